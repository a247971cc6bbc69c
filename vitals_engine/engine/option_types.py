"""The run options' types: made from the table in `engine/option_table.py` by
`python -m vitals_engine.engine.option_render` (`make options`). Edit the table, not
this file: a test fails when this file is not what the table makes.

`EvalOptions` is what `Task.eval()`, `eval_async()`, `stream_async()` and
`ve.eval_set()` take as keywords; `SolveOptions` and `ScoreOptions` what `solve()` and
`score()` take; `RunOptionFields` what a run reads, once checked (`RunOptions`,
`engine/options.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from .option_table import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from ..caching.options import Cache
    from ..pacing.batch_mode import Batch
    from ..pacing.limits import RateLimits
    from ..pacing.retry import Retry
    from .option_table import Backend

__all__ = ["EvalOptions", "RunOptionFields", "ScoreOptions", "SolveOptions"]


class EvalOptions(TypedDict, total=False):
    """The run options `Task.eval()`, `eval_async()`, `stream_async()` and `ve.eval_set()`
    take as keywords (each optional).

    Attributes:
        epochs: runs per sample (default: `Task(epochs=)`, else 1).
        max_concurrency: samples in flight at once (default 32).
        rate_limits: `RateLimits(max_concurrency=, rpm=, tpm=)` for every model of the run
            (a model's own `rate_limits=` wins).
        retry: `Retry(max_attempts=, timeout=, sample_timeout=)` for every model call of the
            run (a model's own `retry=` wins).
        fail_on_error: failed samples tolerated before the run fails: None/True none, False
            any, a count, or a fraction below 1. When exceeded, the log is written and
            `EvalFailedError` raised.
        progress: draw a progress bar on stderr (default: when stderr is a terminal;
            `stream_async()`: no bar; an eval set of several runs: no bar).
        log_format: "json" or "eval" for this run (default: `Task(log_format=)`).
        resume_anyway: with `resume=`, resume even when the solver, scorer or model changed,
            keeping the samples that still match.
        backend: where the samples run: None (default) in this process; `ve.Ray(...)` on Ray
            workers (needs `vitals-engine[ray]`).
        batch: send every model call in the providers' batch APIs, at their batch prices
            (answers may take hours): True, or `ve.Batch(size=, wait=, poll=,
            max_pending=)`. A model made with `batch=True` goes in batches whatever this
            says; not with backend=ve.Ray() yet.
        cache: answer each model call from a cache of replies on disk when an identical call
            (same model, request and epoch) was made before, and keep each new reply: True,
            or `ve.Cache(dir=, expiry=)`. A model made with `cache=` uses its own;
            `cache=False` on a model never caches.
        cost_budget: the most this run may spend, in dollars: no sample starts that could
            take the spending past it; the samples at work finish, the log is written
            (status "cancelled") and `BudgetExceeded` is raised. `resume=True` continues,
            with a budget of its own; not with backend=ve.Ray() yet.
        token_budget: the same as `cost_budget`, in tokens sent and received (input +
            output).
        model_cost_budget: the most each model may cost in this run, in dollars, for the
            models without a `cost_budget=` of their own; not with backend=ve.Ray() yet.
        message_limit: the most messages a sample's conversation may have: a sample that
            passes it stops, and is scored on what it has (its log says which limit it hit).
        token_limit: the most tokens a sample's model calls may use (input, cached, cache
            writes and output), as `message_limit` stops it.
        time_limit: the most clock time a sample may solve for, as `message_limit` stops it.
        working_limit: the most working time a sample may solve for (clock time less the
            waits for rate limits, retries, seats and sandboxes), as `message_limit` stops
            it.
        cost_limit: the most a sample's model calls may cost, in dollars, as `message_limit`
            stops it.
        max_sandboxes: the most sandboxes alive at once (`Task(sandbox=)`; default:
            `max_concurrency`); a sample waits for one as for a seat. On Ray: per worker.
        limit: run only the first N samples of the dataset (after `shuffle`).
        sample_ids: run only the samples with these ids (a `DatasetError` lists some that
            exist when one is not in the dataset).
        shuffle: run the samples in a random order, the same for the same `seed`.
        seed: the seed of `shuffle` (default: one drawn at random, recorded in the log as
            `eval.config.sample_shuffle`; pass it to repeat the order).

    Example:
        >>> options: EvalOptions = {"max_concurrency": 50, "retry": ve.Retry(max_attempts=8)}
        >>> task.eval(**options)
    """

    epochs: int | None
    max_concurrency: int | None
    rate_limits: RateLimits | None
    retry: Retry | None
    fail_on_error: bool | int | float | None
    progress: bool | None
    log_format: str | None
    resume_anyway: bool
    backend: Backend | None
    batch: Batch | bool | None
    cache: Cache | bool | None
    cost_budget: float | None
    token_budget: int | None
    model_cost_budget: float | None
    message_limit: int | None
    token_limit: int | None
    time_limit: float | None
    working_limit: float | None
    cost_limit: float | None
    max_sandboxes: int | None
    limit: int | None
    sample_ids: Sequence[int | str] | None
    shuffle: bool
    seed: int | None


class SolveOptions(TypedDict, total=False):
    """The run options `Task.solve()` and `solve_async()` take.

    Attributes:
        epochs: runs per sample (default: `Task(epochs=)`, else 1).
        max_concurrency: samples in flight at once (default 32).
        rate_limits: `RateLimits(max_concurrency=, rpm=, tpm=)` for every model of the run
            (a model's own `rate_limits=` wins).
        retry: `Retry(max_attempts=, timeout=, sample_timeout=)` for every model call of the
            run (a model's own `retry=` wins).
        progress: draw a progress bar on stderr (default: when stderr is a terminal;
            `stream_async()`: no bar; an eval set of several runs: no bar).

    Example:
        >>> task.solve(epochs=2, max_concurrency=8)
    """

    epochs: int | None
    max_concurrency: int | None
    rate_limits: RateLimits | None
    retry: Retry | None
    progress: bool | None


class ScoreOptions(TypedDict, total=False):
    """The run options `Task.score()` and `score_async()` take.

    Attributes:
        max_concurrency: samples in flight at once (default 32).
        rate_limits: `RateLimits(max_concurrency=, rpm=, tpm=)` for every model of the run
            (a model's own `rate_limits=` wins).
        retry: `Retry(max_attempts=, timeout=, sample_timeout=)` for every model call of the
            run (a model's own `retry=` wins).
        progress: draw a progress bar on stderr (default: when stderr is a terminal;
            `stream_async()`: no bar; an eval set of several runs: no bar).

    Example:
        >>> task.score(max_concurrency=8, rate_limits=ve.RateLimits(rpm=600))
    """

    max_concurrency: int | None
    rate_limits: RateLimits | None
    retry: Retry | None
    progress: bool | None


@dataclass(frozen=True, slots=True)
class RunOptionFields:
    """What a run reads of its options, once checked, and their defaults."""

    epochs: int | None = None
    max_concurrency: int = DEFAULT_CONCURRENCY
    rate_limits: RateLimits | None = None
    retry: Retry | None = None
    fail_on_error: bool | int | float | None = None
    progress: bool = False
    log_format: str | None = None
    resume_anyway: bool = False
    backend: Backend | None = None
    batch: Batch | None = None
    cache: Cache | None = None
    cost_budget: float | None = None
    token_budget: int | None = None
    model_cost_budget: float | None = None
    message_limit: int | None = None
    token_limit: int | None = None
    time_limit: float | None = None
    working_limit: float | None = None
    cost_limit: float | None = None
    max_sandboxes: int | None = None
    limit: int | None = None
    sample_ids: tuple[int | str, ...] | None = None
    shuffle: bool = False
    seed: int | None = None
