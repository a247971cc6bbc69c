"""Run the async API from synchronous code: scripts, notebooks, worker threads."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread

T = TypeVar("T")

_USE_UVLOOP = importlib.util.find_spec("uvloop") is not None


def loop_running_here() -> bool:
    """True when called from inside a running asyncio or trio event loop."""
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
            return True
        except RuntimeError:
            pass
    return False


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
    try:
        return anyio.from_thread.run(fn, *args)  # type: ignore[arg-type]
    except anyio.NoEventLoopError:
        pass
    options = {"use_uvloop": True} if _USE_UVLOOP else {}
    if loop_running_here():
        with anyio.from_thread.start_blocking_portal("asyncio", options) as portal:
            return portal.call(fn, *args)  # type: ignore[arg-type]
    return anyio.run(fn, *args, backend="asyncio", backend_options=options)  # type: ignore[arg-type]
