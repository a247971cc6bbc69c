"""A logged sample's events back into its transcript records (`SampleRecord.events`).

The events that are records (`span_begin`, `span_end`, `tool`, `sandbox`, `sample_limit`,
`error`) come back as the records they were written from, in the log's order; model and
score events are the sample's chats and scores (read elsewhere), and the other events
Inspect writes (`sample_init`, `state`, `logger`, `info`, `step` ...) are left out.

Ours and Inspect's alike: a tool error's or a limit's type logged under Inspect's name
with the recorded one in the event's `metadata` (see `log/transcript.py`) reads back as
recorded; text Inspect moved to the sample's `attachments` (`attachment://<hash>`) reads
back whole; a tool result that is not text (an image, a list of contents) reads back as
its text, or its JSON. Most samples of our runs hold no such event: their events are
searched, never decoded.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import msgspec

from ..vocab.transcript import (
    ErrorRecord,
    LimitRecord,
    NoteRecord,
    SandboxRecord,
    SpanBegin,
    SpanEnd,
    ToolRecord,
    TranscriptRecord,
)

__all__ = ["logged_transcript"]

_TRANSCRIPT_TAG = re.compile(
    rb'"event"\s*:\s*"(?:span_begin|span_end|tool|sandbox|sample_limit|error|info)"'
)
_ATTACHMENT = "attachment://"


class _Tag(msgspec.Struct):
    event: str = ""


class _Base(msgspec.Struct):
    timestamp: str | None = None
    span_id: str | None = None
    metadata: dict[str, Any] | None = None


class _SpanBegin(_Base):
    id: str = ""
    name: str = ""
    type: str | None = None
    parent_id: str | None = None


class _SpanEnd(_Base):
    id: str = ""


class _Tool(_Base):
    id: str = ""
    function: str = ""
    arguments: dict[str, Any] | None = None
    result: Any = ""
    error: dict[str, Any] | None = None
    completed: str | None = None


class _Sandbox(_Base):
    action: str = "exec"
    cmd: str | None = None
    options: dict[str, Any] | None = None
    file: str | None = None
    input: str | None = None
    result: int | None = None
    output: str | None = None
    completed: str | None = None


class _Limit(_Base):
    type: str = "custom"
    message: str = ""
    limit: float | None = None


class _Error(_Base):
    error: dict[str, Any] | None = None


class _Info(_Base):
    source: str | None = None
    data: Any = None


_events = msgspec.json.Decoder(list[msgspec.Raw])
_tag = msgspec.json.Decoder(_Tag)
_DECODERS = {
    "span_begin": msgspec.json.Decoder(_SpanBegin),
    "span_end": msgspec.json.Decoder(_SpanEnd),
    "tool": msgspec.json.Decoder(_Tool),
    "sandbox": msgspec.json.Decoder(_Sandbox),
    "sample_limit": msgspec.json.Decoder(_Limit),
    "error": msgspec.json.Decoder(_Error),
    "info": msgspec.json.Decoder(_Info),
}


class _Reading:
    """What turning one sample's events into records needs: its attachments, and the
    times already parsed (a run's events share many)."""

    def __init__(self, attachments: dict[str, str]) -> None:
        self.attachments = attachments
        self.times: dict[str, float] = {}

    def unix(self, stamp: str | None, default: float = 0.0) -> float:
        if stamp is None:
            return default
        found = self.times.get(stamp)
        if found is None:
            try:
                found = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            except ValueError:
                found = default
            self.times[stamp] = found
        return found

    def text(self, value: Any) -> Any:
        """A string as logged, or the attachment it points to."""
        if isinstance(value, str) and value.startswith(_ATTACHMENT):
            return self.attachments.get(value[len(_ATTACHMENT) :], value)
        return value

    def arguments(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return {key: self.text(v) for key, v in (value or {}).items()}

    def result(self, value: Any) -> str:
        """A tool's result as the text the model was shown."""
        value = self.text(value)
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and value.get("type") == "text":
            return str(self.text(value.get("text", "")))
        if isinstance(value, list) and all(
            isinstance(v, dict) and v.get("type") == "text" for v in value
        ):
            return "".join(str(self.text(v.get("text", ""))) for v in value)
        if isinstance(value, bool | int | float):
            return str(value).lower() if isinstance(value, bool) else str(value)
        return msgspec.json.encode(value).decode()


def _recorded(metadata: dict[str, Any] | None, key: str, logged: str) -> str:
    """The type the engine recorded, where the log wrote Inspect's in its place."""
    recorded = (metadata or {}).get(key)
    return recorded if isinstance(recorded, str) else logged


def _span_begin(e: _SpanBegin, r: _Reading) -> SpanBegin:
    return SpanBegin(e.id, e.name, r.unix(e.timestamp), type=e.type, parent=e.parent_id)


def _span_end(e: _SpanEnd, r: _Reading) -> SpanEnd:
    return SpanEnd(e.id, r.unix(e.timestamp))


def _tool(e: _Tool, r: _Reading) -> ToolRecord:
    started = r.unix(e.timestamp)
    error_type = error_message = None
    if e.error is not None:
        error_type = _recorded(e.metadata, "error_type", str(e.error.get("type") or "unknown"))
        error_message = str(r.text(e.error.get("message") or ""))
    return ToolRecord(
        call_id=e.id,
        function=e.function,
        arguments=r.arguments(e.arguments),
        result=r.result(e.result),
        started=started,
        completed=r.unix(e.completed, started),
        error_type=error_type,
        error_message=error_message,
        span=e.span_id,
    )


def _sandbox(e: _Sandbox, r: _Reading) -> SandboxRecord | None:
    if e.action not in ("exec", "read_file", "write_file"):
        return None
    started = r.unix(e.timestamp)
    return SandboxRecord(
        action=e.action,  # type: ignore[arg-type]
        started=started,
        completed=r.unix(e.completed, started),
        cmd=r.text(e.cmd),
        options=e.options,
        file=r.text(e.file),
        input=r.text(e.input),
        result=e.result,
        output=r.text(e.output),
        span=e.span_id,
    )


def _limit(e: _Limit, r: _Reading) -> LimitRecord:
    kind = _recorded(e.metadata, "limit_type", e.type)
    return LimitRecord(kind, e.limit, r.text(e.message), r.unix(e.timestamp), span=e.span_id)


def _error(e: _Error, r: _Reading) -> ErrorRecord:
    error = e.error or {}
    message, traceback = r.text(error.get("message") or ""), r.text(error.get("traceback") or "")
    return ErrorRecord(str(message), str(traceback), r.unix(e.timestamp), span=e.span_id)


def _note(e: _Info, r: _Reading) -> NoteRecord | None:
    """The engine's own `info` events (another tool's are left out)."""
    if e.source != "vitals-engine" or not isinstance(e.data, str):
        return None
    return NoteRecord(r.text(e.data), r.unix(e.timestamp), span=e.span_id)


_RECORDS: dict[str, Any] = {
    "span_begin": _span_begin,
    "span_end": _span_end,
    "tool": _tool,
    "sandbox": _sandbox,
    "sample_limit": _limit,
    "error": _error,
    "info": _note,
}


def logged_transcript(
    events: msgspec.Raw, attachments: dict[str, str] | None = None
) -> list[TranscriptRecord]:
    """The transcript records a sample's logged `events` hold, in the log's order
    (`attachments`: the sample's, which Inspect's long texts point to); [] for most
    samples of our runs, whose events hold none.

    Example:
        >>> logged_transcript(msgspec.Raw(b'[{"event": "span_end", "id": "s1", '
        ...                               b'"timestamp": "2026-01-01T00:00:00+00:00"}]'))
        [SpanEnd(id='s1', at=1767225600.0)]
    """
    if _TRANSCRIPT_TAG.search(memoryview(events)) is None:
        return []
    reading = _Reading(attachments or {})
    records: list[TranscriptRecord] = []
    for raw in _events.decode(events):
        kind = _tag.decode(raw).event
        decoder = _DECODERS.get(kind)
        if decoder is None:
            continue
        try:
            record = _RECORDS[kind](decoder.decode(raw), reading)
        except msgspec.ValidationError:
            continue  # an event of a shape we do not know: left out, the rest read
        if record is not None:
            records.append(record)
    return records
