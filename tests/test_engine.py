"""The engine: pipelined stages, bounded concurrency, failures kept per sample, cancellation."""

from __future__ import annotations

import asyncio

import anyio
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads

pytestmark = pytest.mark.anyio


def numbered(n):
    return [{"input": f"What's {i}+1?", "target": str(i + 1)} for i in range(n)]


async def test_scoring_starts_before_solving_ends(tmp_path):
    """Sample 1 is scored while sample 2 is still solving (the scorer releases the solver)."""
    scored_first = anyio.Event()

    async def solver(input, sample):
        if sample.id == 2:
            await scored_first.wait()
        return "x"

    async def scorer(sample):
        if sample.id == 1:
            scored_first.set()
        return "C"

    task = ve.Task(numbered(2), solver=solver, scorer=scorer, dir=tmp_path)
    with anyio.fail_after(10):
        await task.eval_async(max_concurrency=2)
    assert task.metrics == {"accuracy": 1.0}


async def test_max_concurrency_bounds_samples_in_flight(tmp_path):
    """With max_concurrency=3 exactly 3 solvers run at once, never more."""
    active = 0
    peak = 0
    release = anyio.Event()
    three_in = anyio.Event()

    async def solver(input):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        if active == 3:
            three_in.set()
        await release.wait()
        active -= 1
        return "x"

    task = ve.Task(numbered(10), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)

    async def release_when_blocked():
        await three_in.wait()
        await anyio.wait_all_tasks_blocked()
        assert active == 3
        release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_when_blocked)
            await task.eval_async(max_concurrency=3)
    assert peak == 3


async def test_bad_max_concurrency_is_rejected(tmp_path):
    """max_concurrency must be a whole number of at least 1."""
    task = ve.Task(numbered(1), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes())
    with pytest.raises(ve.ConfigError, match="max_concurrency"):
        await task.eval_async(max_concurrency=0)


async def test_a_failing_sample_is_recorded_and_the_run_goes_on(tmp_path):
    """A solver that raises for one sample records its error; the other samples finish."""

    async def solver(input, sample):
        if sample.id == 2:
            raise ValueError("the model refused")
        return input.split()[1].rstrip("?").replace("+1", "")

    task = ve.Task(numbered(3), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.EvalFailedError, match="1 of 3 samples failed") as failed:
        await task.eval_async()
    assert failed.value.log_path == str(task.log_path)
    frame = task.get_samples()
    assert frame["error"].to_list() == [None, "ValueError while solving: the model refused", None]
    assert frame["result"].to_list()[1] is None
    assert frame["score"].to_list()[1] is None
    full = assert_inspect_reads(task.log_path, task)
    assert full.status == "error"
    failed = next(s for s in full.samples if s.id == 2)
    assert failed.error.message == "ValueError while solving: the model refused"
    assert "raise ValueError" in failed.error.traceback


async def test_a_failing_scorer_is_recorded_per_sample(tmp_path):
    """A scorer that raises records a scoring error on that sample only."""

    async def scorer(sample):
        if sample.id == 1:
            raise RuntimeError("judge offline")
        return "C"

    task = ve.Task(numbered(2), solver=ve.generate(ve.chat_mock()), scorer=scorer, dir=tmp_path)
    await task.eval_async(fail_on_error=1)
    assert task.get_samples()["error"].to_list() == [
        "RuntimeError while scoring: judge offline",
        None,
    ]
    assert task.metrics == {"accuracy": 1.0}


async def test_contract_errors_are_raised_unwrapped_and_keep_finished_samples(tmp_path):
    """A contract error ends the run with that error (no exception group); finished samples
    (solved and scored: one solved but still being scored had not finished) are kept and
    logged with status error, the task and the log holding the same ones."""

    async def solver(input, sample):
        if sample.id == 3:
            return ["not", "a", "string"]
        return "x"

    task = ve.Task(numbered(3), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with pytest.raises(ve.SolverError, match="returned a list"):
        await task.eval_async(max_concurrency=1)
    frame = task.get_samples()
    full = assert_inspect_reads(task.log_path)
    assert full.status == "error"
    assert "returned a list" in full.error.message
    ids = [s.id for s in full.samples]
    assert ids == list(range(1, len(ids) + 1))
    assert len(ids) <= 2
    assert all(s.scores for s in full.samples)
    assert frame["id"].to_list() == ids
    assert frame["result"].to_list() == ["x"] * len(ids)


async def test_cancelling_the_run_writes_a_cancelled_log(tmp_path):
    """Cancelling the caller's scope stops every worker and logs finished samples as cancelled."""
    started = anyio.Event()

    async def solver(input, sample):
        if sample.id == 1:
            return "x"
        started.set()
        await anyio.sleep_forever()
        return None

    task = ve.Task(numbered(4), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def cancel_when_stuck():
                await started.wait()
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()

            tg.start_soon(cancel_when_stuck)
            await task.eval_async(max_concurrency=4)
    full = assert_inspect_reads(task.log_path)
    assert full.status == "cancelled"
    assert [s.id for s in full.samples if s.output.completion == "x"] == [1]


def test_sync_eval_inside_a_running_event_loop(tmp_path):
    """task.eval() works where an event loop already runs (as in a notebook)."""

    async def notebook_cell():
        task = ve.Task(
            numbered(2),
            solver=ve.generate(ve.chat_mock()),
            scorer=ve.detect_includes(),
            dir=tmp_path,
        )
        task.eval()
        return task.metrics

    assert asyncio.run(notebook_cell()) == {"accuracy": 1.0}


def test_sync_chat_inside_a_running_event_loop():
    """chat.chat() works where an event loop already runs."""

    async def notebook_cell():
        return ve.chat_mock().chat("What's 3+4?")

    assert asyncio.run(notebook_cell()) == "3 + 4 = 7"


async def test_records_are_made_lazily(tmp_path, monkeypatch):
    """The source makes sample records as workers ask for them, not all 1,000 up front."""
    import vitals_engine.task.running as running

    made = 0

    class CountingRecord(running.SampleRecord):
        def __init__(self, *args, **kwargs):
            nonlocal made
            made += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(running, "SampleRecord", CountingRecord)
    made_at_first_solve = []

    async def solver(input):
        if not made_at_first_solve:
            made_at_first_solve.append(made)
        return "x"

    task = ve.Task(numbered(1000), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(max_concurrency=2)
    assert made_at_first_solve[0] <= 6
    assert made == 1000
    assert task.get_samples().height == 1000
