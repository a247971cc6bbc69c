"""What the `vitals` commands share: exit codes, their two errors, one-line messages on
stderr, the default log directory and the lazily imported viewer."""

from __future__ import annotations

import importlib
import os
import select
import sys
import traceback
from pathlib import Path
from typing import Any

from .. import config

__all__ = [
    "EXIT_BELOW_THRESHOLD",
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "RunError",
    "UsageError",
    "default_dir",
    "default_place",
    "import_viewer",
    "quiet_stdout",
    "report",
    "say",
    "stdout_closed",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BELOW_THRESHOLD = 3  # `vitals eval --fail-under`: a metric below its threshold
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a command its pipe ended


class UsageError(Exception):
    """A mistake in how the command was called: exit code 2."""


class RunError(Exception):
    """A failure while running user code (importing the task file, building a task): exit 1."""


def say(message: str) -> None:
    """Print `message` on stderr, on one line."""
    print(" ".join(message.split()) if "\n" in message else message, file=sys.stderr)


def report(
    exc: BaseException, debug: bool, prefix: str, cause: BaseException | None = None
) -> None:
    """Say `prefix` and `exc`; with `debug`, the traceback of `cause` (else `exc`) first."""
    if debug:
        shown = cause or exc
        traceback.print_exception(type(shown), shown, shown.__traceback__, file=sys.stderr)
    say(prefix + str(exc))


def stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader went away (so a BrokenPipeError came
    from our output, not from a connection of the code we ran)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
    except (AttributeError, ValueError, OSError):  # no poll() (Windows): assume it was
        return True
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def quiet_stdout() -> None:
    """Point stdout at the null device: its reader went, and what is still buffered must not
    raise again when Python flushes it at exit (the recipe of Python's `signal` docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, ValueError, OSError):
        pass


def default_dir(given: str | None) -> Path:
    """`given`, else VITALS_LOG_DIR, else ./logs."""
    return Path(given or config.log_dir() or config.DEFAULT_LOG_DIR)


def default_place(given: str | None) -> str:
    """`given`, else VITALS_LOG_DIR, else ./logs: a path or an object store's URL, as
    written (a `Path` would fold the `//` of a URL)."""
    return given or config.log_dir() or config.DEFAULT_LOG_DIR


def import_viewer(module: str) -> Any:
    """`vitals_engine.viewer.<module>`, imported only when a command needs it."""
    try:
        return importlib.import_module(f"vitals_engine.viewer.{module}")
    except ImportError as exc:
        raise RunError(f"the log viewer is not available: {exc}") from exc
