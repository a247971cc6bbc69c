"""The table of run options: each declared once, here, and everything else made from it.

An `Option` says what a run option is called, the type users pass and the type a run
reads, its default, its check, its documentation, which calls take it (`eval()` and its
kin, `solve()`, `score()`), what `estimate_cost()` does with it, and how the command
line spells it (its `Flag`s, on `vitals eval` and `vitals score`). From `OPTIONS`:

- `engine/option_types.py` is written (`python -m vitals_engine.engine.option_render`,
  or `make options`): `EvalOptions`, `SolveOptions` and `ScoreOptions` (the keywords
  users pass, typed and documented), and `RunOptionFields` (what a run reads, its
  defaults); a test fails when the file is not what the table makes;
- `RunOptions.check` (`engine/options.py`) runs each option's check;
- `cli/run_flags.py` adds each option's flags to the commands that take it and reads
  the option's value back from them;
- `estimate_cost()` refuses the options it cannot honour, and runs with the others.

A new option is one entry here (and its value in `tests/test_run_options.py`'s
`every_option()`), then `make options`.

`backend=` is a `Backend`: where a run's samples go when not in this process. The
engine knows only that there may be such a place; `ve.Ray` (`distributed/backend.py`)
is the one there is.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import ConfigError
from ..caching.options import Cache, cache_option
from ..pacing.batch_mode import batch_option
from ..pacing.budget import check_budget
from ..pacing.limits import RateLimits
from ..pacing.retry import Retry

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEPRECATED",
    "OPTIONS",
    "Backend",
    "Flag",
    "Option",
    "check_epochs",
]

#: Samples in flight at once when eval(max_concurrency=) is not given.
DEFAULT_CONCURRENCY = 32

#: The calls that take run options: `eval()` (and `eval_async()`, `stream_async()`,
#: `ve.eval_set()`), `solve()` and `score()` (and their async forms).
Call = Literal["eval", "solve", "score"]
#: What `estimate_cost()` does with an option: runs its sample with it, or refuses it
#: (it means nothing for a sample run into a temporary log), or takes it as its own.
Estimate = Literal["runs", "refused", "own"]

EVAL: frozenset[Call] = frozenset({"eval"})
SOLVE: frozenset[Call] = frozenset({"eval", "solve"})
EVERY: frozenset[Call] = frozenset({"eval", "solve", "score"})


class Backend:
    """Where a run's samples go instead of this process: `ve.Ray(...)`."""

    __slots__ = ()


# -- the command line's readings of a flag -------------------------------------------------


def positive_int(text: str) -> int:
    """A flag's whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def positive_number(text: str) -> float:
    """A flag's positive finite number."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def fail_on_error_flag(text: str) -> bool | int | float:
    """`--fail-on-error`: "true"/"false", a count ("5") or a fraction below 1 ("0.1")."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes"):
        return True
    if lowered in ("false", "no"):
        return False
    with contextlib.suppress(ValueError):
        count = int(lowered)
        if count >= 0:
            return count
    with contextlib.suppress(ValueError):
        fraction = float(lowered)
        if 0 <= fraction < 1:
            return fraction
    raise argparse.ArgumentTypeError(
        f"must be true (no failed sample allowed), false (any number), a count such as 5 "
        f"or a fraction below 1 such as 0.1, not {text!r}"
    )


@dataclass(frozen=True, slots=True)
class Flag:
    """One command-line flag of an option: its `argparse` arguments (`spelling`, and the
    keywords of `add_argument`), and whether it is an old spelling, kept for a release
    (`deprecated`: its help says so, and using it warns)."""

    spelling: str
    arguments: dict[str, Any] = field(default_factory=dict)
    deprecated: bool = False

    @property
    def dest(self) -> str:
        """Where argparse keeps its value."""
        return self.arguments.get("dest") or self.spelling.lstrip("-").replace("-", "_")


@dataclass(frozen=True, slots=True)
class Option:
    """One run option (see the module docstring).

    Attributes:
        name: its keyword.
        given: the type users pass (source text, for the typed keywords).
        kept: the type a run reads, once checked (source text).
        default: the value a run reads when it is not given (source text).
        doc: what it does, for the typed keywords' documentation.
        check: the value given (None when not given) to the value a run reads; a
            `ConfigError` says what is wrong.
        calls: the calls that take it.
        estimate: what `estimate_cost()` does with it.
        flags: how `vitals eval` spells it (and `vitals score`, for one `score()`
            takes).
        from_flags: the option's value from the parsed flags (None: not given); None
            when the command line reads it itself (`backend`: a `ve.Ray`).
    """

    name: str
    given: str
    kept: str
    default: str
    doc: str
    check: Callable[[Any], Any]
    calls: frozenset[Call] = EVAL
    estimate: Estimate = "runs"
    flags: tuple[Flag, ...] = ()
    from_flags: Callable[[argparse.Namespace], Any] | None = None


# -- the checks ----------------------------------------------------------------------------


def check_epochs(epochs: Any) -> int | None:
    """`epochs`, checked: a whole number of at least 1 (None: the task's own)."""
    if epochs is None:
        return None
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ConfigError(f"`epochs` must be a whole number of at least 1, not {epochs!r}.")
    return epochs


def _check_concurrency(value: Any) -> int:
    if value is None:
        return DEFAULT_CONCURRENCY
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"`max_concurrency` must be a whole number of at least 1, not {value!r}.")
    return value


def _check_fail_on_error(value: Any) -> bool | int | float | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and 0 <= value < 1:
        return value
    raise ConfigError(
        f"`fail_on_error` must be None or True (no failed sample allowed), False (any number), "
        f"a count (e.g. 5) or a fraction below 1 (e.g. 0.05), not {value!r}."
    )


def _instance_of(kind: type, spelled: str, name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"`{name}` must be {spelled}, not {type(value).__name__}.")
        return value

    return check


def _check_progress(value: Any) -> bool:
    return sys.stderr.isatty() if value is None else bool(value)


def _check_log_format(value: Any) -> str | None:
    if value not in (None, "json", "eval"):
        raise ConfigError(f"`log_format` must be 'json' or 'eval', not {value!r}.")
    return value


def _check_limit(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"`limit` must be a whole number of at least 1, not {value!r}.")
    return value


def _check_sample_ids(ids: Any) -> tuple[int | str, ...] | None:
    if ids is None:
        return None
    if isinstance(ids, int | str):
        ids = [ids]
    if not isinstance(ids, Sequence) or not ids:
        raise ConfigError(f"`sample_ids` must be a non-empty list of ids, not {ids!r}.")
    wrong = [i for i in ids if isinstance(i, bool) or not isinstance(i, int | str)]
    if wrong:
        raise ConfigError(f"`sample_ids` holds {wrong[0]!r}: an id is an int or a str.")
    return tuple(ids)


def _check_seed(seed: Any) -> int | None:
    """A seed (one is drawn for a shuffle without one: `RunOptions.check`)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"`seed` must be a whole number, not {seed!r}.")
    return seed


def drawn_seed() -> int:
    """A seed for a shuffle given none (so the log can say which order it was)."""
    return random.SystemRandom().randrange(2**31)


def _sample_limit(name: str) -> Callable[[Any], Any]:
    whole = name in ("message_limit", "token_limit")

    def check(value: Any) -> Any:
        if value is None:
            return None
        kind = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kind) or not 0 < value < math.inf:
            what = "a whole number" if whole else "a number"
            raise ConfigError(f"`{name}` must be {what} above 0, not {value!r}.")
        return value if whole else float(value)

    return check


def _check_max_sandboxes(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"`max_sandboxes` must be a whole number of at least 1, not {value!r}.")
    return value


def _budget(name: str) -> Callable[[Any], Any]:
    return lambda value: check_budget(value, name)


# -- the command line's values -------------------------------------------------------------


def _rpm(args: argparse.Namespace) -> RateLimits | None:
    rpm = getattr(args, "rpm", None)
    return RateLimits(rpm=rpm) if rpm is not None else None


def _cache_flag(args: argparse.Namespace) -> Cache | None:
    """`--cache` (the default store) or `--cache DIR`."""
    given = getattr(args, "cache", None)
    if given is None or given is False:
        return None
    return Cache() if given is True else Cache(dir=given)


def _first_given(*dests: str) -> Callable[[argparse.Namespace], Any]:
    """The value of the first of `dests` given (an option's flag, then its old one)."""

    def value(args: argparse.Namespace) -> Any:
        for dest in dests:
            found = getattr(args, dest, None)
            if found is not None:
                return found
        return None

    return value


def _plain(dest: str) -> Callable[[argparse.Namespace], Any]:
    return lambda args: getattr(args, dest, None)


def _switch(dest: str, value: Any) -> Callable[[argparse.Namespace], Any]:
    return lambda args: value if getattr(args, dest, False) else None


_RPM = Flag(
    "--rpm",
    {"type": positive_number, "metavar": "N", "help": "requests per minute for every model"},
)
_NO_PROGRESS = Flag("--no-progress", {"action": "store_true", "help": "draw no progress bar"})
_NOT_ON_RAY = "; not with backend=ve.Ray() yet"

# -- the table -----------------------------------------------------------------------------

OPTIONS: tuple[Option, ...] = (
    Option(
        "epochs",
        given="int | None",
        kept="int | None",
        default="None",
        doc="runs per sample (default: `Task(epochs=)`, else 1).",
        check=check_epochs,
        calls=SOLVE,
        estimate="own",
        flags=(
            Flag("--epochs", {"type": positive_int, "metavar": "N", "help": "runs per sample"}),
        ),
        from_flags=_plain("epochs"),
    ),
    Option(
        "max_concurrency",
        given="int | None",
        kept="int",
        default="DEFAULT_CONCURRENCY",
        doc="samples in flight at once (default 32).",
        check=_check_concurrency,
        calls=EVERY,
        flags=(
            Flag(
                "--max-concurrency",
                {"type": positive_int, "metavar": "N", "help": "samples in flight at once"},
            ),
        ),
        from_flags=_plain("max_concurrency"),
    ),
    Option(
        "rate_limits",
        given="RateLimits | None",
        kept="RateLimits | None",
        default="None",
        doc="`RateLimits(max_concurrency=, rpm=, tpm=)` for every model of the run (a "
        "model's own `rate_limits=` wins).",
        check=_instance_of(RateLimits, "a ve.RateLimits(...)", "rate_limits"),
        calls=EVERY,
        flags=(_RPM,),
        from_flags=_rpm,
    ),
    Option(
        "retry",
        given="Retry | None",
        kept="Retry | None",
        default="None",
        doc="`Retry(max_attempts=, timeout=, sample_timeout=)` for every model call of the "
        "run (a model's own `retry=` wins).",
        check=_instance_of(Retry, "a ve.Retry(...)", "retry"),
        calls=EVERY,
    ),
    Option(
        "fail_on_error",
        given="bool | int | float | None",
        kept="bool | int | float | None",
        default="None",
        doc="failed samples tolerated before the run fails: None/True none, False any, a "
        "count, or a fraction below 1. When exceeded, the log is written and "
        "`EvalFailedError` raised.",
        check=_check_fail_on_error,
        flags=(
            Flag(
                "--fail-on-error",
                {
                    "type": fail_on_error_flag,
                    "metavar": "X",
                    "help": "failed samples tolerated: a count (5), a fraction (0.1), true "
                    "(none, the default) or false (any)",
                },
            ),
        ),
        from_flags=_plain("fail_on_error"),
    ),
    Option(
        "progress",
        given="bool | None",
        kept="bool",
        default="False",
        doc="draw a progress bar on stderr (default: when stderr is a terminal; "
        "`stream_async()`: no bar; an eval set of several runs: no bar).",
        check=_check_progress,
        calls=EVERY,
        flags=(_NO_PROGRESS,),
        from_flags=_switch("no_progress", False),
    ),
    Option(
        "log_format",
        given="str | None",
        kept="str | None",
        default="None",
        doc='"json" or "eval" for this run (default: `Task(log_format=)`).',
        check=_check_log_format,
        estimate="refused",
        flags=(Flag("--log-format", {"choices": ["json", "eval"], "help": "the log's format"}),),
        from_flags=_plain("log_format"),
    ),
    Option(
        "resume_anyway",
        given="bool",
        kept="bool",
        default="False",
        doc="with `resume=`, resume even when the solver, scorer or model changed, "
        "keeping the samples that still match.",
        check=bool,
        estimate="refused",
        flags=(
            Flag(
                "--resume-anyway",
                {
                    "action": "store_true",
                    "help": "with --resume: go on even if the solver, scorer or model "
                    "changed, keeping the samples that still match",
                },
            ),
        ),
        from_flags=_switch("resume_anyway", True),
    ),
    Option(
        "backend",
        given="Backend | None",
        kept="Backend | None",
        default="None",
        doc="where the samples run: None (default) in this process; `ve.Ray(...)` on Ray "
        "workers (needs `vitals-engine[ray]`).",
        check=_instance_of(Backend, "None (this process) or a ve.Ray(...)", "backend"),
        flags=(
            Flag(
                "--ray",
                {
                    "nargs": "?",
                    "const": "local",
                    "default": None,
                    "metavar": "ADDRESS",
                    "help": "run the samples on Ray workers: a local Ray (no ADDRESS), `auto` "
                    "(the cluster this node belongs to) or a ray:// address; needs "
                    "vitals-engine[ray]",
                },
            ),
            Flag(
                "--workers",
                {"type": positive_int, "metavar": "N", "help": "with --ray: Ray workers (actors)"},
            ),
        ),
        # the command line's reader of --ray and --workers makes a ve.Ray: cli/run_flags.py
    ),
    Option(
        "batch",
        given="Batch | bool | None",
        kept="Batch | None",
        default="None",
        doc="send every model call in the providers' batch APIs, at their batch prices "
        "(answers may take hours): True, or `ve.Batch(size=, wait=, poll=, max_pending=)`. "
        "A model made with `batch=True` goes in batches whatever this says" + _NOT_ON_RAY + ".",
        check=lambda value: batch_option(value, "eval()"),
        flags=(
            Flag(
                "--batch",
                {
                    "action": "store_true",
                    "help": "send every model call in the providers' batch APIs (half the "
                    "price, answers within hours)",
                },
            ),
        ),
        from_flags=_switch("batch", True),
    ),
    Option(
        "cache",
        given="Cache | bool | None",
        kept="Cache | None",
        default="None",
        doc="answer each model call from a cache of replies on disk when an identical call "
        "(same model, request and epoch) was made before, and keep each new reply: True, or "
        "`ve.Cache(dir=, expiry=)`. A model made with `cache=` uses its own; `cache=False` "
        "on a model never caches.",
        check=lambda value: cache_option(value, "eval()"),
        estimate="refused",
        flags=(
            Flag(
                "--cache",
                {
                    "nargs": "?",
                    "const": True,
                    "metavar": "DIR",
                    "help": "answer model calls from the cache of replies where it has them, "
                    "and keep new replies (in DIR, else VITALS_CACHE_DIR, else the user's "
                    "cache directory)",
                },
            ),
        ),
        from_flags=_cache_flag,
    ),
    Option(
        "cost_budget",
        given="float | None",
        kept="float | None",
        default="None",
        doc="the most this run may spend, in dollars: no sample starts that could take the "
        "spending past it; the samples at work finish, the log is written (status "
        '"cancelled") and `BudgetExceeded` is raised. `resume=True` continues, with a '
        "budget of its own" + _NOT_ON_RAY + ".",
        check=_budget("cost_budget"),
        estimate="refused",
        flags=(
            Flag(
                "--cost-budget",
                {
                    "type": positive_number,
                    "metavar": "DOLLARS",
                    "help": "stop starting samples when the next could take the run's cost "
                    "past this (the log is written, status cancelled; --resume continues)",
                },
            ),
            Flag("--max-cost", {"type": positive_number, "metavar": "DOLLARS"}, deprecated=True),
        ),
        from_flags=_first_given("cost_budget", "max_cost"),
    ),
    Option(
        "token_budget",
        given="int | None",
        kept="int | None",
        default="None",
        doc="the same as `cost_budget`, in tokens sent and received (input + output).",
        check=_budget("token_budget"),
        estimate="refused",
        flags=(
            Flag(
                "--token-budget",
                {
                    "type": positive_int,
                    "metavar": "N",
                    "help": "the same in tokens sent and received",
                },
            ),
            Flag("--max-tokens", {"type": positive_int, "metavar": "N"}, deprecated=True),
        ),
        from_flags=_first_given("token_budget", "max_tokens"),
    ),
    Option(
        "model_cost_budget",
        given="float | None",
        kept="float | None",
        default="None",
        doc="the most each model may cost in this run, in dollars, for the models without "
        "a `cost_budget=` of their own" + _NOT_ON_RAY + ".",
        check=_budget("model_cost_budget"),
        estimate="refused",
    ),
    *(
        Option(
            name,
            given=f"{kind} | None",
            kept=f"{kind} | None",
            default="None",
            doc=doc,
            check=_sample_limit(name),
            flags=(
                Flag(
                    "--" + name.replace("_", "-"),
                    {"type": parse, "metavar": metavar, "help": doc.rstrip(".")},
                ),
            ),
            from_flags=_plain(name),
        )
        for name, kind, parse, metavar, doc in (
            (
                "message_limit",
                "int",
                positive_int,
                "N",
                "the most messages a sample's conversation may have: a sample that passes "
                "it stops, and is scored on what it has (its log says which limit it hit).",
            ),
            (
                "token_limit",
                "int",
                positive_int,
                "N",
                "the most tokens a sample's model calls may use (input, cached, cache writes "
                "and output), as `message_limit` stops it.",
            ),
            (
                "time_limit",
                "float",
                positive_number,
                "SECONDS",
                "the most clock time a sample may solve for, as `message_limit` stops it.",
            ),
            (
                "working_limit",
                "float",
                positive_number,
                "SECONDS",
                "the most working time a sample may solve for (clock time less the waits for "
                "rate limits, retries, seats and sandboxes), as `message_limit` stops it.",
            ),
            (
                "cost_limit",
                "float",
                positive_number,
                "DOLLARS",
                "the most a sample's model calls may cost, in dollars, as `message_limit` "
                "stops it.",
            ),
        )
    ),
    Option(
        "max_sandboxes",
        given="int | None",
        kept="int | None",
        default="None",
        doc="the most sandboxes alive at once (`Task(sandbox=)`; default: `max_concurrency`); "
        "a sample waits for one as for a seat. On Ray: per worker.",
        check=_check_max_sandboxes,
        flags=(
            Flag(
                "--max-sandboxes",
                {"type": positive_int, "metavar": "N", "help": "the most sandboxes at once"},
            ),
        ),
        from_flags=_plain("max_sandboxes"),
    ),
    Option(
        "limit",
        given="int | None",
        kept="int | None",
        default="None",
        doc="run only the first N samples of the dataset (after `shuffle`).",
        check=_check_limit,
        flags=(
            Flag(
                "--limit",
                {"type": positive_int, "metavar": "N", "help": "run only the first N samples"},
            ),
        ),
        from_flags=_plain("limit"),
    ),
    Option(
        "sample_ids",
        given="Sequence[int | str] | None",
        kept="tuple[int | str, ...] | None",
        default="None",
        doc="run only the samples with these ids (a `DatasetError` lists some that exist "
        "when one is not in the dataset).",
        check=_check_sample_ids,
        flags=(
            Flag(
                "--sample-id",
                {
                    "action": "append",
                    "dest": "sample_ids",
                    "metavar": "ID",
                    "help": "run only the sample with this id (repeat it for more)",
                },
            ),
        ),
        from_flags=_plain("sample_ids"),
    ),
    Option(
        "shuffle",
        given="bool",
        kept="bool",
        default="False",
        doc="run the samples in a random order, the same for the same `seed`.",
        check=bool,
        flags=(
            Flag(
                "--shuffle",
                {
                    "action": "store_true",
                    "help": "run the samples in a random order (before --limit), the same "
                    "for the same --seed",
                },
            ),
        ),
        from_flags=_switch("shuffle", True),
    ),
    Option(
        "seed",
        given="int | None",
        kept="int | None",
        default="None",
        doc="the seed of `shuffle` (default: one drawn at random, recorded in the log as "
        "`eval.config.sample_shuffle`; pass it to repeat the order).",
        check=_check_seed,
        flags=(
            Flag(
                "--seed",
                {
                    "type": int,
                    "metavar": "N",
                    "help": "the seed of --shuffle (default: drawn, logged)",
                },
            ),
        ),
        from_flags=_plain("seed"),
    ),
)

#: Old names of options, kept for a release (using one warns and names the new one).
DEPRECATED: dict[str, str] = {
    "limits": "rate_limits",
    "max_cost": "cost_budget",
    "max_tokens": "token_budget",
}

#: The command-line commands that take run options, and the calls whose options they take.
COMMANDS: dict[str, Call] = {"eval": "eval", "score": "score"}
