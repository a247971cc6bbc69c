"""What the log keeps of a run beyond its answers: retries with their reasons, the
events and times of samples carried over by a resume, the scores of a cancelled run."""

from __future__ import annotations

import json
import os
import stat

import pytest

import vitals_engine as ve
from tests.helpers import openai, sums
from tests.inspect_check import assert_inspect_reads

pytestmark = pytest.mark.anyio


def openai_task(server, tmp_path, n: int) -> ve.Task:
    chat = openai(server)
    return ve.Task(sums(n), solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)


async def test_retries_are_logged_with_their_reasons(server, tmp_path):
    """A 429 and a 503 retried: the sample's record, its row, its model event in the log
    (read by us and by Inspect) all say how often, why and how long it waited."""
    server.fail("429", times=1, retry_after=0.05)
    server.fail("503", times=1)
    task = openai_task(server, tmp_path, 1)
    await task.eval_async(retry=ve.Retry(backoff=0.01))

    (record,) = task._state.records
    notes = record.retry_notes
    assert [n.attempt for n in notes] == [1, 2]
    assert "429" in notes[0].reason
    assert notes[0].wait >= 0.05
    assert "503" in notes[1].reason
    assert all(n.model == "openai/gpt-test" for n in notes)
    assert task.get_samples()["retries"].to_list() == [2]

    logged = ve.read_log(task.log_path)
    assert logged.get_samples()["retries"].to_list() == [2]
    (back,) = logged.records()
    assert [(n.attempt, n.reason, n.wait) for n in back.retry_notes] == [
        (n.attempt, n.reason, round(n.wait, 3)) for n in notes
    ]

    inspect_log = assert_inspect_reads(task.log_path, task)
    (model_event,) = [e for e in inspect_log.samples[0].events if e.event == "model"]
    assert model_event.retries == 2
    assert [r["reason"] for r in model_event.metadata["retries"]] == [n.reason for n in notes]


async def test_inspect_retry_counts_read_without_reasons():
    """Inspect's own logs record only how many retries a model call took."""
    logged = ve.read_log("tests/fixtures/inspect/openai_compat_fake_server.eval")
    retried, *others = logged.records()
    assert retried.retries == 2
    assert {n.reason for n in retried.retry_notes} == {"not recorded"}
    assert [r.retries for r in others] == [0, 0]
    assert logged.get_samples()["retries"].to_list() == [2, 0, 0]


async def test_no_retries_no_column(server, tmp_path):
    """A run without retries has no `retries` column (as it has no `error` column)."""
    task = openai_task(server, tmp_path, 2)
    await task.eval_async()
    assert "retries" not in task.get_samples().columns
    assert "retries" not in ve.read_log(task.log_path).get_samples().columns


async def cancelled_after(task: ve.Task, finished: int) -> None:
    async with task.stream_async(max_concurrency=2) as samples:
        seen = 0
        async for _ in samples:
            seen += 1
            if seen == finished:
                break


async def test_cancelled_log_has_the_metrics_of_what_was_scored(server, tmp_path):
    """A cancelled run's header carries its scorer and metrics over the scored samples."""
    task = openai_task(server, tmp_path, 10)
    await cancelled_after(task, 4)
    logged = ve.read_log(task.log_path)
    assert logged.status == "cancelled"
    assert logged.scorer.startswith("detect_includes")
    assert logged.metrics == {"accuracy": 1.0}
    inspect_log = assert_inspect_reads(task.log_path)
    (scores,) = inspect_log.results.scores
    assert scores.scored_samples == len([s for s in logged.samples if s.scores])


async def test_resume_from_a_cancelled_log_keeps_events_and_times(server, tmp_path):
    """Samples carried over from a cancelled run's final log keep their model and score
    events and their times: they are copied, not rebuilt."""
    server.latency = 0.01
    task = openai_task(server, tmp_path, 6)
    await cancelled_after(task, 3)
    before = {s.id: s for s in ve.read_log(task.log_path).samples if s.scores and s.error is None}
    assert before
    twin = openai_task(server, tmp_path, 6)
    await twin.eval_async(resume=task.log_path)
    after = {s.id: s for s in ve.read_log(twin.log_path).samples}
    assert sorted(after) == list(range(1, 7))
    for sample_id, old in before.items():
        new = after[sample_id]
        assert bytes(new.events) == bytes(old.events)
        assert (new.started_at, new.completed_at) == (old.started_at, old.completed_at)
    final = assert_inspect_reads(twin.log_path, twin)
    for sample in final.samples:
        assert {e.event for e in sample.events} == {"model", "score"}


async def test_resume_from_a_pretty_printed_log(server, tmp_path):
    """A cancelled log rewritten with indentation (by an editor, jq ...) still resumes:
    its samples' raw events are made one line again in the new journal."""
    task = openai_task(server, tmp_path, 6)
    await cancelled_after(task, 3)
    pretty = tmp_path / "pretty" / task.log_path.name
    pretty.parent.mkdir()
    pretty.write_text(json.dumps(json.loads(task.log_path.read_bytes()), indent=2))
    twin = openai_task(server, tmp_path / "pretty", 6)
    await twin.eval_async(resume=pretty)
    final = assert_inspect_reads(twin.log_path, twin)
    assert sorted(s.id for s in final.samples) == list(range(1, 7))
    assert all({e.event for e in s.events} == {"model", "score"} for s in final.samples)


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_logs_get_the_usual_file_permissions(tmp_path, log_format):
    """A log and its listing are readable by others as the umask allows (a web server
    serving the log directory), not private to the writer."""
    old = os.umask(0o022)
    try:
        task = ve.Task(
            sums(2), solver=ve.generate(ve.chat_mock()), scorer=ve.detect_includes(), dir=tmp_path
        )
        await task.eval_async(log_format=log_format)
    finally:
        os.umask(old)
    assert stat.S_IMODE(task.log_path.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "listing.json").stat().st_mode) == 0o644
