"""Samples with a transcript, for the log's and the viewer's tests: an agent that calls a
tool in a sandbox, its tool calls recorded by the engine, the rest as the records say it.

- `record_transcripts(monkeypatch)`: the records of a run's samples by (id, epoch), so a
  solver appends to its own sample's transcript (`SampleRecord.events`).
- `agent_solver(records)`: a solver on the mock model that calls `add` and records what
  the engine will: its solver span, a tool span per call with the tool call and the
  sandbox command it ran, and, on a sample whose input asks for it, a limit or an error.
- `odd_solver(records)`: a solver recording a tool error and a limit of types Inspect does
  not know, and an error.
- `agent_record(n)`: a finished sample whose transcript holds `n` records.
- `same_records(a, b)`: two transcripts equal, their times to the microsecond (the log
  writes times as ISO text with microseconds).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

import vitals_engine as ve
import vitals_engine.task.running as running
from vitals_engine.pacing import transcript
from vitals_engine.samples import Sample, SampleRecord
from vitals_engine.vocab.transcript import (
    ErrorRecord,
    LimitRecord,
    SandboxRecord,
    SpanBegin,
    SpanEnd,
    ToolRecord,
    TranscriptRecord,
)

__all__ = [
    "agent_record",
    "agent_solver",
    "agent_task",
    "in_log_order",
    "odd_solver",
    "record_transcripts",
    "same_records",
]

Records = dict[tuple[Any, int], SampleRecord]
_TIMES = ("at", "started", "completed")


def record_transcripts(monkeypatch: pytest.MonkeyPatch) -> Records:
    """The records the run makes from now on, by (id, epoch), as it makes them."""
    records: Records = {}

    def made(sample: ve.Sample) -> SampleRecord:
        record = records[(sample.id, sample.epoch)] = SampleRecord(sample)
        return record

    monkeypatch.setattr(running, "SampleRecord", made)
    return records


def agent_solver(records: Records):
    """A solver whose sample's input names `add` (the mock then calls it): the engine
    records each tool call in a span of its own, the tool records the sandbox command it
    ran; on a sample whose input asks for it, the solver records a limit or an error."""

    async def solver(input: str, sample: ve.Sample) -> ve.Solution:
        events = records[(sample.id, sample.epoch)].events

        def add(a: int, b: int) -> int:
            """Add two integers in the sandbox.

            Args:
                a: The first number.
                b: The second number.
            """
            started = time.time()
            total = a + b
            command = f"expr {a} + {b}"
            sandbox = SandboxRecord(
                "exec", started, time.time(), cmd=command, result=0, output=f"{total}\n"
            )
            transcript.record(msgspec.structs.replace(sandbox, span=transcript.current_span()))
            return total

        with transcript.span("solvers", "solvers"), transcript.span("react", "solver") as agent:
            chat = ve.chat_mock()
            chat.register_tool(add)
            answer = await chat.chat_async(input)
            if "limit" in input:
                limit = LimitRecord("message", 4, "The sample reached 4 messages.", time.time())
                events.append(msgspec.structs.replace(limit, span=agent))
            if "fail" in input:
                error = ErrorRecord("RuntimeError: the sandbox died", "Traceback ...", time.time())
                events.append(msgspec.structs.replace(error, span=agent))
        return ve.Solution(answer, chat=chat)

    return solver


def agent_task(records: Records, directory: Any, *inputs: str, **options: Any) -> ve.Task:
    """A task of `agent_solver`, one sample per input (targets: the sums' totals)."""
    data = [{"input": text, "target": "4"} for text in inputs]
    return ve.Task(data, agent_solver(records), ve.detect_includes(), dir=directory, **options)


def _rounded(records: list[TranscriptRecord]) -> list[dict[str, Any]]:
    out = []
    for record in records:
        fields = msgspec.to_builtins(record)
        for name in _TIMES:
            if name in fields:
                fields[name] = pytest.approx(fields[name], abs=2e-6)
        out.append(fields)
    return out


def _at(record: TranscriptRecord) -> float:
    return record.started if isinstance(record, ToolRecord | SandboxRecord) else record.at


def in_log_order(records: list[TranscriptRecord]) -> list[TranscriptRecord]:
    """Records in the order the log writes them: by time; at one instant, spans begin
    first and end last, the others as recorded."""
    rank = {SpanBegin: 0, SpanEnd: 2}
    keyed = sorted((_at(r), rank.get(type(r), 1), i) for i, r in enumerate(records))
    return [records[i] for _, _, i in keyed]


def same_records(read: list[TranscriptRecord], written: list[TranscriptRecord]) -> bool:
    """Whether `read` (a logged sample's records) holds the records of `written` in the
    log's order, the times to the microsecond, beside the init span the log adds."""
    ours = [r for r in read if not (isinstance(r, SpanBegin | SpanEnd) and r.id == "init")]
    return [msgspec.to_builtins(r) for r in ours] == _rounded(in_log_order(written))


def odd_solver(records: Records):
    """A solver recording a tool error ("out_of_memory") and a limit ("dollars") of types
    Inspect's reader does not know, then the error that ended the sample."""

    def solver(input: str, sample: ve.Sample) -> str:
        now = time.time()
        records[(sample.id, sample.epoch)].events.extend(
            [
                ToolRecord(
                    "call-1",
                    "bash",
                    {"cmd": "make"},
                    "",
                    now,
                    now + 0.5,
                    error_type="out_of_memory",
                    error_message="the sandbox ran out of memory",
                ),
                LimitRecord("dollars", 0.5, "The sample spent $0.50.", now + 1),
                ErrorRecord(
                    "RuntimeError: the sandbox died",
                    "Traceback (most recent call last): ...",
                    now + 2,
                ),
            ]
        )
        return "4"

    return solver


def agent_record(events: int) -> SampleRecord:
    """A finished sample whose transcript holds `events` records: tool calls in tool spans,
    each with a sandbox command (times exact to the microsecond)."""
    record = SampleRecord(Sample(1, 1, "Fix the bug", "fixed"), result="fixed")
    t = 1_795_000_000.0
    record.solve_started = record.solve_completed = t
    out = [SpanBegin("agent", "react", t, type="solver")]
    n = 0
    while len(out) < events - 1:
        span, at = f"t{n}", t + n * 0.01
        out += [
            SpanBegin(span, "bash", at, type="tool", parent="agent"),
            ToolRecord(
                f"c{n}", "bash", {"cmd": f"make test-{n}"}, f"ok {n}", at, at + 0.004, span=span
            ),
            SandboxRecord(
                "exec",
                at + 0.001,
                at + 0.003,
                cmd=f"make test-{n}",
                result=n % 2,
                output=f"ok {n}\n",
                span=span,
            ),
            SpanEnd(span, at + 0.005),
        ]
        n += 1
    out = [*out[: events - 1], SpanEnd("agent", t + n * 0.01)]
    record.events = out
    record.solve_completed = t + n * 0.01
    return record
