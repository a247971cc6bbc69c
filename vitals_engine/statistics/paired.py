"""Tests for two runs scored on the same samples: McNemar's (exact, or clustered by
sample), a paired bootstrap, and the paired difference's clustered standard error.

- `mcnemar(b, c)`: paired pass/fail outcomes. `b` pairs passed in run A only, `c` in
  run B only; the p-value is the exact two-sided binomial test of b against
  Binomial(b + c, 1/2), `min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c))`.
  The chi-square statistic with Edwards' continuity correction,
  `max(0, |b - c| - 1)^2 / (b + c)`, is reported beside it; the p-value is not
  read from it.
- `mcnemar_clustered(a, b, clusters)`: the same outcomes when pairs come in clusters
  (a sample's epochs, which are not independent): Durkalski et al.'s (2003) test.
  With `b_k`, `c_k` the pairs of cluster k passed in A only and in B only, the
  statistic is `X = (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2` and the p-value its
  chi-square (1 df) tail, `erfc(sqrt(X / 2))` (1 when every cluster has b_k = c_k). When
  every cluster holds a single pair, it is `mcnemar(b, c)`, exact, as before.
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
from typing import Literal

from .._errors import ConfigError
from .intervals import LEVEL, cluster_groups, mean_stderr, t_interval

__all__ = [
    "Bootstrap",
    "McNemar",
    "PairedDifference",
    "mcnemar",
    "mcnemar_clustered",
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
        statistic: "exact": the chi-square statistic with continuity correction (None
            when no pair is discordant); "clustered": Durkalski's statistic (None when
            every cluster has as many pairs passed in A only as in B only).
        p_value: "exact": the exact two-sided binomial p-value (not from
            `statistic`); "clustered": the chi-square (1 df) tail of `statistic`.
        method: "exact" (pairs independent) or "clustered" (`mcnemar_clustered`).
        clusters: how many clusters the clustered test ran over (None for "exact").
    """

    b: int
    c: int
    statistic: float | None
    p_value: float
    method: Literal["exact", "clustered"] = "exact"
    clusters: int | None = None

    @property
    def name(self) -> str:
        """The test as a comparison shows it: "McNemar" or "McNemar (clustered)".

        Example:
            >>> mcnemar(7, 1).name
            'McNemar'
        """
        return "McNemar (clustered)" if self.method == "clustered" else "McNemar"


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


def mcnemar_clustered(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable]
) -> McNemar:
    """McNemar's test for pass/fail pairs that come in clusters (Durkalski et al., 2003).

    `a[i]` and `b[i]` are one pair's outcomes in runs A and B (True/False or 1/0);
    `clusters[i]` its cluster (the sample id, when each sample ran several epochs). Per
    cluster k, `b_k` pairs passed in A only and `c_k` in B only; the statistic is
    `(sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2`, and the p-value its chi-square tail on
    1 degree of freedom (1 when the denominator is 0). Its `b` and `c` are the totals.
    When every cluster holds a single pair, the pairs are independent and this is
    `mcnemar(b, c)`, the exact test.

    Example:
        >>> a = [1, 1, 1, 1, 0, 1, 1, 0]
        >>> b = [0, 0, 0, 1, 1, 0, 0, 0]
        >>> result = mcnemar_clustered(a, b, ["s1", "s1", "s2", "s2", "s3", "s4", "s4", "s5"])
        >>> result.name, result.statistic, round(result.p_value, 4)
        ('McNemar (clustered)', 1.6, 0.2059)
    """
    _check(a, b, clusters)
    odd = [v for v in (*a, *b) if v not in (0, 1)]  # True == 1 and 1.0 == 1
    if odd:
        raise ConfigError(
            f"mcnemar_clustered() takes pass/fail outcomes (True/False or 1/0), not {odd[0]!r}."
        )
    groups = cluster_groups(clusters)
    counts = [
        (sum(1 for i in g if a[i] and not b[i]), sum(1 for i in g if b[i] and not a[i]))
        for g in groups
    ]
    b_total, c_total = sum(n for n, _ in counts), sum(n for _, n in counts)
    if all(len(g) == 1 for g in groups):
        return mcnemar(b_total, c_total)
    differences = [passed_a - passed_b for passed_a, passed_b in counts]
    spread = sum(d * d for d in differences)
    if spread == 0:
        return McNemar(b_total, c_total, None, 1.0, "clustered", len(groups))
    statistic = sum(differences) ** 2 / spread  # exact integers until this division
    p_value = math.erfc(math.sqrt(statistic / 2))  # chi-square, 1 df: P(|Z| > sqrt(X))
    return McNemar(b_total, c_total, statistic, p_value, "clustered", len(groups))


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
