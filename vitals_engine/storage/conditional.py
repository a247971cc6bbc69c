"""Writes that happen only if the object is as expected: the store's conditional writes.

S3 has them (`If-None-Match: *` to create an object only when there is none,
`If-Match: <etag>` to replace one only when nobody replaced it since), so does the
in-process `memory://` store (one lock per process). Elsewhere the write is best
effort: read, compare, write, with a moment in between where another writer may slip
in; `exact()` says which a store has.

`update()` builds on them a change that no other writer's change can undo: the object is
read, changed and written back only if nobody wrote it meanwhile, else read again.
"""

from __future__ import annotations

import errno
import random
import threading
import time
from collections.abc import Callable

from .._errors import StoreError
from .location import Store

__all__ = ["create", "exact", "swap", "update"]

_S3 = frozenset({"s3", "s3a"})
_MEMORY = threading.Lock()


def exact(store: Store) -> bool:
    """Whether `store`'s conditional writes are atomic (else they are best effort).

    Example:
        >>> exact(Store("s3://b/p")), exact(Store("gs://b/p"))
        (True, False)
    """
    return store.protocol in _S3 or store.protocol == "memory"


def _lost(exc: OSError) -> bool:
    """Whether the store refused a write because its condition failed."""
    text = str(exc).lower()
    return (
        isinstance(exc, FileExistsError)
        or exc.errno == errno.EINVAL
        or "precondition" in text
        or "conditionalrequestconflict" in text
    )


def create(store: Store, name: str, data: bytes) -> bool:
    """Write `name` only if there is no such object; False when there was one.

    Example:
        >>> create(store, ".vitals/run.journal.lock", b"{}")
        True
    """
    path = store.path(name)
    if store.protocol in _S3:
        try:
            store.call("locking", lambda: store.op("pipe_file", path, data, mode="create"), name)
        except OSError as exc:
            if _lost(exc):
                return False
            raise store.failure(exc, "locking", name) from exc
        return True
    with _MEMORY:
        if store.info(name) is not None:
            return False
        store.put(name, data)
        return True


def swap(store: Store, name: str, data: bytes, expected: bytes, tag: str) -> bool:
    """Replace `name` with `data` only if it still holds `expected` (S3: its ETag is still
    `tag`); False when it changed (or went) meanwhile."""
    path = store.path(name)
    if store.protocol in _S3:
        try:
            store.call("locking", lambda: store.op("pipe_file", path, data, IfMatch=tag), name)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if _lost(exc):
                return False
            raise store.failure(exc, "locking", name) from exc
        return True
    with _MEMORY:
        try:
            current = store.get(name)
        except FileNotFoundError:
            return False
        if current != expected:
            return False
        store.put(name, data)
        return True


#: Tries of `update()` before it gives up (each lost to another writer's change).
UPDATE_TRIES = 50


def update(store: Store, name: str, change: Callable[[bytes | None], bytes]) -> None:
    """Replace `name` with `change(current)` (`current` None when there is none), written
    only if nobody wrote it since it was read: when another writer got in between, read
    it again and apply `change` to that. Raises a `StoreError` after `UPDATE_TRIES` lost
    tries (or the store's own).

    Example:
        >>> update(store, "listing.json", lambda old: add_entry(old, name, entry))
    """
    for attempt in range(UPDATE_TRIES):
        found = store.info(name)  # its tag before its bytes: a write between fails the swap
        if found is None:
            if create(store, name, change(None)):
                return
        else:
            try:
                current = store.get(name)
            except FileNotFoundError:
                continue
            if swap(store, name, change(current), current, found.tag):
                return
        time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))
    raise StoreError(
        f"{store.url_of(name)}: other writers changed it {UPDATE_TRIES} times while this "
        "run tried to; try again later.",
        url=store.url,
    )
