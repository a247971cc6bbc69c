"""The statistics of metrics against values worked out by hand: standard errors (plain,
clustered, bootstrap), the t quantile, intervals, and the epoch reducers."""

from __future__ import annotations

import math

import polars as pl
import pytest

from vitals_engine._errors import ConfigError, MetricError
from vitals_engine.metrics import accuracy, metric_stats, score_series
from vitals_engine.statistics.intervals import (
    MetricStat,
    bootstrap_stderr,
    cluster_groups,
    mean_stderr,
    t_interval,
    t_quantile,
)
from vitals_engine.statistics.reducers import check_reducer, pass_at_k, reduce_epochs

#: 7 correct of 10.
TEN = ["C", "C", "I", "C", "I", "C", "C", "C", "I", "C"]
#: sqrt(p(1 - p) · n/(n - 1) / n): the sample variance of seven 1s and three 0s is
#: (7·0.3² + 3·0.7²)/9 = 2.1/9.
TEN_STDERR = math.sqrt(0.7 * 0.3 * 10 / 9 / 10)
T_975_9 = 2.262157  # t(0.975, 9), from a table

#: 5 samples x 2 epochs: (1, 1), (1, 0), (0, 0), (1, 1), (0, 1); mean 0.6.
EPOCHS = [1, 1, 1, 0, 0, 0, 1, 1, 0, 1]
SAMPLES = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
#: Each sample's summed deviation from 0.6: 0.8, -0.2, -1.2, 0.8, -0.2; squares sum to 2.8.
#: CR1: sqrt(G/(G-1) · 2.8) / n with G = 5 clusters, n = 10 scores.
EPOCHS_STDERR = math.sqrt(5 / 4 * 2.8) / 10


# -- standard errors -------------------------------------------------------------------


def test_the_stderr_of_a_mean_is_sqrt_var_over_n():
    """10 scores, 7 correct: stderr sqrt(0.7·0.3·10/9/10) = 0.15275, as Inspect's stderr()."""
    values = [1.0 if s == "C" else 0.0 for s in TEN]
    assert mean_stderr(values) == pytest.approx(TEN_STDERR, rel=1e-12)
    assert pytest.approx(0.152753, abs=1e-6) == TEN_STDERR


def test_the_clustered_stderr_sums_each_cluster_first():
    """5 samples x 2 epochs: CR1 with the per-sample sums of deviations, by hand."""
    assert mean_stderr(EPOCHS, SAMPLES) == pytest.approx(EPOCHS_STDERR, rel=1e-12)
    assert pytest.approx(0.187083, abs=1e-6) == EPOCHS_STDERR
    # the epochs of a sample agree more than chance: wider than treating them as 10 samples
    assert mean_stderr(EPOCHS, SAMPLES) > mean_stderr(EPOCHS)  # type: ignore[operator]


def test_clusters_of_one_are_the_plain_stderr():
    """Every score its own cluster gives the unclustered value."""
    assert mean_stderr(EPOCHS, list(range(10))) == pytest.approx(mean_stderr(EPOCHS), rel=1e-12)


def test_fewer_than_two_clusters_have_no_stderr_and_no_interval():
    """One score, or one cluster of many: no standard error, no interval."""
    assert mean_stderr([1.0]) is None
    assert mean_stderr([1.0, 0.0, 1.0], ["a", "a", "a"]) is None
    assert t_interval(0.5, None, clusters=1) == (None, None)
    assert t_interval(0.5, 0.1, clusters=1) == (None, None)
    stats = metric_stats(score_series(["C"]), None)
    assert stats == {"accuracy": MetricStat(1.0, None, None, None, n=1, clusters=1)}


def test_cluster_groups_keep_first_appearance_order():
    assert cluster_groups(["b", "a", "b", "c"]) == [[0, 2], [1], [3]]


# -- the t quantile --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.706), (2, 4.303), (5, 2.571), (9, 2.262), (30, 2.042), (math.inf, 1.960)],
)
def test_t_quantile_matches_the_textbook_table(df, expected):
    """t(0.975, df) for the common degrees of freedom, to the table's 3 decimals."""
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [(0.995, 3, 5.841), (0.9, 7, 1.415), (0.95, 20, 1.725), (0.99, 60, 2.390), (0.975, 120, 1.980)],
)
def test_t_quantile_at_other_levels(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=5e-4)


def test_t_quantile_is_symmetric_and_checks_its_arguments():
    assert t_quantile(0.025, 9) == pytest.approx(-t_quantile(0.975, 9), rel=1e-12)
    assert t_quantile(0.5, 4) == 0.0
    for p in (0.0, 1.0, 1.5):
        with pytest.raises(ConfigError, match="between 0 and 1"):
            t_quantile(p, 5)
    with pytest.raises(ConfigError, match="positive"):
        t_quantile(0.975, 0)


def test_large_df_approaches_the_normal_quantile():
    assert t_quantile(0.975, 10**6) == pytest.approx(1.959966, abs=1e-5)


# -- intervals -------------------------------------------------------------------------


def test_accuracy_interval_is_value_plus_minus_t_times_stderr_clipped_to_0_1():
    """0.7 ± t(0.975, 9)·0.15275: 0.3545 .. 1.0455, clipped to 1 at the top."""
    stat = metric_stats(score_series(TEN), None)["accuracy"]
    assert stat.value == 0.7
    assert stat.stderr == pytest.approx(TEN_STDERR, rel=1e-12)
    assert stat.low == pytest.approx(0.7 - T_975_9 * TEN_STDERR, abs=1e-5)
    assert stat.low == pytest.approx(0.35446, abs=1e-4)
    assert stat.high == 1.0
    assert (stat.n, stat.clusters) == (10, 10)


def test_clustered_accuracy_uses_the_clusters_for_degrees_of_freedom():
    """5 clusters: t(0.975, 4) = 2.776, not the t of 9 degrees of freedom."""
    stat = metric_stats(score_series([float(v) for v in EPOCHS]), None, SAMPLES)["accuracy"]
    assert stat.value == pytest.approx(0.6)
    assert stat.stderr == pytest.approx(EPOCHS_STDERR, rel=1e-12)
    assert stat.low == pytest.approx(0.6 - 2.776445 * EPOCHS_STDERR, abs=1e-5)
    assert stat.high == pytest.approx(min(1.0, 0.6 + 2.776445 * EPOCHS_STDERR), abs=1e-5)
    assert (stat.n, stat.clusters) == (10, 5)


def test_an_accuracy_of_numbers_beyond_0_1_is_not_clipped():
    """Accuracy averages numbers; scores on 1..5 keep an interval on their own scale."""
    stat = metric_stats(score_series([1, 5, 5, 5]), None)["accuracy"]
    assert stat.value == 4.0
    assert stat.high is not None
    assert stat.high > 5


def test_unscored_samples_are_left_out_of_n_and_clusters():
    stat = metric_stats(score_series(["C", None, "I", "C"]), None)["accuracy"]
    assert (stat.n, stat.clusters) == (3, 3)
    assert stat.value == pytest.approx(2 / 3)


def test_a_metric_on_the_accuracy_function_gets_the_analytic_stderr():
    """`metrics={"acc": ve.accuracy}` is the built-in: analytic, not bootstrapped."""
    stats = metric_stats(score_series(TEN), {"acc": accuracy})
    assert stats["acc"].stderr == pytest.approx(TEN_STDERR, rel=1e-12)


# -- bootstrap -------------------------------------------------------------------------


def _mean_of(series: pl.Series):
    return lambda rows: series.gather(rows).mean()


def test_bootstrap_is_seeded_and_close_to_the_analytic_stderr_of_a_mean():
    """A mean's bootstrap stderr: the same for the same seed, within 10% of sqrt(var/n)
    (its own spread is about 1/sqrt(2·1000) = 2%)."""
    values = [1.0 if i % 10 < 7 else 0.0 for i in range(100)]
    series = pl.Series(values)
    once = bootstrap_stderr(_mean_of(series), range(100), seed=0)
    again = bootstrap_stderr(_mean_of(series), range(100), seed=0)
    other = bootstrap_stderr(_mean_of(series), range(100), seed=1)
    assert once == again
    assert once != other
    analytic = mean_stderr(values)
    assert once == pytest.approx(analytic, rel=0.1)
    assert other == pytest.approx(analytic, rel=0.1)


def test_clustered_bootstrap_resamples_whole_clusters():
    """Resampling samples (both epochs together) tracks the clustered analytic stderr."""
    values = [float(v) for v in EPOCHS] * 10
    samples = [f"{copy}-{s}" for copy in range(10) for s in SAMPLES]
    series = pl.Series(values)
    boot = bootstrap_stderr(_mean_of(series), samples)
    assert boot == pytest.approx(mean_stderr(values, samples), rel=0.1)
    assert boot > mean_stderr(values)  # type: ignore[operator]  # wider than unclustered


def test_a_custom_metric_gets_a_bootstrap_stderr_and_an_interval():
    """Any function of the score column: bootstrap over clusters, deterministic."""
    share = {"share": lambda s: (s == "C").mean()}
    first = metric_stats(score_series(TEN * 4), share)["share"]
    second = metric_stats(score_series(TEN * 4), share)["share"]
    assert first == second
    assert first.value == pytest.approx(0.7)
    analytic = mean_stderr([1.0 if s == "C" else 0.0 for s in TEN * 4])
    assert first.stderr == pytest.approx(analytic, rel=0.15)
    assert first.low == pytest.approx(0.7 - t_quantile(0.975, 39) * first.stderr)
    assert (first.n, first.clusters) == (40, 40)


def test_a_custom_metric_that_returns_no_number_is_a_metric_error():
    with pytest.raises(MetricError, match="single number"):
        metric_stats(score_series(TEN), {"bad": lambda s: "high"})


# -- reducers --------------------------------------------------------------------------


def test_mean_counts_grades_as_numbers():
    assert reduce_epochs(["C", "P", "I", "C"], "mean") == pytest.approx(2.5 / 4)
    assert reduce_epochs([True, False], "mean") == 0.5
    assert reduce_epochs([3, None, 5], "mean") == 4.0


def test_mode_keeps_a_grade_and_a_tie_goes_to_the_earliest_epoch():
    """Two C and two I: the value of the earliest epoch among the tied ones wins (Inspect)."""
    assert reduce_epochs(["C", "I", "C"], "mode") == "C"
    assert reduce_epochs(["I", "C", "C", "I"], "mode") == "I"
    assert reduce_epochs(["C", "I", "I", "C"], "mode") == "C"
    assert reduce_epochs(["good", "bad", "bad"], "mode") == "bad"


def test_max_keeps_the_best_score_as_it_is():
    assert reduce_epochs(["I", "P", "I"], "max") == "P"
    assert reduce_epochs(["I", "C"], "max") == "C"
    assert reduce_epochs([0.2, 0.9, 0.5], "max") == 0.9


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 1), (5, 2, 2), (5, 2, 3), (5, 0, 2), (4, 4, 2)])
def test_pass_at_k_is_inspects_unbiased_estimator(n, c, k):
    """1 - C(n-c, k)/C(n, k), with c the correct epochs."""
    scores = ["C"] * c + ["I"] * (n - c)
    assert pass_at_k(scores, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k))
    assert reduce_epochs(scores, f"pass_at_{k}") == pass_at_k(scores, k)


def test_pass_at_k_by_hand():
    """5 epochs, 2 correct, k = 2: 1 - C(3,2)/C(5,2) = 1 - 3/10."""
    assert reduce_epochs(["C", "I", "C", "I", "I"], "pass_at_2") == pytest.approx(0.7)
    assert reduce_epochs([1.0, 0.0, True], "pass_at_1") == pytest.approx(2 / 3)


def test_unscored_epochs_are_left_out():
    assert reduce_epochs([None, None], "mean") is None
    assert reduce_epochs([None, None], "mode") is None
    assert reduce_epochs(["C", None], "pass_at_2") is None  # one scored epoch, k = 2


def test_mean_and_max_refuse_a_custom_grade():
    with pytest.raises(MetricError, match="reducer='mode'"):
        reduce_epochs(["excellent", "poor"], "mean")


@pytest.mark.parametrize(
    ("reducer", "epochs", "message"),
    [
        ("median", 3, "must be None, 'mean', 'mode', 'max' or 'pass_at_<k>'"),
        ("pass_at_k", 3, "Write k as a number: 'pass_at_2'"),
        ("pass_at_0", 3, "k must be at least 1"),
        ("pass_at_3", 2, "needs at least 3 epochs per sample, and the task has 2"),
        ("pass_at_2", None, "the task has 1: pass `epochs=2` or more"),
        (3, 3, "not 3"),
    ],
)
def test_bad_reducers_are_config_errors(reducer, epochs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_reducer(reducer, epochs)


def test_good_reducers_pass():
    assert check_reducer(None) is None
    assert [check_reducer(r, 3) for r in ("mean", "mode", "max", "pass_at_3")] == [
        "mean",
        "mode",
        "max",
        "pass_at_3",
    ]
