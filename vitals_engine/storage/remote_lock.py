"""Who continues a journal in a store: one run at a time, across machines.

The lock is an object beside the journal's segments, `.vitals/<journal>.lock`,
created only if there is none (`conditional.create`: S3's `If-None-Match: *`). It
names its holder (a random owner token, pid, host, since when, command), the time
of its last heartbeat and its lease: the holder rewrites it every shipping interval,
replacing only its own version (`conditional.swap`: S3's `If-Match`). A run killed on
another machine cannot remove its lock, so a lock whose heartbeat is older than its
lease (the holder's `stale_after`, as it wrote it) is taken over, by the same
conditional replace: of two runs taking over one stale lock, one wins. On this host a
lock whose process is gone is stale at once.

`renewed` is when (`time.monotonic()`) the holder wrote the heartbeat the store holds:
others may take the lock over once `stale_after` seconds have passed since, so the
holder stops buying well before (`shipper.py`). A holder that finds its lock replaced
has lost the journal, and stops: `beat()` raises, naming the run that took it over.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
import time

import msgspec

from .._errors import JournalInUseError, StoreError
from .conditional import create, exact, swap
from .location import Store
from .segments import lock_name

__all__ = ["RemoteLock"]


class _Holder(msgspec.Struct):
    owner: str
    pid: int
    host: str
    space: int = 0
    started: float = 0.0
    beat: float = 0.0
    command: str = ""
    #: Seconds the lock stays good after `beat` (0: a lock of an older version).
    lease: float = 0.0


def _pid_space() -> int:
    """This process's pid namespace (two containers on one host share its name)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


#: The owner tokens of the locks this process holds.
_HELD: set[str] = set()


def _gone(holder: _Holder) -> bool:
    """Whether the holder ran on this host (and pid namespace) and is gone: its process
    ended, or it is this process and none of its locks is that one (a run that stopped
    without letting go)."""
    if holder.host != socket.gethostname() or holder.space != _pid_space():
        return False
    if holder.pid == os.getpid():
        return holder.owner not in _HELD
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class RemoteLock:
    """The lock on one journal of a store, held by the run that ships it.

    Example:
        >>> lock = RemoteLock(store, "2026-11-28T10-00-00+00-00_qa_abc.journal", stale_after=30)
        >>> lock.acquire()      # raises JournalInUseError naming the holder
        >>> lock.beat()         # every shipping interval
        >>> lock.release()
    """

    def __init__(self, store: Store, journal: str, *, stale_after: float) -> None:
        self.store = store
        self.journal = journal
        self.name = lock_name(journal)
        self.stale_after = stale_after
        self.exact = exact(store)
        self.held = False
        #: When the heartbeat the store holds was written (`time.monotonic()`).
        self.renewed = 0.0
        now = time.time()
        self._me = _Holder(
            secrets.token_hex(8),
            os.getpid(),
            socket.gethostname(),
            _pid_space(),
            now,
            now,
            " ".join(sys.argv)[:300],
            stale_after,
        )
        self._body = b""
        self._tag = ""
        self._writing = 0.0

    def _encode(self) -> bytes:
        self._writing = time.monotonic()
        self._me.beat = time.time()
        return msgspec.json.encode(self._me)

    def _took(self, body: bytes) -> None:
        self.held, self._body = True, body
        _HELD.add(self._me.owner)
        self.renewed = self._writing
        info = self.store.info(self.name)
        self._tag = info.tag if info is not None else ""

    def acquire(self) -> None:
        """Take the lock, or raise `JournalInUseError` saying who holds it."""
        body = self._encode()
        if create(self.store, self.name, body):
            self._took(body)
            return
        info = self.store.info(self.name)
        try:
            current = self.store.get(self.name)
        except FileNotFoundError:  # released meanwhile: try once more
            if create(self.store, self.name, body):
                self._took(body)
                return
            raise self._in_use("another run took it a moment ago") from None
        holder = _decode(current)
        if holder is not None and holder.owner == self._me.owner:
            self._took(current)
            return
        if holder is not None and not self._stale(holder):
            raise self._in_use(_describe(holder), holder.lease)
        tag = info.tag if info is not None else ""
        if not swap(self.store, self.name, body, current, tag):
            raise self._in_use("another run took over its stale lock a moment ago")
        self._took(body)

    def _stale(self, holder: _Holder) -> bool:
        lease = holder.lease if holder.lease > 0 else self.stale_after
        return time.time() - holder.beat > lease or _gone(holder)

    def _in_use(self, who: str, lease: float = 0.0) -> JournalInUseError:
        return JournalInUseError(
            f"{self.store.url_of(self.journal)} is being continued by {who}. Wait for that "
            "run to finish or stop it, then resume; two runs continuing one journal would "
            f"overwrite each other's log. (A run that died leaves its lock: it is taken "
            f"over once its heartbeat is {lease or self.stale_after:g} s old.)",
            path=self.store.url_of(self.journal),
        )

    def beat(self, *, again: bool = True) -> None:
        """Say the holder is alive; raise `JournalInUseError` if another run took over."""
        if not self.held:
            return
        body = self._encode()
        if swap(self.store, self.name, body, self._body, self._tag):
            self._took(body)
            return
        try:  # a beat of ours may have landed while we heard no answer: is it still ours?
            current = self.store.get(self.name)
        except FileNotFoundError:
            current = b""
        holder = _decode(current)
        if again and holder is not None and holder.owner == self._me.owner:
            self._writing = time.monotonic() - max(0.0, time.time() - holder.beat)
            self._took(current)
            self.beat(again=False)
            return
        self.held = False
        _HELD.discard(self._me.owner)
        now = f"it is held by {_describe(holder)}" if holder is not None else "that run is over"
        raise JournalInUseError(
            f"{self.store.url_of(self.journal)} was taken over by another run while this "
            f"one could not renew its lock ({now}). This run stopped; the other one "
            "continues the journal, and its final log is the one that goes in the store.",
            path=self.store.url_of(self.journal),
        )

    def release(self) -> None:
        """Remove the lock if this run holds it (a store that fails is not an error here:
        the lock goes stale)."""
        if not self.held:
            return
        self.held = False
        _HELD.discard(self._me.owner)
        with contextlib.suppress(StoreError, OSError):
            self.store.remove([self.name])


def _decode(data: bytes) -> _Holder | None:
    try:
        return msgspec.json.decode(data, type=_Holder)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _describe(holder: _Holder) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started))
    ago = max(0.0, time.time() - holder.beat)
    what = f" ({holder.command})" if holder.command else ""
    return (
        f"process {holder.pid} on {holder.host}, running since {started}{what}, "
        f"last heard from {ago:.0f} s ago"
    )
