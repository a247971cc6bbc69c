"""Agreement between raters: Krippendorff's alpha at each level, against values computed
by hand from Krippendorff's worked example, and pairwise agreement and Cohen's kappa."""

from __future__ import annotations

import math
import random

import pytest

from vitals_engine._errors import ConfigError
from vitals_engine.statistics import (
    describe_agreement,
    krippendorff_alpha,
    pairwise_agreement,
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four
# observers, twelve units, values 1..5, some missing (None).
OBSERVERS = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}
UNITS = [list(unit) for unit in zip(*OBSERVERS.values(), strict=True)]


def test_nominal_alpha_of_krippendorffs_example():
    """Nominal alpha of the example is 113/152 = 0.7434 (Krippendorff: 0.743).

    Unit 12 has one value: not pairable, so n = 40 values in 11 units. A unit of m
    values adds n_c n_k / (m - 1) to the coincidence o_ck (c != k) and
    n_c (n_c - 1) / (m - 1) to o_cc:

    - o_11 = 3 (unit 1: three 1s, 3*2/2) + 2 (unit 8: three 1s of 4, 3*2/3) + 2 (unit 11) = 7
    - o_22 = 2 (unit 2) + 4 (unit 5) + 4 (unit 9) = 10; o_33 = 4 + 4 = 8; o_44 = 4;
      o_55 = 3 (unit 10)
    - off the diagonal: unit 2 gives o_23 = o_32 = 1, unit 8 o_12 = o_21 = 1, unit 6
      (1, 2, 3, 4) 1/3 to each of its 12 ordered pairs.

    D_o = (40 - 32) / 40 = 0.2. The marginals n_c = (9, 13, 10, 5, 3), so
    D_e = (40^2 - (81 + 169 + 100 + 25 + 9)) / (40 * 39) = 1216 / 1560, and
    alpha = 1 - 0.2 * 1560 / 1216 = 904 / 1216 = 113 / 152.
    """
    alpha = krippendorff_alpha(OBSERVERS)
    assert alpha.value == pytest.approx(113 / 152, abs=1e-12)
    assert (alpha.raters, alpha.units, alpha.values) == (4, 11, 40)
    assert alpha.observed == pytest.approx(0.2)
    assert alpha.expected == pytest.approx(1216 / 1560)


def test_interval_alpha_of_krippendorffs_example():
    """Interval alpha of the example is 1 - 20280/134400 = 0.8491 (Krippendorff: 0.849).

    The off-diagonal coincidences (both orders) are o_12 = o_23 = 4/3 and
    o_13 = o_14 = o_24 = o_34 = 1/3, so
    n D_o = 2 (4/3 * 1 + 1/3 * 4 + 1/3 * 9 + 4/3 * 1 + 1/3 * 4 + 1/3 * 1) = 52/3 and
    D_o = 13/30. With n_c = (9, 13, 10, 5, 3), sum_{c<k} n_c n_k (c - k)^2 =
    117 + 360 + 405 + 432 + 130 + 260 + 351 + 50 + 120 + 15 = 2240, so
    D_e = 2 * 2240 / 1560, and alpha = 1 - (13/30) / (4480/1560).
    """
    alpha = krippendorff_alpha(OBSERVERS, "interval")
    assert alpha.value == pytest.approx(1 - (13 / 30) / (4480 / 1560), abs=1e-12)
    assert alpha.value == pytest.approx(0.849, abs=5e-4)


def test_ordinal_alpha_of_krippendorffs_example():
    """Ordinal alpha of the example is 1 - 73749/399480 = 0.8154 (Krippendorff: 0.815).

    The ordinal distance is (sum_{g=c..k} n_g - (n_c + n_k)/2)^2 with
    n_g = (9, 13, 10, 5, 3): d_12 = 11^2, d_13 = 22.5^2, d_14 = 30^2, d_15 = 34^2,
    d_23 = 11.5^2, d_24 = 19^2, d_25 = 23^2, d_34 = 7.5^2, d_35 = 11.5^2, d_45 = 4^2.
    n D_o = (2/3)(4 * 121 + 506.25 + 900 + 4 * 132.25 + 361 + 56.25) = 1891, so
    D_o = 47.275; sum_{c<k} n_c n_k d_ck = 199740, so D_e = 399480 / 1560.
    """
    alpha = krippendorff_alpha(OBSERVERS, "ordinal")
    assert alpha.observed == pytest.approx(47.275)
    assert alpha.expected == pytest.approx(399480 / 1560)
    assert alpha.value == pytest.approx(1 - 73749 / 399480, abs=1e-12)


def test_ratio_alpha_of_krippendorffs_example():
    """Ratio alpha of the example is 0.7974 (Krippendorff: 0.797).

    The distance ((c - k)/(c + k))^2: d_12 = 1/9, d_13 = 1/4, d_14 = 9/25, d_15 = 4/9,
    d_23 = 1/25, d_24 = 1/9, d_25 = 9/49, d_34 = 1/49, d_35 = 1/16, d_45 = 1/81.
    n D_o = (2/3)(4/9 + 1/4 + 9/25 + 4/25 + 1/9 + 1/49);
    1560 D_e = 2 (117/9 + 90/4 + 405/25 + 108/9 + 130/25 + 65/9 + 351/49 + 50/49
    + 30/16 + 15/81).
    """
    observed = (2 / 3) * (4 / 9 + 1 / 4 + 9 / 25 + 4 / 25 + 1 / 9 + 1 / 49) / 40
    expected = (
        2
        * (
            117 / 9
            + 90 / 4
            + 405 / 25
            + 108 / 9
            + 130 / 25
            + 65 / 9
            + 351 / 49
            + 50 / 49
            + 30 / 16
            + 15 / 81
        )
        / 1560
    )
    alpha = krippendorff_alpha(OBSERVERS, "ratio")
    assert alpha.value == pytest.approx(1 - observed / expected, abs=1e-12)
    assert alpha.value == pytest.approx(0.797, abs=5e-4)


def test_units_and_raters_give_the_same_alpha():
    """A list of units (ratings by rater position) and a mapping rater -> ratings are the
    same data; units of different lengths are padded with missing ratings."""
    assert krippendorff_alpha(UNITS).value == krippendorff_alpha(OBSERVERS).value
    ragged = [[1, 1], [2, 2, 1], [3]]
    padded = {"a": [1, 2, 3], "b": [1, 2, None], "c": [None, 1, None]}
    assert krippendorff_alpha(ragged).value == krippendorff_alpha(padded).value


def test_units_with_one_rating_are_not_pairable():
    """A unit rated once (or not at all) changes nothing: it is left out."""
    base = [["C", "C"], ["I", "C"], ["I", "I"]]
    more = [*base, ["C", None], [None, None], ["I"]]
    assert krippendorff_alpha(more) == krippendorff_alpha(base)
    assert krippendorff_alpha(more).units == 3


def test_no_variation_leaves_alpha_undefined():
    """Every rating the same: no disagreement expected by chance (D_e = 0) nor observed,
    and alpha is NaN, as Krippendorff leaves it; the summary line says why."""
    alpha = krippendorff_alpha([["C", "C", "C"], ["C", None, "C"]])
    assert math.isnan(alpha.value)
    assert (alpha.observed, alpha.expected) == (0.0, 0.0)
    assert describe_agreement(alpha) == (
        "judges agree: alpha undefined (every grade the same; 2 samples graded by 3 judges)"
    )


def test_no_pairable_unit_leaves_alpha_undefined():
    """No unit rated twice: alpha is NaN over 0 units."""
    alpha = krippendorff_alpha({"a": ["C", None], "b": [None, "I"]})
    assert math.isnan(alpha.value)
    assert alpha.units == 0
    assert "no sample graded by 2 judges" in describe_agreement(alpha)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_perfect_agreement_is_one(level):
    """Raters who always agree (and do not always give one value) have alpha 1."""
    units = [[v, v, v] for v in (1, 2, 3, 2, 1, 4)] + [[2, None, 2]]
    assert krippendorff_alpha(units, level).value == 1.0


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_random_ratings_have_alpha_near_zero(level):
    """Raters who grade at random, independently of the unit, agree only by chance:
    alpha is near 0 over 3,000 units (seeded)."""
    rng = random.Random(12)
    units = [[rng.choice([0, 0.5, 1]) for _ in range(3)] for _ in range(3000)]
    assert abs(krippendorff_alpha(units, level).value) < 0.03


def test_grades_count_as_numbers_above_the_nominal_level():
    """At the interval level C, P, I count 1, 0.5, 0 (as the metrics count them)."""
    grades = [["C", "P"], ["I", "I"], ["C", "C"]]
    numbers = [[1, 0.5], [0, 0], [1, 1]]
    assert krippendorff_alpha(grades, "interval") == krippendorff_alpha(numbers, "interval")


def test_interval_alpha_ignores_shift_and_scale():
    """Interval alpha is unchanged by a linear change of units (x -> 10 x + 3)."""
    moved = {r: [None if v is None else 10 * v + 3 for v in vs] for r, vs in OBSERVERS.items()}
    first = krippendorff_alpha(OBSERVERS, "interval").value
    assert krippendorff_alpha(moved, "interval").value == pytest.approx(first, abs=1e-12)


@pytest.mark.parametrize(
    ("ratings", "level", "message"),
    [
        ({"a": [1, 2], "b": [1]}, "nominal", "one rating per unit"),
        (["CC", "CI"], "nominal", "must be a list"),
        ("CCI", "nominal", "must be a list"),
        ([[1, "excellent"]], "interval", "takes numbers"),
        ([[1, float("nan")]], "nominal", "finite"),
        ([[1, -2]], "ratio", ">= 0"),
        ([[1, 2]], "cardinal", "must be one of"),
    ],
)
def test_bad_ratings_are_config_errors(ratings, level, message):
    """Ratings in the wrong shape, of the wrong kind, or an unknown level: a ConfigError
    that says what is wrong."""
    with pytest.raises(ConfigError, match=message):
        krippendorff_alpha(ratings, level)


def test_a_rating_that_is_no_number_is_refused_pairwise_too():
    """NaN is never a rating (it equals nothing, not even itself): a ConfigError, as for
    alpha; missing ratings are None."""
    with pytest.raises(ConfigError, match="finite"):
        pairwise_agreement({"a": [1.0, math.nan], "b": [1.0, 2.0]})


def test_cohens_kappa_against_a_hand_computed_table():
    """50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15. p_o = 35/50 = 0.7;
    A says yes 25/50, B 30/50, so p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.2/0.5 = 0.4."""
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    (pair,) = pairwise_agreement({"A": a, "B": b})
    assert pair.raters == ("A", "B")
    assert pair.units == 50
    assert pair.agreement == pytest.approx(0.7)
    assert pair.kappa == pytest.approx(0.4)


def test_pairs_use_only_the_units_both_rated():
    """Each pair of raters is compared on the units both rated, in the raters' order."""
    pairs = pairwise_agreement(OBSERVERS)
    assert [p.raters for p in pairs] == [
        ("A", "B"),
        ("A", "C"),
        ("A", "D"),
        ("B", "C"),
        ("B", "D"),
        ("C", "D"),
    ]
    a_c = pairs[1]
    # A and C both rated units 2..9: they agree on 3, 4, 5, 7, 9
    assert (a_c.units, a_c.agreement) == (8, 5 / 8)


def test_undefined_kappa_is_nan():
    """Two raters who both give one and the same value throughout: chance agreement is 1,
    kappa is NaN (agreement is 1); two raters who share no unit: both NaN."""
    (same,) = pairwise_agreement([["C", "C"], ["C", "C"]])
    assert same.agreement == 1.0
    assert math.isnan(same.kappa)
    (apart,) = pairwise_agreement([["C", None], [None, "I"]])
    assert apart.units == 0
    assert math.isnan(apart.agreement)
    assert math.isnan(apart.kappa)


def test_describe_agreement():
    """The summary line gives alpha to two places, its level and what it is over."""
    assert describe_agreement(krippendorff_alpha(OBSERVERS)) == (
        "judges agree: alpha 0.74 (nominal, 11 samples graded by 4 judges)"
    )
