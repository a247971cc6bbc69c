"""A logged transcript read back: `read_log(...).records()` gives each sample the records
its events were written from (ours, and Inspect's agent logs alike), so a re-score writes
them again and a resumed run keeps those of the samples that finished."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads
from tests.transcripts import (
    agent_record,
    agent_task,
    in_log_order,
    odd_solver,
    record_transcripts,
    same_records,
)
from vitals_engine.log import schema as s
from vitals_engine.log.compose import compose_sample
from vitals_engine.log.logged_sample import sample_record
from vitals_engine.log.logged_transcript import logged_transcript
from vitals_engine.vocab.transcript import (
    ErrorRecord,
    LimitRecord,
    SandboxRecord,
    SpanBegin,
    ToolRecord,
)

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
AGENT_LOGS = sorted((FIXTURES / "inspect-agent").glob("*_agent_*.*"))


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_the_transcript_reads_back_as_its_records(tmp_path, monkeypatch, log_format):
    """`read_log(...).records()` gives each sample the records it was logged from, in the
    log's order (by time), beside the init span the log added."""
    records = record_transcripts(monkeypatch)
    task = agent_task(
        records,
        tmp_path,
        "Use add on 2 and 2",
        "Use add on 1 and 3, then fail",
        log_format=log_format,
    )
    await task.eval_async()
    back = {r.key: r for r in ve.read_log(task.log_path).records()}
    for key, record in records.items():
        assert same_records(back[key].events, record.events)
        assert back[key].events[0] == SpanBegin("init", "init", back[key].events[0].at, type="init")
    assert isinstance(back[(2, 1)].events[-3], ErrorRecord)


async def test_a_rescore_keeps_the_transcript(tmp_path, monkeypatch):
    """Scoring a logged sample again writes its transcript again, whole."""
    records = record_transcripts(monkeypatch)
    task = agent_task(records, tmp_path, "Use add on 2 and 2")
    await task.eval_async()
    again = ve.read_log(task.log_path).rescore(ve.detect_exact())
    await again.score_async()
    (sample,) = assert_inspect_reads(again.log_path).samples
    kinds = [e.event for e in sample.events]
    assert [kinds.count(kind) for kind in ("tool", "sandbox", "sample_init")] == [1, 1, 1]
    (back,) = ve.read_log(again.log_path).records()
    assert same_records(back.events, records[(1, 1)].events)


async def test_a_resumed_run_keeps_the_transcripts_of_what_finished(tmp_path, monkeypatch):
    """Samples a cancelled run finished are carried over with their transcripts; the
    others run again and record theirs."""
    records = record_transcripts(monkeypatch)
    inputs = [f"Use add on {i} and {4 - i}" for i in range(4)]
    task = agent_task(records, tmp_path, *inputs)
    async with task.stream_async(max_concurrency=1) as samples:
        async for _ in samples:
            break
    kept = {s.id: bytes(s.events) for s in ve.read_log(task.log_path).samples if s.scores}
    assert kept
    twin = agent_task(records, tmp_path, *inputs)
    await twin.eval_async(resume=task.log_path)
    final = assert_inspect_reads(twin.log_path, twin)
    assert sorted(s.id for s in final.samples) == [1, 2, 3, 4]
    logged = {s.id: s for s in ve.read_log(twin.log_path).samples}
    for sample_id, events in kept.items():
        assert bytes(logged[sample_id].events) == events
    for sample in final.samples:
        assert [e.event for e in sample.events].count("tool") == 1


async def test_inspects_agent_logs_read_with_tools_sandbox_and_limit():
    """Logs Inspect wrote of an agent in its local sandbox (`.json` and `.eval`) read back
    with their tool calls, results and errors, sandbox actions, spans and the limit."""
    assert len(AGENT_LOGS) == 2
    for path in AGENT_LOGS:
        first, second = ve.read_log(path).records()
        tools = [e for e in first.events if isinstance(e, ToolRecord)]
        assert [(t.function, t.result) for t in tools] == [
            ("bash", "oops\n\nhello\n"),
            ("write_note", "a note"),
            ("bash", "failing\n\n"),
        ]
        actions = [e.action for e in first.events if isinstance(e, SandboxRecord)]
        assert actions == ["exec", "exec", "write_file", "read_file", "exec"]
        (limit,) = [e for e in first.events if isinstance(e, LimitRecord)]
        assert (limit.type, limit.limit) == ("message", 7)
        kinds = {e.type for e in first.events if isinstance(e, SpanBegin)}
        assert kinds == {"init", "solvers", "solver", "tool", "scorers", "scorer"}
        (failed,) = [e for e in second.events if isinstance(e, ToolRecord)]
        assert failed.error_type == "parsing"
        assert "'command' is a required property" in (failed.error_message or "")


async def test_inspects_other_logs_read_with_their_spans_and_errors():
    """Inspect's logs of plain runs read with their spans; a failed sample's error event
    reads as an error record."""
    tiny = ve.read_log(
        FIXTURES / "inspect" / "2026-11-22T01-34-10-00-00_tiny_Qm9omgo5Hto8Xb3xpTfaBV.json"
    )
    for record in tiny.records():
        names = [e.name for e in record.events if isinstance(e, SpanBegin)]
        assert names == ["init", "solvers", "generate", "scorers", "includes"]
    retried = ve.read_log(FIXTURES / "inspect" / "retry_original.eval").records()
    errors = [e for r in retried for e in r.events if isinstance(e, ErrorRecord)]
    assert len(errors) == 2
    assert all(e.message and e.traceback for e in errors)


def test_text_inspect_moved_to_attachments_reads_back_whole():
    """A tool result and a sandbox output Inspect logged as `attachment://` read as the text."""
    events = msgspec.Raw(
        msgspec.json.encode(
            [
                {
                    "event": "tool",
                    "id": "c1",
                    "function": "bash",
                    "arguments": {"cmd": "attachment://a"},
                    "result": [{"type": "text", "text": "attachment://b"}],
                    "timestamp": "2026-01-01T00:00:00Z",
                },
                {
                    "event": "sandbox",
                    "action": "exec",
                    "output": "attachment://b",
                    "timestamp": "2026-01-01T00:00:01Z",
                },
                {"event": "logger", "message": {}},
            ]
        )
    )
    tool, sandbox = logged_transcript(events, {"a": "ls -la", "b": "total 0\n"})
    assert (tool.arguments, tool.result, tool.completed) == (
        {"cmd": "ls -la"},
        "total 0\n",
        tool.started,
    )
    assert sandbox.output == "total 0\n"


async def test_types_inspect_does_not_know_read_back_as_recorded(tmp_path, monkeypatch):
    """A tool error's and a limit's own types, logged under Inspect's names, read back as
    the engine recorded them."""
    records = record_transcripts(monkeypatch)
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        odd_solver(records),
        ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    (back,) = ve.read_log(task.log_path).records()
    assert same_records(back.events, records[(1, 1)].events)
    tool, limit = back.events[2], back.events[3]
    assert isinstance(tool, ToolRecord)
    assert isinstance(limit, LimitRecord)
    assert (tool.error_type, limit.type) == ("out_of_memory", "dollars")


# -- big transcripts ------------------------------------------------------------------------------


def test_ten_thousand_events_compose_and_read_back():
    """A sample of 10,000 transcript records is logged whole and reads back record for
    record (its time is measured apart, in the report of this change)."""
    record = agent_record(10_000)
    sample = compose_sample(record, "includes")
    decoded = s.sample_decoder.decode(s.encoder.encode(sample))
    back = sample_record(decoded, "mock/mock-model", ours=True)
    assert len(back.events) == 10_002  # and the init span's begin and end
    assert same_records(back.events, record.events)
    assert in_log_order(record.events) == record.events
