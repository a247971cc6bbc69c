"""One run of a task: the stage functions the supervisor drives, and their bookkeeping.

A `Run` owns what lives exactly as long as a run: the usage ledger, its use
of the endpoint limits (shared by every call of the run, and with the other
runs of its event loop until it ends: `pacing/limits.py`), the retry policy,
the thread limiter for sync user code, progress counters and timestamps. It
takes the run's options whole (`RunOptions`, `engine/options.py`), as checked once
by `eval()`; a Ray worker's run takes the same, with the worker's share of the
concurrency.

Its stage functions open a call scope per sample stage, so model usage is
attributed to the role (solver or scorer) and the sample; they record a
sample's own failure (including running past its `sample_timeout`) on its
record, and let contract violations (`ConfigError`, `SolverError`,
`ScorerError`) end the run, since they would fail every sample alike. A sample
whose model call the budget refused (`BudgetExceeded`: it did not fit, and was not
sent) did not finish: it is neither counted nor logged, and a resumed run runs it again.

Each sample stage is observed (`engine/observing.py`): the sample's id and epoch go on
what the library logs meanwhile, and, when the application set up OpenTelemetry, the
sample is a span of the run's trace, each model call (a layer of its call stacks) and
tool call a span under it.

Given a `LiveTexts`, each sample stage's scope gets a text sink (`on_text`)
that keeps the text a streaming provider sends for that sample, so the live
viewer can show it. A sample's text goes away when the sample finishes or
fails. When nothing streams, that is one small closure per stage and nothing
else: no entry, no call.

While `execute()` goes on, `IN_VITALS_EVAL=true` is in the environment, for the
user's solvers and scorers and what they call (`engine/eval_env.py`).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, Sized
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import (
    BudgetExceeded,
    ConfigError,
    InvalidScore,
    ProviderError,
    ScorerError,
    SolverError,
    TaskStateError,
)
from .._sync import asyncio_named
from ..batching.queues import BatchQueues
from ..caching.lookup import CacheUse
from ..chats.layers.replies import Replies
from ..chats.layers.stacks import CallStacks
from ..pacing.admission import Places
from ..pacing.budget import Budget
from ..pacing.clock import Clock, SystemClock
from ..pacing.limits import Endpoint, Limits, LimitsRegistry, RunLimits
from ..pacing.retry import Retry
from ..pacing.scope import CallScope, TextSink
from ..pacing.seats import current_seat
from ..progress import Progress
from ..samples import Sample, SampleError, SampleRecord
from ..vocab.batch_records import BatchRecord
from ..vocab.model_calls import RetryNote
from ..vocab.usage import UsageLedger
from .eval_env import in_vitals_eval
from .gc_tuning import relaxed_gc
from .observing import RunObserver
from .options import RunOptions
from .supervisor import Gate, Pass, Supervisor
from .user_functions import (
    FunctionSpec,
    batch_column,
    call_scorer,
    call_solver,
    normalise_score,
    normalise_solution,
)

if TYPE_CHECKING:
    import polars as pl

__all__ = ["TEXT_LIMIT", "LiveText", "LiveTexts", "Run"]

#: The characters of streamed text kept per sample: the last ones, the newest.
TEXT_LIMIT = 4000

_FATAL = (ConfigError, SolverError, ScorerError, TaskStateError)


def _raise_if_it_stops_the_run(exc: Exception) -> None:
    """A provider error that every sample would meet (the account's quota is spent, the same
    client error ended every call) ends the run instead of failing the samples one by one."""
    if isinstance(exc, ProviderError) and exc.stops_run:
        raise exc


def _deadline(seconds: float | None) -> AbstractContextManager[Any]:
    """A timeout scope, or nothing at all when there is no limit (a cancel scope costs)."""
    return anyio.fail_after(seconds) if seconds is not None else contextlib.nullcontext()


#: The error of a sample the budget stopped (a call of it did not fit, and was not sent):
#: it did not finish, so it is neither counted nor logged, and a resumed run runs it again.
_STOPPED = SampleError(stage="budget", type="BudgetExceeded", message="stopped by the budget")


def _sample_error(stage: str, exc: BaseException, sample_timeout: float | None) -> SampleError:
    if isinstance(exc, BudgetExceeded):
        return _STOPPED
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


class LiveText:
    """The text streamed so far by one sample's current model call attempt."""

    __slots__ = ("attempt", "chars", "role", "sample", "text", "updated")

    def __init__(self, sample: Sample, role: str, attempt: object) -> None:
        self.sample = sample
        self.role = role
        self.attempt = attempt
        self.text = ""  # the last `TEXT_LIMIT` characters
        self.chars = 0  # every character of the attempt so far
        self.updated = 0.0  # time.time() of the last piece


class LiveTexts:
    """The streamed text of each in-flight sample, by (id, epoch): what the live viewer shows.

    `sink(sample, role)` is the `on_text` of one sample stage. A piece of text with
    the attempt key the sample's entry has is appended (keeping the last `limit`
    characters); a new key (a retry, or the sample's next model call) starts the
    entry afresh. `drop()` removes a sample's entry when it finishes or fails.
    `on_change` is called after every change; sinks are called from the run's
    event loop thread, as providers do.

    Example:
        >>> texts = LiveTexts()
        >>> sink = texts.sink(sample, "solver")
        >>> attempt = object()
        >>> sink(attempt, "Hel"); sink(attempt, "lo")
        >>> texts.entries[(sample.id, sample.epoch)].text
        'Hello'
    """

    __slots__ = ("entries", "limit", "on_change")

    def __init__(
        self, *, limit: int = TEXT_LIMIT, on_change: Callable[[], None] | None = None
    ) -> None:
        self.entries: dict[tuple[int | str, int], LiveText] = {}
        self.limit = limit
        self.on_change = on_change

    def sink(self, sample: Sample, role: str) -> TextSink:
        """The text sink of one stage (`role`) of `sample`."""
        entries, key, limit = self.entries, (sample.id, sample.epoch), self.limit

        def take(attempt: object, delta: str) -> None:
            entry = entries.get(key)
            if entry is None or entry.attempt is not attempt:
                entry = entries[key] = LiveText(sample, role, attempt)
            text = entry.text + delta
            entry.text = text if len(text) <= limit else text[-limit:]
            entry.chars += len(delta)
            entry.updated = time.time()
            if self.on_change is not None:
                self.on_change()

        return take

    def drop(self, key: tuple[int | str, int]) -> None:
        """Forget a sample's text (it finished or failed)."""
        if self.entries.pop(key, None) is not None and self.on_change is not None:
            self.on_change()

    def clear(self) -> None:
        """Forget every sample's text: the run ended (`on_change` is not called)."""
        self.entries.clear()


class Run:
    """The stages and bookkeeping of one run.

    Example:
        >>> options = RunOptions(max_concurrency=10)
        >>> run = Run(solver=describe(solver, "solver"), scorer=None, options=options)
        >>> await run.execute(records, sink=store)
    """

    def __init__(
        self,
        *,
        solver: FunctionSpec | None,
        scorer: FunctionSpec | None,
        options: RunOptions,
        solver_kwargs: dict[str, Any] | None = None,
        scorer_kwargs: dict[str, Any] | None = None,
        ledger: UsageLedger | None = None,
        samples_frame: Callable[[Sequence[SampleRecord]], pl.DataFrame] | None = None,
        clock: Clock | None = None,
        total: int | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        live: LiveTexts | None = None,
        batch_journal: Callable[[BatchRecord], None] | None = None,
        earlier_batches: Sequence[BatchRecord] = (),
        cache: CacheUse | None = None,
        budget: Budget | None = None,
        solver_endpoints: Sequence[tuple[Endpoint, Limits | None]] = (),
        observer: RunObserver | None = None,
    ) -> None:
        self.solver = solver
        self.scorer = scorer
        self.solver_kwargs = solver_kwargs or {}
        self.scorer_kwargs = scorer_kwargs or {}
        #: The run's options, as eval() checked them (`engine/options.py`).
        self.options = options
        self.concurrency = options.max_concurrency
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.samples_frame = samples_frame
        self.clock = clock or SystemClock()
        #: The run's endpoint limits, shared with the other runs of its event loop.
        self.limits: LimitsRegistry = RunLimits(options.limits, self.concurrency, self.clock)
        self.retry = options.retry or Retry()
        self.started_at: float | None = None
        self.completed_at: float | None = None
        self.total = total or 0
        #: How many records the run has, when known (caps the workers started).
        self._count = total
        self.done = 0
        #: Finished samples that sent a model call (what a sample costs is learnt from these).
        self.paid = 0
        self.failed = 0
        self.retries = 0
        self.on_progress = on_progress
        #: The streamed text of in-flight samples, for the live viewer (None: not kept).
        self.live = live
        #: Batch mode for every model call (None: only for models made with `batch=`).
        self.batch = options.batch
        #: The run's batch queues (from when it starts; their counts stay for the record).
        self.batches: BatchQueues | None = None
        #: The layers its model calls pass, built from its options when it starts.
        self.stacks: CallStacks | None = None
        #: Takes what is known of each provider batch, before it goes (the run's journal).
        self.batch_journal = batch_journal
        #: The batches an earlier run of these samples sent (a resumed run reattaches).
        self.earlier_batches = earlier_batches
        #: Where each model reply goes as it arrives (the run's journal; on a Ray worker,
        #: the driver's), and the replies an earlier run of these samples journaled, which
        #: answer the same calls (None: nothing journaled, nothing answered).
        self.replies: Replies | None = None
        #: The run's use of the cache of replies (None: only models with their own).
        self.cache = cache
        #: The run's budget (None: none); it stops handing out samples when reached.
        self.budget = budget
        if budget is not None:
            budget.ledger = self.ledger  # what its caps measure
        #: The endpoints the solver is known to call before it runs, with the model's own
        #: limits: new samples wait for their admission from the first.
        self.solver_endpoints = solver_endpoints
        #: Awaited before each sample is taken (None: nothing to wait for): a run logging
        #: to an object store waits there while its lock on the journal is in doubt.
        self.fence: Callable[[], Awaitable[None]] | None = None
        #: The samples handed out and not finished, by key (kept only with a budget).
        self._started: dict[tuple[int | str, int], SampleRecord] = {}
        self._finished: anyio.Event | None = None
        #: Samples in a per-sample stage now (for the batch queues: see `BatchQueues`).
        self.at_work = 0
        self._threads = anyio.CapacityLimiter(self.concurrency)
        #: `execute()` calls going on (the run lets go of its endpoints when none is).
        self._executing = 0
        #: What the application sees of the run: its fields on what is logged, its trace.
        self.observer = observer or RunObserver()

    def _scope(self, role: str, record: SampleRecord | None) -> CallScope:
        live = self.live
        return CallScope(
            role,
            (self.ledger, record.usage) if record is not None else (self.ledger,),
            record.calls if record is not None else None,
            self.limits,
            self.retry,
            self.clock,
            self._count_retry,
            current_seat(),
            live.sink(record.sample, role) if live is not None and record is not None else None,
            self.batches,
            record.key
            if record is not None and (self.batches is not None or self.cache is not None)
            else None,
            self.cache,
            None,
            self.budget,
            self.stacks,
        )

    def _count_retry(self, _: RetryNote) -> None:
        self.retries += 1
        self._emit()

    def progress(self) -> Progress:
        """A snapshot of the run so far."""
        cost, tokens = self.ledger.spent()
        cache = self.cache
        if cache is not None and cache.default is None and not (cache.hits or cache.misses):
            cache = None  # no cache in this run: nothing to show
        return Progress(
            done=self.done,
            total=self.total,
            failed=self.failed,
            retries=self.retries,
            tokens=tokens,
            cost=cost,
            elapsed=time.time() - (self.started_at or time.time()),
            cache_hits=cache.hits if cache is not None else None,
            cache_misses=cache.misses if cache is not None else None,
            **self._batch_progress(),
        )

    def _batch_progress(self) -> dict[str, int]:
        batches = self.batches
        if batches is None:
            return {}
        counts = batches.counts
        return {
            "batch_queued": counts.queued,
            "batch_submitted": counts.submitted,
            "batch_waiting": counts.waiting,
            "batch_done": counts.done,
        }

    def _emit(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress())

    def _time_left(self, record: SampleRecord) -> float | None:
        limit = self.retry.sample_timeout
        if limit is None:
            return None
        return limit - (time.time() - (record.solve_started or record.score_started or time.time()))

    # -- per-sample stages ----------------------------------------------------

    async def solve_one(self, record: SampleRecord) -> None:
        assert self.solver is not None
        record.solve_started = time.time()
        self.at_work += 1
        try:
            with self.observer.stage(record):
                await self._solve(record)
        finally:
            self._left_stage()

    async def _solve(self, record: SampleRecord) -> None:
        assert self.solver is not None
        with self._scope("solver", record):
            try:
                with _deadline(self._time_left(record)):
                    solution = await call_solver(
                        self.solver, record.sample, self.solver_kwargs, self._threads
                    )
            except _FATAL:
                raise
            except Exception as exc:
                _raise_if_it_stops_the_run(exc)
                record.error = _sample_error("solve", exc, self.retry.sample_timeout)
            else:
                record.result = solution.result
                record.solver_chat = solution.chat
                record.solver_metadata = solution.metadata
        record.solve_completed = time.time()

    async def score_one(self, record: SampleRecord) -> None:
        assert self.scorer is not None
        record.score_started = time.time()
        self.at_work += 1
        try:
            with self.observer.stage(record):
                await self._score(record)
        finally:
            self._left_stage()

    def _left_stage(self) -> None:
        self.at_work -= 1
        if self.batches is not None:
            self.batches.nudge()

    async def _score(self, record: SampleRecord) -> None:
        assert self.scorer is not None
        with self._scope("scorer", record):
            try:
                with _deadline(self._time_left(record)):
                    scored = await call_scorer(
                        self.scorer, record.solved_sample(), self.scorer_kwargs, self._threads
                    )
                    record.set_score(scored)
            except _FATAL:
                raise
            except Exception as exc:
                _raise_if_it_stops_the_run(exc)
                record.error = _sample_error("score", exc, self.retry.sample_timeout)
        record.score_completed = time.time()

    # -- batch stages -----------------------------------------------------------

    async def _call_batch(self, spec: FunctionSpec, arg: Any, kwargs: dict[str, Any]) -> Any:
        if spec.is_async:
            return await spec.fn(arg, **kwargs)
        return await anyio.to_thread.run_sync(lambda: spec.fn(arg, **kwargs))

    async def solve_batch(self, records: Sequence[SampleRecord]) -> None:
        assert self.solver is not None
        todo = [r for r in records if r.error is None]
        if not todo:
            return
        started = time.time()
        who = f"batch solver {self.solver.name}"
        with self._scope("solver", None):
            try:
                out = await self._call_batch(
                    self.solver, [r.sample.input for r in todo], self.solver_kwargs
                )
            except _FATAL:
                raise
            except Exception as exc:
                _raise_if_it_stops_the_run(exc)
                for record in todo:
                    record.error = _sample_error("solve", exc, None)
                return
        if isinstance(out, dict):
            if "result" not in out:
                raise SolverError(
                    f"The {who} must return a dict with 'result'; got keys {list(out)}."
                )
            columns = {
                key: batch_column(out, key, len(todo), who, SolverError)
                for key in ("result", "solver_chat", "solver_metadata")
            }
            values: list[Any] = [{k: columns[k][i] for k in columns} for i in range(len(todo))]
        else:
            values = batch_column({"result": out}, "result", len(todo), who, SolverError)
        for record, value in zip(todo, values, strict=True):
            solution = normalise_solution(value, self.solver)
            record.result, record.solver_chat = solution.result, solution.chat
            record.solver_metadata = solution.metadata
            record.solve_started, record.solve_completed = started, time.time()

    async def score_batch(self, records: Sequence[SampleRecord]) -> None:
        assert self.scorer is not None
        assert self.samples_frame is not None
        todo = [r for r in records if r.error is None]
        if not todo:
            return
        started = time.time()
        who = f"batch scorer {self.scorer.name}"
        with self._scope("scorer", None):
            try:
                out = await self._call_batch(
                    self.scorer, self.samples_frame(todo), self.scorer_kwargs
                )
            except _FATAL:
                raise
            except Exception as exc:
                _raise_if_it_stops_the_run(exc)
                for record in todo:
                    record.error = _sample_error("score", exc, None)
                return
        keys = ("score", "answer", "explanation", "scorer_metadata", "scorer_chat")
        if isinstance(out, dict):
            if "score" not in out:
                raise ScorerError(
                    f"The {who} must return a dict with 'score'; got keys {list(out)}."
                )
            columns = {key: batch_column(out, key, len(todo), who, ScorerError) for key in keys}
            values: list[Any] = [{k: columns[k][i] for k in keys} for i in range(len(todo))]
        else:
            values = batch_column({"score": out}, "score", len(todo), who, ScorerError)
        for record, value in zip(todo, values, strict=True):
            try:
                record.set_score(normalise_score(value, self.scorer))
            except InvalidScore as exc:  # this sample's own failure, as in `_score`
                record.error = _sample_error("score", exc, None)
            record.score_started, record.score_completed = started, time.time()

    # -- the whole run -----------------------------------------------------------

    async def execute(
        self, records: Iterable[SampleRecord], sink: Callable[[SampleRecord], Awaitable[None]]
    ) -> None:
        """Solve and/or score `records`, handing each finished one to `sink`.

        Per-sample stages take the records lazily; a batch stage needs them all.
        """
        self.started_at = time.time()

        live = self.live

        budget = self.budget

        observer = self.observer

        async def counted(record: SampleRecord) -> None:
            observer.done(record)
            if live is not None and live.entries:
                live.drop(record.key)
            if budget is not None:
                self._started.pop(record.key, None)
                if self._finished is not None:
                    self._finished.set()
                    self._finished = None
                if record.error is _STOPPED:  # not finished: the budget stopped it
                    record.error = None  # (a record scored alone stays as it was solved)
                    return
                if any(not cached for *_, cached in record.usage.rows):
                    self.paid += 1
            self.done += 1
            if record.error is not None:
                self.failed += 1
            await sink(record)
            self._emit()

        self._executing += 1
        try:
            with relaxed_gc(), in_vitals_eval(), asyncio_named(), observer.running(self.progress):
                queues = BatchQueues(
                    self.batch,
                    self.clock,
                    self._emit,
                    at_work=self._at_work,
                    journal=self.batch_journal,
                    earlier=self.earlier_batches,
                )
                async with queues as batches:
                    self.batches = batches
                    if budget is not None:
                        budget.on_wait = batches.nudge  # a call waiting for room will not join
                    self.stacks = CallStacks(
                        retry=self.retry,
                        clock=self.clock,
                        cache=self.cache,
                        budget=budget,
                        batches=batches,
                        limits=self.limits,
                        replies=self.replies,
                        trace=observer.trace,
                    )
                    for endpoint, own in self.solver_endpoints:
                        self.limits.get(endpoint, own).solver_calls = True
                    if budget is not None:
                        records = self._within(budget, records)
                    await self._execute(records, counted)
        finally:
            if live is not None and live.entries:
                live.clear()
            self._executing -= 1
            if not self._executing:
                self.limits.close()
        self.completed_at = time.time()

    async def _execute(
        self, records: Iterable[SampleRecord], sink: Callable[[SampleRecord], Awaitable[None]]
    ) -> None:
        solver, scorer = self.solver, self.scorer
        if (solver is not None and solver.is_batch) or (scorer is not None and scorer.is_batch):
            records = list(records)
        if solver is not None and solver.is_batch:
            await self.solve_batch(list(records))
            solver = None
        solve_stage = self.solve_one if solver is not None else None
        per_sample_score = scorer is not None and not scorer.is_batch
        score_stage = self.score_one if per_sample_score else None
        # How many records there are, when known: no stage needs more workers than that.
        count = len(records) if isinstance(records, Sized) else self._count
        if scorer is not None and scorer.is_batch:
            await Supervisor(
                solve=solve_stage,
                score=None,
                sink=_ignore,
                concurrency=self.concurrency,
                total=count,
                spares=self._spares(),
                gate=self._gate(),
            ).run(records)
            await self.score_batch(list(records))
            for record in records:
                await sink(record)
        else:
            await Supervisor(
                solve=solve_stage,
                score=score_stage,
                sink=sink,
                concurrency=self.concurrency,
                total=count,
                spares=self._spares(),
                gate=self._gate(),
            ).run(records)

    def _gate(self) -> Gate:
        return self._admitted

    async def _admitted(self, held: Pass | None) -> Pass | None:
        """Before a sample is taken: the budget's warm-up, then a place at every endpoint
        the solver calls (see `pacing/admission.py`). `held`: the places of the sample the
        worker just finished, kept for this one when the endpoints allow it."""
        if self.fence is not None:
            try:
                await self.fence()
            except BaseException:
                if held is not None:
                    held.release()
                raise
        admissions = self.limits.solver_admissions()
        if isinstance(held, Places):
            if held.keep(admissions) and not self._warming():
                return held
            held.release()
        if self.budget is not None:
            await self._warm_up()
        if not admissions:
            return None
        return await Places.enter(self, admissions)

    def _at_work(self) -> int:
        """Samples at work that may still send a call to a batch (not counting calls that
        wait for room in the budget)."""
        budget = self.budget
        return self.at_work - budget.waiting if budget is not None else self.at_work

    def _within(self, budget: Budget, records: Iterable[SampleRecord]) -> Iterator[SampleRecord]:
        """The records, handed out while the budget admits one more (checked before a
        record is made, so a record made is a record run)."""
        source = iter(records)
        started = self._started
        while budget.admits(self.ledger, self.done, started.values(), self.paid):
            record = next(source, None)
            if record is None:
                return
            started[record.key] = record
            yield record

    def _warming(self) -> bool:
        """Whether the next sample must wait for one at work to finish (the budget's
        warm-up: nothing is known yet of what one costs)."""
        budget = self.budget
        return budget is not None and budget.warming(self.paid, len(self._started))

    async def _warm_up(self) -> None:
        """Before a sample is taken: while the budget warms up, wait for the few at work
        to finish."""
        while self._warming():
            if self._finished is None:
                self._finished = anyio.Event()
            await self._finished.wait()

    def _spares(self) -> int | None:
        """Spare workers per stage: in batch mode, enough for every sample that may wait
        on batches (they lend their seats), else as many as seats."""
        if self.batch is None:
            return None
        return max(self.concurrency, self.batch.pending)


async def _ignore(_: SampleRecord) -> None:
    return None
