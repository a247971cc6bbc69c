"""Paired tests of two runs: McNemar's exact and clustered tests, the paired bootstrap and
the clustered paired difference, against values computed by hand."""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

import pytest

from vitals_engine._errors import ConfigError
from vitals_engine.statistics.paired import (
    mcnemar,
    mcnemar_clustered,
    paired_bootstrap,
    paired_difference,
)

# Student's t, 97.5% quantiles (tables): 3, 5 and 19 degrees of freedom
T_3, T_5, T_19 = 3.182446, 2.570582, 2.093024

# -- McNemar ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "c", "p_value", "statistic"),
    [
        # 2 * (C(8,0) + C(8,1)) / 2^8 = 2 * 9 / 256
        (7, 1, 0.0703125, 25 / 8),
        (1, 7, 0.0703125, 25 / 8),
        # 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 * 79 / 4096
        (10, 2, 0.03857421875, 49 / 12),
        # 2 * C(6,0) / 2^6
        (0, 6, 0.03125, 25 / 6),
        # b = c: the tail passes the middle, capped at 1
        (5, 5, 1.0, 0.0),
        (4, 5, 1.0, 0.0),
    ],
)
def test_mcnemar_against_hand_computed_values(b, c, p_value, statistic):
    """The exact two-sided p-value is 2 * P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at
    most 1; the statistic is (|b - c| - 1)^2 / (b + c), never below 0."""
    result = mcnemar(b, c)
    assert (result.b, result.c) == (b, c)
    assert result.p_value == p_value
    assert result.statistic == pytest.approx(statistic)


def test_mcnemar_without_discordant_pairs():
    """No pair changed: nothing to test, p = 1 and no statistic."""
    result = mcnemar(0, 0)
    assert result.p_value == 1.0
    assert result.statistic is None


def test_mcnemar_stays_exact_for_many_pairs():
    """Thousands of discordant pairs: the tail is summed in integers, not floats that
    overflow (2^1100) or underflow."""
    b, c = 600, 500
    n = b + c
    exact = Fraction(2 * sum(math.comb(n, i) for i in range(c + 1)), 2**n)
    assert mcnemar(b, c).p_value == pytest.approx(float(exact), rel=1e-12)
    assert 0.001 < mcnemar(b, c).p_value < 0.01  # z = 99/sqrt(1100) ~ 2.98


@pytest.mark.parametrize("counts", [(-1, 2), (1.5, 2), (2, None)])
def test_mcnemar_takes_counts(counts):
    """Anything other than two counts >= 0 is a ConfigError."""
    with pytest.raises(ConfigError, match="two counts"):
        mcnemar(*counts)


# -- clustered McNemar ---------------------------------------------------------------------


def _chi2_1df_tail(x: float) -> float:
    """P(chi-square with 1 df > x) = P(|Z| > sqrt(x)), from the standard library's normal
    (scipy is not installed): a check independent of the erfc the module uses."""
    return 2 * NormalDist().cdf(-math.sqrt(x))


def _pairs(per_cluster: list[tuple[int, int, int]]) -> tuple[list[int], list[int], list[str]]:
    """Pass/fail pairs from (passed in A only, passed in B only, concordant) per cluster."""
    a, b, clusters = [], [], []
    for k, (only_a, only_b, same) in enumerate(per_cluster):
        pairs = [(1, 0)] * only_a + [(0, 1)] * only_b + [(1, 1)] * same
        a += [x for x, _ in pairs]
        b += [y for _, y in pairs]
        clusters += [f"s{k}"] * len(pairs)
    return a, b, clusters


def test_clustered_mcnemar_by_hand():
    """Clusters with (b_k, c_k) = (2, 0), (1, 0), (0, 1), (2, 0) and one concordant: the
    differences 2, 1, -1, 2, 0 sum to 4, their squares to 10: X = 16 / 10 = 1.6 and
    p = P(chi-square_1 > 1.6) = erfc(sqrt(0.8)) = 0.20590."""
    a, b, clusters = _pairs([(2, 0, 1), (1, 0, 2), (0, 1, 0), (2, 0, 0), (0, 0, 3)])
    result = mcnemar_clustered(a, b, clusters)
    assert (result.b, result.c) == (5, 1)
    assert result.statistic == 1.6
    assert result.p_value == pytest.approx(0.2059032, abs=1e-7)
    assert result.p_value == pytest.approx(_chi2_1df_tail(1.6), rel=1e-12)
    assert (result.method, result.clusters, result.name) == ("clustered", 5, "McNemar (clustered)")
    # the exact test, taking the 6 discordant pairs as independent, says otherwise
    assert mcnemar(5, 1).p_value == 0.21875


def test_clustered_mcnemar_is_symmetric_and_takes_booleans():
    """B against A: the same statistic and p-value, b and c swapped; True/False as 1/0."""
    a, b, clusters = _pairs([(2, 0, 1), (1, 0, 2), (0, 1, 0), (2, 0, 0)])
    forward = mcnemar_clustered(a, b, clusters)
    backward = mcnemar_clustered([bool(y) for y in b], [bool(x) for x in a], clusters)
    assert (backward.b, backward.c) == (forward.c, forward.b)
    assert (backward.statistic, backward.p_value) == (forward.statistic, forward.p_value)


@pytest.mark.parametrize(
    ("per_cluster", "statistic"),
    [
        # differences -2, -1, 1 (and 0s): X = 4 / 6
        ([(0, 2, 1), (0, 1, 2), (1, 0, 2), (0, 0, 3), (0, 0, 3), (0, 0, 3)], 2 / 3),
        # differences -2, -1, -1, 1: X = 9 / 7
        ([(0, 2, 0), (0, 1, 1), (0, 1, 1), (1, 0, 1), (0, 0, 2), (0, 0, 2)], 9 / 7),
        # one cluster alone: X = d^2 / d^2 = 1, whatever d
        ([(3, 0, 0)], 1.0),
    ],
)
def test_clustered_mcnemar_p_value_is_the_chi_square_tail(per_cluster, statistic):
    result = mcnemar_clustered(*_pairs(per_cluster))
    assert result.statistic == pytest.approx(statistic, rel=1e-15)
    assert result.p_value == pytest.approx(_chi2_1df_tail(statistic), rel=1e-12)


def test_clustered_mcnemar_with_one_pair_per_cluster_is_the_exact_test():
    """Every cluster a single pair (one epoch per sample): exactly mcnemar(b, c)."""
    a, b, clusters = _pairs([(1, 0, 0)] * 7 + [(0, 1, 0)] + [(0, 0, 1)] * 12)
    result = mcnemar_clustered(a, b, clusters)
    assert result == mcnemar(7, 1)
    assert (result.p_value, result.method, result.clusters) == (0.0703125, "exact", None)
    assert result.name == "McNemar"


def test_clustered_mcnemar_without_imbalance_in_any_cluster():
    """All pairs concordant, or each cluster with as many pairs passed in A only as in B
    only: the denominator is 0, p = 1 and no statistic."""
    all_same = mcnemar_clustered(*_pairs([(0, 0, 2), (0, 0, 3)]))
    assert (all_same.b, all_same.c, all_same.statistic, all_same.p_value) == (0, 0, None, 1.0)
    balanced = mcnemar_clustered(*_pairs([(1, 1, 0), (2, 2, 1), (0, 0, 2)]))
    assert (balanced.b, balanced.c, balanced.statistic, balanced.p_value) == (3, 3, None, 1.0)
    assert balanced.method == "clustered"


def test_clustered_mcnemar_with_opposite_clusters_that_cancel():
    """Differences +2 and -2: the sum is 0, so X = 0 and p = 1."""
    result = mcnemar_clustered(*_pairs([(2, 0, 0), (0, 2, 0)]))
    assert (result.statistic, result.p_value) == (0.0, 1.0)


def test_clustered_mcnemar_takes_pass_fail_pairs():
    """Scores other than pass/fail, pairs that do not pair, or none: ConfigErrors."""
    with pytest.raises(ConfigError, match=r"pass/fail outcomes .* not 0\.5"):
        mcnemar_clustered([1, 0.5], [1, 1], ["s1", "s1"])
    with pytest.raises(ConfigError, match=r"pass/fail outcomes .* not None"):
        mcnemar_clustered([1, None], [1, 1], ["s1", "s1"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="one value of each run per pair"):
        mcnemar_clustered([1, 0], [1, 1], ["s1"])
    with pytest.raises(ConfigError, match="at least one pair"):
        mcnemar_clustered([], [], [])


# -- paired difference ----------------------------------------------------------------------


def test_paired_difference_by_hand():
    """d = b - a = (0, 0, 1, 0): mean 0.25, s^2 = 0.25, SE = sqrt(0.25 / 4) = 0.25, and the
    interval is 0.25 +/- t(3) * 0.25."""
    result = paired_difference([1, 1, 0, 0], [1, 1, 1, 0])
    assert result.difference == 0.25
    assert result.standard_error == pytest.approx(0.25)
    assert result.low == pytest.approx(0.25 - T_3 * 0.25, abs=1e-3)
    assert result.high == pytest.approx(0.25 + T_3 * 0.25, abs=1e-3)
    assert result.clusters == 4


def test_paired_difference_clusters_epochs_of_a_sample():
    """Three identical epochs of each sample carry no more information than one: the
    clustered SE equals that of the samples alone, with samples - 1 degrees of freedom."""
    a, b = [1, 1, 0, 0], [1, 1, 1, 0]
    single = paired_difference(a, b)
    tripled = paired_difference(
        [x for x in a for _ in range(3)],
        [y for y in b for _ in range(3)],
        [i for i in range(4) for _ in range(3)],
    )
    assert tripled.difference == pytest.approx(single.difference)
    assert tripled.standard_error == pytest.approx(single.standard_error)
    assert (tripled.low, tripled.high) == pytest.approx((single.low, single.high))
    assert tripled.clusters == 4
    naive = paired_difference([x for x in a for _ in range(3)], [y for y in b for _ in range(3)])
    assert naive.standard_error is not None
    assert single.standard_error is not None
    assert naive.standard_error < single.standard_error  # what ignoring clusters gets wrong


def test_paired_difference_twenty_samples():
    """7 samples gain a point, 1 loses one, 12 stay: d = 0.3, s^2 = 6.2 / 19, t(19)."""
    a = [0] * 7 + [1] + [1] * 12
    b = [1] * 7 + [0] + [1] * 12
    result = paired_difference(a, b)
    error = math.sqrt(6.2 / 19 / 20)
    assert result.difference == pytest.approx(0.3)
    assert result.standard_error == pytest.approx(error)
    assert result.low == pytest.approx(0.3 - T_19 * error, abs=1e-3)
    assert result.high == pytest.approx(0.3 + T_19 * error, abs=1e-3)


def test_paired_difference_within_bounds():
    """Three samples, two gained: 2/3 +/- t(2) * 1/3 reaches past 1, so with the bounds of a
    difference of 0..1 scores it stops at 1."""
    free = paired_difference([0, 0, 0], [1, 1, 0])
    bounded = paired_difference([0, 0, 0], [1, 1, 0], bounds=(-1.0, 1.0))
    assert free.high == pytest.approx(2 / 3 + 4.302653 / 3, abs=1e-4)
    assert bounded.high == 1.0
    assert bounded.low == free.low


def test_paired_difference_of_one_sample_has_no_interval():
    """One cluster has no spread to measure: no standard error and no interval."""
    result = paired_difference([0, 1], [1, 1], ["s1", "s1"])
    assert result.difference == 0.5
    assert (result.standard_error, result.low, result.high) == (None, None, None)


def test_paired_values_must_pair():
    """Runs of different lengths, or no pair at all, are ConfigErrors."""
    with pytest.raises(ConfigError, match="one value of each run per pair"):
        paired_difference([1, 0], [1])
    with pytest.raises(ConfigError, match="one value of each run per pair"):
        paired_bootstrap([1, 0], [1, 1], ["a"])
    with pytest.raises(ConfigError, match="at least one pair"):
        paired_bootstrap([], [])


# -- paired bootstrap ------------------------------------------------------------------------

# 40 pairs whose differences are 0.25 + a symmetric spread that sums to 0: mean exactly 0.25
SPREAD = [0.3, -0.3, 0.1, -0.1, 0.2, -0.2, 0.0, 0.05, -0.05, 0.15, -0.15, 0.0] * 3 + [
    0.4,
    -0.4,
    0.0,
    0.0,
]
A = [0.2 + 0.01 * (i % 7) for i in range(len(SPREAD))]
B = [x + 0.25 + e for x, e in zip(A, SPREAD, strict=True)]


def test_bootstrap_is_deterministic_with_its_seed():
    """The same pairs and seed give the same draws, to the last digit; another seed others."""
    first = paired_bootstrap(A, B, seed=7)
    assert paired_bootstrap(A, B, seed=7) == first
    other = paired_bootstrap(A, B, seed=8)
    assert (other.low, other.high) != (first.low, first.high)
    assert (first.draws, first.level) == (2_000, 0.95)


def test_bootstrap_interval_holds_the_true_difference():
    """The percentile interval of a shift by 0.25 holds 0.25, about +/- 2 SE wide, and the
    p-value is 0: no draw reaches 0."""
    result = paired_bootstrap(A, B)
    assert result.difference == pytest.approx(0.25)
    assert result.low < 0.25 < result.high
    sd = math.sqrt(sum(e * e for e in SPREAD) / (len(SPREAD) - 1))
    error = sd / math.sqrt(len(SPREAD))
    assert result.high - result.low == pytest.approx(2 * 1.96 * error, rel=0.2)
    assert result.p_value == 0.0


def test_bootstrap_p_value_counts_the_other_side_of_zero():
    """No difference at all: p = 1. A constant difference: every draw equals it, so the
    interval has no width and no draw is on the other side (p = 0). A difference that is
    noise: a large p."""
    same = paired_bootstrap([0.1, 0.5, 0.9], [0.1, 0.5, 0.9])
    assert (same.difference, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = paired_bootstrap([0.1, 0.5, 0.9], [0.2, 0.6, 1.0])
    assert (shifted.low, shifted.high) == pytest.approx((0.1, 0.1))
    assert shifted.p_value == 0.0
    noise = paired_bootstrap(A, [x + e for x, e in zip(A, SPREAD, strict=True)])
    assert noise.p_value > 0.5
    assert noise.low < 0 < noise.high


def test_bootstrap_p_value_by_hand_for_two_pairs():
    """Two pairs with differences +1 and -0.5: a draw is both of one or one of each, means
    1, -0.5 or 0.25 with chances 1/4, 1/4, 1/2. The observed mean is 0.25 > 0, the draws at
    or below 0 are about a quarter, so p is about 2 * 1/4."""
    result = paired_bootstrap([0.0, 0.5], [1.0, 0.0], draws=20_000)
    assert result.difference == 0.25
    assert result.p_value == pytest.approx(0.5, abs=0.03)


def test_bootstrap_draws_a_sample_with_all_its_epochs():
    """Three identical epochs per sample, drawn by sample, give exactly the bootstrap of
    the samples alone (same seed, same clusters drawn)."""
    tripled = paired_bootstrap(
        [x for x in A for _ in range(3)],
        [y for y in B for _ in range(3)],
        [i for i in range(len(A)) for _ in range(3)],
    )
    single = paired_bootstrap(A, B)
    assert tripled.difference == pytest.approx(single.difference)
    assert (tripled.low, tripled.high) == pytest.approx((single.low, single.high))


def test_bootstrap_with_clusters_of_different_sizes():
    """Samples with different numbers of epochs: each draw's difference is the mean over
    the pairs drawn; the interval holds the observed difference, deterministically."""
    a = [0.0, 0.0, 0.5, 1.0, 0.5, 0.0, 1.0, 0.5]
    b = [1.0, 0.5, 0.5, 1.0, 1.0, 0.5, 1.0, 0.0]
    clusters = ["s1", "s1", "s1", "s2", "s3", "s3", "s4", "s5"]
    result = paired_bootstrap(a, b, clusters)
    assert result.difference == pytest.approx(sum(b) / 8 - sum(a) / 8)
    assert result.low <= result.difference <= result.high
    assert paired_bootstrap(a, b, clusters) == result
