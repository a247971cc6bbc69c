"""A sample's transcript (`SampleRecord.events`) as Inspect events, interleaved by time
with its model and score events.

What a sample with transcript records logs, as Inspect writes it:

```
span_begin init · sample_init · span_end init     the sample and its state at the start
span_begin solvers                                 the engine's spans, as it recorded them
  span_begin solver
    model                                          a model call: in the innermost span
    span_begin tool "bash"                           open from its start to its end
      tool · sandbox exec                          records: in the span they name
    span_end
  sample_limit · error
span_begin scorers · span_begin scorer · score     a score: in its scorer's span
```

Events are ordered by time; at one instant a span's begin comes first and its end last,
records keep the engine's order. A viewer nests by ids (`span_id`, `parent_id`), as
Inspect's does, never by order. The init span is the engine's when it recorded one
(type "init"), else one of ours (id "init") at the sample's start.

A sample without transcript records is logged as it always was (`log/events.py`): its
model and score events only, no spans, no `sample_init`.

Inspect's reader refuses a tool error's type or a limit's type outside its own lists (and
then the whole log does not read): such a type is logged as "unknown" (a tool error's) or
"custom" (a limit's), the recorded one kept in the event's `metadata` (`error_type`,
`limit_type`), where our reader finds it again.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

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
from . import schema as s

__all__ = [
    "INIT_SPAN",
    "LIMIT_TYPES",
    "TOOL_ERROR_TYPES",
    "LiveEvents",
    "live_events",
    "record_event",
    "sample_init",
    "sample_limit",
    "transcript_events",
    "transcript_start",
]

#: The `source` of the `info` events the engine writes (a `NoteRecord` each).
NOTE_SOURCE = "vitals-engine"

#: The tool error types Inspect's reader accepts.
TOOL_ERROR_TYPES = frozenset(
    {
        "parsing",
        "timeout",
        "unicode_decode",
        "permission",
        "file_not_found",
        "is_a_directory",
        "limit",
        "approval",
        "cancelled",
        "sandbox_unavailable",
        "unknown",
        "output_limit",
    }
)
#: The limit types Inspect's reader accepts in a `sample_limit` event (a sample's `limit`
#: also takes "context").
LIMIT_TYPES = frozenset(
    {"message", "time", "working", "token", "turn", "cost", "operator", "custom"}
)
_SAMPLE_LIMIT_TYPES = LIMIT_TYPES | {"context"}
#: The id of the init span we add when the engine recorded none.
INIT_SPAN = "init"

Iso = Callable[[float], str]
Event = dict[str, Any]
#: A model or score event with its start and end: (started, completed, event).
Timed = tuple[float, float, Event]

# An item to place: (time, rank at that time, order among equals, what, payload).
_RECORD, _TIMED, _FIXED = 0, 1, 2
_RANKS = {SpanBegin: 0, SpanEnd: 2}
_order = operator.itemgetter(0, 1, 2)


def _head(kind: str, at: float, span: str | None, start: float, iso: Iso) -> Event:
    event: Event = {"event": kind, "timestamp": iso(at), "working_start": round(at - start, 6)}
    if span is not None:
        event["span_id"] = span
    return event


def _span_begin(r: SpanBegin, start: float, iso: Iso) -> Event:
    event = _head("span_begin", r.at, r.id, start, iso)
    event["id"] = r.id
    if r.parent is not None:
        event["parent_id"] = r.parent
    if r.type is not None:
        event["type"] = r.type
    event["name"] = r.name
    return event


def _span_end(r: SpanEnd, start: float, iso: Iso) -> Event:
    event = _head("span_end", r.at, r.id, start, iso)
    event["id"] = r.id
    return event


def _tool(r: ToolRecord, start: float, iso: Iso) -> Event:
    event = _head("tool", r.started, r.span, start, iso)
    event["type"] = "function"
    event["id"] = r.call_id
    event["function"] = r.function
    event["arguments"] = r.arguments
    event["result"] = r.result
    if r.error_type is not None or r.error_message is not None:
        kind = r.error_type or "unknown"
        known = kind if kind in TOOL_ERROR_TYPES else "unknown"
        event["error"] = {"type": known, "message": r.error_message or ""}
        if known != kind:
            event["metadata"] = {"error_type": kind}
    event["completed"] = iso(r.completed)
    event["working_time"] = round(r.completed - r.started, 6)
    return event


def _sandbox(r: SandboxRecord, start: float, iso: Iso) -> Event:
    event = _head("sandbox", r.started, r.span, start, iso)
    event["action"] = r.action
    for name in ("cmd", "options", "file", "input", "result", "output"):
        value = getattr(r, name)
        if value is not None:
            event[name] = value
    event["completed"] = iso(r.completed)
    return event


def _limit(r: LimitRecord, start: float, iso: Iso) -> Event:
    event = _head("sample_limit", r.at, r.span, start, iso)
    kind = r.type if r.type in LIMIT_TYPES else "custom"
    event["type"] = kind
    event["message"] = r.message
    if r.limit is not None:
        event["limit"] = r.limit
    if kind != r.type:
        event["metadata"] = {"limit_type": r.type}
    return event


def _note(r: NoteRecord, start: float, iso: Iso) -> Event:
    event = _head("info", r.at, r.span, start, iso)
    event["source"] = NOTE_SOURCE
    event["data"] = r.message
    return event


def _error(r: ErrorRecord, start: float, iso: Iso) -> Event:
    event = _head("error", r.at, r.span, start, iso)
    event["error"] = {"message": r.message, "traceback": r.traceback, "traceback_ansi": r.traceback}
    return event


_EVENTS: dict[type, Callable[[Any, float, Iso], Event]] = {
    SpanBegin: _span_begin,
    SpanEnd: _span_end,
    ToolRecord: _tool,
    SandboxRecord: _sandbox,
    LimitRecord: _limit,
    NoteRecord: _note,
    ErrorRecord: _error,
}


def record_event(record: TranscriptRecord, start: float, iso: Iso) -> Event:
    """One transcript record as Inspect's event, its times relative to the sample's
    `start` (`working_start`) and written by `iso`.

    Example:
        >>> record_event(SpanEnd("s1", at=12.5), 10.0, str)["working_start"]
        2.5
    """
    return _EVENTS[type(record)](record, start, iso)


def live_events(records: Sequence[TranscriptRecord], last: int = 200) -> list[Event]:
    """The last `last` records of a running sample's transcript as the log's events (for
    the live viewer: timed from its first record, written in local ISO time).

    Example:
        >>> live_events([SpanBegin("s1", "bash", at=5.0, type="tool")])[0]["event"]
        'span_begin'
    """
    if not records:
        return []
    start = _at(records[0])
    shown = records[-last:]
    return [record_event(record, start, _local_iso) for record in shown]


class LiveEvents:
    """`live_events` of one running sample's transcript, kept between writes of the live
    sidecar: each record is rendered once, when it is new (the transcript only grows).

    Example:
        >>> shown = LiveEvents()
        >>> len(shown.of(records))       # every record rendered
        3
        >>> records.append(SpanEnd("s1", at=9.0))
        >>> len(shown.of(records))       # only the new one rendered
        4
    """

    __slots__ = ("_done", "_events", "_last", "_records", "_start")

    def __init__(self, last: int = 200) -> None:
        self._last = last
        self._records: Sequence[TranscriptRecord] | None = None
        self._done = 0  # records rendered so far
        self._events: list[Event] = []
        self._start = 0.0

    def of(self, records: Sequence[TranscriptRecord]) -> list[Event]:
        """The last `last` records of `records` as the log's events (as `live_events`)."""
        if records is not self._records or len(records) < self._done:
            self._records, self._done, self._events = records, 0, []
            self._start = _at(records[0]) if records else 0.0
        new = records[max(self._done, len(records) - self._last) :]
        self._done = len(records)
        if new:
            start = self._start
            events = self._events
            events.extend(record_event(record, start, _local_iso) for record in new)
            del events[: -self._last]
        return list(self._events)


def _local_iso(unix: float) -> str:
    return datetime.fromtimestamp(unix).astimezone().isoformat()


def _at(record: TranscriptRecord) -> float:
    return record.started if isinstance(record, ToolRecord | SandboxRecord) else record.at


def transcript_start(records: Iterable[TranscriptRecord], start: float | None) -> float | None:
    """When a sample's transcript starts: at `start` (its first stage's), or at its first
    record when that is earlier (a re-scored sample's records are its solving's).

    Example:
        >>> transcript_start([SpanBegin("s1", "solvers", at=5.0)], 7.0)
        5.0
    """
    first = min(map(_at, records), default=None)
    if first is None or (start is not None and start <= first):
        return start
    return first


def sample_init(
    sample_id: int | str, input: Any, target: str | list[str], metadata: dict[str, Any]
) -> Event:
    """The body of a `sample_init` event: the sample as the dataset gave it, and its state
    at the start (its input as messages, its metadata).

    Example:
        >>> sample_init(1, "What's 2+2?", "4", {})["state"]["messages"]
        [{'role': 'user', 'content': "What's 2+2?", 'source': 'input'}]
    """
    sample: Event = {"id": sample_id, "input": input, "target": target}
    if metadata:
        sample["metadata"] = metadata
    messages = (
        [{"role": "user", "content": input, "source": "input"}] if isinstance(input, str) else input
    )
    return {"sample": sample, "state": {"messages": messages, "metadata": metadata}}


def sample_limit(records: Iterable[TranscriptRecord]) -> s.EvalSampleLimit | None:
    """The limit that stopped the sample (its last limit record with a value), as a
    sample's `limit`; None when it hit none.

    Example:
        >>> sample_limit([LimitRecord("message", 10, "10 messages", at=3.0)])
        EvalSampleLimit(type='message', limit=10, reason='10 messages')
    """
    hit = None
    for record in records:
        if type(record) is LimitRecord and record.limit is not None:
            hit = record
    if hit is None or hit.limit is None:
        return None
    kind = hit.type if hit.type in _SAMPLE_LIMIT_TYPES else "custom"
    return s.EvalSampleLimit(type=kind, limit=hit.limit, reason=hit.message)


def _score_span(name: str, begins: list[SpanBegin]) -> SpanBegin | None:
    """The span a score goes in: its scorer's (the last of that name), else the scorers'."""
    named = [b for b in begins if b.type == "scorer" and b.name == name]
    if named:
        return named[-1]
    return next((b for b in reversed(begins) if b.type == "scorers"), None)


def _init_items(records: list[TranscriptRecord], init: Event, start: float, iso: Iso) -> list:
    """The init span's items: `sample_init` just after the engine's init span begins, or
    our own init span holding it, before anything else at `start`."""
    for seq, record in enumerate(records):
        if type(record) is SpanBegin and record.type == "init":
            event = {**_head("sample_init", record.at, record.id, start, iso), **init}
            return [(record.at, 0, seq + 0.5, _FIXED, event)]
    event = {**_head("sample_init", start, INIT_SPAN, start, iso), **init}
    return [
        (start, -1, 0, _RECORD, SpanBegin(INIT_SPAN, "init", start, type="init")),
        (start, -1, 1, _FIXED, event),
        (start, -1, 2, _RECORD, SpanEnd(INIT_SPAN, start)),
    ]


def _items(
    records: list[TranscriptRecord], models: Iterable[Timed], scores: Iterable[tuple[str, Timed]]
) -> tuple[list, dict[str, float]]:
    """Everything to place, unsorted, and when each span ends (never: still open)."""
    ends = {r.id: r.at for r in records if type(r) is SpanEnd}
    begins = [r for r in records if type(r) is SpanBegin]
    items: list = [(_at(r), _RANKS.get(type(r), 1), i, _RECORD, r) for i, r in enumerate(records)]
    seq = len(records)
    for timed in models:
        items.append((timed[0], 1, seq, _TIMED, timed))
        seq += 1
    for name, timed in scores:
        target = _score_span(name, begins)
        if target is None:
            items.append((timed[0], 1, seq, _TIMED, timed))
        else:
            end = ends.get(target.id, math.inf)
            timed[2]["span_id"] = target.id
            items.append((min(max(timed[0], target.at), end), 1, seq, _FIXED, timed[2]))
        seq += 1
    return items, ends


def _innermost(open_spans: dict[str, float], completed: float) -> str | None:
    """The last opened span still open that stays open until `completed`."""
    for span in reversed(open_spans):
        if open_spans[span] >= completed:
            return span
    return None


def transcript_events(
    records: list[TranscriptRecord],
    models: Iterable[Timed],
    scores: Iterable[tuple[str, Timed]],
    init: Event,
    start: float,
    iso: Iso,
) -> list[Event]:
    """A sample's events: its transcript `records`, its model events (`models`, each with
    its start and end) and its score events (`scores`, each with its scorer's name),
    interleaved by time under the init span holding `sample_init` (`init`: its body). A
    model event goes in the innermost span open over its whole call, a score in its
    scorer's span (see the module docstring).

    Example:
        >>> records = [SpanBegin("s1", "solvers", at=1.0, type="solvers"), SpanEnd("s1", at=3.0)]
        >>> events = transcript_events(records, [(2.0, 2.5, model_event)], [], init, 1.0, iso)
        >>> [(e["event"], e.get("span_id")) for e in events][3:]
        [('span_begin', 's1'), ('model', 's1'), ('span_end', 's1')]
    """
    items, ends = _items(records, models, scores)
    items.extend(_init_items(records, init, start, iso))
    items.sort(key=_order)
    open_spans: dict[str, float] = {}
    events: list[Event] = []
    for _, _, _, what, payload in items:
        if what == _RECORD:
            kind = type(payload)
            if kind is SpanBegin:
                open_spans[payload.id] = ends.get(payload.id, math.inf)
            elif kind is SpanEnd:
                open_spans.pop(payload.id, None)
            events.append(_EVENTS[kind](payload, start, iso))
        elif what == _TIMED:
            _, completed, event = payload
            span = _innermost(open_spans, completed)
            if span is not None:
                event["span_id"] = span
            events.append(event)
        else:
            events.append(payload)
    return events
