"""Running one command as a host process for a sandbox (bwrap's and local's exec): its
input fed, each output stream kept up to a limit and drained past it (so the command
never blocks on a full pipe), a timeout that kills it, and a cancelled caller that kills
it too. The process starts in a session of its own; `kill` (the kind's) ends it and what
it started, and the exec returns only once the process is gone.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

from .base import Capped
from .host_process import open_host_process

__all__ = ["DRAIN_GRACE", "Finished", "end_group", "end_marked", "kill_group", "run_process"]

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


def kill_group(pid: int) -> bool:
    """SIGKILL the process group `pid` leads; whether there was one."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` is alive, not a zombie (Linux; elsewhere: False)."""
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return False
    for entry in entries:
        if not entry.name.isdecimal():
            continue
        try:
            with open(f"{entry.path}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


async def end_group(process: anyio.abc.Process) -> None:
    """Kill the process group `process` leads, and wait until none of it is alive (a killed
    process's children die a moment after it)."""
    if kill_group(process.pid):
        with anyio.move_on_after(10):
            while await anyio.to_thread.run_sync(_group_alive, process.pid):  # noqa: ASYNC110
                await anyio.sleep(0.005)  # no event tells when another's child has died


def _marked(needle: bytes) -> list[int]:
    """The processes whose environment holds `needle` (Linux; elsewhere none)."""
    found = []
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return found
    for entry in entries:
        if entry.name.isdecimal():
            try:
                with open(f"{entry.path}/environ", "rb") as file:
                    if needle in file.read():
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


async def end_marked(variable: str) -> None:
    """SIGKILL every process whose environment holds `variable` ("NAME=value"), until none
    is left (what a killed run's local sandbox still ran)."""
    needle = b"\0" + variable.encode() + b"\0"
    with anyio.move_on_after(10):
        while pids := await anyio.to_thread.run_sync(_marked, needle):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    continue
            await anyio.sleep(0.005)


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


async def _stop(
    process: anyio.abc.Process, kill: Callable[[anyio.abc.Process], Awaitable[None]]
) -> None:
    await kill(process)
    await process.wait()


async def _open(
    argv: Sequence[str],
    stdin: bool,
    cwd: str | None,
    env: Mapping[str, str] | None,
    pass_fds: Sequence[int],
) -> anyio.abc.Process:
    """Start the process (not cancellable: a process started is one the caller then ends)."""
    return await open_host_process(argv, stdin=stdin, cwd=cwd, env=env, pass_fds=pass_fds)


async def run_process(
    argv: Sequence[str],
    *,
    input: bytes | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    time_limit: float | None,
    limit: int,
    kill: Callable[[anyio.abc.Process], Awaitable[None]],
    pass_fds: Sequence[int] = (),
) -> Finished:
    """Run `argv` to its end (or for `time_limit` seconds, when `kill` ends it), keeping
    `limit` bytes of each output stream. `kill` also runs after a normal end, for what the
    command left in the background, and when the caller is cancelled (shielded: the
    process is gone when the cancellation goes on).

    Example:
        >>> done = await run_process(["echo", "hi"], input=None, cwd=None, env=None,
        ...                          time_limit=5, limit=1024, kill=end_group)
        >>> done.returncode, done.stdout.text()
        (0, 'hi\\n')
    """
    started = time.perf_counter()
    process = await _open(argv, input is not None, cwd, env, pass_fds)
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
