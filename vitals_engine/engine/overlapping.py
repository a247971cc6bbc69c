"""A change to the whole process that runs share while they overlap: made when the first
run starts, undone when the last one ends (an eval set, runs in several threads).

Example:
    >>> threshold = Overlapping(lambda: gc.get_threshold(), lambda old: gc.set_threshold(*old))
    >>> with threshold.held(lambda: gc.set_threshold(50_000)):
    ...     ...  # every run in this block shares the change; the last out undoes it
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["Overlapping"]

T = TypeVar("T")


class Overlapping(Generic[T]):
    """Count the runs holding a process-wide change: `save` reads what was there before
    the first, `restore` puts it back after the last."""

    def __init__(self, save: Callable[[], T], restore: Callable[[T], object]) -> None:
        self._save = save
        self._restore = restore
        self._lock = threading.Lock()
        self._holders = 0
        self._saved: T | None = None

    @contextmanager
    def held(self, change: Callable[[], object]) -> Iterator[None]:
        """Hold the change for the duration: the first holder saves, then changes."""
        with self._lock:
            if self._holders == 0:
                self._saved = self._save()
                change()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    saved, self._saved = self._saved, None
                    self._restore(saved)  # type: ignore[arg-type]
