"""Finding the journal of a run going on in the background, from a test."""

from __future__ import annotations

from pathlib import Path


def started_journal(directory: Path) -> Path | None:
    """The journal in `directory` once its start record is whole, else None.

    A run's writer creates its journal (in a worker thread, under the journal's lock)
    before it writes the start record, so a test polling the directory meanwhile can
    find an empty or half-written file, which `read_journal` and `read_log` rightly
    refuse as "not a journal". From then on the file only grows: once its first line
    is whole, it reads."""
    journal = next(directory.glob("*.journal"), None)
    if journal is None:
        return None
    try:
        with journal.open("rb") as fh:
            whole = fh.readline().endswith(b"\n")
    except FileNotFoundError:  # the run ended meanwhile and removed it
        return None
    return journal if whole else None
