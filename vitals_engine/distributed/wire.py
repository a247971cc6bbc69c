"""What crosses between the driver and its Ray workers, in the fewest objects.

A parcel of samples going out is one cloudpickled blob: the samples alone, as plain tuples,
when the workers solve (their records are new), or the records whole when they
only score (the records hold the solutions), with the replies an earlier run journaled
for them (a resumed run: they answer the same calls). A reply coming back, as it
arrives, is its sample's id and epoch and its journal line (`Replied`). A finished
record coming back is a tuple: its (id, epoch), its journal line, then its fields in
`FIELDS` order, never its sample (the driver has it). Plain tuples of builtins pickle in C;
dataclasses would go through Python code object by object, in both processes.
The live text of a worker's in-flight samples goes as a snapshot of tuples
(`live_out`), which the driver puts into its own `LiveTexts` (`live_in`).

Example:
    >>> from vitals_engine.samples import Sample, SampleRecord
    >>> records = [SampleRecord(Sample(1, 1, "What's 1+1?", "2"))]
    >>> [r.sample for r in parcel_in(parcel_out(records, fresh=True))] == [records[0].sample]
    True
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
from typing import Any

from ..engine.live_texts import LiveText, LiveTexts
from ..samples import Sample, SampleRecord
from ..vocab.model_calls import JournaledReply

__all__ = [
    "FIELDS",
    "Finished",
    "LiveSnapshot",
    "Replied",
    "finished_in",
    "finished_out",
    "live_in",
    "live_out",
    "parcel_in",
    "parcel_out",
    "parcel_parts",
]

#: The fields of a record that come back from a worker, in order.
FIELDS = tuple(f.name for f in dataclasses.fields(SampleRecord) if f.name != "sample")

#: A finished record as it comes back: id, epoch, journal line, then `FIELDS`.
Finished = tuple[Any, ...]

#: A reply as it comes back from a worker: its sample's id and epoch, its journal line.
Replied = tuple[Any, int, bytes]

#: A worker's live texts: (id, epoch, role, text, chars, updated) per in-flight sample.
LiveSnapshot = list[tuple[Any, int, str, str, int, float]]


def _cloudpickle() -> Any:
    return importlib.import_module("ray.cloudpickle")


def parcel_out(
    records: Sequence[SampleRecord],
    *,
    fresh: bool,
    replies: Sequence[JournaledReply] = (),
) -> bytes:
    """A parcel of records for a worker; `fresh`: records that hold nothing but a sample.
    `replies`: those an earlier run journaled for them."""
    earlier = list(replies)
    if fresh:
        rows = [(s.id, s.epoch, s.input, s.target, s.metadata) for s in (r.sample for r in records)]
        return _cloudpickle().dumps((True, rows, earlier))
    return _cloudpickle().dumps((False, list(records), earlier))


def parcel_parts(blob: bytes) -> tuple[list[SampleRecord], list[JournaledReply]]:
    """The records of a parcel made by `parcel_out`, and the earlier replies it carries."""
    fresh, rows, earlier = _cloudpickle().loads(blob)
    if fresh:
        return [SampleRecord(Sample(*row)) for row in rows], earlier
    return rows, earlier


def parcel_in(blob: bytes) -> list[SampleRecord]:
    """The records of a parcel made by `parcel_out`."""
    return parcel_parts(blob)[0]


def finished_out(record: SampleRecord, line: bytes) -> Finished:
    """A finished record (and its journal line) for the driver."""
    sample = record.sample
    return (sample.id, sample.epoch, line, *(getattr(record, name) for name in FIELDS))


def finished_in(into: SampleRecord, finished: Finished) -> bytes:
    """Copy a finished record's fields onto the driver's record; return its line."""
    for name, value in zip(FIELDS, finished[3:], strict=True):
        setattr(into, name, value)
    return finished[2]


def live_out(texts: LiveTexts) -> LiveSnapshot:
    """A snapshot of a worker's live texts, for the driver."""
    return [
        (key[0], key[1], entry.role, entry.text, entry.chars, entry.updated)
        for key, entry in texts.entries.items()
    ]


def live_in(
    texts: LiveTexts,
    snapshot: LiveSnapshot,
    at_work: dict[tuple[Any, int], SampleRecord],
    shown: set[tuple[Any, int]],
) -> set[tuple[Any, int]]:
    """Show one worker's `snapshot` in the driver's `texts`, in place of what it showed
    before (`shown`): samples no longer at work there are left out. Returns what it shows."""
    now: set[tuple[Any, int]] = set()
    for id, epoch, role, text, chars, updated in snapshot:
        record = at_work.get((id, epoch))
        if record is None:  # finished since
            continue
        entry = texts.entries.get(record.key)
        if entry is None:
            entry = texts.entries[record.key] = LiveText(record.sample, role, None)
        entry.role, entry.text, entry.chars, entry.updated = role, text, chars, updated
        now.add(record.key)
    for key in shown - now:
        texts.entries.pop(key, None)
    if texts.on_change is not None:
        texts.on_change()
    return now
