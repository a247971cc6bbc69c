"""The options of one run, checked once: epochs, concurrency, limits, retries,
how many failed samples are tolerated, and whether to draw progress."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError
from ..caching.options import Cache, cache_option
from ..distributed.backend import Ray
from ..pacing.batch_mode import Batch, batch_option
from ..pacing.limits import Limits
from ..pacing.retry import Retry

__all__ = ["DEFAULT_CONCURRENCY", "RunOptions", "allowed_failures", "check_epochs"]

#: Samples in flight at once when eval(max_concurrency=) is not given.
DEFAULT_CONCURRENCY = 32


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
    """eval()'s own keyword options, never routed to the solver or scorer."""

    epochs: int | None = None
    max_concurrency: int = DEFAULT_CONCURRENCY
    limits: Limits | None = None
    retry: Retry | None = None
    fail_on_error: bool | int | float | None = None
    progress: bool = False
    log_format: str = "json"
    #: Resume even when the solver, scorer or model changed (reusing what still matches).
    resume_anyway: bool = False
    #: Where the samples run: None in this process, a `Ray(...)` on Ray workers.
    backend: Ray | None = None
    #: Every model call in provider batches (None: only models made with `batch=`).
    batch: Batch | None = None
    #: Model replies cached on disk (None: only models made with `cache=`).
    cache: Cache | None = None
    #: The most this run may spend, in dollars and in tokens (None: no budget).
    max_cost: float | None = None
    max_tokens: int | None = None

    @classmethod
    def check(
        cls,
        *,
        epochs: Any = None,
        max_concurrency: Any = None,
        limits: Any = None,
        retry: Any = None,
        fail_on_error: Any = None,
        progress: bool | None = None,
        log_format: str | None = None,
        resume_anyway: bool = False,
        backend: Any = None,
        batch: Any = None,
        cache: Any = None,
        max_cost: Any = None,
        max_tokens: Any = None,
    ) -> RunOptions:
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigError(f"`limits` must be a ve.Limits(...), not {type(limits).__name__}.")
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigError(f"`retry` must be a ve.Retry(...), not {type(retry).__name__}.")
        if backend is not None and not isinstance(backend, Ray):
            raise ConfigError(
                f"`backend` must be None (this process) or a ve.Ray(...), not "
                f"{type(backend).__name__}."
            )
        batched = batch_option(batch, "eval()")
        if batched is not None and backend is not None:
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
        if log_format not in (None, "json", "eval"):
            raise ConfigError(f"`log_format` must be 'json' or 'eval', not {log_format!r}.")
        return cls(
            epochs=check_epochs(epochs),
            max_concurrency=_check_concurrency(max_concurrency),
            limits=limits,
            retry=retry,
            fail_on_error=_check_fail_on_error(fail_on_error),
            progress=sys.stderr.isatty() if progress is None else bool(progress),
            log_format=log_format or "json",
            resume_anyway=bool(resume_anyway),
            backend=backend,
            batch=batched,
            cache=cache_option(cache, "eval()"),
            max_cost=_check_budget(max_cost, "max_cost"),
            max_tokens=_check_budget(max_tokens, "max_tokens"),
        )
