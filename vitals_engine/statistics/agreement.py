"""Agreement between raters (judges, or a judge and people): Krippendorff's alpha over
every rater at once, and percent agreement and Cohen's kappa for each pair of raters.

Ratings come as plain Python, in either of two shapes:

- a list of units (samples), each a sequence of ratings, one per rater by position,
  None where that rater gave none: `[["C", "C", None], ["I", "C", "I"]]`;
- a mapping rater -> that rater's ratings, one per unit, all of one length:
  `{"gpt": ["C", "I"], "claude": ["C", "C"]}`.

Krippendorff's alpha (Krippendorff, *Content Analysis*, and "Computing Krippendorff's
Alpha-Reliability", 2011): `alpha = 1 - D_o / D_e`. A unit's m >= 2 ratings give
m(m - 1) ordered pairs, each counted with weight 1 / (m - 1), so every pairable rating
counts once; units with fewer than 2 ratings are not pairable and are left out. `D_o`
is the weighted mean distance within units; `D_e` is the mean distance between any two
of the n pairable ratings, whatever their unit: `sum_{c,k} n_c n_k d(c, k) / (n(n - 1))`
over the values' counts `n_c`. The distance `d` is the level's:

- `"nominal"`: 0 for equal values, 1 otherwise (grades "C"/"P"/"I", labels);
- `"ordinal"`: `(sum_{g from c to k} n_g - (n_c + n_k) / 2)^2`, ranks by the counts;
- `"interval"`: `(c - k)^2`;
- `"ratio"`: `((c - k) / (c + k))^2`.

The last three take numbers; grades count C = 1, P = 0.5, I = 0 and booleans 1 and 0,
as the metrics count them.

When every pairable rating is the same value there is no variation to tell agreement
from chance: `D_e = 0` (and `D_o = 0`), and alpha is undefined, NaN, as Krippendorff
leaves it (not 1: the data cannot show that the raters would agree on other values).
Alpha is NaN too when no unit has two ratings.

Cohen's kappa for two raters over the units both rated: `(p_o - p_e) / (1 - p_e)`,
`p_o` the share of equal ratings, `p_e = sum_c p_A(c) p_B(c)` the share expected by
chance from each rater's own shares (nominal: unweighted). NaN when both raters gave
one and the same value throughout (`p_e = 1`) or share no unit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal, TypeAlias

from .._errors import ConfigError
from .._words import plural
from .reducers import numeric_value

__all__ = [
    "LEVELS",
    "Alpha",
    "Level",
    "PairAgreement",
    "Ratings",
    "describe_agreement",
    "krippendorff_alpha",
    "pairwise_agreement",
]

Level: TypeAlias = Literal["nominal", "ordinal", "interval", "ratio"]
#: The levels of measurement alpha knows.
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")

#: Units, each a sequence of ratings by rater position; or rater -> ratings by unit.
Ratings: TypeAlias = Sequence[Sequence[Hashable | None]] | Mapping[Any, Sequence[Hashable | None]]


@dataclass(frozen=True, slots=True)
class Alpha:
    """Krippendorff's alpha and what it was computed from.

    Attributes:
        value: `1 - observed / expected`; NaN when undefined (no unit with 2 ratings,
            or every rating the same value).
        level: the level of measurement ("nominal", "ordinal", "interval", "ratio").
        raters: how many raters the ratings name.
        units: the pairable units (2 ratings or more).
        values: the pairable ratings, n.
        observed, expected: the disagreements `D_o` and `D_e`.

    Example:
        >>> krippendorff_alpha([["C", "C"], ["I", "I"], ["C", "I"]]).value
        0.4444444444444444
    """

    value: float
    level: Level
    raters: int
    units: int
    values: int
    observed: float
    expected: float


@dataclass(frozen=True, slots=True)
class PairAgreement:
    """Two raters compared over the units both rated.

    Attributes:
        raters: the two raters (names, or positions 0, 1, ... in a list of units).
        units: how many units both rated.
        agreement: the share of those units rated the same (NaN without any).
        kappa: Cohen's kappa (NaN when undefined).

    Example:
        >>> pairwise_agreement({"a": ["C", "I", "C", "C"], "b": ["C", "I", "I", "C"]})[0]
        PairAgreement(raters=('a', 'b'), units=4, agreement=0.75, kappa=0.5)
    """

    raters: tuple[Hashable, Hashable]
    units: int
    agreement: float
    kappa: float


def krippendorff_alpha(ratings: Ratings, level: Level = "nominal") -> Alpha:
    """Krippendorff's alpha of several raters over units, ratings missing allowed.

    Example:
        >>> units = [[1, 1, None], [2, 2, 2], [3, 3, 2], [None, 4, 4]]
        >>> round(krippendorff_alpha(units, "interval").value, 4)
        0.9135
        >>> krippendorff_alpha([["C", "C"], ["C", "C"]]).value   # no variation: undefined
        nan
    """
    if level not in LEVELS:
        raise ConfigError(f"`level` must be one of {', '.join(LEVELS)}, not {level!r}.")
    names, table = _table(ratings)
    units = [_values(row, level) for row in table]
    units = [unit for unit in units if len(unit) >= 2]
    counts: Counter[Hashable] = Counter(value for unit in units for value in unit)
    n = sum(counts.values())
    if n < 2:
        return Alpha(math.nan, level, len(names), 0, 0, 0.0, 0.0)
    distance = _distance(level, counts)
    observed = math.fsum(_within(Counter(unit), distance) / (len(unit) - 1) for unit in units) / n
    expected = _expected(counts, level, distance) / (n * (n - 1))
    value = 1 - observed / expected if expected > 0 else math.nan
    return Alpha(value, level, len(names), len(units), n, observed, expected)


def pairwise_agreement(ratings: Ratings) -> list[PairAgreement]:
    """Percent agreement and Cohen's kappa for each pair of raters, in the raters' order.

    Example:
        >>> [p.kappa for p in pairwise_agreement([["C", "C", "I"], ["I", "I", "I"]])]
        [1.0, 0.0, 0.0]
    """
    names, table = _table(ratings)
    found = []
    for (i, a), (j, b) in combinations(enumerate(names), 2):
        pairs = [(row[i], row[j]) for row in table if row[i] is not None and row[j] is not None]
        found.append(_pair(a, b, pairs))
    return found


def describe_agreement(alpha: Alpha) -> str:
    """Alpha as a summary's line says it.

    Example:
        >>> describe_agreement(krippendorff_alpha([["C", "C"], ["I", "I"], ["C", "I"]]))
        'judges agree: alpha 0.44 (nominal, 3 samples graded by 2 judges)'
    """
    over = f"{plural(alpha.units, 'sample')} graded by {plural(alpha.raters, 'judge')}"
    if alpha.units == 0:
        return f"judges agree: alpha undefined (no sample graded by 2 judges of {alpha.raters})"
    if math.isnan(alpha.value):
        return f"judges agree: alpha undefined (every grade the same; {over})"
    return f"judges agree: alpha {alpha.value:.2f} ({alpha.level}, {over})"


def _pair(a: Hashable, b: Hashable, pairs: list[tuple[Hashable, Hashable]]) -> PairAgreement:
    """Percent agreement and Cohen's kappa of one pair of raters over their shared units."""
    n = len(pairs)
    if n == 0:
        return PairAgreement((a, b), 0, math.nan, math.nan)
    agreement = sum(1 for x, y in pairs if x == y) / n
    first, second = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    chance = math.fsum(first[value] * second[value] for value in first) / (n * n)
    kappa = (agreement - chance) / (1 - chance) if chance < 1 else math.nan
    return PairAgreement((a, b), n, agreement, kappa)


def _table(ratings: Ratings) -> tuple[list[Hashable], list[list[Hashable | None]]]:
    """The raters' names and one row per unit, a rating (or None) per rater."""
    if isinstance(ratings, Mapping):
        names: list[Hashable] = list(ratings)
        columns = [_sequence(ratings[name], f"rater {name!r}'s ratings") for name in names]
        lengths = {len(column) for column in columns}
        if len(lengths) > 1:
            sizes = ", ".join(f"{name!r}: {len(c)}" for name, c in zip(names, columns, strict=True))
            raise ConfigError(
                f"Each rater needs one rating per unit (None where missing): {sizes}."
            )
        table = [list(row) for row in zip(*columns, strict=True)]
    else:
        rows = [_sequence(u, f"unit {i}") for i, u in enumerate(_sequence(ratings, "ratings"))]
        names = list(range(max((len(row) for row in rows), default=0)))
        table = [[*row, *[None] * (len(names) - len(row))] for row in rows]
    for row in table:
        for value in row:
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"A rating must be a finite value or None, not {value!r}.")
    return names, table


def _sequence(value: object, what: str) -> Sequence[Hashable | None]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(
            f"{what.capitalize()} must be a list (a unit's ratings, None where missing), "
            f"not {value!r}."
        )
    return value


def _values(row: Sequence[Hashable | None], level: Level) -> Sequence[Hashable]:
    """A unit's ratings, missing ones left out: as they are (nominal) or as numbers."""
    present = [value for value in row if value is not None]
    if level == "nominal":
        return present
    numbers = [numeric_value(value) for value in present]
    for value, number in zip(present, numbers, strict=True):
        if number is None or not math.isfinite(number):
            raise ConfigError(
                f"Alpha at the {level} level takes numbers (or grades C, P, I), not {value!r}; "
                "level='nominal' takes any rating."
            )
    found = [number for number in numbers if number is not None]
    if level == "ratio" and any(number < 0 for number in found):
        raise ConfigError(f"Alpha at the ratio level takes values >= 0, not {min(found)!r}.")
    return found


def _distance(level: Level, counts: Counter[Hashable]) -> Callable[[Hashable, Hashable], float]:
    """The level's squared distance between two values (ordinal: from the counts)."""
    if level == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if level == "interval":
        return lambda c, k: (float(c) - float(k)) ** 2  # type: ignore[arg-type]
    if level == "ratio":
        return lambda c, k: 0.0 if c == k else ((c - k) / (c + k)) ** 2  # type: ignore[operator]
    ordered = sorted(counts)  # type: ignore[type-var]
    below = {}  # the count of the values below each one
    total = 0
    for value in ordered:
        below[value] = total
        total += counts[value]

    def ordinal(c: Hashable, k: Hashable) -> float:
        low, high = (c, k) if below[c] <= below[k] else (k, c)
        between = below[high] + counts[high] - below[low]  # n_low + ... + n_high
        return (between - (counts[c] + counts[k]) / 2) ** 2

    return ordinal


def _within(counts: Counter[Hashable], distance: Callable[[Hashable, Hashable], float]) -> float:
    """`sum_{c != k} n_c n_k d(c, k)` over ordered pairs of distinct values."""
    return 2 * math.fsum(
        counts[c] * counts[k] * distance(c, k) for c, k in combinations(list(counts), 2)
    )


def _expected(counts: Counter[Hashable], level: Level, distance: Callable[..., float]) -> float:
    """`sum_{c,k} n_c n_k d(c, k)` over all the pairable ratings: in closed form for the
    nominal (`n^2 - sum n_c^2`) and interval (`2 n sum n_c (c - mean)^2`) levels, so that
    many distinct values cost no more than a few; pair by pair for the others."""
    n = sum(counts.values())
    if level == "nominal":
        return float(n * n - sum(count * count for count in counts.values()))
    if level == "interval":
        mean = math.fsum(count * float(c) for c, count in counts.items()) / n  # type: ignore[arg-type]
        return 2 * n * math.fsum(count * (float(c) - mean) ** 2 for c, count in counts.items())  # type: ignore[arg-type]
    return _within(counts, distance)
