"""Recording a sample's transcript as it happens: spans, and what happens inside them.

The records go to the running sample's transcript (`CallScope.transcript`, its
`SampleRecord.events`); outside a sample stage nothing is recorded. The span now open
is a context variable, so tools running side by side in one sample each record inside
their own span, and what a tool does (its sandbox actions) goes in the tool's.

Example:
    >>> with span("bash", "tool") as span_id:
    ...     record(SandboxRecord(action="exec", started=t0, completed=t1, span=span_id))
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..vocab.transcript import SpanBegin, SpanEnd, TranscriptRecord
from .scope import current_scope

__all__ = ["current_span", "record", "recording", "span"]

_span: ContextVar[str | None] = ContextVar("vitals_span", default=None)
_ids = itertools.count(1)
_PREFIX = secrets.token_hex(3)  # span ids of another process (a resumed run's) differ


def recording() -> bool:
    """Whether a sample's transcript is being recorded here."""
    scope = current_scope()
    return scope is not None and scope.transcript is not None


def current_span() -> str | None:
    """The id of the innermost span open here (None: none)."""
    return _span.get()


def record(entry: TranscriptRecord) -> None:
    """Add `entry` to the running sample's transcript (nothing outside a sample)."""
    scope = current_scope()
    if scope is not None and scope.transcript is not None:
        scope.transcript.append(entry)
        if scope.on_record is not None:
            scope.on_record()


@contextmanager
def span(name: str, type: str | None = None) -> Iterator[str | None]:
    """A span of the running sample's transcript around the block: its id while it is open
    (None outside a sample, where nothing is recorded)."""
    scope = current_scope()
    transcript = scope.transcript if scope is not None else None
    if transcript is None:
        yield None
        return
    told = scope.on_record if scope is not None else None
    span_id = f"{_PREFIX}-{next(_ids)}"
    transcript.append(SpanBegin(span_id, name, time.time(), type, _span.get()))
    if told is not None:
        told()
    token = _span.set(span_id)
    try:
        yield span_id
    finally:
        _span.reset(token)
        transcript.append(SpanEnd(span_id, time.time()))
        if told is not None:
            told()
