"""Who writes a journal: one process at a time, and the others can tell which.

A run holds an exclusive lock on `.<journal name>.lock` (hidden, beside it)
from the moment it opens its journal until its final log is in place. The
lock file says who holds it (pid, host, start time, command); the lock itself
is the operating system's (`flock` on POSIX, `msvcrt.locking` on Windows), so
a process that dies, even by `kill -9`, releases it, and a lock file left
behind by a dead run means nothing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

import msgspec

from .._errors import JournalInUseError

__all__ = ["JournalLock", "lock_path"]


class _Holder(msgspec.Struct):
    pid: int
    host: str = ""
    started: float = 0.0
    command: str = ""


def lock_path(journal: Path) -> Path:
    """The lock file of `journal`: `.<name>.journal.lock` beside it."""
    return journal.with_name(f".{journal.name}.lock")


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    #: The holder's note starts past the locked byte, where others can read it.
    _NOTE_AT = 1
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    _NOTE_AT = 0


def _describe(note: bytes) -> str:
    try:
        holder = msgspec.json.decode(note.strip(b"\0 \n"), type=_Holder)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "another process (it left no note of its pid)"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started))
    where = f" on {holder.host}" if holder.host else ""
    what = f" ({holder.command})" if holder.command else ""
    return f"process {holder.pid}{where}, running since {started}{what}"


class JournalLock:
    """The exclusive lock on one journal, taken by the run that writes it.

    Example:
        >>> lock = JournalLock(Path("logs/run.journal"))
        >>> lock.acquire()            # raises JournalInUseError naming the holder
        >>> ...                       # write the journal
        >>> lock.release()
    """

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.path = lock_path(journal)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or raise `JournalInUseError` saying which process holds it."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            if not _try_lock(fd):
                os.lseek(fd, _NOTE_AT, os.SEEK_SET)
                note = os.read(fd, 4096)
                os.close(fd)
                raise JournalInUseError(
                    f"{self.journal} is being written by {_describe(note)}. Wait for that "
                    "run to finish or stop it, then resume; two runs writing one journal "
                    "would overwrite each other's log.",
                    path=str(self.journal),
                )
            if self._still_named(fd):
                break
            os.close(fd)  # the holder finished and removed the file we locked: again
        note = msgspec.json.encode(
            _Holder(os.getpid(), socket.gethostname(), time.time(), " ".join(sys.argv)[:300])
        )
        os.ftruncate(fd, _NOTE_AT)
        os.lseek(fd, _NOTE_AT, os.SEEK_SET)
        os.write(fd, note + b"\n")
        self._fd = fd

    def _still_named(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False

    def release(self) -> None:
        """Remove the lock file and let go (a no-op when not held)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # the lock goes with the descriptor anyway
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None
