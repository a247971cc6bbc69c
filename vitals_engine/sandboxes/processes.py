"""Running one command as a host process for a sandbox (bwrap's and local's exec): its
input fed, each output stream kept up to a limit and drained past it (so the command
never blocks on a full pipe), a timeout that kills it, and a cancelled caller that kills
it too. The process starts in a session of its own; `kill` (the kind's) ends it and what
it started, and the exec returns only once the process is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

from .base import Capped

__all__ = ["DRAIN_GRACE", "Finished", "kill_group", "run_process"]

#: Seconds to read what is left in the pipes once the command has ended (a process that
#: escaped its group may hold them open; they are closed after that).
DRAIN_GRACE = 2.0


@dataclass
class Finished:
    """How a process ended, and what it wrote."""

    returncode: int
    stdout: Capped
    stderr: Capped
    timed_out: bool
    seconds: float


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _drain(
    stream: anyio.abc.ByteReceiveStream | None, into: Capped, done: anyio.Event
) -> None:
    try:
        if stream is not None:
            async for chunk in stream:
                into.feed(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        done.set()


async def _feed(stream: anyio.abc.ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        if data:
            await stream.send(data)
        await stream.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, BrokenPipeError):
        pass


async def _stop(process: anyio.abc.Process, kill: Callable[[anyio.abc.Process], None]) -> None:
    kill(process)
    await process.wait()


async def run_process(
    argv: Sequence[str],
    *,
    input: bytes | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    time_limit: float | None,
    limit: int,
    kill: Callable[[anyio.abc.Process], None],
    pass_fds: Sequence[int] = (),
) -> Finished:
    """Run `argv` to its end (or for `time_limit` seconds, when `kill` ends it), keeping
    `limit` bytes of each output stream. `kill` also runs after a normal end, for what the
    command left in the background, and when the caller is cancelled (shielded: the
    process is gone when the cancellation goes on).

    Example:
        >>> done = await run_process(["echo", "hi"], input=None, cwd=None, env=None,
        ...                          time_limit=5, limit=1024, kill=lambda p: kill_group(p.pid))
        >>> done.returncode, done.stdout.text()
        (0, 'hi\\n')
    """
    started = time.perf_counter()
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    out, err = Capped(limit), Capped(limit)
    timed_out = False
    try:
        async with anyio.create_task_group() as group:
            drained = (anyio.Event(), anyio.Event())
            group.start_soon(_drain, process.stdout, out, drained[0])
            group.start_soon(_drain, process.stderr, err, drained[1])
            if input is not None:
                group.start_soon(_feed, process.stdin, input)
            with anyio.move_on_after(time_limit):
                await process.wait()
            timed_out = process.returncode is None
            await _stop(process, kill)
            with anyio.move_on_after(DRAIN_GRACE):
                for event in drained:
                    await event.wait()
            group.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            with anyio.CancelScope(shield=True):
                await _stop(process, kill)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    returncode = process.returncode
    return Finished(
        returncode=-1 if timed_out or returncode is None or returncode < 0 else returncode,
        stdout=out,
        stderr=err,
        timed_out=timed_out,
        seconds=time.perf_counter() - started,
    )
