"""A task whose logs go to an object store: where it stages them, what it pulls from
the store to resume, its journal's shipper, and the final log put in the store.

The run itself is the same as a local one, in the store's staging directory
(`storage/staging.py`); this module is where the two meet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from .._errors import JournalInUseError
from ..config import DEFAULT_LOG_DIR, log_dir
from ..log.journal_lock import JournalLock
from ..log.writer import LogWriter
from ..storage.location import Store, as_store
from ..storage.shipper import Shipper
from ..storage.staging import staging_dir
from ..storage.sync import pull
from .state import RunState, TaskSetup

__all__ = [
    "drop_refused",
    "in_staging",
    "open_shipper",
    "place",
    "publish",
    "pull_runs",
    "shown_dir",
]


def place(dir: str | os.PathLike[str] | None) -> tuple[Path, Store | None]:
    """Where a task logs: `dir`, else `VITALS_LOG_DIR`, else ./logs; for a URL, its
    staging directory and its store.

    Example:
        >>> place("s3://team-evals/qa")[1]
        Store('s3://team-evals/qa')
    """
    given = dir if dir is not None and dir != "" else (log_dir() or DEFAULT_LOG_DIR)
    store = as_store(given)
    if store is None:
        return Path(given), None
    return staging_dir(store.url), store


def shown_dir(setup: TaskSetup) -> Path | str:
    """The log directory as the user named it: the store's URL, or the local path."""
    return setup.store.url if setup.store is not None else setup.dir


def pull_runs(setup: TaskSetup, names: set[str] | None = None) -> None:
    """Bring the store's logs and journals of this task (or of tasks `names`) into the
    staging directory, where resume looks (nothing for a local task)."""
    if setup.store is not None:
        pull(setup.store, setup.dir, only=names if names is not None else {setup.name})


def open_shipper(setup: TaskSetup, state: RunState, writer: LogWriter) -> Shipper | None:
    """The shipper of `writer`'s journal to the task's store (None for a local task)."""
    state.shipper = None
    if setup.store is None:
        return None
    state.shipper = Shipper(
        setup.store, writer.journal, written=lambda: writer.written, log_path=writer.path
    )
    return state.shipper


def publish(state: RunState, final: Path) -> None:
    """Put the final log in the store and clear the journal there (when the run ships)."""
    shipper = state.shipper
    if shipper is not None:
        shipper.publish(final)
        shipper.release()


def drop_refused(journal: Path) -> None:
    """A resume the store refused (another machine continues the run): remove the copy of
    its journal it pulled here, which is no run's to continue, so that a later resume
    takes the store's word instead (unless a process of this machine writes it).

    Example:
        >>> drop_refused(writer.journal)
    """
    lock = JournalLock(journal)
    try:
        lock.acquire()
    except JournalInUseError:
        return
    try:
        journal.unlink(missing_ok=True)
    finally:
        lock.release()


def in_staging(setup: TaskSetup, resume: Literal[True] | str | Path) -> Literal[True] | str | Path:
    """`eval(resume=...)` of a task that logs to a store, with what it names pulled into
    the staging directory: `True` stays (the newest run is looked for there), a URL or
    a name of a log or journal in the store becomes its local copy."""
    assert setup.store is not None
    if resume is True:
        pull_runs(setup)
        return True
    text = os.fspath(resume) if not isinstance(resume, bool) else ""
    prefix = setup.store.url + "/"
    if text.startswith(prefix) or (text and "/" not in text and not Path(text).exists()):
        name = text.removeprefix(prefix)
        pull_runs(setup)
        return setup.dir / name
    return resume
