"""Runs in child processes that a test can kill with SIGKILL, started in milliseconds.

A child is forked from a fork server that has imported the engine once (a fresh Python
with the engine takes over half a second to start; a test killing ten runs would spend
its time there). It runs a module-level function of a test module, so that function must
be importable by name; it gets plain arguments (paths, strings, numbers).

Example:
    >>> child = start(run_task, str(tmp_path))
    >>> time.sleep(0.2)
    >>> kill(child)        # SIGKILL, then waits for it
    -9
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pkgutil
import signal
from collections.abc import Callable
from typing import Any

__all__ = ["die", "finish", "kill", "start"]

#: Imported once by the fork server (this module, which imports them when imported), so a
#: child's run starts at once: a first run in a fresh process spends a second importing.
WARM = (
    "pytest",
    "polars",
    "uvloop",
    "sqlite3",
    "zoneinfo",
    "anyio._backends._asyncio",
    "tests.helpers",
)


def _warm() -> None:
    for name in WARM:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    package = importlib.import_module("vitals_engine")
    for module in pkgutil.walk_packages(package.__path__, "vitals_engine."):
        if module.name.endswith("__main__"):
            continue
        with contextlib.suppress(Exception):  # an optional extra that is not installed
            importlib.import_module(module.name)


_warm()
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["tests.children"])


def start(target: Callable[..., Any], *args: Any) -> multiprocessing.process.BaseProcess:
    """`target(*args)` in a child process of its own, started now."""
    child = _CONTEXT.Process(target=target, args=args, daemon=True)
    child.start()
    return child


def kill(child: multiprocessing.process.BaseProcess) -> int | None:
    """SIGKILL `child` (if it is still running) and wait for it; its exit code."""
    if child.pid is not None and child.exitcode is None:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(child.pid, signal.SIGKILL)
    child.join(60)
    return child.exitcode


def finish(child: multiprocessing.process.BaseProcess, timeout: float = 60.0) -> int | None:
    """Wait for `child` to end by itself (killed if it has not after `timeout` seconds)."""
    child.join(timeout)
    if child.exitcode is None:
        kill(child)
        raise AssertionError(f"the child process did not end in {timeout:g} s")
    return child.exitcode


def die() -> None:
    """In a child: end this process now, as `kill -9` does (nothing is cleaned up)."""
    os.kill(os.getpid(), signal.SIGKILL)
