"""Big runs keep only results in memory; chats come back from the log when asked."""

from __future__ import annotations

import json

import pytest

import vitals_engine as ve
import vitals_engine.task.running as running
import vitals_engine.task.spill as spill
from tests.helpers import sums

pytestmark = pytest.mark.anyio


def events(sample):
    return json.loads(bytes(sample.events))


@pytest.fixture
def spill_after_three(monkeypatch):
    monkeypatch.setattr(running, "SPILL_AFTER", 3)


@pytest.mark.usefixtures("spill_after_three")
async def test_samples_past_the_threshold_keep_only_their_scores(tmp_path):
    """Past the threshold a finished sample keeps its score's value, not its result, its
    score's explanation or its chats; the metrics are those of every sample, and
    get_samples() gives every sample back whole."""
    task = ve.Task(
        sums(8), solver=ve.generate(ve.chat_mock()), scorer=ve.model_graded_qa(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1)
    records = task._state.records
    assert sum(r.spilled for r in records) == 5
    assert [r.score.value for r in records] == ["C"] * 8
    spilled = [r for r in records if r.spilled]
    assert all(r.result is None and r.solver_chat is None for r in spilled)
    assert all(r.score.explanation is None for r in spilled)
    assert task.metrics == {"accuracy": 1.0}
    frame = task.get_samples()
    assert frame["result"].to_list() == [f"{i} + {i} = {2 * i}" for i in range(8)]
    assert all(e.endswith("GRADE: C") for e in frame["explanation"].to_list())


@pytest.mark.usefixtures("spill_after_three")
async def test_a_streamed_sample_stays_whole_for_the_caller_past_the_threshold(tmp_path):
    """stream_async() hands out every sample whole, and the caller's copy stays whole
    after the run has spilled its own."""
    task = ve.Task(
        sums(8), solver=ve.generate(ve.chat_mock()), scorer=ve.model_graded_qa(), dir=tmp_path
    )
    kept = []
    async with task.stream_async(max_concurrency=1) as samples:
        async for record in samples:
            kept.append(record)
    assert sum(r.spilled for r in task._state.records) == 5
    assert [r.result for r in kept] == [f"{i} + {i} = {2 * i}" for i in range(8)]
    assert all(r.solver_chat is not None and r.score.chat is not None for r in kept)


@pytest.mark.usefixtures("spill_after_three")
async def test_get_samples_reads_spilled_chats_back(tmp_path):
    """get_samples() returns every sample's chats, spilled or not, with the same turns."""
    chat = ve.chat_mock()
    task = ve.Task(sums(8), solver=ve.generate(chat), scorer=ve.model_graded_qa(), dir=tmp_path)
    await task.eval_async(max_concurrency=1)
    frame = task.get_samples()
    chats = frame["solver_chat"].to_list()
    assert all(c is not None for c in chats)
    assert [c.last_turn().text for c in chats] == [f"{i} + {i} = {2 * i}" for i in range(8)]
    judges = frame["scorer_chat"].to_list()
    assert all(j.last_turn().text.endswith("GRADE: C") for j in judges)
    assert chats[-1].provider is chat.provider  # reattached to the live model
    assert frame["score"].to_list() == ["C"] * 8


@pytest.mark.usefixtures("spill_after_three")
async def test_rescoring_a_spilled_run_uses_the_logged_chats(tmp_path):
    """score() after a spilled run reads the solver chats back so a judge can use them."""
    task = ve.Task(
        sums(6), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1)
    task.set_scorer(ve.model_graded_qa())
    await task.score_async()
    assert task.measure() == {"accuracy": 1.0}
    assert task.get_cost()["role"].to_list() == ["solver", "scorer"]


@pytest.mark.usefixtures("spill_after_three")
async def test_spilled_samples_keep_their_retries(tmp_path, server):
    """A spilled sample drops its chats, not its retries: get_samples() and the log count
    the same retries, past the threshold as before it."""
    model = ve.chat_openai("gpt-test", base_url=server.base_url(), api_key="sk-test")

    async def once_refused(input: str) -> ve.Solution:
        server.fail("500")  # this sample's first request fails, its retry succeeds
        chat = model.clone()
        return ve.Solution(await chat.chat_async(input), chat=chat)

    task = ve.Task(sums(8), solver=once_refused, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(max_concurrency=1, retry=ve.Retry(max_attempts=3, backoff=0.001))
    assert sum(r.spilled for r in task._state.records) == 5
    assert [r.retries for r in task._state.records] == [1] * 8
    assert task.get_samples()["retries"].to_list() == [1] * 8
    assert ve.read_log(task.log_path).get_samples()["retries"].to_list() == [1] * 8


@pytest.mark.usefixtures("spill_after_three")
async def test_rescoring_a_spilled_run_logs_each_samples_own_usage(tmp_path):
    """After score(), each sample's usage in the log is its own, spilled or not: the
    solver's, as the first log had it, and one judge call (spilled samples once shared
    one ledger, so each logged the judge calls of all those scored before it)."""
    task = ve.Task(
        sums(6), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1)
    first = {s.id: s.role_usage for s in ve.read_log(task.log_path).samples}
    task.set_scorer(ve.model_graded_qa())
    await task.score_async()
    logged = ve.read_log(task.log(tmp_path / "rescored")).samples
    assert [s.role_usage["solver"] for s in logged] == [first[s.id]["solver"] for s in logged]
    judge = [s.role_usage["scorer"] for s in logged]
    assert all(usage == judge[0] for usage in judge)
    assert judge[0].input_tokens > 0


@pytest.mark.usefixtures("spill_after_three")
async def test_writing_a_spilled_runs_log_elsewhere_keeps_every_sample_whole(tmp_path):
    """task.log(dir) after the run's own log was written: the copy holds every sample as
    the run's log does (messages, output, usage, events), spilled or not."""
    task = ve.Task(
        sums(6), solver=ve.generate(ve.chat_mock()), scorer=ve.model_graded_qa(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=1)
    first = ve.read_log(task.log_path)
    copy = ve.read_log(task.log(tmp_path / "copy"))
    assert len(copy.samples) == 6
    for ours, theirs in zip(first.samples, copy.samples, strict=True):
        assert theirs.messages == ours.messages
        assert theirs.output == ours.output
        assert theirs.model_usage == ours.model_usage
        assert [e["event"] for e in events(theirs)] == [e["event"] for e in events(ours)]


async def test_the_runs_of_an_eval_set_share_one_allowance_of_whole_samples(tmp_path, monkeypatch):
    """An eval set of three runs of 4 samples, with 5 samples kept whole: 5 are kept whole
    across the runs (each run alone would keep all 4 of its own), the rest keep their
    scores only; the set's samples all come back whole, and a run outside the set has an
    allowance of its own again."""
    monkeypatch.setattr(spill, "SPILL_AFTER", 5)
    monkeypatch.setattr(running, "SPILL_AFTER", 5)
    tasks = [
        ve.Task(sums(4), ve.generate(ve.chat_mock()), ve.model_graded_qa(), name=n, dir=tmp_path)
        for n in "abc"
    ]
    runs = await ve.eval_set_async(tasks, max_concurrency=1)
    records = [r for task in runs.tasks for r in task._state.records]
    assert sum(not r.spilled for r in records) == 5
    frame = runs.get_samples()
    assert frame.height == 12
    assert all(c is not None for c in frame["solver_chat"].to_list())
    assert sorted(frame["result"].to_list()) == sorted(
        [f"{i} + {i} = {2 * i}" for i in range(4)] * 3
    )
    alone = ve.Task(sums(4), ve.generate(ve.chat_mock()), ve.model_graded_qa(), dir=tmp_path)
    await alone.eval_async(max_concurrency=1)
    assert not any(r.spilled for r in alone._state.records)
