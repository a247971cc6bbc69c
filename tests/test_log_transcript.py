"""A sample's whole transcript in the log: its spans, tool calls, sandbox actions, the limit
it hit and the error that ended it, as Inspect's events interleaved with its model and score
events, and read by Inspect's reader as the events it knows."""

from __future__ import annotations

import msgspec
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads
from tests.transcripts import agent_record, agent_task, odd_solver, record_transcripts
from vitals_engine.log.compose import compose_sample
from vitals_engine.log.journal_format import encode_sample
from vitals_engine.log.transcript import (
    LiveEvents,
    live_events,
    sample_init,
    transcript_events,
)
from vitals_engine.vocab.transcript import SandboxRecord, SpanBegin, SpanEnd, ToolRecord

pytestmark = pytest.mark.anyio


def inspect_tree(events):
    from inspect_ai.event import event_tree

    return event_tree(events)


def spans_of(tree, into=None):
    """{span name: [the kinds of the events in it, nested spans as their names]}."""
    into = {} if into is None else into
    for node in tree:
        if hasattr(node, "children"):
            into[node.name] = [getattr(c, "name", None) or c.event for c in node.children]
            spans_of(node.children, into)
    return into


# -- written, and read by Inspect ------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "eval"])
async def test_an_agents_transcript_is_logged_as_inspects_events(tmp_path, monkeypatch, log_format):
    """Each record is the event Inspect reads: the tool call (function, arguments, result,
    the id of the assistant's tool call), the sandbox command inside its tool span, the
    limit (also the sample's `limit`); model calls sit in the solver span, the init span
    holds `sample_init`."""
    records = record_transcripts(monkeypatch)
    task = agent_task(
        records, tmp_path, "Use add on 2 and 2 until the limit", log_format=log_format
    )
    await task.eval_async()

    log = assert_inspect_reads(task.log_path, task)
    (sample,) = log.samples
    events = sample.events
    assert [e.event for e in events[:3]] == ["span_begin", "sample_init", "span_end"]
    assert events[1].sample.input == "Use add on 2 and 2 until the limit"
    (tool,) = [e for e in events if e.event == "tool"]
    assert (tool.function, tool.arguments, tool.result, tool.error) == (
        "add",
        {"a": 2, "b": 2},
        "4",
        None,
    )
    asked = [c.id for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
    assert asked == [tool.id]
    (sandbox,) = [e for e in events if e.event == "sandbox"]
    assert (sandbox.action, sandbox.cmd, sandbox.result, sandbox.output) == (
        "exec",
        "expr 2 + 2",
        0,
        "4\n",
    )
    (limit,) = [e for e in events if e.event == "sample_limit"]
    assert (limit.type, limit.limit, limit.message) == (
        "message",
        4,
        "The sample reached 4 messages.",
    )
    assert (sample.limit.type, sample.limit.limit) == ("message", 4)
    assert sample.limit.reason == "The sample reached 4 messages."
    assert spans_of(inspect_tree(events)) == {
        "init": ["sample_init"],
        "solvers": ["react"],
        "react": ["model", "add", "model", "sample_limit"],
        "add": ["tool", "sandbox"],
    }
    assert [e.event for e in events[-1:]] == ["score"]
    assert all(e.timestamp is not None for e in events)


async def test_a_run_without_records_logs_only_its_model_and_score_events(tmp_path):
    """No transcript records, no spans, no `sample_init`, no `limit`: the log is as it was."""
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        ve.generate(ve.chat_mock()),
        ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    (sample,) = assert_inspect_reads(task.log_path, task).samples
    assert [e.event for e in sample.events] == ["model", "score"]
    assert sample.limit is None
    assert ve.read_log(task.log_path).records()[0].events == []


async def test_an_error_and_types_inspect_does_not_know(tmp_path, monkeypatch):
    """An error record is Inspect's error event; a tool error or limit of a type Inspect
    does not know is logged as its "unknown" and "custom", the recorded type in the
    event's metadata: the log still reads."""
    records = record_transcripts(monkeypatch)
    task = ve.Task(
        [{"input": "What's 2+2?", "target": "4"}],
        odd_solver(records),
        ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async()
    (sample,) = assert_inspect_reads(task.log_path, task).samples
    by_kind = {e.event: e for e in sample.events}
    assert (by_kind["tool"].error.type, by_kind["tool"].error.message) == (
        "unknown",
        "the sandbox ran out of memory",
    )
    assert by_kind["tool"].metadata == {"error_type": "out_of_memory"}
    assert (by_kind["sample_limit"].type, by_kind["sample_limit"].limit) == ("custom", 0.5)
    assert sample.limit.type == "custom"
    assert by_kind["error"].error.message == "RuntimeError: the sandbox died"
    assert by_kind["error"].error.traceback.startswith("Traceback (most recent call last)")


# -- where each event goes --------------------------------------------------------------------


def _iso(unix: float) -> str:
    return f"t{unix}"


def _placed(records, models=(), scores=()):
    events = transcript_events(list(records), list(models), list(scores), {"sample": {}}, 0.0, _iso)
    return [(e["event"], e.get("id") or e.get("name"), e.get("span_id")) for e in events]


def test_a_model_call_goes_in_the_innermost_span_open_over_it():
    """A call inside a tool span is in it; one that outlasts it is in the span around it;
    one after every span closed is at the top; a span never closed holds what follows."""
    records = [
        SpanBegin("agent", "react", 1.0, type="solver"),
        SpanBegin("tool", "bash", 2.0, type="tool", parent="agent"),
        SpanEnd("tool", 3.0),
        SpanEnd("agent", 5.0),
        SpanBegin("open", "cleanup", 7.0, type="solver"),
    ]
    models = [
        (2.1, 2.9, {"event": "model", "name": "inside"}),
        (2.5, 4.0, {"event": "model", "name": "outlasts"}),
        (5.5, 6.0, {"event": "model", "name": "after"}),
        (8.0, 9.0, {"event": "model", "name": "unclosed"}),
    ]
    placed = _placed(records, models)
    assert placed[3:] == [
        ("span_begin", "agent", "agent"),
        ("span_begin", "tool", "tool"),
        ("model", "inside", "tool"),
        ("model", "outlasts", "agent"),
        ("span_end", "tool", "tool"),
        ("span_end", "agent", "agent"),
        ("model", "after", None),
        ("span_begin", "open", "open"),
        ("model", "unclosed", "open"),
    ]
    assert placed[:3] == [
        ("span_begin", "init", "init"),
        ("sample_init", None, "init"),
        ("span_end", "init", "init"),
    ]


def test_a_tool_record_written_late_sits_where_it_started():
    """The engine keeps a tool call when it ends; the log places it at its start, in the
    span it names, and parallel tool spans keep their own events."""
    records = [
        SpanBegin("t1", "bash", 1.0, type="tool"),
        SpanBegin("t2", "python", 1.5, type="tool"),
        SandboxRecord("exec", 1.6, 1.7, cmd="python -c 1", span="t2"),
        SpanEnd("t2", 2.0),
        ToolRecord("c2", "python", {}, "", 1.5, 2.0, span="t2"),
        ToolRecord("c1", "bash", {}, "", 1.0, 3.0, span="t1"),
        SpanEnd("t1", 3.0),
    ]
    assert _placed(records)[3:] == [
        ("span_begin", "t1", "t1"),
        ("tool", "c1", "t1"),
        ("span_begin", "t2", "t2"),
        ("tool", "c2", "t2"),
        ("sandbox", None, "t2"),
        ("span_end", "t2", "t2"),
        ("span_end", "t1", "t1"),
    ]


def test_a_score_goes_in_its_scorers_span_and_the_engines_init_span_is_kept():
    """A score lands in its scorer's span (the last of that name), inside its times; the
    engine's own init span holds `sample_init` and no other init span is added."""
    records = [
        SpanBegin("i", "init", 0.0, type="init"),
        SpanEnd("i", 0.5),
        SpanBegin("sc", "scorers", 4.0, type="scorers"),
        SpanBegin("judge", "judge", 4.0, type="scorer", parent="sc"),
        SpanEnd("judge", 5.0),
        SpanEnd("sc", 5.0),
    ]
    score = {"event": "score", "name": "judge"}
    placed = _placed(records, scores=[("judge", (6.0, 6.0, score))])
    assert placed == [
        ("span_begin", "i", "i"),
        ("sample_init", None, "i"),
        ("span_end", "i", "i"),
        ("span_begin", "sc", "sc"),
        ("span_begin", "judge", "judge"),
        ("score", "judge", "judge"),
        ("span_end", "judge", "judge"),
        ("span_end", "sc", "sc"),
    ]


def test_sample_init_holds_the_sample_and_its_first_messages():
    """`sample_init` names the sample and its state at the start: its input as a message."""
    init = sample_init("a", "What's 2+2?", ["4", "four"], {"level": 1})
    assert init["sample"] == {
        "id": "a",
        "input": "What's 2+2?",
        "target": ["4", "four"],
        "metadata": {"level": 1},
    }
    assert init["state"]["messages"] == [
        {"role": "user", "content": "What's 2+2?", "source": "input"}
    ]


# -- the journal ----------------------------------------------------------------------------------


def test_a_journal_line_carries_the_transcript():
    """The journal's sample line (what a resumed run copies) holds the transcript's events."""
    record = agent_record(9)
    line = encode_sample(compose_sample(record, "includes"))
    sample = msgspec.json.decode(line, type=dict)["sample"]
    assert [e["event"] for e in sample["events"]].count("tool") == 2


def test_the_live_sidecars_events_are_rendered_once_and_read_as_if_rendered_afresh():
    """A running agent's transcript grows between writes of the live sidecar: what the
    sidecar shows is what rendering the whole transcript would give (its last records, the
    times from its first), though each record is rendered only when it is new."""
    records: list = []
    shown = LiveEvents(last=3)
    for k in range(7):
        records.append(SpanBegin(f"s{k}", f"step {k}", at=10.0 + k, type="tool"))
        if k % 2:
            records.append(SpanEnd(f"s{k}", at=10.5 + k))
        assert shown.of(records) == live_events(records, last=3)
    assert shown.of(records) == live_events(records, last=3)  # nothing new: the same
    other = [SpanBegin("t0", "another sample's", at=50.0, type="tool")]
    assert shown.of(other) == live_events(other, last=3)  # another transcript: afresh
