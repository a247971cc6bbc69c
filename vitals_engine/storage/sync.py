"""Bringing a store's logs to this machine: into the staging directory, so that what
reads local logs (resume, eval sets, `read_logs()`, `bundle()`) reads them there.

`pull()` rebuilds each unfinished journal from its segments (keeping a local one that
holds more: this machine wrote it) and copies each final log that is not yet here in
the same size; each file gets the store's modification time, so "newest first" means
the same here and there. `only` limits it to the logs of some tasks, by the task name
every log and journal name carries (`<time>_<task>_<id>`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .location import Store, StoredObject
from .segments import journals, rebuild, segments

__all__ = ["LOG_SUFFIXES", "pull", "pull_log"]

LOG_SUFFIXES = (".json", ".eval")
_MANIFESTS = frozenset({"listing.json", "logs.json", "eval-set.json"})


def _wanted(name: str, only: set[str] | None) -> bool:
    if only is None:
        return True
    parts = name.rsplit(".", 1)[0].split("_")
    return len(parts) >= 3 and "_".join(parts[1:-1]) in only


def _stamp(path: Path, modified: float) -> None:
    if modified > 0:
        os.utime(path, (modified, modified))


def pull_log(store: Store, obj: StoredObject, local: Path) -> Path:
    """Copy one log object to `local` (unless it is there already, in the same size)."""
    try:
        if local.stat().st_size == obj.size:
            return local
    except OSError:
        pass
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.pulling")
    store.get_file(obj.name, tmp)
    os.replace(tmp, local)
    _stamp(local, obj.modified)
    return local


def pull(store: Store, staging: Path, only: Iterable[str] | None = None) -> Path:
    """Bring `store`'s logs and unfinished journals into `staging`; return it.

    Example:
        >>> pull(Store("s3://team-evals/qa"), staging_dir("s3://team-evals/qa"), only={"qa"})
    """
    wanted = set(only) if only is not None else None
    for obj in store.list():
        name = obj.name
        if name.endswith(LOG_SUFFIXES) and name not in _MANIFESTS and _wanted(name, wanted):
            pull_log(store, obj, staging / name)
    for journal in journals(store):
        if not _wanted(journal, wanted):
            continue
        parts = segments(store, journal)
        if not parts:
            continue
        local = staging / journal
        rebuild(store, journal, local)
        _stamp(local, max(seg.object.modified for seg in parts))
    return staging
