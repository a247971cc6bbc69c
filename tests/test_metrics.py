"""The score column's typing, accuracy, and custom metrics through a Task."""

from __future__ import annotations

import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine.metrics import GRADE_DTYPE, accuracy, score_series

DATASET = [
    {"input": "What's 1+1?", "target": "2"},
    {"input": "What's 2+2?", "target": "5"},
]


def make_task(tmp_path, **kwargs) -> ve.Task:
    """Two samples the default mock answers with sums: one correct, one incorrect."""
    kwargs.setdefault("scorer", ve.detect_includes())
    return ve.Task(dataset=DATASET, solver=ve.generate(ve.chat_mock()), dir=tmp_path, **kwargs)


# -- score_series ----------------------------------------------------------------------


def test_grades_become_ordered_enum():
    """Grades become the Enum I < P < C, so sorting puts I before P before C."""
    series = score_series(["C", "I", "P", "C"])
    assert series.dtype == pl.Enum(["I", "P", "C"])
    assert series.dtype == GRADE_DTYPE
    assert series.name == "score"
    assert series.sort().to_list() == ["I", "P", "C", "C"]
    assert series.max() == "C"


def test_grades_keep_nulls():
    """Unscored samples (None) stay null in a grade column."""
    series = score_series(["C", None, "I"])
    assert series.dtype == GRADE_DTYPE
    assert series.to_list() == ["C", None, "I"]


def test_booleans_become_boolean():
    """Boolean scores give a Boolean column with nulls kept."""
    series = score_series([True, False, None])
    assert series.dtype == pl.Boolean
    assert series.to_list() == [True, False, None]


def test_numbers_become_float64():
    """Integer and float scores give a Float64 column with nulls kept."""
    series = score_series([1, 0.5, None])
    assert series.dtype == pl.Float64
    assert series.to_list() == [1.0, 0.5, None]


def test_other_strings_become_string():
    """A custom grade scheme gives a String column, not the grade Enum."""
    series = score_series(["A", "B", None])
    assert series.dtype == pl.String
    assert series.to_list() == ["A", "B", None]


def test_grades_mixed_with_other_strings_become_string():
    """One non-grade string turns the whole column into String."""
    assert score_series(["C", "excellent"]).dtype == pl.String


def test_all_null_scores_stay_null():
    """A column of only None keeps every value null."""
    assert score_series([None, None]).to_list() == [None, None]


# -- accuracy --------------------------------------------------------------------------


def test_accuracy_all_correct():
    """C, C is accuracy 1.0."""
    assert accuracy(score_series(["C", "C"])) == 1.0


def test_accuracy_partial_counts_half():
    """P counts 0.5 and I counts 0, so P, I is 0.25."""
    assert accuracy(score_series(["P", "I"])) == 0.25


def test_accuracy_averages_numbers():
    """Numeric scores are averaged."""
    assert accuracy(score_series([1, 0.5, 0])) == pytest.approx(0.5)


def test_accuracy_averages_booleans():
    """Boolean scores are averaged as 1/0."""
    assert accuracy(score_series([True, False, True, True])) == 0.75


def test_accuracy_leaves_out_nulls():
    """Unscored samples are left out rather than counted as incorrect."""
    assert accuracy(score_series(["C", None, "I"])) == 0.5
    assert accuracy(score_series([1.0, None])) == 1.0


def test_accuracy_none_for_other_strings():
    """Accuracy has no meaning for a custom grade scheme, so it is None."""
    assert accuracy(score_series(["A", "B"])) is None


def test_accuracy_none_when_all_null():
    """With nothing scored, accuracy is None rather than 0 or NaN."""
    assert accuracy(score_series([None, None])) is None


def test_accuracy_is_exported():
    """ve.accuracy is the metrics module's accuracy, usable in a metrics dict."""
    assert ve.accuracy is accuracy


# -- metrics through a Task ------------------------------------------------------------


@pytest.mark.anyio
async def test_default_metric_is_accuracy(tmp_path):
    """Without metrics=, an eval reports {'accuracy': ...}."""
    task = await make_task(tmp_path).eval_async()
    assert task.metrics == {"accuracy": 0.5}


@pytest.mark.anyio
async def test_custom_metrics_dict(tmp_path):
    """Each metric in Task(metrics=...) gets the score column and is reported by name."""
    seen: list[pl.Series] = []

    def n_correct(scores: pl.Series) -> int:
        seen.append(scores)
        return int((scores == "C").sum())

    task = make_task(tmp_path, metrics={"n_correct": n_correct, "acc": ve.accuracy})
    await task.eval_async()
    assert task.metrics == {"n_correct": 1.0, "acc": 0.5}
    assert seen[0].dtype == GRADE_DTYPE
    assert seen[0].to_list() == ["C", "I"]


@pytest.mark.anyio
async def test_set_metrics_clears_until_measure(tmp_path):
    """set_metrics() clears task.metrics; measure() computes the new ones."""
    task = await make_task(tmp_path).eval_async()
    assert task.metrics == {"accuracy": 0.5}
    returned = task.set_metrics({"pct": lambda s: 100 * ve.accuracy(s)})
    assert returned is task
    assert task.metrics is None
    assert task.measure() == {"pct": 50.0}
    assert task.metrics == {"pct": 50.0}


@pytest.mark.anyio
async def test_set_metrics_none_restores_accuracy(tmp_path):
    """set_metrics(None) goes back to the default accuracy."""
    task = await make_task(tmp_path, metrics={"one": lambda s: 1}).eval_async()
    assert task.metrics == {"one": 1.0}
    task.set_metrics(None)
    assert task.measure() == {"accuracy": 0.5}


@pytest.mark.anyio
async def test_metric_returning_string_raises_metric_error(tmp_path):
    """A metric returning a string raises MetricError naming the metric."""
    task = make_task(tmp_path, metrics={"verdict": lambda s: "good"})
    with pytest.raises(ve.MetricError, match=r"metric 'verdict' returned a str"):
        await task.eval_async()


@pytest.mark.anyio
async def test_metric_returning_bool_raises_metric_error(tmp_path):
    """A metric returning a bool is not a number and raises MetricError."""
    task = await make_task(tmp_path).eval_async()
    task.set_metrics({"passed": lambda s: True})
    with pytest.raises(ve.MetricError, match=r"metric 'passed' returned a bool"):
        task.measure()


def test_metrics_not_a_dict_is_config_error(tmp_path):
    """Task(metrics=a_function) is a ConfigError explaining the dict form."""
    with pytest.raises(ve.ConfigError, match=r"`metrics` must be a dict of name -> function"):
        make_task(tmp_path, metrics=ve.accuracy)


def test_set_metrics_not_a_dict_is_config_error(tmp_path):
    """set_metrics(a_function) is a ConfigError too."""
    task = make_task(tmp_path)
    with pytest.raises(ve.ConfigError, match=r"`metrics` must be a dict"):
        task.set_metrics(ve.accuracy)  # type: ignore[arg-type]


def test_empty_metrics_dict_is_config_error(tmp_path):
    """An empty metrics dict is a ConfigError pointing at None for the default."""
    with pytest.raises(ve.ConfigError, match=r"empty dict; pass None"):
        make_task(tmp_path, metrics={})


def test_measure_before_scoring_is_task_state_error(tmp_path):
    """measure() on a task never run raises TaskStateError."""
    with pytest.raises(ve.TaskStateError, match=r"not been scored yet"):
        make_task(tmp_path).measure()


@pytest.mark.anyio
async def test_measure_after_solve_only_is_task_state_error(tmp_path):
    """measure() after solve() but before score() raises TaskStateError."""
    task = await make_task(tmp_path).solve_async()
    with pytest.raises(ve.TaskStateError, match=r"Run task.score\(\) first"):
        task.measure()


@pytest.mark.anyio
async def test_custom_letter_grades_give_string_scores_and_no_metrics(tmp_path):
    """A scorer grading 'A'/'B' gives a String score column and no default metrics."""

    async def letter_grade(sample):
        return "A" if sample.target in sample.result else "B"

    task = await make_task(tmp_path, scorer=letter_grade).eval_async()
    samples = task.get_samples()
    assert samples["score"].dtype == pl.String
    assert samples["score"].to_list() == ["A", "B"]
    assert task.metrics == {}


@pytest.mark.anyio
async def test_numeric_scorer_gives_float_scores_and_mean_accuracy(tmp_path):
    """A scorer returning numbers gives a Float64 column and their mean as accuracy."""

    async def closeness(sample):
        return 1 if sample.target in sample.result else 0.25

    task = await make_task(tmp_path, scorer=closeness).eval_async()
    assert task.get_samples()["score"].dtype == pl.Float64
    assert task.metrics == {"accuracy": 0.625}
