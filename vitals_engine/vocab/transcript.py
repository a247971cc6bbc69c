"""What a sample did besides its model calls, as the engine records it: tool calls,
sandbox actions, spans around its stages and tool calls, a limit it hit, an error.

A sample's `SampleRecord.events` holds these in the order they happened, each stamped
with `time.time()`; its model calls stay in `SampleRecord.calls` (`vocab/model_calls.py`),
each with its own start and end. The log (`log/events.py`) interleaves both, by time,
into Inspect's events: `span_begin` / `span_end`, `tool`, `sandbox`, `sample_limit`,
`error`, and the `model` and `score` events it writes already.

A span groups what happens inside it: `SpanBegin(id, name, type, parent)` opens it,
`SpanEnd(id)` closes it; every record made while a span is open names it (`span`), so
a viewer can nest them. Types as Inspect's: "solvers", "solver", "scorers", "scorer",
"tool", "init".

As JSON (msgspec), a record names its kind under `record` ("span_begin", "tool" ...), so
a list of them decodes as `list[TranscriptRecord]`; not under `type`, which is a span's
and a limit's own field.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "ErrorRecord",
    "LimitRecord",
    "NoteRecord",
    "SandboxRecord",
    "SpanBegin",
    "SpanEnd",
    "ToolRecord",
    "TranscriptRecord",
]


class SpanBegin(msgspec.Struct, tag_field="record", tag="span_begin", frozen=True):
    """A span opens: its `id`, `name`, `type` ("solver", "tool" ...) and the span it is
    in (`parent`, None at the top)."""

    id: str
    name: str
    at: float
    type: str | None = None
    parent: str | None = None


class SpanEnd(msgspec.Struct, tag_field="record", tag="span_end", frozen=True):
    """The span `id` closes."""

    id: str
    at: float


class ToolRecord(msgspec.Struct, tag_field="record", tag="tool", frozen=True):
    """One tool call: the model's request (`call_id`, `function`, `arguments`), what went
    back to the model (`result`, text), an error the model was shown (`error`: its type,
    "timeout", "parsing", "unknown" ..., and `message`), and when it started and ended."""

    call_id: str
    function: str
    arguments: dict[str, Any]
    result: str
    started: float
    completed: float
    error_type: str | None = None
    error_message: str | None = None
    span: str | None = None


class SandboxRecord(msgspec.Struct, tag_field="record", tag="sandbox", frozen=True):
    """One action in the sample's sandbox: "exec" (`cmd`, `input`, its `result` exit code
    and `output`, stdout then stderr, cut as the tool cut it), "read_file" or
    "write_file" (`file`, and the text written or read, `output`)."""

    action: Literal["exec", "read_file", "write_file"]
    started: float
    completed: float
    cmd: str | None = None
    options: dict[str, Any] | None = None
    file: str | None = None
    input: str | None = None
    result: int | None = None
    output: str | None = None
    span: str | None = None


class LimitRecord(msgspec.Struct, tag_field="record", tag="sample_limit", frozen=True):
    """The sample hit a limit: its `type` ("message", "token", "time", "working", "cost"),
    the `limit` (None for a limit without a value, as an operator's stop in a log another
    tool wrote), and a `message` saying what happened."""

    type: str
    limit: float | None
    message: str
    at: float
    span: str | None = None


class NoteRecord(msgspec.Struct, tag_field="record", tag="info", frozen=True):
    """Something the engine says of the sample, for whoever reads its transcript (a
    resumed sample that went on live where its journal no longer matched, say)."""

    message: str
    at: float
    span: str | None = None


class ErrorRecord(msgspec.Struct, tag_field="record", tag="error", frozen=True):
    """An error that ended the sample, as it happened (the sample's `error` says it too)."""

    message: str
    traceback: str
    at: float
    span: str | None = None


#: One record of a sample's transcript.
TranscriptRecord = (
    SpanBegin | SpanEnd | ToolRecord | SandboxRecord | LimitRecord | NoteRecord | ErrorRecord
)
