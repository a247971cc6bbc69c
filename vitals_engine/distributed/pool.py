"""Ray actors kept between the runs of one process, so that a run after the first starts
its workers and limits hub at once instead of waiting for new Ray processes.

A run takes what it needs (`take_hub`, `take_worker`) and makes what the pool lacks.
When it ends well, it gives its actors back (`give_back`); when it does not (an error,
a cancelled run, a worker that died) it kills them, since one may be mid-sample. Idle
actors are killed `keep_alive` seconds after the last run gave them back, or at once
when `keep_alive` is 0. Actors belong to a Ray job and to the actor class they were
made from: after `ray.shutdown()` and a new `ray.init()`, or with another class, the
old ones are not taken.

Every worker a run uses gets an id (`worker_id`) that is unique in this process, so a
reused hub tells a late call from an earlier run's worker from one of this run's.

The pool imports no Ray: the driver passes `kill` (ray.kill, errors suppressed).

Example:
    >>> pool = ActorPool()
    >>> pool.take_worker(("job-1", object), node="n1") is None   # empty: make one
    True
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["POOL", "ActorPool"]

#: Whose actors: (the Ray job's id, the actor class).
Key = tuple[Any, Any]


@dataclass(frozen=True, slots=True)
class _Kept:
    key: Key
    node: str | None
    handle: Any


class ActorPool:
    """Idle Ray workers and limits hubs, and worker ids (thread-safe: runs in different
    threads may take and give back at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: list[_Kept] = []
        self._hubs: list[_Kept] = []
        self._ids = itertools.count()
        self._timer: threading.Timer | None = None

    def worker_id(self) -> int:
        """An id no other worker of this process has had."""
        with self._lock:
            return next(self._ids)

    def take_hub(self, key: Key) -> Any | None:
        """An idle hub of `key`, or None."""
        with self._lock:
            return self._take(self._hubs, key, None, any_node=True)

    def take_worker(self, key: Key, node: str | None) -> Any | None:
        """An idle worker of `key` placed on `node`, or None."""
        with self._lock:
            return self._take(self._workers, key, node, any_node=False)

    def _take(self, kept: list[_Kept], key: Key, node: str | None, *, any_node: bool) -> Any:
        for i, item in enumerate(kept):
            if item.key == key and (any_node or item.node == node):
                del kept[i]
                return item.handle
        return None

    def give_back(
        self,
        key: Key,
        hub: Any,
        workers: Sequence[tuple[str | None, Any]],
        keep_alive: float,
        kill: Callable[[Any], None],
    ) -> None:
        """A run that ended well hands back its hub and its (node, worker) pairs: kept
        for `keep_alive` seconds of idleness, then killed (at once if 0)."""
        if keep_alive <= 0:
            for _, worker in workers:
                kill(worker)
            kill(hub)
            return
        with self._lock:
            self._hubs.append(_Kept(key, None, hub))
            self._workers.extend(_Kept(key, node, worker) for node, worker in workers)
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(keep_alive, self._expire, (kill,))
            self._timer.daemon = True
            self._timer.start()

    def _expire(self, kill: Callable[[Any], None]) -> None:
        """Nothing was taken or given back for `keep_alive` seconds: kill the idle."""
        with self._lock:
            idle = self._hubs + self._workers
            self._hubs, self._workers, self._timer = [], [], None
        for item in idle:
            kill(item.handle)

    def forget(self, keep: Callable[[Key], bool]) -> None:
        """Drop (without killing: their job is gone) the idle actors whose key fails `keep`."""
        with self._lock:
            self._hubs = [item for item in self._hubs if keep(item.key)]
            self._workers = [item for item in self._workers if keep(item.key)]

    def idle(self) -> list[Any]:
        """The idle workers' handles (for benchmarks and tests)."""
        with self._lock:
            return [item.handle for item in self._workers]


#: The process's pool.
POOL = ActorPool()
