"""How a stage's exception becomes a sample's error, or ends the run.

A sample's own failure (its solver raised, a model call failed after its retries, it ran
past its `sample_timeout`) is recorded on its record and the run goes on. Contract
violations (`ConfigError`, `SolverError`, `ScorerError`, `TaskStateError`) would fail
every sample alike, so they end the run; so does a provider error that every sample
would meet (the account's quota is spent). A sample whose model call the budget refused
(`BudgetExceeded`: it did not fit, and was not sent) did not finish: it gets
`STOPPED_BY_BUDGET`, and is neither counted nor logged.
"""

from __future__ import annotations

import contextlib
import traceback
from contextlib import AbstractContextManager
from typing import Any

import anyio

from .._errors import (
    BudgetExceeded,
    ConfigError,
    ProviderError,
    ScorerError,
    SolverError,
    TaskStateError,
)
from ..samples import SampleError

__all__ = ["FATAL", "STOPPED_BY_BUDGET", "deadline", "raise_if_it_stops_the_run", "sample_error"]

#: Errors of the user's contract: they end the run.
FATAL = (ConfigError, SolverError, ScorerError, TaskStateError)

#: The error of a sample the budget stopped (a call of it did not fit, and was not sent):
#: it did not finish, so it is neither counted nor logged, and a resumed run runs it again.
STOPPED_BY_BUDGET = SampleError(
    stage="budget", type="BudgetExceeded", message="stopped by the budget"
)


def raise_if_it_stops_the_run(exc: Exception) -> None:
    """A provider error that every sample would meet (the account's quota is spent, the same
    client error ended every call) ends the run instead of failing the samples one by one."""
    if isinstance(exc, ProviderError) and exc.stops_run:
        raise exc


def deadline(seconds: float | None) -> AbstractContextManager[Any]:
    """A timeout scope, or nothing at all when there is no limit (a cancel scope costs)."""
    return anyio.fail_after(seconds) if seconds is not None else contextlib.nullcontext()


def sample_error(stage: str, exc: BaseException, sample_timeout: float | None) -> SampleError:
    """The error a sample is recorded with after `exc` in its `stage` ("solve", "score").

    Example:
        >>> sample_error("solve", ValueError("no answer"), None).type
        'ValueError'
    """
    if isinstance(exc, BudgetExceeded):
        return STOPPED_BY_BUDGET
    if type(exc) is TimeoutError and sample_timeout is not None:
        return SampleError(
            stage=stage,
            type="SampleTimeout",
            message=f"the sample took longer than its sample_timeout of {sample_timeout:g}s",
            traceback="".join(traceback.format_exception(exc)),
        )
    return SampleError(
        stage=stage,
        type=type(exc).__name__,
        message=str(exc) or type(exc).__name__,
        traceback="".join(traceback.format_exception(exc)),
    )
