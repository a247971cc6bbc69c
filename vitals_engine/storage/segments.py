"""A journal in a store: immutable segment objects, named by where they start.

The journal `<log stem>.journal` of a run is shipped as objects
`.vitals/<log stem>.journal/<offset>.seg`, each holding whole lines of the journal
from byte `offset` (16 digits, so names sort as offsets do). Segments are never
rewritten; the journal is their concatenation, from 0, each starting where the one
before it ends. The hidden `.vitals/` folder keeps them out of listings.

A segment damaged in the store (cut short, or gone) costs its own lines, not those
after it: the journal is rebuilt with the lost bytes blanked (spaces ending in a
newline, which a journal's reader passes over), so every byte keeps its offset, the
segments after it are read, and shipping goes on where the last one ends. `rebuild()`
says which segment and which bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .._logging import log
from .location import Store, StoredObject

__all__ = [
    "FOLDER",
    "Lost",
    "Segment",
    "catch_up",
    "journals",
    "lock_name",
    "rebuild",
    "segment_name",
    "segment_objects",
    "segments",
]

FOLDER = ".vitals"
_SUFFIX = ".seg"


class Segment:
    """One shipped part of a journal: its object and the journal bytes it holds."""

    __slots__ = ("object", "offset")

    def __init__(self, offset: int, obj: StoredObject) -> None:
        self.offset, self.object = offset, obj

    @property
    def end(self) -> int:
        return self.offset + self.object.size


def segment_name(journal: str, offset: int) -> str:
    """The object of the segment of `journal` starting at byte `offset`.

    Example:
        >>> segment_name("a.journal", 1234)
        '.vitals/a.journal/0000000000001234.seg'
    """
    return f"{FOLDER}/{journal}/{offset:016d}{_SUFFIX}"


def lock_name(journal: str) -> str:
    """The lock object of `journal` (`remote_lock.py`)."""
    return f"{FOLDER}/{journal}.lock"


def segment_objects(store: Store, journal: str) -> list[StoredObject]:
    """Every object in the store's folder of `journal`: what removing it removes.

    Example:
        >>> store.remove([obj.name for obj in segment_objects(store, "a.journal")])
    """
    return store.list(f"{FOLDER}/{journal}")


def segments(store: Store, journal: str) -> list[Segment]:
    """The segments of `journal`, in order. One that starts inside the one before it
    (no shipper writes such a one) is left out; gaps are kept (see `pieces`)."""
    found = []
    for obj in segment_objects(store, journal):
        stem = obj.name.rsplit("/", 1)[-1]
        if stem.endswith(_SUFFIX) and stem[: -len(_SUFFIX)].isdigit():
            found.append(Segment(int(stem[: -len(_SUFFIX)]), obj))
    found.sort(key=lambda seg: seg.offset)
    kept: list[Segment] = []
    for seg in found:
        if seg.offset >= (kept[-1].end if kept else 0):
            kept.append(seg)
    return kept


class Lost(NamedTuple):
    """Bytes of a journal that its segments in the store no longer hold: from `start` to
    `end`, which `segment` (an object's name) held or should have reached."""

    segment: str
    start: int
    end: int


def _blank(size: int) -> bytes:
    return b" " * (size - 1) + b"\n" if size > 0 else b""


def pieces(
    store: Store, parts: list[Segment], since: int = 0, lost: list[Lost] | None = None
) -> Iterator[bytes]:
    """The journal's bytes from `since` (0, or where one of `parts` ends), segment by
    segment, each at its offset: the part of a line a segment cut short, and a gap before
    the next one, are blanked. What was lost is added to `lost`.

    Example:
        >>> lost = []
        >>> data = b"".join(pieces(store, segments(store, "a.journal"), 0, lost))
    """
    end = since
    before = ""
    for seg in parts:
        if seg.offset < since:
            before = seg.object.name
            continue
        if seg.offset > end:
            _note(lost, Lost(before or seg.object.name, end, seg.offset))
            yield _blank(seg.offset - end)
        data = store.get(seg.object.name)
        whole = data.rfind(b"\n") + 1
        if whole < len(data):  # cut short mid-line: its last line is lost
            _note(lost, Lost(seg.object.name, seg.offset + whole, seg.offset + len(data)))
            data = data[:whole] + _blank(len(data) - whole)
        yield data
        end, before = seg.offset + len(data), seg.object.name


def _note(lost: list[Lost] | None, found: Lost) -> None:
    if lost is None:
        return
    if lost and lost[-1].end == found.start and lost[-1].segment == found.segment:
        lost[-1] = Lost(found.segment, lost[-1].start, found.end)  # a cut line, then a gap
    else:
        lost.append(found)


def journals(store: Store) -> list[str]:
    """The names of the journals with segments in `store` (runs without a final log in
    place, or whose segments were not yet removed)."""
    return sorted(name for name in store.folders(FOLDER) if name.endswith(".journal"))


def rebuild(store: Store, journal: str, local: Path, *, keep_longer: bool = True) -> int:
    """Write `journal`'s segments into the local file `local`; return its shipped size.

    A local copy that already holds every shipped byte (this machine wrote it, and
    wrote more since) is kept when `keep_longer`: it loses less. A damaged segment is
    said in a warning, naming it and the bytes lost (see the module docstring).
    """
    parts = segments(store, journal)
    shipped = parts[-1].end if parts else 0
    if keep_longer and _holds(local, store, parts):
        return shipped
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.rebuilding")
    lost: list[Lost] = []
    with tmp.open("wb") as fh:
        for data in pieces(store, parts, 0, lost):
            fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, local)
    for gone in lost:
        log.warning(
            f"{store.url_of(gone.segment)}: a segment of the journal is damaged in the "
            f"store (cut short, or one after it is missing): bytes {gone.start}-{gone.end} "
            f"of {journal} ({gone.end - gone.start} bytes) are lost. The samples and model "
            "replies logged there run again on resume; the segments after it are read.",
            url=store.url,
        )
    return shipped


def _holds(local: Path, store: Store, parts: list[Segment]) -> bool:
    """Whether `local` starts with the first segment and is at least as long as all."""
    try:
        size = local.stat().st_size
    except OSError:
        return False
    if not parts or size < parts[-1].end:
        return False
    first = store.get(parts[0].object.name)
    with local.open("rb") as fh:
        return fh.read(len(first)) == first


def catch_up(store: Store, journal: str, local: Path) -> int:
    """Append to the local copy `local` the segments of `journal` it lacks (rebuilding it
    when it does not match them); return its size. What a viewer following a run in a
    store calls again and again: each call fetches only the new segments."""
    parts = segments(store, journal)
    try:
        size = local.stat().st_size
    except OSError:
        size = 0
    ends = {seg.end for seg in parts} | {0}
    if size not in ends:
        return rebuild(store, journal, local, keep_longer=False)
    local.parent.mkdir(parents=True, exist_ok=True)
    with local.open("ab") as fh:
        for data in pieces(store, parts, size):
            fh.write(data)
            size += len(data)
    return size
