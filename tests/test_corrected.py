"""A judge corrected by human grades (prediction-powered inference): hand-computed values
on small vectors, clear errors, and the coverage of its interval over seeded draws of a
biased judge."""

from __future__ import annotations

import math
import random

import pytest

from vitals_engine._errors import ConfigError
from vitals_engine.statistics import CorrectedMean, corrected_mean, describe_corrected

JUDGE = ["C", "C", "I", "C", "C", "C", "I", "C"]
HUMAN = ["C", "I", "I", "I", None, None, None, None]


def test_small_example_by_hand():
    """Judge 1 1 0 1 1 1 0 1 (mean 0.75, N = 8); people grade the first four 1 0 0 0.
    human - judge = 0, -1, 0, -1 (mean -0.5, n = 4): corrected = 0.75 - 0.5 = 0.25.

    Each sample's share of the error is (f - 0.75)/8, plus (r + 0.5)/4 when graded:
    graded 0.15625, -0.09375, 0.03125, -0.09375 (squares sum to 0.04296875, times 4/3);
    not graded 0.03125, 0.03125, -0.09375, 0.03125 (squares sum to 0.01171875, times
    8/7). The variance is their sum, 0.0706845..., the standard error 0.26587.
    """
    result = corrected_mean(JUDGE, HUMAN)
    assert result.judge.value == 0.75
    assert result.human.value == 0.25
    assert result.judge_bias == 0.5
    assert result.corrected.value == 0.25
    variance = 0.04296875 * 4 / 3 + 0.01171875 * 8 / 7
    assert result.corrected.stderr == pytest.approx(math.sqrt(variance), abs=1e-12)
    assert (result.corrected.n, result.corrected.clusters) == (8, 4)
    half = 3.182446 * math.sqrt(variance)  # t(0.975, 3): 4 graded clusters
    assert result.corrected.low == pytest.approx(0.25 - half, abs=1e-5)
    assert result.corrected.high == pytest.approx(0.25 + half, abs=1e-5)


def test_the_variance_is_ppis_plus_the_shared_samples_covariance():
    """Without clusters, the variance is var(f)/N + var(r)/n + 2 cov(f, r)/N up to the
    small-sample factors: PPI's two terms and the covariance of the graded samples,
    which both means contain. Checked on random scores against that formula with
    population moments (the factors N/(N-1), n/(n-1) make the difference); here the
    covariance term is large (the judge's excess grows with its score), and leaving it
    out would be wrong by far more."""
    rng = random.Random(3)
    judge = [rng.random() for _ in range(400)]
    human = [0.5 * f + 0.2 + rng.gauss(0, 0.1) for f in judge[:100]]  # the judge overstates
    result = corrected_mean(judge, human + [None] * 300)
    big, small = 400, 100
    f_mean = sum(judge) / big
    r = [h - f for h, f in zip(human, judge, strict=False)]
    r_mean = sum(r) / small
    f_graded_mean = sum(judge[:100]) / small
    var_f = sum((f - f_mean) ** 2 for f in judge) / big
    var_r = sum((x - r_mean) ** 2 for x in r) / small
    cov = sum((f - f_graded_mean) * (x - r_mean) for f, x in zip(judge, r, strict=False)) / small
    formula = var_f / big + var_r / small + 2 * cov / big
    stderr = result.corrected.stderr
    assert stderr is not None
    assert stderr**2 == pytest.approx(formula, rel=0.03)
    without_covariance = var_f / big + var_r / small
    assert abs(stderr**2 - without_covariance) > 0.03 * formula


def test_a_perfect_judge_needs_no_correction():
    """A judge that matches every human grade: no bias, the corrected mean is the judge's."""
    judge = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
    result = corrected_mean(judge, judge[:5] + [None] * 5)
    assert result.judge_bias == 0.0
    assert result.corrected.value == result.judge.value == 0.7
    assert (result.agreement.agreement, result.agreement.kappa) == (1.0, 1.0)


def test_agreement_on_the_graded_samples():
    """The judge and the people are compared where people graded: 2 of 4 equal; the
    judge says 1 three times in four, the people once, so p_e = (3 * 1 + 1 * 3)/16 and
    kappa = (0.5 - 0.375) / 0.625 = 0.2."""
    result = corrected_mean(JUDGE, HUMAN)
    assert result.agreement.raters == ("judge", "human")
    assert result.agreement.units == 4
    assert result.agreement.agreement == 0.5
    assert result.agreement.kappa == pytest.approx(0.2)


def test_clusters_are_counted_for_both_terms():
    """With clusters, the judge's interval counts the clusters, the corrected one the
    graded clusters; a cluster's samples move together, so clustering widens both
    standard errors here (each cluster's samples are alike)."""
    judge = [1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1]
    human = [1, 1, 0, 0, 0, 0, 1, 1, None, None, None, None]
    keys = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e", "f", "f"]
    clustered = corrected_mean(judge, human, keys)
    alone = corrected_mean(judge, human)
    assert clustered.corrected.value == alone.corrected.value
    assert (clustered.judge.clusters, clustered.corrected.clusters) == (6, 4)
    assert (alone.judge.clusters, alone.corrected.clusters) == (12, 8)
    assert clustered.corrected.stderr > alone.corrected.stderr  # type: ignore[operator]
    assert clustered.judge.stderr > alone.judge.stderr  # type: ignore[operator]


def test_every_cluster_of_a_sample_alone_is_no_clustering():
    """Clusters of one sample each give the unclustered figures."""
    keys = list(range(len(JUDGE)))
    assert corrected_mean(JUDGE, HUMAN, keys) == corrected_mean(JUDGE, HUMAN)


def test_grades_from_one_cluster_have_no_interval():
    """Human grades all from one cluster: no spread to measure, no interval (as for a
    metric over one cluster), and the summary says so."""
    keys = ["a", "a", "a", "a", "b", "c", "d", "e"]
    result = corrected_mean(JUDGE, HUMAN, keys)
    assert result.corrected.stderr is None
    assert (result.corrected.low, result.corrected.high) == (None, None)
    assert describe_corrected(result) == (
        "judge 0.75; corrected 0.25 (no interval: the grades come from 1 cluster) "
        "from 4 human grades"
    )


def test_bounds_clip_the_intervals():
    """`bounds=(0, 1)` keeps every interval of scores on 0..1 inside 0..1."""
    result = corrected_mean(JUDGE, HUMAN, bounds=(0, 1))
    for stat in (result.corrected, result.judge, result.human):
        assert 0 <= stat.low <= stat.value <= stat.high <= 1  # type: ignore[operator]


def test_level_sets_the_interval_and_the_summary():
    """A 90% interval is narrower than the 95% one, and the summary names its level."""
    judge = [1.0] * 60 + [0.0] * 40
    human = [1.0, 0.0, 0.0, 1.0, 0.0] * 8 + [None] * 60
    wide, narrow = corrected_mean(judge, human), corrected_mean(judge, human, level=0.9)
    assert narrow.corrected.high - narrow.corrected.low < wide.corrected.high - wide.corrected.low  # type: ignore[operator]
    assert "(90% CI " in describe_corrected(narrow)


def test_describe_corrected():
    """The summary line: the judge's mean, the corrected one with its interval, and how
    many human grades corrected it."""
    judge = [1] * 16 + [0] * 4
    human = [1, 1, 1, 0, 1, 0, 1, 1, 0, 0] + [None] * 10
    text = describe_corrected(corrected_mean(judge, human, bounds=(0, 1)))
    assert text == "judge 0.80; corrected 0.40 (95% CI 0.00\u20130.82) from 10 human grades"


@pytest.mark.parametrize(
    ("judge", "human", "clusters", "message"),
    [
        ([1, 0, 1], [1, None], None, "3 judge scores, 2 human grades"),
        ([1, 0, 1], [1, 0, None], ["a", "b"], "and 2 cluster keys"),
        ([1, 0, 1], [1, None, None], None, "at least 2 human grades, not 1"),
        ([1, 0, 1], [None, None, None], None, "at least 2 human grades, not 0"),
        ([1, float("nan"), 1], [1, 0, None], None, "judge score of sample 1"),
        ([1, 0, 1], [1, math.inf, None], None, "human score of sample 1"),
        ([1, None, 1], [1, 0, None], None, "a judge must score every sample"),
        ([1, 0, 1], [1, "excellent", None], None, "not 'excellent'"),
    ],
)
def test_bad_input_is_a_config_error(judge, human, clusters, message):
    """Lengths that differ, fewer than 2 human grades, scores that are no finite number:
    a ConfigError that says which."""
    with pytest.raises(ConfigError, match=message):
        corrected_mean(judge, human, clusters)


def test_level_must_be_a_probability():
    """`level` outside (0, 1) is a ConfigError."""
    with pytest.raises(ConfigError, match="level"):
        corrected_mean(JUDGE, HUMAN, level=95)


# -- coverage -------------------------------------------------------------------------------

TRUE_MEAN, SAMPLES, GRADED, DRAWS = 0.7, 1_000, 200, 1_000


def biased_judge_draws(seed: int) -> list[CorrectedMean]:
    """`DRAWS` seeded evaluations: each sample is truly correct with probability 0.7;
    the judge calls 10% of the correct ones incorrect and 40% of the incorrect ones
    correct (its mean is 0.7 * 0.9 + 0.3 * 0.4 = 0.75: biased by +0.05); people grade
    200 of the 1,000 samples, chosen at random (the first 200 of independent draws)."""
    rng = random.Random(seed)
    draw = rng.random
    results = []
    for _ in range(DRAWS):
        truth = [1.0 if draw() < TRUE_MEAN else 0.0 for _ in range(SAMPLES)]
        judge = [
            (0.0 if draw() < 0.1 else 1.0) if correct else (1.0 if draw() < 0.4 else 0.0)
            for correct in truth
        ]
        results.append(corrected_mean(judge, truth[:GRADED] + [None] * (SAMPLES - GRADED)))
    return results


def test_the_corrected_interval_covers_the_true_mean():
    """Over 1,000 seeded draws of a judge biased by +0.05, the corrected 95% interval
    covers the true mean 93-97% of the time (measured: 95.9%), the judge's own interval
    almost never (measured: 4.8%: it is precise about the wrong value), and the
    corrected interval is narrower than the human grades' alone."""
    results = biased_judge_draws(seed=35)

    def covered(stats) -> float:
        return sum(1 for s in stats if s.low <= TRUE_MEAN <= s.high) / DRAWS

    corrected = covered(r.corrected for r in results)
    judge = covered(r.judge for r in results)
    assert 0.93 <= corrected <= 0.97, corrected
    assert judge < 0.2, judge
    assert sum(r.corrected.value for r in results) / DRAWS == pytest.approx(TRUE_MEAN, abs=0.003)

    def width(stat) -> float:
        return stat.high - stat.low

    assert sum(width(r.corrected) for r in results) < sum(width(r.human) for r in results)


# -- power tuning (PPI++) -------------------------------------------------------------------


def test_power_tuning_sets_a_judge_that_tells_nothing_aside():
    """A judge whose scores have nothing to do with the truth: PPI++ gives it almost no
    weight (λ near 0), so its interval is about the human grades' own, and narrower than
    plain PPI's, which adds the judge's noise."""
    rng = random.Random(8)
    truth = [1.0 if rng.random() < 0.6 else 0.0 for _ in range(2000)]
    judge = [1.0 if rng.random() < 0.5 else 0.0 for _ in range(2000)]
    human = truth[:300] + [None] * 1700
    plain, tuned = corrected_mean(judge, human), corrected_mean(judge, human, power_tuning=True)
    assert plain.power == 1.0
    assert tuned.power < 0.15
    assert tuned.corrected.stderr < plain.corrected.stderr  # type: ignore[operator]
    assert tuned.corrected.stderr == pytest.approx(tuned.human.stderr, rel=0.05)


def test_power_tuning_weights_the_judge_by_its_slope():
    """When the graded samples are a random part of all N, the variance is
    var(mean_n h) + λ² (1/n - 1/N) var(f) - 2 λ (1/n - 1/N) cov(h, f), smallest at
    λ = cov(h, f) / var(f): the slope of the human grades on the judge's. A judge right
    nine times in ten (truth 60% correct) has slope 0.192 / 0.2436 = 0.79 in expectation;
    the tuned λ is the graded samples' slope, and the interval no wider than PPI's."""
    rng = random.Random(9)
    truth = [1.0 if rng.random() < 0.6 else 0.0 for _ in range(2000)]
    judge = [t if rng.random() < 0.9 else 1 - t for t in truth]
    human = truth[:300] + [None] * 1700
    plain, tuned = corrected_mean(judge, human), corrected_mean(judge, human, power_tuning=True)
    f, h = judge[:300], truth[:300]
    f_mean, h_mean = sum(f) / 300, sum(h) / 300
    slope = sum((x - f_mean) * (y - h_mean) for x, y in zip(f, h, strict=True)) / sum(
        (x - f_mean) ** 2 for x in f
    )
    assert tuned.power == pytest.approx(slope, abs=0.03)
    assert tuned.power == pytest.approx(0.79, abs=0.05)
    assert tuned.corrected.stderr <= plain.corrected.stderr  # type: ignore[operator]


def test_the_power_tuned_interval_covers_the_true_mean():
    """PPI++ on 400 seeded draws of the biased judge: the 95% interval covers the true
    mean 92-98% of the time (λ is estimated from the same grades it weights)."""
    rng = random.Random(36)
    draw = rng.random
    covered = 0
    for _ in range(400):
        truth = [1.0 if draw() < TRUE_MEAN else 0.0 for _ in range(SAMPLES)]
        judge = [
            (0.0 if draw() < 0.1 else 1.0) if correct else (1.0 if draw() < 0.4 else 0.0)
            for correct in truth
        ]
        human = truth[:GRADED] + [None] * (SAMPLES - GRADED)
        stat = corrected_mean(judge, human, power_tuning=True).corrected
        covered += stat.low <= TRUE_MEAN <= stat.high  # type: ignore[operator]
    assert 0.92 <= covered / 400 <= 0.98, covered / 400
