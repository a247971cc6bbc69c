"""Run the async API from synchronous code: scripts, notebooks, worker threads; and
carry a KeyboardInterrupt or SystemExit out of a task that is not the caller's own.

On asyncio, a task that lets a KeyboardInterrupt or SystemExit escape does not
hand it to its task group: `Task.__step` re-raises it out of the event loop at
once. `asyncio.Runner` then cancels the tasks left; the run's own task, having
written the log, raises the interrupt again inside that clean-up, so the runner
closes the loop before the callbacks that stop anyio's worker threads have run,
and the process hangs at exit waiting for those threads.

So where user code (a solver, a scorer, a tool, a sync call back into the loop)
may raise one inside a child task, `carry()` turns it into `Interrupted`, an
ordinary exception that cancels the task group like any other error; the task
or thread that owns the group raises the original as itself (`raise_carried()`).
Trio needs none of this, but takes the same path.

`asyncio_named()` tells anyio, for the duration, that the running loop is
asyncio, when a loop anyio did not start runs our engine (a Ray actor's, or a
user's own service): anyio otherwise works it out again on each call, through
`asyncio.current_task()`, which costs a `getpid` system call every time.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import anyio.from_thread

__all__ = [
    "INTERRUPTS",
    "Interrupted",
    "asyncio_named",
    "carry",
    "loop_running_here",
    "on_asyncio",
    "raise_carried",
    "run_sync",
]

T = TypeVar("T")

INTERRUPTS = (KeyboardInterrupt, SystemExit)

_USE_UVLOOP = importlib.util.find_spec("uvloop") is not None


def loop_running_here() -> bool:
    """True when called from inside a running asyncio or trio event loop."""
    if on_asyncio():
        return True
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
            return True
        except RuntimeError:
            pass
    return False


@contextlib.contextmanager
def asyncio_named() -> Iterator[None]:
    """Name the running loop "asyncio" for anyio (through sniffio), in this task and the
    tasks it starts, unless it is named already or is not asyncio."""
    sniffio = sys.modules.get("sniffio")
    if (
        sniffio is None
        or sniffio.thread_local.name is not None
        or sniffio.current_async_library_cvar.get() is not None
        or not on_asyncio()
    ):
        yield
        return
    token = sniffio.current_async_library_cvar.set("asyncio")
    try:
        yield
    finally:
        sniffio.current_async_library_cvar.reset(token)


def on_asyncio() -> bool:
    """True when called from inside a running asyncio event loop (uvloop's included)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run `fn(*args)` to completion and return its result, from any thread.

    - In a worker thread that anyio started (a sync solver inside a run), the
      call goes back to the run's own event loop, so it shares the run's
      connection pools, limits and usage ledger.
    - Where an event loop already runs in this thread (a notebook), it runs
      on a fresh loop in a worker thread and blocks until done.
    - Otherwise it starts an event loop with `anyio.run` (asyncio, with uvloop
      when installed).
    """
    # A KeyboardInterrupt or SystemExit must not end the loop's task (see the module
    # docstring): it is raised here, in the calling thread, instead.
    try:
        return anyio.from_thread.run(carry, fn, *args)
    except anyio.NoEventLoopError:
        pass
    except Interrupted as exc:
        raise exc.interrupt from None
    options = {"use_uvloop": True} if _USE_UVLOOP else {}
    if loop_running_here():
        with anyio.from_thread.start_blocking_portal("asyncio", options) as portal:
            try:
                return portal.call(carry, fn, *args)
            except Interrupted as exc:
                raise exc.interrupt from None
    return anyio.run(fn, *args, backend="asyncio", backend_options=options)  # type: ignore[arg-type]


class Interrupted(Exception):
    """A KeyboardInterrupt or SystemExit on its way out of a child task; never leaves
    the library."""

    def __init__(self, interrupt: BaseException) -> None:
        super().__init__(f"{type(interrupt).__name__} in a child task")
        self.interrupt = interrupt


async def carry(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`await fn(*args)`, with a KeyboardInterrupt or SystemExit raised as `Interrupted`."""
    try:
        return await fn(*args)
    except INTERRUPTS as exc:
        raise Interrupted(exc) from None


def _interrupt_in(exc: BaseException) -> BaseException | None:
    """The KeyboardInterrupt or SystemExit that `exc` carries, at any depth of
    exception groups, or None."""
    if isinstance(exc, Interrupted):
        return exc.interrupt
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _interrupt_in(inner)
            if found is not None:
                return found
    return None


def raise_carried(exc: BaseException) -> None:
    """Raise the KeyboardInterrupt or SystemExit that `exc` carries, if any, as itself."""
    interrupt = _interrupt_in(exc)
    if interrupt is not None:
        raise interrupt from None
