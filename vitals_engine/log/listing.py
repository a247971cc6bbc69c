"""`listing.json`: the manifest of a log directory, for static hosting and fast listings.

It maps each log's file name to its overview (ids, task, model, status,
times, the primary metric), the shape Inspect's static viewer reads. The
writer updates it as each log is finished; `write_listing()` rebuilds it
from the logs themselves.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from . import schema as s
from .atomic import replace_atomically

__all__ = ["LISTING", "overview", "read_listing", "update_listing"]

LISTING = "listing.json"


def overview(header: s.EvalLog) -> dict[str, Any]:
    """One log's entry in the listing."""
    spec = header.eval
    results = header.results if isinstance(header.results, s.EvalResults) else None
    metric = None
    if results is not None and results.scores and results.scores[0].metrics:
        first = next(iter(results.scores[0].metrics.values()))
        metric = {"name": first.name, "value": first.value, "params": first.params}
    entry: dict[str, Any] = {
        "eval_id": spec.eval_id,
        "run_id": spec.run_id,
        "task": spec.task,
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "version": header.version,
        "status": header.status,
        "invalidated": False,
        "model": spec.model,
        "started_at": header.stats.started_at or spec.created,
        "completed_at": header.stats.completed_at,
        "primary_metric": metric,
    }
    if isinstance(header.error, s.EvalError):
        entry["error"] = header.error.message
    return entry


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with (directory / ".listing.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_listing(directory: Path) -> dict[str, Any]:
    """The listing of `directory` ({} if there is none or it cannot be read)."""
    path = directory / LISTING
    if not path.is_file():
        return {}  # none, or a FIFO or device that reading could block on
    try:
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def update_listing(directory: Path, name: str, header: s.EvalLog) -> None:
    """Add or replace `name`'s entry; entries of logs that no longer exist are dropped."""
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        listing = read_listing(directory)
        listing = {k: v for k, v in listing.items() if (directory / k).exists() or k == name}
        listing[name] = overview(header)
        encoded = msgspec.json.encode(listing)
        replace_atomically(directory / LISTING, lambda fh: fh.write(encoded), ".json", sync=False)
