"""The run options on the command line, made from the table of run options.

`add_run_flags(parser, command)` adds the flags of every run option the command takes
(`vitals eval`: those of `eval()`; `vitals score`: those of `score()`), as the table
spells them (`engine/option_table.py`); `run_options(args, command)` reads the options
back from the parsed flags, None for those not given. An old spelling (`--max-cost`)
is kept, hidden from the help, and warns when used.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .._errors import ConfigError
from ..distributed.backend import Ray
from ..engine.option_table import COMMANDS, OPTIONS, Flag, Option
from .shared import say

__all__ = ["add_run_flags", "run_options"]


def _backend(args: argparse.Namespace) -> Ray | None:
    """`--ray [ADDRESS]` and `--workers N` as the run's backend (None: this process)."""
    address = getattr(args, "ray", None)
    workers = getattr(args, "workers", None)
    if address is None:
        if workers is not None:
            raise ConfigError("--workers is the number of Ray workers: give --ray with it.")
        return None
    return Ray(address=None if address == "local" else address, workers=workers)


#: The options the command line reads itself (the engine knows no backend by name).
_READERS: dict[str, Callable[[argparse.Namespace], Any]] = {"backend": _backend}


def _taken(command: str) -> list[Option]:
    call = COMMANDS[command]
    return [option for option in OPTIONS if call in option.calls and option.flags]


def add_run_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """Add to `parser` the flags of the run options `command` takes.

    Example:
        >>> add_run_flags(score_parser, "score")   # --max-concurrency, --rpm, --no-progress
    """
    for option in _taken(command):
        for flag in option.flags:
            arguments = dict(flag.arguments)
            if flag.deprecated:
                arguments["help"] = argparse.SUPPRESS
            parser.add_argument(flag.spelling, **arguments)


def run_options(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The run options `command` takes, as its flags in `args` give them (None: not
    given). An old spelling used says which flag replaces it.

    Example:
        >>> run_options(parser.parse_args(["score", "run.json", "--rpm", "60"]), "score")
        {'max_concurrency': None, 'rate_limits': RateLimits(rpm=60.0, ...), 'progress': None}
    """
    found: dict[str, Any] = {}
    for option in _taken(command):
        _warn_old_spellings(args, option.flags)
        read = _READERS.get(option.name) or option.from_flags
        assert read is not None, f"the run option {option.name} has flags and no reader"
        found[option.name] = read(args)
    return found


def _warn_old_spellings(args: argparse.Namespace, flags: tuple[Flag, ...]) -> None:
    current = next((flag.spelling for flag in flags if not flag.deprecated), None)
    for flag in flags:
        if flag.deprecated and getattr(args, flag.dest, None) is not None:
            say(
                f"warning: {flag.spelling} is deprecated and will be removed in the next "
                f"release: use {current}."
            )
