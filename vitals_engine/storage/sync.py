"""Bringing a store's logs to this machine: into the staging directory, so that what
reads local logs (resume, eval sets, `read_logs()`, `bundle()`) reads them there.

`pull()` rebuilds each unfinished journal from its segments (keeping a local one that
holds more: this machine wrote it) and copies each final log that is not yet here as
the store has it (same size, same modification time); each file gets the store's
modification time, so "newest first" means the same here and there. `only` limits it
to the logs of some tasks, by the task name every log and journal name carries
(`<time>_<task>_<id>`).

The store is the truth: a journal here whose run has its final log in the store, and
neither segments nor a lock there (no run continues it), is a stale copy (of a resume
that was refused, or stopped before it cleaned up) and `pull()` removes it, so that no
resume takes it for a run to continue.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .._logging import log
from .location import Store, StoredObject, stamp
from .segments import FOLDER, journals, lock_name, rebuild, segments

__all__ = ["LOG_SUFFIXES", "pull", "pull_log"]

LOG_SUFFIXES = (".json", ".eval")
_JOURNAL = ".journal"
_MANIFESTS = frozenset({"listing.json", "logs.json", "eval-set.json"})


def _wanted(name: str, only: set[str] | None) -> bool:
    if only is None:
        return True
    parts = name.rsplit(".", 1)[0].split("_")
    return len(parts) >= 3 and "_".join(parts[1:-1]) in only


def _same(local: Path, obj: StoredObject) -> bool:
    """Whether `local` is `obj` as pulled (or put) before: its size and, when the store
    says it, its modification time."""
    try:
        stat = local.stat()
    except OSError:
        return False
    return stat.st_size == obj.size and (
        obj.modified <= 0 or abs(stat.st_mtime - obj.modified) < 1e-3
    )


def pull_log(store: Store, obj: StoredObject, local: Path) -> Path:
    """Copy one log object to `local` (unless it is there already, as the store has it:
    a log this machine wrote and could not put, or a stale copy, is replaced)."""
    if _same(local, obj):
        return local
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.pulling")
    store.get_file(obj.name, tmp)
    os.replace(tmp, local)
    stamp(local, obj.modified)
    return local


def pull(store: Store, staging: Path, only: Iterable[str] | None = None) -> Path:
    """Bring `store`'s logs and unfinished journals into `staging`; return it.

    Example:
        >>> pull(Store("s3://team-evals/qa"), staging_dir("s3://team-evals/qa"), only={"qa"})
    """
    wanted = set(only) if only is not None else None
    finals = set()
    for obj in store.list():
        name = obj.name
        if name.endswith(LOG_SUFFIXES) and name not in _MANIFESTS and _wanted(name, wanted):
            pull_log(store, obj, staging / name)
            finals.add(name.rsplit(".", 1)[0])
    going = set()
    for journal in journals(store):
        if not _wanted(journal, wanted):
            continue
        parts = segments(store, journal)
        if not parts:
            continue
        going.add(journal)
        local = staging / journal
        rebuild(store, journal, local)
        stamp(local, max(seg.object.modified for seg in parts))
    _drop_stale(store, staging, finals, going)
    return staging


def _drop_stale(store: Store, staging: Path, finals: set[str], going: set[str]) -> None:
    """Remove the journals here whose run the store says finished (see the module
    docstring): a final log there, and no segments or lock."""
    if not staging.is_dir():
        return
    stale = [
        path
        for path in staging.glob(f"*{_JOURNAL}")
        if path.name.removesuffix(_JOURNAL) in finals and path.name not in going
    ]
    if not stale:
        return
    locks = {obj.name for obj in store.list(FOLDER)}
    for path in stale:
        if lock_name(path.name) in locks:
            continue  # a run continues it, or its lock was left: not for us to judge
        path.unlink(missing_ok=True)
        log.info(
            f"removed {path}: a stale copy of a journal whose run's final log is in the store",
            url=store.url,
        )
