"""The options of one run, parsed and checked once, then handed down whole: to the
run (`engine/run.py`'s `Run`), to each of its Ray workers (`WorkerPlan`) and to every
run of an eval set.

`EvalOptions` is what a user passes: the keywords of `Task.eval()`, `eval_async()`,
`stream_async()` and `ve.eval_set()`, typed and documented here, once. `RunOptions`
is what a run reads: those keywords checked, defaults filled in. `RunOptions.parse`
takes a call's keywords apart: the run options, checked (a `ConfigError` for a bad
one), and the rest, for the solver and scorer (`engine/user_functions.route_kwargs`,
whose "did you mean" knows `OPTION_NAMES`).

A new option is a key of `EvalOptions` (its type, and its line in the docstring) and
a field of `RunOptions` (its value once checked, and its check in `RunOptions.check`);
`tests/test_run_options.py` fails until both have it, and sees it reach every entry
point and the Ray workers.

`backend=` is a `Backend`: where a run's samples go when not in this process. The
engine knows only that there may be such a place; `ve.Ray` (`distributed/backend.py`)
is the one there is.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from .._errors import ConfigError
from ..caching.options import Cache, cache_option
from ..pacing.batch_mode import Batch, batch_option
from ..pacing.limits import Limits
from ..pacing.retry import Retry

__all__ = [
    "DEFAULT_CONCURRENCY",
    "OPTION_NAMES",
    "Backend",
    "EvalKeywords",
    "EvalOptions",
    "RunOptions",
    "allowed_failures",
    "check_epochs",
]

#: Samples in flight at once when eval(max_concurrency=) is not given.
DEFAULT_CONCURRENCY = 32


class Backend:
    """Where a run's samples go instead of this process: `ve.Ray(...)`."""

    __slots__ = ()


class EvalOptions(TypedDict, total=False):
    """The run options `Task.eval()`, `eval_async()`, `stream_async()` and `ve.eval_set()`
    take as keywords (each optional).

    Attributes:
        epochs: runs per sample (default: `Task(epochs=)`, else 1).
        max_concurrency: samples in flight at once (default 32).
        limits: `Limits(max_concurrency=, rpm=, tpm=)` for every model of the run (a
            model's own `limits=` wins).
        retry: `Retry(max_attempts=, timeout=, sample_timeout=)` for every model call of
            the run (a model's own `retry=` wins).
        fail_on_error: failed samples tolerated before the run fails: None/True none,
            False any, a count, or a fraction below 1. When exceeded, the log is written
            and `EvalFailedError` raised.
        progress: draw a progress bar on stderr (default: when stderr is a terminal;
            `stream_async()`: no bar; an eval set of several runs: no bar).
        log_format: "json" or "eval" for this run (default: `Task(log_format=)`).
        resume_anyway: with `resume=`, resume even when the solver, scorer or model
            changed, keeping the samples that still match.
        backend: where the samples run: None (default) in this process; `ve.Ray(...)` on
            Ray workers (needs `vitals-engine[ray]`).
        batch: send every model call in the providers' batch APIs, at their batch prices
            (answers may take hours): True, or `ve.Batch(size=, wait=, poll=,
            max_pending=)`. A model made with `batch=True` goes in batches whatever this
            says.
        cache: answer each model call from a cache of replies on disk when an identical
            call (same model, request and epoch) was made before, and keep each new
            reply: True, or `ve.Cache(dir=, expiry=)`. A model made with `cache=` uses its
            own; `cache=False` on a model never caches.
        max_cost: the most this run may spend, in dollars: no sample starts that could
            take the spending past it; the samples at work finish, the log is written
            (status "cancelled") and `BudgetExceeded` is raised. `resume=True` continues,
            with a budget of its own.
        max_tokens: the same for tokens sent and received (input + output).
        limit: run only the first N samples of the dataset (after `shuffle`).
        sample_ids: run only the samples with these ids (a `DatasetError` lists some
            that exist when one is not in the dataset).
        shuffle: run the samples in a random order, the same for the same `seed`.
        seed: the seed of `shuffle` (default: one drawn at random, recorded in the log
            as `eval.config.sample_shuffle`; pass it to repeat the order).

    Example:
        >>> options: EvalOptions = {"max_concurrency": 50, "retry": ve.Retry(max_attempts=8)}
        >>> task.eval(**options)
    """

    epochs: int | None
    max_concurrency: int | None
    limits: Limits | None
    retry: Retry | None
    fail_on_error: bool | int | float | None
    progress: bool | None
    log_format: str | None
    resume_anyway: bool
    backend: Backend | None
    batch: Batch | bool | None
    cache: Cache | bool | None
    max_cost: float | None
    max_tokens: int | None
    limit: int | None
    sample_ids: Sequence[int | str] | None
    shuffle: bool
    seed: int | None


if TYPE_CHECKING:

    class EvalKeywords(EvalOptions, total=False, extra_items=Any):  # PEP 728
        """`EvalOptions`, and any other keyword: it goes to the solver and/or scorer by
        their signatures (`task.eval(solver_chat=other_chat)`)."""

else:
    EvalKeywords = EvalOptions  # Python 3.15's TypedDict takes extra_items; ours is only read


def check_epochs(epochs: Any) -> int | None:
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


def _check_budget(value: Any, name: str) -> Any:
    if value is None:
        return None
    whole = name == "max_tokens"
    kind = int if whole else int | float
    if isinstance(value, bool) or not isinstance(value, kind) or not 0 < value < math.inf:
        what = "a whole number of tokens" if whole else "a number of dollars"
        raise ConfigError(f"`{name}` must be {what} above 0, not {value!r}.")
    return value if whole else float(value)


def _check_selection(given: EvalOptions) -> dict[str, Any]:
    """`limit`, `sample_ids`, `shuffle` and `seed`, checked; a seed drawn for a shuffle
    without one (so the log can say which order it was)."""
    limit, ids = given.get("limit"), given.get("sample_ids")
    shuffle, seed = bool(given.get("shuffle", False)), given.get("seed")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"`limit` must be a whole number of at least 1, not {limit!r}.")
    if ids is not None:
        if isinstance(ids, int | str):
            ids = [ids]
        if not isinstance(ids, Sequence) or not ids:
            raise ConfigError(f"`sample_ids` must be a non-empty list of ids, not {ids!r}.")
        wrong = [i for i in ids if isinstance(i, bool) or not isinstance(i, int | str)]
        if wrong:
            raise ConfigError(f"`sample_ids` holds {wrong[0]!r}: an id is an int or a str.")
        ids = tuple(ids)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ConfigError(f"`seed` must be a whole number, not {seed!r}.")
    if shuffle and seed is None:
        seed = random.SystemRandom().randrange(2**31)
    return {"limit": limit, "sample_ids": ids, "shuffle": shuffle, "seed": seed}


def allowed_failures(fail_on_error: bool | int | float | None, total: int) -> float:
    """How many failed samples a run of `total` may have and still succeed."""
    if fail_on_error is None or fail_on_error is True:
        return 0
    if fail_on_error is False:
        return math.inf
    if isinstance(fail_on_error, float):
        return math.floor(fail_on_error * total)
    return fail_on_error


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The run options (`EvalOptions`), checked, defaults filled in: what a run reads.
    None of them is routed to the solver or scorer.

    Example:
        >>> options, routed = RunOptions.parse({"max_concurrency": 8, "solver_chat": chat})
        >>> options.max_concurrency, list(routed)
        (8, ['solver_chat'])
    """

    #: None: the task's own (`Task(epochs=)`), else 1.
    epochs: int | None = None
    max_concurrency: int = DEFAULT_CONCURRENCY
    limits: Limits | None = None
    retry: Retry | None = None
    fail_on_error: bool | int | float | None = None
    progress: bool = False
    #: None: the task's own (`Task(log_format=)`).
    log_format: str | None = None
    resume_anyway: bool = False
    #: None: the samples run in this process.
    backend: Backend | None = None
    #: None: only models made with `batch=` send their calls in batches.
    batch: Batch | None = None
    #: None: only models made with `cache=` keep their replies.
    cache: Cache | None = None
    #: None: no budget.
    max_cost: float | None = None
    max_tokens: int | None = None
    #: None: every sample (`select_rows` in `dataset.py` applies these four).
    limit: int | None = None
    sample_ids: tuple[int | str, ...] | None = None
    shuffle: bool = False
    #: With `shuffle`, always a number once checked (drawn when not given).
    seed: int | None = None

    @classmethod
    def parse(cls, given: Mapping[str, Any]) -> tuple[RunOptions, dict[str, Any]]:
        """A call's keywords taken apart: its run options, checked, and the others (for
        the solver and scorer), as given."""
        ours = {name: value for name, value in given.items() if name in OPTION_NAMES}
        others = {name: value for name, value in given.items() if name not in OPTION_NAMES}
        return cls.check(**ours), others

    @classmethod
    def check(cls, **given: Unpack[EvalOptions]) -> RunOptions:
        """The options given, checked (a `ConfigError` names the first wrong one), with
        the defaults of those not given."""
        limits, retry, backend = given.get("limits"), given.get("retry"), given.get("backend")
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError(f"`limits` must be a ve.Limits(...), not {type(limits).__name__}.")
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigError(f"`retry` must be a ve.Retry(...), not {type(retry).__name__}.")
        if backend is not None and not isinstance(backend, Backend):
            raise ConfigError(
                f"`backend` must be None (this process) or a ve.Ray(...), not "
                f"{type(backend).__name__}."
            )
        batch = batch_option(given.get("batch"), "eval()")
        max_cost, max_tokens = given.get("max_cost"), given.get("max_tokens")
        _check_where(backend, batch, max_cost, max_tokens)
        log_format = given.get("log_format")
        if log_format not in (None, "json", "eval"):
            raise ConfigError(f"`log_format` must be 'json' or 'eval', not {log_format!r}.")
        progress = given.get("progress")
        return cls(
            epochs=check_epochs(given.get("epochs")),
            max_concurrency=_check_concurrency(given.get("max_concurrency")),
            limits=limits,
            retry=retry,
            fail_on_error=_check_fail_on_error(given.get("fail_on_error")),
            progress=sys.stderr.isatty() if progress is None else bool(progress),
            log_format=log_format,
            resume_anyway=bool(given.get("resume_anyway", False)),
            backend=backend,
            batch=batch,
            cache=cache_option(given.get("cache"), "eval()"),
            max_cost=_check_budget(max_cost, "max_cost"),
            max_tokens=_check_budget(max_tokens, "max_tokens"),
            **_check_selection(given),
        )


#: The names of the run options, in `RunOptions`' order.
OPTION_NAMES: tuple[str, ...] = tuple(field.name for field in fields(RunOptions))


def _check_where(
    backend: Backend | None, batch: Batch | None, max_cost: Any, max_tokens: Any
) -> None:
    """What does not go with a backend yet: batch mode, a budget."""
    if batch is not None and backend is not None:
        raise ConfigError(
            "batch= and backend=ve.Ray() do not go together yet: batches wait hours, "
            "so one process is enough to hold them. Run in batch mode without a backend."
        )
    if backend is not None and (max_cost is not None or max_tokens is not None):
        raise ConfigError(
            "max_cost= and max_tokens= do not go with backend=ve.Ray() yet: the budget "
            "is checked as each sample starts, in this process. Run without a backend, "
            "or without a budget."
        )
