"""A host process for a sandbox's command, started without a child watcher: on Linux the
process is `subprocess.Popen` (vfork and exec, on the event loop) watched through a
pidfd, and its pipes are read and written when the event loop says they are ready.

Why not `anyio.open_process`: on asyncio it starts a thread per process to wait for it
and wraps each pipe in a transport; with a hundred agents each running commands, that
cost more CPU than the rest of an agent's step (`bench/agents.py`: 2.1 ms of CPU per step
against 0.9 ms this way). Elsewhere (no `os.pidfd_open`) `open_host_process` is
`anyio.open_process`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

import anyio
import anyio.abc

__all__ = ["open_host_process"]

_READ = 65536


async def open_host_process(
    argv: Sequence[str],
    *,
    stdin: bool,
    cwd: str | None,
    env: Mapping[str, str] | None,
    pass_fds: Sequence[int],
) -> anyio.abc.Process:
    """Start `argv` in a session of its own, its output piped (and its input, with
    `stdin`; else /dev/null). Not cancellable: a process started is the caller's to end.

    Example:
        >>> process = await open_host_process(["echo", "hi"], stdin=False, cwd=None,
        ...                                   env=None, pass_fds=())
        >>> await process.stdout.receive(), await process.wait()
        (b'hi\\n', 0)
    """
    if not hasattr(os, "pidfd_open"):
        with anyio.CancelScope(shield=True):
            return await anyio.open_process(
                list(argv),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                pass_fds=pass_fds,
            )
    popen = subprocess.Popen(  # noqa: ASYNC220 - a vfork and exec: no wait for the process
        list(argv),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    return PidfdProcess(popen)


class PidfdProcess(anyio.abc.Process):
    """A `subprocess.Popen` as anyio's `Process`: its end awaited through a pidfd, its
    pipes non-blocking and awaited through the event loop."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._pidfd: int | None = os.pidfd_open(popen.pid)
        self._stdin = _PipeWriter(popen.stdin) if popen.stdin is not None else None
        self._stdout = _PipeReader(popen.stdout) if popen.stdout is not None else None
        self._stderr = _PipeReader(popen.stderr) if popen.stderr is not None else None

    async def wait(self) -> int:
        while self._popen.poll() is None:
            assert self._pidfd is not None
            await anyio.wait_readable(self._pidfd)
        return self._popen.returncode

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream | None:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stdout

    @property
    def stderr(self) -> anyio.abc.ByteReceiveStream | None:
        return self._stderr

    async def aclose(self) -> None:
        """Close the pipes; wait for the process to end (shielded), then its pidfd."""
        for stream in (self._stdin, self._stdout, self._stderr):
            if stream is not None:
                await stream.aclose()
        with anyio.CancelScope(shield=True):
            await self.wait()
        if self._pidfd is not None:
            _close(self._pidfd)
            self._pidfd = None


class _PipeReader(anyio.abc.ByteReceiveStream):
    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._fd: int | None = file.fileno()
        os.set_blocking(self._fd, False)

    async def receive(self, max_bytes: int = _READ) -> bytes:
        while True:
            fd = self._fd
            if fd is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if self._fd is not None:
            self._fd = None
            _close_file(self._file)


class _PipeWriter(anyio.abc.ByteSendStream):
    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._fd: int | None = file.fileno()
        os.set_blocking(self._fd, False)

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            fd = self._fd
            if fd is None:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(fd)
            except BrokenPipeError as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if self._fd is not None:
            self._fd = None
            _close_file(self._file)


def _close_file(file: IO[bytes]) -> None:
    """Close a pipe's file, first waking any task waiting on it (it then sees it closed)."""
    with contextlib.suppress(OSError, ValueError):
        anyio.notify_closing(file.fileno())
    with contextlib.suppress(OSError):
        file.close()


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        anyio.notify_closing(fd)
    with contextlib.suppress(OSError):
        os.close(fd)
