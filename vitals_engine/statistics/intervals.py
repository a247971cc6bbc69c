"""Standard errors and 95% intervals of metrics, clustered or not.

A metric's standard error is the analytic one of a mean for mean-type metrics
(`mean_stderr`), cluster-robust when scores come in clusters (a sample's epochs, or a
metadata column), and a bootstrap over clusters for any other function of the scores
(`bootstrap_stderr`). The interval is `value ± t(0.975, G - 1) * stderr` with G the
number of clusters (`t_interval`); with fewer than 2 clusters there is neither.

The Student t quantile is computed here (`t_quantile`): no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from .._errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "BOOTSTRAP_DRAWS",
    "LEVEL",
    "MetricStat",
    "bootstrap_stderr",
    "cluster_groups",
    "mean_stderr",
    "t_interval",
    "t_quantile",
]

#: The intervals' confidence level.
LEVEL = 0.95
#: Resamples of a bootstrap standard error.
BOOTSTRAP_DRAWS = 1000
#: Clusters drawn in one go by a bootstrap.
_PICKS_AT_ONCE = 1_000_000


@dataclass(frozen=True, slots=True)
class MetricStat:
    """A metric's value with its standard error and 95% interval.

    Attributes:
        value: the metric (as in `task.metrics`).
        stderr: its standard error; None with fewer than 2 clusters.
        low, high: the 95% interval, `value ± t(0.975, clusters - 1) * stderr` (clipped
            to 0..1 for an accuracy of scores on 0..1); None without a standard error.
        n: how many scores the metric saw (None when a log does not say).
        clusters: how many independent clusters they form: the scores themselves, the
            samples when each has several epochs, or the values of `Task(cluster=)`'s
            column (None when a log does not say).

    Example:
        >>> task.metric_stats["accuracy"]
        MetricStat(value=0.7, stderr=0.1528, low=0.3544, high=1.0, n=10, clusters=10)
    """

    value: float
    stderr: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    clusters: int | None = None


def cluster_groups(keys: Sequence[Hashable]) -> list[list[int]]:
    """The positions of `keys` grouped by key, groups in order of first appearance.

    Example:
        >>> cluster_groups(["a", "b", "a"])
        [[0, 2], [1]]
    """
    groups: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(key, []).append(position)
    return list(groups.values())


def mean_stderr(values: Sequence[float], keys: Sequence[Hashable] | None = None) -> float | None:
    """The standard error of the mean of `values`, cluster-robust when `keys` say which
    cluster each value belongs to; None with fewer than 2 clusters.

    Clustered (CR1): `sqrt(G/(G-1) · Σ_g (Σ_{i in g} (x_i - mean))²) / n`. With every
    value its own cluster this is the familiar `sqrt(var/n)`, var with n - 1 (Inspect's
    `stderr()`).

    Example:
        >>> round(mean_stderr([1, 0, 1, 1]), 4)
        0.25
        >>> round(mean_stderr([1, 1, 0, 0], keys=["a", "a", "b", "b"]), 4)
        0.5
    """
    n = len(values)
    if keys is not None and len(keys) != n:
        raise ConfigError(f"{len(keys)} cluster keys for {n} values.")
    if n < 2:
        return None
    mean = math.fsum(values) / n
    if keys is None:
        count = n
        spread = math.fsum((x - mean) ** 2 for x in values)
    else:
        # one running sum per cluster (no list of positions: a run has tens of thousands)
        sums: dict[Hashable, float] = {}
        for x, key in zip(values, keys, strict=True):
            sums[key] = sums.get(key, 0.0) + (x - mean)
        count = len(sums)
        spread = math.fsum(s * s for s in sums.values())
    if count < 2:
        return None
    return math.sqrt(spread * count / (count - 1)) / n


def bootstrap_stderr(
    statistic: Callable[[pl.Series], float | None],
    keys: Sequence[Hashable],
    *,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = 0,
) -> float | None:
    """The bootstrap standard error of `statistic` over clusters: `draws` times, draw as
    many clusters as there are, with replacement, and call `statistic` with the positions
    of their rows (a polars Series of row indices); the spread (n - 1) of the results.

    Seeded: the same draws each time. Draws whose statistic is not a finite number are
    left out; None with fewer than 2 clusters or 2 usable draws.

    Example:
        >>> scores = pl.Series([1.0, 0.0, 1.0, 1.0])
        >>> bootstrap_stderr(lambda rows: scores.gather(rows).mean(), range(4))
        0.21...
    """
    import polars as pl

    groups = cluster_groups(keys)
    count = len(groups)
    if count < 2:
        return None
    single = all(len(group) == 1 for group in groups)
    rows = pl.Series([group[0] for group in groups]) if single else pl.Series(groups)

    def rows_of(picked: pl.Series) -> pl.Series:
        return rows.gather(picked) if single else rows.gather(picked).explode()

    clusters = pl.Series(range(count))
    per_block = max(1, _PICKS_AT_ONCE // count)  # bounds the memory of the draws
    results: list[float] = []
    for block, first in enumerate(range(0, draws, per_block)):
        size = min(per_block, draws - first)
        picks = clusters.sample(count * size, with_replacement=True, seed=seed + block)
        for draw in range(size):
            value = statistic(rows_of(picks.slice(draw * count, count)))
            if value is not None and math.isfinite(value):
                results.append(float(value))
    if len(results) < 2:
        return None
    mean = math.fsum(results) / len(results)
    return math.sqrt(math.fsum((r - mean) ** 2 for r in results) / (len(results) - 1))


def t_interval(
    value: float,
    stderr: float | None,
    clusters: int,
    *,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
) -> tuple[float | None, float | None]:
    """`value ± t((1 + level)/2, clusters - 1) * stderr`, clipped to `bounds` when given;
    (None, None) without a standard error or with fewer than 2 clusters.

    Example:
        >>> t_interval(0.7, 0.1, clusters=10)
        (0.4737..., 0.9262...)
    """
    if stderr is None or clusters < 2 or not math.isfinite(stderr) or not math.isfinite(value):
        return None, None
    half = t_quantile((1 + level) / 2, clusters - 1) * stderr
    low, high = value - half, value + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return low, high


#: Above this many degrees of freedom the t quantile is the normal one (to 1e-6).
_NORMAL_DF = 1e7


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (`math.inf`: normal).

    Exact for 1 and 2 degrees of freedom; otherwise the t distribution function (a
    regularized incomplete beta) is inverted by bisection, to about 1e-12.

    Example:
        >>> round(t_quantile(0.975, 9), 3)
        2.262
    """
    if not 0 < p < 1:
        raise ConfigError(f"A quantile's probability must lie strictly between 0 and 1, not {p}.")
    if not df > 0:
        raise ConfigError(f"Degrees of freedom must be positive, not {df}.")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if df >= _NORMAL_DF:
        from statistics import NormalDist  # the standard library's, when needed

        return NormalDist().inv_cdf(p)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if _t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low <= 1e-13 * high:
            break
    return (low + high) / 2


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for t >= 0."""
    return 1 - 0.5 * _beta_regularized(df / 2, 0.5, df / (df + t * t))


def _beta_regularized(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a - 1 + m2) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
