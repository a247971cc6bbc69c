"""The Task API: lifecycle, state resets, epochs, keyword routing, cost."""

from __future__ import annotations

import re

import anyio
import polars as pl
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads

pytestmark = pytest.mark.anyio

ADDITION = [
    {"input": "What's 2+2?", "target": "4"},
    {"input": "What's 2+3?", "target": "5"},
    {"input": "What's 1+1?", "target": "2"},
]


def make_task(tmp_path, **kw):
    kw.setdefault("solver", ve.generate(ve.chat_mock()))
    kw.setdefault("scorer", ve.detect_includes())
    return ve.Task(ADDITION, dir=tmp_path, **kw)


async def test_new_task_shows_its_dataset(tmp_path):
    """Before solving, get_samples() is the dataset: id, input, target."""
    task = make_task(tmp_path)
    frame = task.get_samples()
    assert frame.columns == ["id", "input", "target"]
    assert frame["id"].to_list() == [1, 2, 3]
    assert task.metrics is None


async def test_eval_solves_scores_measures_and_logs(tmp_path):
    """eval() adds results, scores and explanations, computes accuracy and writes a log."""
    task = make_task(tmp_path)
    assert await task.eval_async() is task
    frame = task.get_samples()
    for column in (
        "id",
        "epoch",
        "input",
        "target",
        "result",
        "score",
        "scorer",
        "explanation",
        "solver_chat",
    ):
        assert column in frame.columns
    assert frame["result"].to_list() == ["2 + 2 = 4", "2 + 3 = 5", "1 + 1 = 2"]
    assert frame["score"].to_list() == ["C", "C", "C"]
    assert frame["score"].dtype == pl.Enum(["I", "P", "C"])
    assert task.metrics == {"accuracy": 1.0}
    assert task.log_path is not None
    assert task.log_path.parent == tmp_path
    assert_inspect_reads(task.log_path, task)


def test_sync_eval_in_a_plain_script(tmp_path):
    """The sync eval() runs without an event loop of the caller's."""
    task = make_task(tmp_path).eval()
    assert task.metrics == {"accuracy": 1.0}


async def test_task_epochs_repeat_each_sample_in_order(tmp_path):
    """Task(epochs=2) on 3 samples gives 6 rows ordered id1/e1, id1/e2, id2/e1, ..."""
    task = make_task(tmp_path, epochs=2)
    await task.eval_async()
    frame = task.get_samples()
    assert frame["id"].to_list() == [1, 1, 2, 2, 3, 3]
    assert frame["epoch"].to_list() == [1, 2, 1, 2, 1, 2]
    assert_inspect_reads(task.log_path, task)


async def test_eval_epochs_override_task_epochs(tmp_path):
    """eval(epochs=1) overrides Task(epochs=2); a later eval(epochs=3) gives 3x rows."""
    task = make_task(tmp_path, epochs=2)
    await task.eval_async(epochs=1)
    assert task.get_samples().height == 3
    await task.eval_async(epochs=3)
    assert task.get_samples()["epoch"].to_list() == [1, 2, 3] * 3


async def test_bad_epochs_are_rejected(tmp_path):
    """Epochs must be a whole number of at least 1."""
    with pytest.raises(ve.ConfigError, match="epochs"):
        make_task(tmp_path, epochs=0)
    task = make_task(tmp_path)
    with pytest.raises(ve.ConfigError, match="epochs"):
        await task.eval_async(epochs=1.5)


async def test_set_solver_clears_results_scores_and_metrics(tmp_path):
    """set_solver() drops results, scores and metrics until the task is run again."""
    task = make_task(tmp_path)
    await task.eval_async()
    task.set_solver(ve.generate(ve.chat_mock(lambda p: "nothing")))
    assert "result" not in task.get_samples().columns
    assert task.metrics is None
    assert not task.solved
    assert not task.scored
    await task.eval_async()
    assert task.metrics == {"accuracy": 0.0}


async def test_set_scorer_clears_scores_but_keeps_results(tmp_path):
    """set_scorer() keeps results, drops scores; score() then re-scores without re-solving."""
    calls = []

    async def solver(input):
        calls.append(input)
        return "ANSWER: 4"

    task = ve.Task(ADDITION[:1], solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    task.set_scorer(ve.detect_answer(format="word"))
    frame = task.get_samples()
    assert "score" not in frame.columns
    assert frame["result"].to_list() == ["ANSWER: 4"]
    assert task.metrics is None
    await task.score_async()
    assert task.measure() == {"accuracy": 1.0}
    assert len(calls) == 1


async def test_set_metrics_clears_metrics_until_measured(tmp_path):
    """set_metrics() resets task.metrics to None; measure() recomputes with the new metrics."""
    task = make_task(tmp_path)
    await task.eval_async()
    task.set_metrics({"n_correct": lambda scores: (scores == "C").sum()})
    assert task.metrics is None
    assert task.measure() == {"n_correct": 3.0}


async def test_clone_is_independent(tmp_path):
    """Evaluating a clone leaves the original's results and scores intact."""
    task = make_task(tmp_path)
    await task.eval_async()
    twin = task.clone()
    twin.set_solver(ve.generate(ve.chat_mock(lambda p: "no")))
    await twin.eval_async()
    assert task.metrics == {"accuracy": 1.0}
    assert task.get_samples()["result"].to_list()[0] == "2 + 2 = 4"
    assert twin.metrics == {"accuracy": 0.0}


async def test_steps_out_of_order_are_clear_errors(tmp_path):
    """score() before solve(), measure() before score() and log() before solve() say what to run."""
    task = make_task(tmp_path)
    with pytest.raises(ve.TaskStateError, match=r"not been solved yet. Run task.solve\(\) first"):
        await task.score_async()
    with pytest.raises(ve.TaskStateError, match=r"not been scored yet. Run task.score\(\) first"):
        task.measure()
    with pytest.raises(ve.TaskStateError, match="not been solved"):
        task.log()
    await task.solve_async()
    with pytest.raises(ve.TaskStateError, match="not been scored"):
        task.measure()


async def test_solve_then_score_separately(tmp_path):
    """solve() and score() run the same stages separately; log() writes the result."""
    task = make_task(tmp_path)
    await task.solve_async(epochs=2)
    assert "score" not in task.get_samples().columns
    await task.score_async()
    assert task.measure() == {"accuracy": 1.0}
    path = task.log()
    assert_inspect_reads(path, task)


# -- keyword routing ----------------------------------------------------------------------


def routing_task(tmp_path, solver, scorer):
    return ve.Task(ADDITION[:1], solver=solver, scorer=scorer, dir=tmp_path)


async def test_arguments_are_routed_by_name(tmp_path):
    """A name the solver declares goes to the solver, one the scorer declares to the scorer."""
    seen = {}

    async def solver(input, *, style="plain"):
        seen["style"] = style
        return "4"

    async def scorer(sample, *, strict=False):
        seen["strict"] = strict
        return "C"

    await routing_task(tmp_path, solver, scorer).eval_async(style="fancy", strict=True)
    assert seen == {"style": "fancy", "strict": True}


async def test_an_argument_both_declare_goes_to_both(tmp_path):
    """A name declared by solver and scorer reaches both."""
    seen = []

    async def solver(input, *, level=0):
        seen.append(("solver", level))
        return "4"

    async def scorer(sample, *, level=0):
        seen.append(("scorer", level))
        return "C"

    await routing_task(tmp_path, solver, scorer).eval_async(level=3)
    assert sorted(seen) == [("scorer", 3), ("solver", 3)]


async def test_unmatched_argument_goes_to_var_kwargs(tmp_path):
    """A name neither declares goes to whichever takes **kwargs (only that one)."""
    seen = {}

    async def solver(input, **kwargs):
        seen["solver"] = kwargs
        return "4"

    async def scorer(sample):
        return "C"

    await routing_task(tmp_path, solver, scorer).eval_async(temperature=0.2)
    assert seen == {"solver": {"temperature": 0.2}}


async def test_unmatched_argument_without_var_kwargs_is_an_error(tmp_path):
    """An argument no function can take is an error naming it."""

    async def solver(input):
        return "4"

    task = routing_task(tmp_path, solver, ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="Argument `tempreature` does not match any parameter"):
        await task.eval_async(tempreature=0.2)


async def test_eval_own_options_are_never_routed(tmp_path):
    """epochs and max_concurrency stay with eval() even when the solver declares them."""
    seen = {}

    async def solver(input, epochs="untouched", max_concurrency="untouched"):
        seen.update(epochs=epochs, max_concurrency=max_concurrency)
        return "4"

    task = routing_task(tmp_path, solver, ve.detect_includes())
    await task.eval_async(epochs=2, max_concurrency=3)
    assert seen == {"epochs": "untouched", "max_concurrency": "untouched"}
    assert task.get_samples().height == 2


async def test_eval_with_another_solver_chat_swaps_the_model(tmp_path):
    """eval(solver_chat=other) re-runs generate() on the other chat."""
    task = make_task(tmp_path)
    other = ve.chat_mock(lambda prompt: "I don't know", model="other-model")
    await task.eval_async(solver_chat=other)
    assert task.get_samples()["result"].to_list() == ["I don't know"] * 3
    assert task.get_cost()["model"].to_list() == ["other-model"]
    full = assert_inspect_reads(task.log_path, task)
    assert full.eval.model == "mock/other-model"


# -- cost -----------------------------------------------------------------------------------


async def test_cost_is_split_by_role_and_model(tmp_path):
    """get_cost() has one row per role and model; the same model as judge counts separately."""
    judge = ve.chat_mock()

    async def judged(sample):
        chat = judge.clone()
        reply = await chat.chat_async(f"Is '{sample.result}' right for {sample.input}? GRADE")
        return ve.Score("C" if reply else "I", chat=chat)

    task = make_task(tmp_path, scorer=judged)
    await task.solve_async()
    solve_only = task.get_cost()
    assert solve_only["role"].to_list() == ["solver"]
    await task.score_async()
    cost = task.get_cost()
    assert cost["role"].to_list() == ["solver", "scorer"]
    assert cost["model"].to_list() == ["mock-model", "mock-model"]
    assert cost["requests"].to_list() == [3, 3]
    frame = task.get_samples()
    solver_input = sum(c.get_tokens()["input"].sum() for c in frame["solver_chat"].to_list())
    assert cost["input_tokens"][0] == solver_input
    assert cost["cost"].to_list() == [0.0, 0.0]


async def test_unknown_price_gives_unknown_cost(tmp_path):
    """A model without a price has cost None, never 0."""
    chat = ve.chat_mock()
    chat.provider.name = "Unpriced"
    task = make_task(tmp_path, solver=ve.generate(chat))
    await task.eval_async()
    assert task.get_cost()["cost"].to_list() == [None]


async def test_rescoring_replaces_the_scorer_cost(tmp_path):
    """Running score() again counts the scorer's usage once, not twice."""
    judge = ve.chat_mock()

    async def judged(sample):
        chat = judge.clone()
        await chat.chat_async("GRADE this")
        return ve.Score("C", chat=chat)

    task = make_task(tmp_path, scorer=judged)
    await task.eval_async()
    await task.score_async()
    assert task.get_cost()["requests"].to_list() == [3, 3]


def test_log_dir_reads_and_sets_the_environment(monkeypatch, tmp_path):
    """log_dir() reads VITALS_LOG_DIR; log_dir_set() sets it and returns the previous value."""
    monkeypatch.delenv("VITALS_LOG_DIR", raising=False)
    assert ve.log_dir() is None
    assert ve.log_dir_set(tmp_path / "a") is None
    assert ve.log_dir() == str(tmp_path / "a")
    assert ve.log_dir_set(tmp_path / "b") == str(tmp_path / "a")
    task = ve.Task(ADDITION, solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes())
    assert task.dir == tmp_path / "b"
    ve.log_dir_set(None)
    assert ve.log_dir() is None


async def test_log_to_another_dir_writes_only_there(tmp_path):
    """log(dir=x) writes exactly one log, in x (listed in x's listing.json); none stays
    in the default dir, not even the run's journal."""
    task = make_task(tmp_path / "default")
    await task.solve_async()
    await task.score_async()
    task.measure()
    path = task.log(tmp_path / "other")
    logs = [p for p in (tmp_path / "other").glob("*.json") if p.name != "listing.json"]
    assert logs == [path]
    assert path.name in ve_listing(tmp_path / "other")
    assert not [p for p in (tmp_path / "default").glob("*") if not p.name.startswith(".")]


def ve_listing(directory):
    import json

    return json.loads((directory / "listing.json").read_text())


async def test_log_file_name_follows_inspect(tmp_path):
    """The log is named <timestamp>_<task>_<id>.json, with the task name made file-safe."""
    task = ve.Task(
        ADDITION,
        solver=ve.generate(ve.chat_mock()),
        scorer=ve.detect_includes(),
        name="My task_v2",
        dir=tmp_path,
    )
    await task.eval_async()
    pattern = r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}[-+]\d{2}-\d{2}_My-task-v2_[0-9A-Za-z]+\.json$"
    assert re.match(pattern, task.log_path.name)


async def test_repr_shows_state(tmp_path):
    """repr(task) names the task, its size, its state and metrics."""
    task = make_task(tmp_path, name="adds")
    assert repr(task) == "<Task adds: 3 samples, not run>"
    await task.eval_async()
    assert repr(task) == "<Task adds: 3 samples, scored, accuracy=1>"


async def test_concurrent_evals_of_clones_do_not_interfere(tmp_path):
    """Two clones evaluated at once in one event loop keep their own results and costs."""
    task = make_task(tmp_path)
    a, b = task.clone(), task.clone()
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.eval_async)
        tg.start_soon(lambda: b.eval_async(solver_chat=ve.chat_mock(lambda p: "x", model="m2")))
    assert a.metrics == {"accuracy": 1.0}
    assert b.metrics == {"accuracy": 0.0}
    assert a.get_cost()["model"].to_list() == ["mock-model"]
    assert b.get_cost()["model"].to_list() == ["m2"]


def test_one_sample_is_one_sample_in_messages(tmp_path) -> None:
    """Counts in the summary, the repr and a failed run's error agree with their number:
    "1 sample", not "1 samples"."""
    dataset = [{"input": "What's 1+1?", "target": "2"}]
    task = ve.Task(dataset, solver=lambda x: "2", scorer=ve.detect_includes(), dir=tmp_path)
    assert repr(task).startswith("<Task task: 1 sample, not run")
    task.eval()
    assert ve.summary(task).startswith("Task task: 1 sample, 0 failed")
    assert "1 sample, " in repr(ve.read_log(task.log_path))

    def broken(x: str) -> str:
        raise ValueError("no")

    failing = ve.Task(dataset, solver=broken, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.EvalFailedError, match=r"^1 of 1 sample failed "):
        failing.eval()
