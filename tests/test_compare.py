"""compare(): two runs of one task paired by (id, epoch); compare_models(): an eval set's
models against a baseline.

Runs use the offline mock model, scripted to answer wrongly for chosen samples, so the
changed samples, the differences and the tests' values are known by hand.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import polars as pl
import pytest

import vitals_engine as ve
from vitals_engine import Comparison, ComparisonSet, compare, compare_models
from vitals_engine._errors import ConfigError, TaskStateError
from vitals_engine.statistics.paired import paired_bootstrap

# Student's t, 97.5% quantiles (tables)
T_5, T_19 = 2.570582, 2.093024

QUESTIONS = [{"input": f"Question {i}: say yes", "target": "yes"} for i in range(1, 21)]


def _number(prompt: str) -> int:
    return int(re.search(r"Question (\d+)", prompt)[1])  # type: ignore[index]


def saying_no_to(wrong: set[int], model: str = "mock-model") -> ve.Chat:
    """A mock model answering "no" to the questions numbered in `wrong`, "yes" to the rest."""
    return ve.chat_mock(lambda prompt: "no" if _number(prompt) in wrong else "yes", model=model)


def run(tmp_path: Path, chat: ve.Chat, data=QUESTIONS, name: str = "say-yes", **options) -> ve.Task:
    task = ve.Task(data, ve.generate(chat), ve.detect_includes(), name=name, dir=tmp_path)
    return task.eval(**options)


# A is wrong on 1-7 and 10, B on 10 and 20: 7 pairs go I -> C, 1 goes C -> I, 12 stay.
WRONG_A, WRONG_B = {1, 2, 3, 4, 5, 6, 7, 10}, {10, 20}


@pytest.fixture
def two_runs(tmp_path):
    a = run(tmp_path, saying_no_to(WRONG_A))
    b = run(tmp_path, saying_no_to(WRONG_B, model="better"))
    return a, b


def answering(wrong: set[tuple[int, int]]):
    """A solver that answers "no" to the (id, epoch)s in `wrong`, else "yes"."""

    def solver(input: str, sample: ve.Sample) -> str:
        return "no" if (sample.id, sample.epoch) in wrong else "yes"

    return solver


def test_changed_samples_and_mcnemar_by_hand(two_runs):
    """The samples that changed grade are listed exactly; accuracy goes 0.60 -> 0.90, with
    McNemar's exact p = 2 * (1 + 8) / 2^8 for b = 1, c = 7, and the t interval of the
    paired differences (+1 seven times, -1 once, 0 twelve times)."""
    comparison = compare(*two_runs)
    assert isinstance(comparison, Comparison)
    (row,) = comparison.metrics.iter_rows(named=True)
    error = math.sqrt((7 * 0.7**2 + 1.3**2 + 12 * 0.3**2) / 19 / 20)
    assert row["metric"] == "accuracy"
    assert (row["a"], row["b"]) == pytest.approx((0.6, 0.9))
    assert row["difference"] == pytest.approx(0.3)
    assert row["p_value"] == 0.0703125
    assert row["test"] == "McNemar"
    assert row["n_pairs"] == 20
    assert row["low"] == pytest.approx(0.3 - T_19 * error, abs=1e-4)
    assert row["high"] == pytest.approx(0.3 + T_19 * error, abs=1e-4)
    assert comparison.mcnemar is not None
    assert (comparison.mcnemar.b, comparison.mcnemar.c) == (1, 7)
    changed = comparison.changed
    assert changed.columns == [
        "id",
        "epoch",
        "input",
        "score_a",
        "score_b",
        "answer_a",
        "answer_b",
    ]
    assert changed.select("id", "epoch").rows() == [(i, 1) for i in (1, 2, 3, 4, 5, 6, 7, 20)]
    assert changed.select(pl.col("score_a", "score_b").cast(pl.String)).rows() == [
        ("I", "C")
    ] * 7 + [("C", "I")]
    assert changed.row(0, named=True)["input"] == "Question 1: say yes"
    assert changed.row(0, named=True)["answer_a"] == "no"
    assert (comparison.name_a, comparison.name_b) == (
        "say-yes (mock/mock-model)",
        "say-yes (mock/better)",
    )
    assert (comparison.only_a, comparison.only_b, comparison.unscored) == ([], [], 0)


def test_the_printed_table_has_the_key_figures(two_runs):
    """The printout names both runs and says the difference, its interval, the test and
    its p-value, the pairs, the changes by kind, cost and tokens, and lists the changes."""
    a, b = two_runs
    text = str(compare(a, b))
    assert "A: say-yes (mock/mock-model)\nB: say-yes (mock/better)" in text
    interval = "95% CI +0.03\u2013+0.57"
    assert f"accuracy 0.60 → 0.90 (+0.30, {interval}), McNemar p = 0.070, 20 pairs" in text
    assert "8 samples changed grade: 7 I→C, 1 C→I" in text
    tokens = a.get_cost()["input_tokens"].sum() + a.get_cost()["output_tokens"].sum()
    assert f"cost $0.00 vs $0.00; tokens {tokens:,} vs {tokens:,}; time " in text
    assert re.search(r"^20 +1 +C +I +Question 20: say yes$", text, re.MULTILINE)


@pytest.mark.anyio
async def test_tasks_logs_and_paths_compare_alike(tmp_path):
    """compare(Task, path), compare(LoggedEval, LoggedEval) and compare(str, Path) give the
    same metrics, changed samples and cost (runs made on either async backend)."""
    a = await ve.Task(
        QUESTIONS, ve.generate(saying_no_to(WRONG_A)), ve.detect_includes(), dir=tmp_path
    ).eval_async()
    b = await ve.Task(
        QUESTIONS, ve.generate(saying_no_to(WRONG_B)), ve.detect_includes(), dir=tmp_path
    ).eval_async()
    assert a.log_path is not None
    assert b.log_path is not None
    from_tasks = compare(a, b)
    results = [
        compare(a, b.log_path),
        compare(ve.read_log(a.log_path), ve.read_log(b.log_path)),
        compare(str(a.log_path), Path(b.log_path)),
    ]
    for other in results:
        assert isinstance(other, Comparison)
        assert other.metrics.equals(from_tasks.metrics)
        assert other.changed.equals(from_tasks.changed)
        assert other.cost.equals(from_tasks.cost)
        assert (other.name_a, other.name_b) == (from_tasks.name_a, from_tasks.name_b)
        assert all(seconds is not None for seconds in other.time)


def test_epochs_pair_by_id_and_epoch(tmp_path):
    """With 3 epochs each (id, epoch) is a pair (b = 1, c = 3), and both McNemar's test and
    the interval's standard error are clustered by sample: per sample b_k - c_k is -2, -1,
    +1, 0, 0, 0, so X = (-2)^2 / (4 + 1 + 1) = 2/3 and p = erfc(sqrt(1/3)) = 0.41422 (the
    exact test, taking the 4 pairs as independent, would say 2 * (1 + 4) / 16 = 0.625)."""
    wrong_a = {(1, 1), (1, 2), (2, 3)}
    wrong_b = {(3, 1)}

    data = QUESTIONS[:6]
    a = ve.Task(data, answering(wrong_a), ve.detect_includes(), dir=tmp_path).eval(epochs=3)
    b = ve.Task(data, answering(wrong_b), ve.detect_includes(), dir=tmp_path).eval(epochs=3)
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    assert comparison.changed.select("id", "epoch").rows() == [(1, 1), (1, 2), (2, 3), (3, 1)]
    (row,) = comparison.metrics.iter_rows(named=True)
    assert (row["n_pairs"], row["test"]) == (18, "McNemar (clustered)")
    assert row["p_value"] == pytest.approx(0.4142162, abs=1e-7)
    assert comparison.mcnemar is not None
    assert (comparison.mcnemar.b, comparison.mcnemar.c) == (1, 3)
    assert comparison.mcnemar.statistic == pytest.approx(2 / 3)
    assert (comparison.mcnemar.method, comparison.mcnemar.clusters) == ("clustered", 6)
    # per sample, the sums of differences: +2, +1, -1, 0, 0, 0 over 3 pairs each; d = 2/18
    d = 2 / 18
    sums = [2, 1, -1, 0, 0, 0]
    error = math.sqrt(6 / 5 * sum((s - 3 * d) ** 2 for s in sums)) / 18
    assert row["difference"] == pytest.approx(d)
    assert row["low"] == pytest.approx(d - T_5 * error, abs=1e-4)
    assert row["high"] == pytest.approx(d + T_5 * error, abs=1e-4)
    assert "4 (sample, epoch) pairs changed grade: 3 I→C, 1 C→I" in str(comparison)
    assert "McNemar (clustered) p = 0.414, 18 pairs" in str(comparison)


def test_two_epochs_report_the_clustered_mcnemar(tmp_path):
    """epochs=2: A fails both epochs of sample 1 and the first of samples 2 and 3, B the
    second of sample 4. Per sample b_k - c_k: -2, -1, -1, +1, 0, 0; X = 9 / 7 and
    p = erfc(sqrt(9 / 14)) = 0.25684, shown as "McNemar (clustered)" in the frame, the
    printout and an eval set's table."""
    wrong_a = {(1, 1), (1, 2), (2, 1), (3, 1)}
    wrong_b = {(4, 2)}

    data = QUESTIONS[:6]
    a, b = (
        ve.Task(data, answering(w), ve.detect_includes(), name="twice", dir=tmp_path).eval(epochs=2)
        for w in (wrong_a, wrong_b)
    )
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    (row,) = comparison.metrics.iter_rows(named=True)
    assert (row["test"], row["n_pairs"]) == ("McNemar (clustered)", 12)
    assert row["p_value"] == pytest.approx(math.erfc(math.sqrt(9 / 14)), rel=1e-12)
    assert row["p_value"] == pytest.approx(0.2568393, abs=1e-7)
    assert comparison.mcnemar is not None
    assert (comparison.mcnemar.b, comparison.mcnemar.c) == (1, 4)
    assert "accuracy 0.67 → 0.92 (+0.25, 95% CI" in str(comparison)
    assert "McNemar (clustered) p = 0.257, 12 pairs" in str(comparison)
    table = str(compare_models(StandIn([a, b], []))).split("\n\n\n")[0]
    assert re.search(r" 0\.257 +McNemar \(clustered\)$", table, flags=re.MULTILINE), table


def test_one_epoch_against_three_pairs_the_first(tmp_path):
    """A run of 1 epoch against one of 3: the first epochs pair, the others are B's alone."""
    data = QUESTIONS[:4]
    a = ve.Task(data, lambda input: "yes", ve.detect_includes(), dir=tmp_path).eval()
    b = ve.Task(data, lambda input: "yes", ve.detect_includes(), dir=tmp_path).eval(epochs=3)
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    assert comparison.metrics["n_pairs"].to_list() == [4]
    assert comparison.metrics["test"].to_list() == ["McNemar"]  # one pair per sample: exact
    assert comparison.only_a == []
    assert comparison.only_b == [(i, e) for i in (1, 2, 3, 4) for e in (2, 3)]


def _numeric_task(tmp_path: Path, bonus: float) -> ve.Task:
    """Scores i / 20 for question i, plus `bonus` on odd questions."""

    def score(sample: ve.SolvedSample) -> float:
        return float(sample.result)

    def reply(prompt: str) -> str:
        i = _number(prompt)
        return str(i / 20 + (bonus if i % 2 else 0.0))

    return ve.Task(QUESTIONS, ve.generate(ve.chat_mock(reply)), score, dir=tmp_path).eval()


def test_numeric_scores_use_the_paired_bootstrap(tmp_path):
    """Numbers are compared with the seeded paired bootstrap: the interval and p-value are
    those of paired_bootstrap() on the scores, and the interval holds the true +0.05."""
    a, b = _numeric_task(tmp_path, 0.0), _numeric_task(tmp_path, 0.1)
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    (row,) = comparison.metrics.iter_rows(named=True)
    assert row["test"] == "paired bootstrap"
    assert row["difference"] == pytest.approx(0.05)
    xs, ys = a.get_samples()["score"].to_list(), b.get_samples()["score"].to_list()
    expected = paired_bootstrap(xs, ys, list(range(1, 21)))
    assert (row["low"], row["high"], row["p_value"]) == (
        expected.low,
        expected.high,
        expected.p_value,
    )
    assert row["low"] <= 0.05 <= row["high"]
    assert comparison.bootstrap == expected
    assert comparison.mcnemar is None
    assert comparison.changed["id"].to_list() == list(range(1, 21, 2))
    assert "10 samples changed score: 10 up" in str(comparison)
    assert compare(a, b).metrics.equals(comparison.metrics)  # seeded: the same each time


def test_partial_credit_uses_the_bootstrap(tmp_path):
    """P grades are not pass/fail: the mean score (P = 0.5) goes to the paired bootstrap."""
    data = QUESTIONS[:6]
    a = ve.Task(data, lambda input: "yes", lambda sample: "P", dir=tmp_path).eval()
    b = ve.Task(data, lambda input: "yes", lambda sample: "C", dir=tmp_path).eval()
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    row = comparison.metrics.row(0, named=True)
    assert (row["a"], row["b"], row["test"]) == (0.5, 1.0, "paired bootstrap")
    assert "6 samples changed grade: 6 P→C" in str(comparison)


def test_samples_missing_from_one_run_are_reported(tmp_path):
    """Samples one run lacks are not paired: counted by (id, epoch) and said in the printout."""
    a = run(tmp_path, saying_no_to(WRONG_A))
    fewer = [{"id": i, **q} for i, q in enumerate(QUESTIONS, 1) if i < 19]
    fewer.append({"id": 21, "input": "Question 21: say yes", "target": "yes"})
    b = run(tmp_path, saying_no_to(WRONG_B), data=fewer)
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    assert comparison.only_a == [(19, 1), (20, 1)]
    assert comparison.only_b == [(21, 1)]
    assert comparison.metrics["n_pairs"].to_list() == [18]
    assert comparison.changed["id"].to_list() == [1, 2, 3, 4, 5, 6, 7]
    assert "Not paired: 2 samples only in A, 1 only in B" in str(comparison)


def test_unscored_pairs_are_left_out(tmp_path):
    """A sample one run did not score (a score without a value, as a judge's reply without a
    grade) is paired but left out of the tests, and counted."""
    data = QUESTIONS[:5]
    a = ve.Task(data, lambda input: "yes", ve.detect_includes(), dir=tmp_path).eval()

    def sometimes(sample: ve.SolvedSample) -> ve.Score:
        return ve.Score(None if sample.id == 2 else "C")

    b = ve.Task(data, lambda input: "yes", sometimes, dir=tmp_path).eval()
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    assert comparison.unscored == 1
    assert comparison.metrics["n_pairs"].to_list() == [4]
    assert comparison.metrics["test"].to_list() == ["McNemar"]  # one pair per sample: exact
    assert comparison.changed.select("id", "score_b").rows() == [(2, None)]
    assert "Left out: 1 pair one run did not score" in str(comparison)


def test_custom_metrics_are_shown_untested(tmp_path):
    """A run's own metrics beside accuracy are shown as the runs report them, with no test."""
    metrics = {"n_correct": lambda scores: (scores == "C").sum()}
    a = ve.Task(
        QUESTIONS,
        ve.generate(saying_no_to(WRONG_A)),
        ve.detect_includes(),
        metrics=metrics,
        dir=tmp_path,
    ).eval()
    b = ve.Task(
        QUESTIONS,
        ve.generate(saying_no_to(WRONG_B)),
        ve.detect_includes(),
        metrics=metrics,
        dir=tmp_path,
    ).eval()
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    rows = comparison.metrics.rows(named=True)
    assert [r["metric"] for r in rows] == ["accuracy", "n_correct"]
    assert rows[1] | {"metric": None} == {
        "metric": None,
        "a": 12.0,
        "b": 18.0,
        "difference": 6.0,
        "low": None,
        "high": None,
        "p_value": None,
        "test": None,
        "n_pairs": None,
    }
    assert "n_correct 12.00 → 18.00 (+6.00; as the runs report it, untested)" in str(comparison)


def test_cost_and_time_side_by_side_over_http(server, tmp_path):
    """Over the local mock server, each run's cost is its get_cost() total, side by side
    with its tokens and time; identical answers make no change and McNemar p = 1."""
    data = [{"input": f"What's {i}+1?", "target": str(i + 1)} for i in range(1, 9)]

    def task(model: str) -> ve.Task:
        chat = ve.chat_openai(model, base_url=server.base_url(), api_key="k")
        return ve.Task(data, ve.generate(chat), ve.detect_includes(), dir=tmp_path).eval()

    a, b = task("gpt-4.1-mini"), task("gpt-4.1")
    comparison = compare(a, b)
    assert isinstance(comparison, Comparison)
    cost = comparison.cost
    assert cost["run"].to_list() == ["A", "B"]
    assert cost["cost"].to_list() == pytest.approx(
        [a.get_cost()["cost"].sum(), b.get_cost()["cost"].sum()]
    )
    assert cost["requests"].to_list() == [8, 8]
    assert cost["cost"][1] > cost["cost"][0] > 0  # gpt-4.1 costs more than its mini
    assert comparison.time == (a.elapsed, b.elapsed)
    assert comparison.changed.height == 0
    assert comparison.metrics.row(0, named=True)["p_value"] == 1.0
    text = str(comparison)
    assert "No sample changed grade." in text
    assert f"cost ${cost['cost'][0]:.4f} vs ${cost['cost'][1]:.4f}" in text


def test_runs_of_different_tasks_are_a_config_error(tmp_path):
    """No sample in common, or none with the same input, is a ConfigError that says so."""
    a = run(tmp_path, saying_no_to(set()))
    others = [{"id": f"q{i}", "input": f"Question {i}: say yes", "target": "yes"} for i in (1, 2)]
    b = run(tmp_path, saying_no_to(set()), data=others, name="other")
    with pytest.raises(ConfigError, match=r"no sample in common .* different tasks"):
        compare(a, b)
    renamed = [{"input": f"Question {i}: say no", "target": "yes"} for i in range(1, 21)]
    c = run(tmp_path, saying_no_to(set()), data=renamed, name="other")
    with pytest.raises(ConfigError, match="No sample has the same input"):
        compare(a, c)


def test_an_edited_dataset_is_noted(tmp_path):
    """Some paired samples with another input: compared, and noted in the printout."""
    a = run(tmp_path, saying_no_to(set()))
    edited = [dict(q) for q in QUESTIONS]
    edited[0]["input"] = "Question 1: please say yes"
    comparison = compare(a, run(tmp_path, saying_no_to(set()), data=edited))
    assert isinstance(comparison, Comparison)
    assert comparison.inputs_differ == 1
    assert "Note: the input differs between the runs in 1 paired sample" in str(comparison)


def test_runs_that_cannot_be_compared(tmp_path, two_runs):
    """A task that has not run, one run alone, a baseline without an eval set, or another
    kind of object are errors that say what compare() takes."""
    a, b = two_runs
    fresh = ve.Task(QUESTIONS, lambda input: "yes", ve.detect_includes(), dir=tmp_path)
    with pytest.raises(TaskStateError, match="has not run yet"):
        compare(fresh, b)
    with pytest.raises(ConfigError, match="needs two runs"):
        compare(a)
    with pytest.raises(ConfigError, match="`baseline=` is for compare"):
        compare(a, b, baseline="mock/mock-model")
    with pytest.raises(ConfigError, match="`b` is a int"):
        compare(a, 42)  # type: ignore[arg-type]


# -- eval sets ---------------------------------------------------------------------------------


class StandIn:
    """What compare_models() needs of an eval set: `.tasks` (one per task and model) and
    `.models`."""

    def __init__(self, tasks: list[ve.Task], models: list[object]) -> None:
        self.tasks = tasks
        self.models = models


@pytest.fixture
def eval_set(tmp_path):
    wrong = {"m1": WRONG_A, "m2": WRONG_B, "m3": set()}
    tasks = [run(tmp_path, saying_no_to(wrong[m], model=m)) for m in ("m1", "m2", "m3")]
    small = QUESTIONS[:4]
    tasks += [run(tmp_path, saying_no_to(set(), model=m), small, "short") for m in ("m1", "m2")]
    return StandIn(tasks, [ve.chat_mock(model="m1"), "mock/m2", "mock/m3"])


def test_an_eval_set_is_compared_with_its_first_model(eval_set):
    """Each task's run on every other model is compared with its run on the first model."""
    comparisons = compare_models(eval_set)
    assert isinstance(comparisons, ComparisonSet)
    assert len(comparisons) == 3
    assert [(c.name_a, c.name_b) for c in comparisons] == [
        ("say-yes (mock/m1)", "say-yes (mock/m2)"),
        ("say-yes (mock/m1)", "say-yes (mock/m3)"),
        ("short (mock/m1)", "short (mock/m2)"),
    ]
    metrics = comparisons.metrics
    assert metrics.columns[:4] == ["task", "model_a", "model_b", "metric"]
    assert metrics.select("task", "model_b", "p_value").rows() == [
        ("say-yes", "mock/m2", 0.0703125),
        ("say-yes", "mock/m3", 2 * 1 / 2**8),  # 8 gained, none lost
        ("short", "mock/m2", 1.0),
    ]
    assert comparisons.changed.filter(pl.col("model_b") == "mock/m2")["id"].to_list() == [
        1,
        2,
        3,
        4,
        5,
        6,
        7,
        20,
    ]
    text = str(comparisons)
    assert text.startswith("task     model A  model B  metric    A     B     B - A  95% CI")
    assert re.search(
        r"^say-yes +mock/m1 +mock/m2 +accuracy +0\.60 +0\.90 +\+0\.30 "
        r"+\+0\.03\u2013\+0\.57 +0\.070 +McNemar$",
        text,
        re.MULTILINE,
    )
    assert "B: say-yes (mock/m3)" in text
    assert "B: short (mock/m2)" in text


def test_an_eval_set_with_another_baseline(eval_set):
    """`baseline=` names the model (with or without its provider) the others are compared to;
    a model no run used is a ConfigError naming the models each task ran on."""
    comparisons = compare_models(eval_set, baseline="m2")
    assert isinstance(comparisons, ComparisonSet)
    assert [c.name_a for c in comparisons] == ["say-yes (mock/m2)"] * 2 + ["short (mock/m2)"]
    assert comparisons[0].name_b == "say-yes (mock/m1)"
    assert comparisons[0].metrics["difference"].to_list() == pytest.approx([-0.3])
    with pytest.raises(ConfigError, match=r"no run on the baseline model 'gpt-5'.*mock/m1"):
        compare_models(eval_set, baseline="gpt-5")


def test_an_eval_set_run_without_scores_is_skipped(eval_set, tmp_path):
    """A run of the set that never scored (it failed before) is left out and named; the
    others are compared."""
    unrun = ve.Task(QUESTIONS, ve.generate(saying_no_to(set(), model="m4")), name="say-yes")
    eval_set.tasks.append(unrun)
    comparisons = compare_models(eval_set)
    assert len(comparisons) == 3
    assert comparisons.skipped == ["say-yes"]
    assert "Not compared: 1 run without scores (say-yes)" in str(comparisons)


def test_an_eval_set_of_one_model_has_nothing_to_compare(tmp_path):
    """An eval set whose every task ran on one model is a ConfigError."""
    single = StandIn([run(tmp_path, saying_no_to(set()))], ["mock/mock-model"])
    with pytest.raises(ConfigError, match="Nothing to compare"):
        compare_models(single)


def test_compare_of_an_eval_set_is_deprecated(eval_set):
    """compare(eval_set) still returns compare_models()'s ComparisonSet for this release,
    with a DeprecationWarning naming compare_models."""
    with pytest.warns(DeprecationWarning, match=r"use ve\.compare_models\(eval_set\)"):
        comparisons = compare(eval_set, baseline="m2")
    assert isinstance(comparisons, ComparisonSet)
    expected = compare_models(eval_set, baseline="m2")
    assert [(c.name_a, c.name_b) for c in comparisons] == [(c.name_a, c.name_b) for c in expected]
    assert comparisons.metrics.equals(expected.metrics)


# -- clustered by a metadata column --------------------------------------------------------

# Twelve questions on four documents of three each; A is wrong on 1-4, B on 7.
DOCS = [dict(q, doc=f"d{(i - 1) // 3 + 1}") for i, q in enumerate(QUESTIONS[:12], start=1)]
#: Per document, pairs passed in A only minus in B only: d1 -3, d2 -1, d3 +1, d4 0.
DOC_X = 3**2 / (9 + 1 + 1)
#: The differences B - A (+1 on 1-4, -1 on 7) have mean 0.25; per document the sums of
#: (d - 0.25) are 2.25, 0.25, -1.75, -0.75: CR1 with G = 4.
DOC_SE = math.sqrt(4 / 3 * (2.25**2 + 0.25**2 + 1.75**2 + 0.75**2)) / 12
T_3 = 3.182446


def doc_runs(tmp_path: Path, cluster: str | None = "doc") -> tuple[ve.Task, ve.Task]:
    tasks = []
    for wrong, model in (({1, 2, 3, 4}, "mock-model"), ({7}, "better")):
        task = ve.Task(
            DOCS,
            ve.generate(saying_no_to(wrong, model=model)),
            ve.detect_includes(),
            name="documents",
            dir=tmp_path,
            cluster=cluster,
        )
        tasks.append(task.eval())
    return tasks[0], tasks[1]


def test_pairs_are_clustered_by_a_column_asked_for(tmp_path):
    """cluster="doc": Durkalski's statistic over the four documents, X = 9/11, and the
    interval of the difference from the documents' CR1 standard error (t on 3 df)."""
    a, b = doc_runs(tmp_path, cluster=None)
    comparison = compare(a, b, cluster="doc")
    (row,) = comparison.metrics.iter_rows(named=True)
    assert comparison.cluster == "doc"
    assert row["test"] == "McNemar (clustered by doc)"
    assert row["p_value"] == pytest.approx(math.erfc(math.sqrt(DOC_X / 2)), rel=1e-12)
    assert row["difference"] == pytest.approx(0.25)
    assert row["low"] == pytest.approx(0.25 - T_3 * DOC_SE, abs=1e-5)
    assert row["high"] == 1.0  # 0.25 + 0.906, clipped
    assert "McNemar (clustered by doc) p = 0.366, 12 pairs" in str(comparison)
    # by sample, the same runs: the exact test on b = 1, c = 4
    by_sample = compare(a, b)
    assert by_sample.cluster is None
    assert by_sample.metrics["test"].to_list() == ["McNemar"]
    assert by_sample.metrics["p_value"].to_list() == [pytest.approx(0.375)]


def test_runs_clustered_by_a_column_are_compared_by_it_from_tasks_and_logs(tmp_path):
    """Task(cluster="doc") is recorded in the log: Tasks, their logs and their paths all
    compare clustered by it, unless cluster="id" asks for samples."""
    a, b = doc_runs(tmp_path)
    logged = ve.read_log(a.log_path)
    assert logged.cluster == "doc"
    assert ve.read_log(a.log_path, header_only=True).cluster == "doc"
    for pair in ((a, b), (logged, b.log_path), (str(a.log_path), ve.read_log(b.log_path))):
        comparison = compare(*pair)
        assert comparison.cluster == "doc"
        assert comparison.metrics["p_value"].to_list() == [
            pytest.approx(math.erfc(math.sqrt(DOC_X / 2)), rel=1e-12)
        ]
    assert compare(a, b, cluster="id").metrics["test"].to_list() == ["McNemar"]


def test_a_cluster_column_that_is_not_there_or_runs_that_disagree_are_config_errors(tmp_path):
    a, b = doc_runs(tmp_path)
    with pytest.raises(ConfigError, match=r"has a column 'topic' to cluster by \(A's columns: id"):
        compare(a, b, cluster="topic")
    other = ve.Task(
        [dict(q, part=q["doc"]) for q in DOCS],
        ve.generate(saying_no_to({7}, model="other")),
        ve.detect_includes(),
        name="documents",
        dir=tmp_path,
        cluster="part",
    ).eval()
    with pytest.raises(ConfigError, match=r"clustered its metrics by 'doc' .* by 'part'"):
        compare(a, other)
    assert compare(a, other, cluster="part").cluster == "part"


def test_numeric_scores_draw_whole_clusters(tmp_path):
    """The paired bootstrap clustered by a column draws its documents whole: the figures
    are paired_bootstrap()'s given the documents, not those of the samples alone."""

    def reply(bonus: float):
        return lambda prompt: str(_number(prompt) % 3 + (bonus if _number(prompt) < 5 else 0.0))

    def score(sample: ve.SolvedSample) -> float:
        return float(sample.result)

    a, b = (
        ve.Task(
            DOCS, ve.generate(ve.chat_mock(reply(bonus))), score, dir=tmp_path, cluster="doc"
        ).eval()
        for bonus in (0.0, 0.5)
    )
    comparison = compare(a, b)
    (row,) = comparison.metrics.iter_rows(named=True)
    assert row["test"] == "paired bootstrap (clustered by doc)"
    xs, ys = a.get_samples()["score"].to_list(), b.get_samples()["score"].to_list()
    expected = paired_bootstrap(xs, ys, [q["doc"] for q in DOCS])
    assert (row["low"], row["high"], row["p_value"]) == (
        expected.low,
        expected.high,
        expected.p_value,
    )
    by_sample = paired_bootstrap(xs, ys, list(range(1, 13)))
    assert (row["low"], row["high"]) != (by_sample.low, by_sample.high)
