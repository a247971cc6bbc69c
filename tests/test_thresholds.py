"""`check_thresholds`: a run's logged metrics against the least each may be, by name."""

from __future__ import annotations

import pytest

import vitals_engine as ve
from vitals_engine.log import schema as s
from vitals_engine.thresholds import parse_threshold


def header(status: str = "success", scores: dict[str, dict[str, float]] | None = None):
    """A log header whose results have one entry per scorer, as `results.scores` holds them."""
    scores = (
        {"detect_includes(case_sensitive=False)": {"accuracy": 0.72}} if scores is None else scores
    )
    results = s.EvalResults(
        total_samples=10,
        completed_samples=10,
        scores=[
            s.EvalScore(
                name=scorer,
                scorer=scorer,
                metrics={k: s.EvalMetric(name=k, value=v) for k, v in metrics.items()},
            )
            for scorer, metrics in scores.items()
        ],
    )
    spec = s.EvalSpec(
        created="2026-11-28T12:00:00+00:00",
        task="sums",
        dataset=s.EvalDataset(),
        model="mock/mock-model",
        config=s.EvalConfig(),
    )
    return s.EvalLog(version=2, status=status, eval=spec, results=results)  # type: ignore[arg-type]


TWO_SCORERS = {
    "detect_includes(case_sensitive=False)": {"accuracy": 0.9, "share": 0.5},
    "model_graded_qa": {"accuracy": 0.6},
}


def test_a_metric_below_fails_with_one_line():
    """A metric below its threshold fails, and says so on one line."""
    [check] = ve.check_thresholds(header(), {"accuracy": 0.8})
    assert not check.passed
    assert check.line() == "FAIL sums: accuracy 0.72 < 0.80"
    assert (check.scorer, check.metric, check.value) == (
        "detect_includes(case_sensitive=False)",
        "accuracy",
        0.72,
    )


def test_a_metric_at_or_above_passes():
    """A metric equal to its threshold passes."""
    [check] = ve.check_thresholds(header(), {"accuracy": 0.72})
    assert check.passed
    assert check.line() == "ok sums: accuracy 0.72 >= 0.72"


def test_named_by_scorer_when_several_have_the_metric():
    """With two scorers, `scorer/metric` picks one (by its short or its full name); the
    plain name of a metric only one has still works."""
    checks = ve.check_thresholds(
        header(scores=TWO_SCORERS),
        {
            "detect_includes/accuracy": 0.8,
            "model_graded_qa/accuracy": 0.7,
            "detect_includes(case_sensitive=False)/share": 0.5,
            "share": 0.6,
        },
    )
    assert [(c.scorer, c.value, c.passed) for c in checks] == [
        ("detect_includes(case_sensitive=False)", 0.9, True),
        ("model_graded_qa", 0.6, False),
        ("detect_includes(case_sensitive=False)", 0.5, True),
        ("detect_includes(case_sensitive=False)", 0.5, False),
    ]
    assert checks[1].line() == "FAIL sums: model_graded_qa/accuracy 0.60 < 0.70"


def test_an_ambiguous_name_is_an_error_listing_the_metrics():
    """A plain name two scorers have is an error that says how to name each."""
    with pytest.raises(ve.ConfigError, match="several scorers") as raised:
        ve.check_thresholds(header(scores=TWO_SCORERS), {"accuracy": 0.8})
    assert "detect_includes/accuracy, share (detect_includes/share)" in str(raised.value)
    assert "model_graded_qa/accuracy" in str(raised.value)


def test_an_unknown_name_is_an_error_listing_the_metrics():
    """A name that matches no metric is an error that lists the metrics there are."""
    with pytest.raises(
        ve.ConfigError,
        match=r"Threshold 'acc': task 'sums' has no such metric\. "
        r"Its metrics: accuracy \(detect_includes/accuracy\)\.",
    ):
        ve.check_thresholds(header(), {"acc": 0.8})
    with pytest.raises(ve.ConfigError, match="no such metric"):
        ve.check_thresholds(header(), {"model_graded_qa/accuracy": 0.8})


def test_a_run_that_did_not_succeed_passes_nothing():
    """A run with status error fails its checks even with its metric above the threshold;
    without results, each check fails for that reason."""
    [check] = ve.check_thresholds(header(status="error"), {"accuracy": 0.5})
    assert not check.passed
    assert check.line() == "FAIL sums: accuracy 0.72 >= 0.50, but the run ended with status error"
    [empty] = ve.check_thresholds(header(status="error", scores={}), {"accuracy": 0.5})
    assert not empty.passed
    assert empty.line() == "FAIL sums: accuracy: no results (the run ended with status error)"


def test_digits_follow_the_threshold_and_never_hide_a_difference():
    """The numbers have the threshold's decimals (at least 2), and more when the value
    would look equal to it."""
    [finer] = ve.check_thresholds(header(), {"accuracy": 0.725})
    assert finer.reason() == "accuracy 0.720 < 0.725"
    [close] = ve.check_thresholds(header(scores={"x": {"accuracy": 0.7999}}), {"accuracy": 0.8})
    assert close.reason() == "accuracy 0.7999 < 0.8000"


def test_a_task_that_ran_and_its_log_are_checked_alike(tmp_path):
    """A Task that ran, its log's path and the log read give the same checks."""
    data = [{"input": "2+2", "target": "4"}, {"input": "4", "target": "4"}]
    task = ve.Task(data, lambda input: input, ve.detect_includes(), name="pairs", dir=tmp_path)
    task.eval(progress=False)
    assert task.log_path is not None
    by_task = ve.check_thresholds(task, {"accuracy": 0.6})
    assert by_task == ve.check_thresholds(task.log_path, {"accuracy": 0.6})
    assert by_task == ve.check_thresholds(ve.read_log(task.log_path), {"accuracy": 0.6})
    assert [c.line() for c in by_task] == ["FAIL pairs: accuracy 0.50 < 0.60"]


def test_a_task_that_never_ran_is_an_error():
    """Checking a task before it ran says to run it first."""
    task = ve.Task([{"input": "a", "target": "a"}], lambda input: input, ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="has no log yet"):
        ve.check_thresholds(task, {"accuracy": 0.5})


@pytest.mark.parametrize("text", ["accuracy", "=0.5", "accuracy=high", "accuracy=nan"])
def test_a_malformed_threshold_is_an_error(text):
    """`NAME=VALUE` needs a name and a finite number."""
    with pytest.raises(ve.ConfigError, match="A threshold is METRIC=VALUE"):
        parse_threshold(text)


def test_a_threshold_parses_on_its_last_equals_sign():
    """The value follows the last `=`; the name may hold a scorer's arguments."""
    assert parse_threshold("detect_match(location='end')/accuracy=0.9") == (
        "detect_match(location='end')/accuracy",
        0.9,
    )


@pytest.mark.parametrize("limit", [float("nan"), float("inf"), "0.8", True])
def test_a_threshold_that_is_not_a_finite_number_is_an_error(limit):
    """`check_thresholds` refuses what `--fail-under` refuses: a NaN (no metric is ever at
    or above it, so every check would fail with a line saying `0.72 < nan`), an
    infinity, and anything but a number (a text "0.8", a boolean)."""
    with pytest.raises(ve.ConfigError, match=r"Threshold 'accuracy' must be a finite number"):
        ve.check_thresholds(header(), {"accuracy": limit})
