"""Tests for two runs scored on the same samples: McNemar's, a paired bootstrap, and the
paired difference's clustered standard error.

- `mcnemar(b, c)`: paired pass/fail outcomes. `b` pairs passed in run A only, `c` in
  run B only; the p-value is the exact two-sided binomial test of b against
  Binomial(b + c, 1/2), `min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c))`.
  The chi-square statistic with Edwards' continuity correction,
  `max(0, |b - c| - 1)^2 / (b + c)`, is reported beside it; the p-value is not
  read from it.
- `paired_bootstrap(a, b, clusters=)`: numeric scores. The pairs (every pair of a
  cluster together: a sample's epochs) are drawn with replacement, 2,000 times from
  polars' seeded sampling (as `intervals.bootstrap_stderr` draws), so the same input
  gives the same answer with a given polars. The interval is the percentile interval
  of the drawn mean differences; the two-sided p-value is the share of draws at 0 or
  on its other side from the observed difference, doubled (at most 1; 1 when the
  observed difference is 0).
- `paired_difference(a, b, clusters=)`: the mean difference B - A with its standard
  error, robust to clustering (a sample's epochs are not independent draws), and a
  Student t interval on clusters - 1 degrees of freedom.

Differences are always B - A.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from .._errors import ConfigError
from .intervals import LEVEL, cluster_groups, mean_stderr, t_interval

__all__ = [
    "Bootstrap",
    "McNemar",
    "PairedDifference",
    "mcnemar",
    "paired_bootstrap",
    "paired_difference",
]

DRAWS = 2_000
#: Clusters drawn in one go by the bootstrap (bounds its memory).
_PICKS_AT_ONCE = 1_000_000


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on the discordant pairs of two runs' pass/fail outcomes.

    Attributes:
        b: pairs that pass in run A and fail in run B.
        c: pairs that fail in run A and pass in run B.
        statistic: the chi-square statistic with continuity correction (None when
            no pair is discordant).
        p_value: the exact two-sided binomial p-value (not from `statistic`).
    """

    b: int
    c: int
    statistic: float | None
    p_value: float


@dataclass(frozen=True)
class Bootstrap:
    """A paired bootstrap of the mean difference B - A.

    Attributes:
        difference: the observed mean difference over all pairs.
        low, high: the percentile interval of the drawn differences.
        p_value: twice the share of draws on the other side of 0 (1 when the observed
            difference is 0), at most 1.
        draws, seed, level: how it was drawn.
    """

    difference: float
    low: float
    high: float
    p_value: float
    draws: int
    seed: int
    level: float


@dataclass(frozen=True)
class PairedDifference:
    """The mean difference B - A, its clustered standard error and t interval.

    `standard_error`, `low` and `high` are None with a single cluster (no spread to
    measure).
    """

    difference: float
    standard_error: float | None
    low: float | None
    high: float | None
    clusters: int
    level: float


def mcnemar(b: int, c: int) -> McNemar:
    """McNemar's exact test: `b` pairs passed in A only, `c` in B only.

    Example:
        >>> mcnemar(7, 1).p_value
        0.0703125
        >>> mcnemar(3, 3).p_value, mcnemar(0, 0).p_value
        (1.0, 1.0)
    """
    if not (isinstance(b, int) and isinstance(c, int)) or b < 0 or c < 0:
        raise ConfigError(f"mcnemar() takes two counts >= 0, not {b!r} and {c!r}.")
    n = b + c
    if n == 0:
        return McNemar(b, c, None, 1.0)
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    p_value = min(1.0, 2 * tail / 2**n)  # exact integers: no rounding before the division
    statistic = max(0, abs(b - c) - 1) ** 2 / n
    return McNemar(b, c, statistic, p_value)


def _check(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None) -> None:
    if len(a) != len(b) or (clusters is not None and len(clusters) != len(a)):
        sizes = f"{len(a)} and {len(b)}" + (f" ({len(clusters)} clusters)" if clusters else "")
        raise ConfigError(f"Paired values need one value of each run per pair, not {sizes}.")
    if not a:
        raise ConfigError("A paired test needs at least one pair.")


def _cluster_sums(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None
) -> tuple[list[float], list[int]]:
    """Per cluster (in order of first appearance): the sum of differences B - A and the
    number of pairs; every pair alone without clusters."""
    differences = [y - x for x, y in zip(a, b, strict=True)]
    if clusters is None:
        return differences, [1] * len(differences)
    groups = cluster_groups(clusters)
    return [math.fsum(differences[i] for i in g) for g in groups], [len(g) for g in groups]


def _draws(sums: list[float], sizes: list[int], draws: int, seed: int) -> list[float]:
    """The mean difference of each of `draws` resamples of the clusters, drawn in blocks
    of about a million picks (polars, seeded: the same draws each time)."""
    import polars as pl

    count = len(sums)
    totals, counts = pl.Series(sums, dtype=pl.Float64), pl.Series(sizes, dtype=pl.Int64)
    balanced = len(set(sizes)) == 1
    clusters = pl.Series(range(count), dtype=pl.Int64)
    per_block = max(1, _PICKS_AT_ONCE // count)
    results: list[float] = []
    for block, first in enumerate(range(0, draws, per_block)):
        size = min(per_block, draws - first)
        picks = clusters.sample(count * size, with_replacement=True, seed=seed + block)
        drawn = totals.gather(picks).reshape((size, count)).arr.sum()
        if balanced:
            results += (drawn / (count * sizes[0])).to_list()
        else:
            pairs = counts.gather(picks).reshape((size, count)).arr.sum()
            results += (drawn / pairs).to_list()
    return results


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly (numpy's default)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    *,
    draws: int = DRAWS,
    seed: int = 0,
    level: float = LEVEL,
) -> Bootstrap:
    """A seeded paired bootstrap of mean(b - a); pairs sharing a cluster are drawn together.

    `a[i]` and `b[i]` are one pair's scores in runs A and B; `clusters[i]` its cluster
    (the sample id, when each sample ran several epochs). Each draw takes as many
    clusters as there are, with replacement, and its difference is the mean over the
    pairs drawn.

    Example:
        >>> result = paired_bootstrap([0.2, 0.5, 0.4, 0.9], [0.4, 0.6, 0.7, 0.9])
        >>> round(result.difference, 3), result.low <= result.difference <= result.high
        (0.15, True)
    """
    _check(a, b, clusters)
    if draws < 1 or not 0 < level < 1:
        raise ConfigError(f"A bootstrap needs draws >= 1 and 0 < level < 1, not {draws}, {level}.")
    sums, sizes = _cluster_sums(a, b, clusters)
    difference = math.fsum(sums) / sum(sizes)
    results = sorted(_draws(sums, sizes, draws, seed))
    if difference > 0:
        share = sum(1 for r in results if r <= 0) / draws
    elif difference < 0:
        share = sum(1 for r in results if r >= 0) / draws
    else:
        share = 0.5
    tail = (1 - level) / 2
    return Bootstrap(
        difference=difference,
        low=_percentile(results, tail),
        high=_percentile(results, 1 - tail),
        p_value=min(1.0, 2 * share),
        draws=draws,
        seed=seed,
        level=level,
    )


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    *,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
) -> PairedDifference:
    """mean(b - a), its standard error clustered by `clusters`, and a t interval.

    The standard error is the cluster-robust one of the differences' mean
    (`intervals.mean_stderr`: the usual `s / sqrt(N)` with one pair per cluster); the
    interval is `d +/- t((1 + level) / 2, G - 1) * SE` over G clusters, clipped to
    `bounds` when given ((-1, 1) for scores on 0..1).

    Example:
        >>> result = paired_difference([1, 1, 0, 0], [1, 1, 1, 0])
        >>> result.difference, round(result.standard_error, 3)
        (0.25, 0.25)
    """
    _check(a, b, clusters)
    differences = [y - x for x, y in zip(a, b, strict=True)]
    difference = math.fsum(differences) / len(differences)
    groups = len(cluster_groups(clusters)) if clusters is not None else len(differences)
    error = mean_stderr(differences, clusters)
    low, high = t_interval(difference, error, groups, level=level, bounds=bounds)
    return PairedDifference(difference, error, low, high, groups, level)
