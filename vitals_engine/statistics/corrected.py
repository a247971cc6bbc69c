"""A judge's mean corrected by human grades on a subset: prediction-powered inference.

A judge (a model) scores all N samples; people grade n of them. The judge's mean is
cheap and precise but may be biased; the people's mean is unbiased but noisy. PPI
(Angelopoulos et al., "Prediction-powered inference", Science 2023) keeps the best of
both: the judge's mean on all N plus its error measured where people graded,

    corrected = mean_N(judge) + mean_n(human - judge),

unbiased for the human mean whenever the graded samples are a random subset.

Its variance, with `f` the judge's score and `r = human - judge` on a graded sample, is
`var(f) / N + var(r) / n + 2 cov(f, r) / N`: the first two terms are PPI's, and the
third is there because the graded samples are among the N, so both means contain them
(equal to `var(human) / N + (1 - n / N) var(r) / n`, the two-phase sampling variance).
It is computed from each sample's share of the estimate's error,
`(f_i - mean_N f) / N + [graded] (r_i - mean_n r) / n`, summed per cluster (a sample's
epochs, a metadata column: as `intervals.mean_stderr` clusters) and squared, the
clusters with a graded sample counted with G_n / (G_n - 1) and the others with
G / (G - 1) (CR1); without clusters every sample is its own, and this is the formula
above with sample variances. The interval is `corrected ± t((1 + level)/2, G_n - 1) *
stderr`, G_n the clusters with a human grade (the human grades carry most of the
uncertainty; for hundreds of grades the t quantile is the normal one).

`power_tuning=True` is PPI++ (Angelopoulos, Duchi and Zrnic, 2023): the judge's part
weighted by λ, `λ mean_N(judge) + mean_n(human - λ judge)`, still unbiased for any λ,
with λ chosen from the data to make the variance above (its clustered form, a quadratic
in λ) smallest, and kept within 0..1: 1 is plain PPI, 0 the human grades alone (a judge
that tells nothing). Without clusters that λ is about the slope of the human grades on
the judge's, `cov(h, f) / var(f)`. By default λ = 1.

Scores are numbers, booleans or grades (C = 1, P = 0.5, I = 0).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError
from .agreement import PairAgreement, pairwise_agreement
from .intervals import LEVEL, MetricStat, mean_stderr, t_interval
from .reducers import numeric_value

__all__ = ["CorrectedMean", "corrected_mean", "describe_corrected"]


@dataclass(frozen=True, slots=True)
class CorrectedMean:
    """A judge's mean, the same corrected by human grades, and the human grades alone.

    Attributes:
        corrected: the prediction-powered mean (value, stderr, interval; `n` the N
            samples, `clusters` the clusters with a human grade, the interval's).
        judge: the judge's mean over all N samples, as `metric_stats` gives it.
        human: the human grades' mean over the n graded samples.
        judge_bias: mean(judge - human) over the graded samples: how much the judge
            over-scores (negative: under-scores); plain PPI's `corrected` is
            `judge - judge_bias`.
        agreement: the judge and the people compared on the graded samples (share of
            equal scores and Cohen's kappa; raters "judge" and "human").
        level: the intervals' confidence level.
        power: PPI++'s λ, the weight of the judge's part (1: plain PPI).

    Example:
        >>> result = corrected_mean([1, 1, 1, 0], [1, 0, None, None])
        >>> result.judge.value, result.judge_bias, result.corrected.value
        (0.75, 0.5, 0.25)
    """

    corrected: MetricStat
    judge: MetricStat
    human: MetricStat
    judge_bias: float
    agreement: PairAgreement
    level: float = LEVEL
    power: float = 1.0


def corrected_mean(
    judge: Sequence[Any],
    human: Sequence[Any],
    clusters: Sequence[Hashable] | None = None,
    *,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
    power_tuning: bool = False,
) -> CorrectedMean:
    """The judge's mean corrected by the human grades (prediction-powered inference).

    `judge[i]` is the judge's score of sample i (every sample scored); `human[i]` a
    person's grade of it, None where nobody graded it (at least 2 graded); `clusters[i]`
    its cluster, when samples are not independent (a sample's epochs, a document's
    questions). `bounds` clips the intervals ((0, 1) for scores on 0..1);
    `power_tuning=True` weights the judge by the λ that makes the interval narrowest
    (PPI++).

    Example:
        >>> judge = ["C", "C", "I", "C", "C", "C", "I", "C"]
        >>> human = ["C", "I", "I", "I", None, None, None, None]
        >>> result = corrected_mean(judge, human)
        >>> result.judge.value, result.corrected.value, round(result.corrected.stderr, 3)
        (0.75, 0.25, 0.266)
    """
    if not 0 < level < 1:
        raise ConfigError(f"`level` must lie strictly between 0 and 1, not {level}.")
    f = [_score(value, "judge", i) for i, value in enumerate(judge)]
    h = [None if value is None else _score(value, "human", i) for i, value in enumerate(human)]
    if len(h) != len(f) or (clusters is not None and len(clusters) != len(f)):
        extra = "" if clusters is None else f" and {len(clusters)} cluster keys"
        raise ConfigError(
            f"One judge score and one human grade (None where none) per sample, not "
            f"{len(f)} judge scores, {len(h)} human grades{extra}."
        )
    grades = {i: grade for i, grade in enumerate(h) if grade is not None}
    if len(grades) < 2:
        raise ConfigError(
            f"Correcting a judge needs at least 2 human grades, not {len(grades)}: "
            "grade more samples by hand (None marks a sample not graded)."
        )
    keys: Sequence[Hashable] = range(len(f)) if clusters is None else clusters
    graded_keys = [keys[i] for i in grades]
    human_scores = list(grades.values())
    errors = {i: grade - f[i] for i, grade in grades.items()}
    judge_stat = _stat(f, clusters, level, bounds)
    human_stat = _stat(human_scores, None if clusters is None else graded_keys, level, bounds)
    bias = -math.fsum(errors.values()) / len(errors)
    shares, weights = _shares(f, grades, keys)
    power = _best_power(shares, weights) if power_tuning else 1.0
    graded_judge = math.fsum(f[i] for i in grades) / len(grades)
    value = human_stat.value + power * (judge_stat.value - graded_judge)
    stderr = _stderr(shares, weights, power)
    graded_clusters = len(set(graded_keys))
    low, high = t_interval(value, stderr, graded_clusters, level=level, bounds=bounds)
    corrected = MetricStat(value, stderr, low, high, len(f), graded_clusters)
    pair = pairwise_agreement({"judge": [f[i] for i in grades], "human": human_scores})[0]
    return CorrectedMean(corrected, judge_stat, human_stat, bias, pair, level, power)


def describe_corrected(result: CorrectedMean) -> str:
    """The correction as a summary's line says it.

    Example:
        >>> judge = [1] * 16 + [0] * 4
        >>> human = [1, 1, 1, 0, 1, 0, 1, 1, 0, 0] + [None] * 10
        >>> describe_corrected(corrected_mean(judge, human, bounds=(0, 1)))
        'judge 0.80; corrected 0.40 (95% CI 0.00\u20130.82) from 10 human grades'
    """
    stat, graded = result.corrected, result.human.n
    text = f"judge {result.judge.value:.2f}; corrected {stat.value:.2f}"
    if stat.low is not None and stat.high is not None:
        text += f" ({result.level * 100:g}% CI {stat.low:.2f}\u2013{stat.high:.2f})"
    else:
        text += f" (no interval: the grades come from {stat.clusters} cluster)"
    return f"{text} from {graded} human grades"  # at least 2


def _score(value: Any, who: str, position: int) -> float:
    if type(value) is float and math.isfinite(value):
        return value  # the common case, without numeric_value()'s checks
    number = numeric_value(value)
    if number is None or not math.isfinite(number):
        blank = " (a judge must score every sample)" if value is None else ""
        raise ConfigError(
            f"The {who} score of sample {position} must be a finite number, a boolean or a "
            f"grade C, P, I, not {value!r}{blank}."
        )
    return number


def _stat(
    values: Sequence[float],
    keys: Sequence[Hashable] | None,
    level: float,
    bounds: tuple[float, float] | None,
) -> MetricStat:
    """A plain mean with its standard error (clustered by `keys`) and t interval."""
    value = math.fsum(values) / len(values)
    stderr = mean_stderr(values, keys)
    groups = len(values) if keys is None else len(set(keys))
    low, high = t_interval(value, stderr, groups, level=level, bounds=bounds)
    return MetricStat(value, stderr, low, high, len(values), groups)


def _shares(
    judge: Sequence[float], grades: dict[int, float], keys: Sequence[Hashable]
) -> tuple[list[tuple[float, float]], list[float]]:
    """Each cluster's share of the estimate's error, `λ a + b`, as (a, b), and its CR1
    weight: G_n / (G_n - 1) for a cluster with a graded sample, G / (G - 1) for another.

    A sample adds `(f - mean_N f) / N` to a, and when graded `(h - mean_n h) / n` to b
    and `-(f - mean_n f) / n` to a: at λ = 1, `(f - mean_N f) / N + (r - mean_n r) / n`.
    """
    big, small = len(judge), len(grades)
    judge_mean = math.fsum(judge) / big
    graded_judge = math.fsum(judge[i] for i in grades) / small
    human_mean = math.fsum(grades.values()) / small
    sums: dict[Hashable, tuple[float, float]] = {}
    graded: set[Hashable] = set()
    for i, (score, key) in enumerate(zip(judge, keys, strict=True)):
        a, b = sums.get(key, (0.0, 0.0))
        a += (score - judge_mean) / big
        if i in grades:
            a -= (score - graded_judge) / small
            b += (grades[i] - human_mean) / small
            graded.add(key)
        sums[key] = (a, b)
    count, count_graded = len(sums), len(graded)
    inside = count_graded / (count_graded - 1) if count_graded > 1 else math.inf
    outside = count / (count - 1) if count > 1 else math.inf
    weights = [inside if key in graded else outside for key in sums]
    return list(sums.values()), weights


def _stderr(shares: list[tuple[float, float]], weights: list[float], power: float) -> float | None:
    """The corrected mean's standard error at weight `power`: the clusters' shares of
    its error squared, weighted and summed; None with fewer than 2 graded clusters."""
    if math.inf in weights:
        return None
    variance = math.fsum(
        w * (power * a + b) ** 2 for (a, b), w in zip(shares, weights, strict=True)
    )
    return math.sqrt(variance)


def _best_power(shares: list[tuple[float, float]], weights: list[float]) -> float:
    """The λ in 0..1 that makes `sum_g w_g (λ a_g + b_g)^2` smallest (1 when it cannot
    be told: a judge that gives one score, or a single graded cluster)."""
    if math.inf in weights:
        return 1.0
    square = math.fsum(w * a * a for (a, _), w in zip(shares, weights, strict=True))
    cross = math.fsum(w * a * b for (a, b), w in zip(shares, weights, strict=True))
    if square <= 0:
        return 1.0
    return min(1.0, max(0.0, -cross / square))
