"""A journal in a store: immutable segment objects, named by where they start.

The journal `<log stem>.journal` of a run is shipped as objects
`.vitals/<log stem>.journal/<offset>.seg`, each holding whole lines of the journal
from byte `offset` (16 digits, so names sort as offsets do). Segments are never
rewritten; the journal is their concatenation, from 0, as long as each starts where
the one before it ends. The hidden `.vitals/` folder keeps them out of listings.
"""

from __future__ import annotations

import os
from pathlib import Path

from .location import Store, StoredObject

__all__ = [
    "FOLDER",
    "Segment",
    "catch_up",
    "journals",
    "lock_name",
    "rebuild",
    "segment_name",
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


def segments(store: Store, journal: str) -> list[Segment]:
    """The contiguous segments of `journal` from byte 0, in order (a gap ends them)."""
    found = []
    for obj in store.list(f"{FOLDER}/{journal}"):
        stem = obj.name.rsplit("/", 1)[-1]
        if stem.endswith(_SUFFIX) and stem[: -len(_SUFFIX)].isdigit():
            found.append(Segment(int(stem[: -len(_SUFFIX)]), obj))
    found.sort(key=lambda seg: seg.offset)
    contiguous, end = [], 0
    for seg in found:
        if seg.offset != end:
            break
        contiguous.append(seg)
        end = seg.end
    return contiguous


def journals(store: Store) -> list[str]:
    """The names of the journals with segments in `store` (runs without a final log in
    place, or whose segments were not yet removed)."""
    return sorted(name for name in store.folders(FOLDER) if name.endswith(".journal"))


def rebuild(store: Store, journal: str, local: Path, *, keep_longer: bool = True) -> int:
    """Write `journal`'s segments into the local file `local`; return its shipped size.

    A local copy that already holds every shipped byte (this machine wrote it, and
    wrote more since) is kept when `keep_longer`: it loses less.
    """
    parts = segments(store, journal)
    shipped = parts[-1].end if parts else 0
    if keep_longer and _holds(local, store, parts):
        return shipped
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.rebuilding")
    with tmp.open("wb") as fh:
        for seg in parts:
            fh.write(store.get(seg.object.name))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, local)
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
        for seg in parts:
            if seg.offset >= size:
                fh.write(store.get(seg.object.name))
                size = seg.end
    return size
