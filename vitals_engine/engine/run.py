"""One run of a task: its parts, each with one job, wired together.

A `Run` is built whole from what it runs (`RunWork`), its options (`RunOptions`, as
`eval()` checked them, handed down whole; a Ray worker's with its share of the
concurrency) and what it is connected to (its journal, cache, budget, observer, the
live texts); nothing is filled in after. Its parts:

- `RunCounts` (`engine/counts.py`): what it has done and when, its progress;
- `SampleGate` (`engine/gate.py`): which samples start, and when (its budget, the
  endpoints' admission);
- the run's endpoint limits (`pacing/limits.py`: shared with the other runs of its event
  loop until it ends), retry policy and batch queues (`batching/queues.py`);
- while it is under way (`under_way()`): its call stacks, built once from its options
  (`chats/layers/stacks.py`), and its stages: per sample (`engine/stages.py`) and whole
  dataset (`engine/whole_dataset.py`).

`execute()` runs records through the stages with a `Supervisor` (`engine/supervisor.py`)
and hands each finished one to the caller's sink, counted. A Ray driver counts what its
workers send back through the same `RunCounts`, and runs a whole-dataset stage of its
own inside `under_way()`.

While a run is under way, `IN_VITALS_EVAL=true` is in the environment, for the user's
solvers and scorers and what they call (`engine/eval_env.py`), and the run is observed
(`engine/observing.py`): its fields on what the library logs, its trace when the
application set up OpenTelemetry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence, Sized
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from .._logging import log
from .._sync import asyncio_named
from ..batching.queues import BatchCounts, BatchQueues
from ..caching.lookup import CacheUse
from ..chats.layers.replies import Replies
from ..chats.layers.stacks import CallStacks
from ..pacing.budget import Budget
from ..pacing.clock import Clock, SystemClock
from ..pacing.limits import Endpoint, LimitsRegistry, RateLimits, RunLimits
from ..pacing.retry import Retry
from ..progress import Progress
from ..samples import SampleRecord
from ..sandboxes.kinds import sandbox_kind
from ..vocab.batch_records import BatchRecord
from ..vocab.transcript import NoteRecord
from ..vocab.usage import UsageLedger
from .counts import RunCounts
from .eval_env import in_vitals_eval
from .gate import SampleGate
from .gc_tuning import relaxed_gc
from .live_texts import LiveTexts
from .observing import RunObserver
from .options import RunOptions
from .sandboxing import RunSandboxes
from .stages import AtWork, SampleStages
from .supervisor import Supervisor
from .whole_dataset import WholeDatasetStages
from .work import RunWork

__all__ = ["Run", "RunJournal", "UnderWay"]

Sink = Callable[[SampleRecord], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RunJournal:
    """What a run's journal takes as the run goes, and what an earlier run of the same
    samples left in it.

    Attributes:
        replies: each model reply as it arrives, and the replies the earlier run received
            for the samples it did not finish, which answer the same calls (None: nothing
            journaled, nothing answered).
        batches: takes what is known of each provider batch, before it goes (None: no
            journal).
        earlier_batches: the batches the earlier run sent (the run takes their outcomes).
        fence: awaited before each sample is taken (None: nothing to wait for): a run
            logging to an object store waits there while its lock on the journal is in
            doubt.
    """

    replies: Replies | None = None
    batches: Callable[[BatchRecord], None] | None = None
    earlier_batches: Sequence[BatchRecord] = field(default_factory=tuple)
    fence: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True, slots=True)
class UnderWay:
    """A run's parts that exist while it is under way (`Run.under_way()`)."""

    stacks: CallStacks
    stages: SampleStages
    whole: WholeDatasetStages


class Run:
    """The parts of one run, and their wiring (see the module docstring).

    Example:
        >>> work = RunWork(solver=spec_of(solver, "solver"), scorer=None)
        >>> run = Run(work=work, options=RunOptions(max_concurrency=10))
        >>> await run.execute(records, sink=store)
        >>> run.counts.done
        3
    """

    def __init__(
        self,
        *,
        work: RunWork,
        options: RunOptions,
        journal: RunJournal | None = None,
        cache: CacheUse | None = None,
        budget: Budget | None = None,
        solver_endpoints: Sequence[tuple[Endpoint, RateLimits | None]] = (),
        limits: LimitsRegistry | None = None,
        observer: RunObserver | None = None,
        live: LiveTexts | None = None,
        total: int | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.work = work
        #: The run's options, as eval() checked them (`engine/options.py`).
        self.options = options
        self.concurrency = options.max_concurrency
        self.journal = journal or RunJournal()
        #: The run's use of the cache of replies (None: only models with their own).
        self.cache = cache
        #: The run's budget (None: none); it stops handing out samples when reached.
        self.budget = budget
        #: The endpoints the solver is known to call before it runs, with the model's own
        #: limits: new samples wait for their admission from the first.
        self.solver_endpoints = solver_endpoints
        #: What the application sees of the run: its fields on what is logged, its trace.
        self.observer = observer or RunObserver()
        #: The streamed text of in-flight samples, for the live viewer (None: not kept).
        self.live = live
        self.clock = clock or SystemClock()
        self.ledger = UsageLedger()
        if budget is not None:
            budget.ledger = self.ledger  # what its caps measure
        #: The run's endpoint limits, shared with the other runs of its event loop (a Ray
        #: worker's: with the cluster's).
        self.limits: LimitsRegistry = limits or RunLimits(
            options.rate_limits, self.concurrency, self.clock
        )
        self.retry = options.retry or Retry()
        self.counts = RunCounts(total=total, on_progress=on_progress, snapshot=self.progress)
        self.gate = SampleGate(
            limits=self.limits,
            budget=budget,
            ledger=self.ledger,
            counts=self.counts,
            fence=self.journal.fence,
        )
        self.at_work = AtWork()
        #: The batch queues of its latest opening (`under_way()`; None before the first):
        #: their counts and records stay for the record. (A Ray worker's run is opened by
        #: each parcel at once, each with queues of its own.)
        self.batches: BatchQueues | None = None
        #: The sandboxes of its samples (None: the task has none).
        self.sandboxes = (
            RunSandboxes(
                sandbox_kind(work.sandbox),
                run_id=self.observer.run_id or "run",
                max_sandboxes=options.max_sandboxes or self.concurrency,
            )
            if work.sandbox is not None
            else None
        )
        self._threads = anyio.CapacityLimiter(self.concurrency)
        #: `under_way()` openings going on (the run lets go of its endpoints when none is).
        self._open = 0

    # -- what it has done ---------------------------------------------------------------

    def progress(self) -> Progress:
        """A snapshot of the run so far."""
        counts = self.counts
        cost, tokens = self.ledger.spent()
        cache = self.cache
        if cache is not None and cache.default is None and not (cache.hits or cache.misses):
            cache = None  # no cache in this run: nothing to show
        batches = self.batches.counts if self.batches is not None else BatchCounts()
        return Progress(
            done=counts.done,
            total=counts.total,
            failed=counts.failed,
            retries=counts.retries,
            tokens=tokens,
            cost=cost,
            elapsed=counts.elapsed(),
            cache_hits=cache.hits if cache is not None else None,
            cache_misses=cache.misses if cache is not None else None,
            batch_queued=batches.queued,
            batch_submitted=batches.submitted,
            batch_waiting=batches.waiting,
            batch_done=batches.done,
        )

    def _at_work(self) -> int:
        """Samples at work that may still send a call to a batch (not counting calls that
        wait for room in the budget)."""
        budget = self.budget
        at_work = self.at_work.count
        return at_work - budget.waiting if budget is not None else at_work

    # -- under way ------------------------------------------------------------------------

    @asynccontextmanager
    async def under_way(self) -> AsyncIterator[UnderWay]:
        """The run under way: observed, its batch queues open, its call stacks built from
        its options, its stages ready. When the last opening ends, it lets go of its
        endpoints."""
        self._open += 1
        observer, budget = self.observer, self.budget
        queues = BatchQueues(
            self.options.batch,
            self.clock,
            self.counts.emit,
            at_work=self._at_work,
            journal=self.journal.batches,
            earlier=self.journal.earlier_batches,
        )
        try:
            with relaxed_gc(), in_vitals_eval(), asyncio_named(), observer.running(self.progress):
                if self.sandboxes is not None and self._open == 1:
                    await self.sandboxes.start()  # a missing bwrap or daemon: before any call
                async with queues as batches:
                    self.batches = batches
                    if budget is not None:
                        budget.on_wait = batches.nudge  # a call waiting for room will not join
                    stacks = CallStacks(
                        retry=self.retry,
                        clock=self.clock,
                        cache=self.cache,
                        budget=budget,
                        batches=batches,
                        limits=self.limits,
                        replies=self.journal.replies,
                        trace=observer.trace,
                        on_retry=self.counts.retried,
                        sample_limits=self.options.sample_limits is not None,
                    )
                    for endpoint, own in self.solver_endpoints:
                        self.limits.get(endpoint, own).solver_calls = True
                    yield UnderWay(
                        stacks=stacks,
                        stages=SampleStages(
                            work=self.work,
                            stacks=stacks,
                            ledger=self.ledger,
                            observer=observer,
                            threads=self._threads,
                            sample_timeout=self.retry.sample_timeout,
                            live=self.live,
                            at_work=self.at_work,
                            left=batches.nudge,
                            limits=self.options.sample_limits,
                            sandboxes=self.sandboxes,
                        ),
                        whole=WholeDatasetStages(work=self.work, stacks=stacks, ledger=self.ledger),
                    )
        finally:
            live = self.live
            if live is not None and live.entries:
                live.clear()
            self._open -= 1
            if not self._open:
                self.limits.close()
                if self.sandboxes is not None:
                    await self.sandboxes.close_all()

    async def execute(self, records: Iterable[SampleRecord], sink: Sink) -> None:
        """Solve and/or score `records`, handing each finished one to `sink`, counted.

        Per-sample stages take the records lazily; a whole-dataset stage needs them all.
        """
        self.counts.start()
        async with self.under_way() as parts:
            await self._execute(parts, self.gate.within(records), self._counted(sink))
        self.counts.stop()

    def _counted(self, sink: Sink) -> Sink:
        counts, gate, observer, live = self.counts, self.gate, self.observer, self.live
        sandboxes, replies = self.sandboxes, self.journal.replies

        async def counted(record: SampleRecord) -> None:
            if sandboxes is not None:
                await sandboxes.close(record)
            if replies is not None:
                _note_replies_left(record, replies.left_over(record.key))
            observer.done(record)
            if live is not None and live.entries:
                live.drop(record.key)
            if not gate.left(record):
                return  # not finished: the budget stopped it
            counts.finished(record)
            await sink(record)
            counts.emit()

        return counted

    async def _execute(self, parts: UnderWay, records: Iterable[SampleRecord], sink: Sink) -> None:
        work, stages = self.work, parts.stages
        solver, scorer = work.solver, work.scorer
        if work.vectorized:
            records = list(records)
        if solver is not None and solver.vectorized:
            await parts.whole.solve_all(list(records))
            solver = None
        solve = stages.solve if solver is not None else None
        whole_scorer = scorer is not None and scorer.vectorized
        score = stages.score if scorer is not None and not whole_scorer else None
        # How many records there are, when known: no stage needs more workers than that.
        count = len(records) if isinstance(records, Sized) else (self.counts.total or None)
        supervisor = Supervisor(
            solve=solve,
            score=score,
            sink=_ignore if whole_scorer else sink,
            concurrency=self.concurrency,
            total=count,
            spares=self._spares(),
            gate=self.gate.admitted,
        )
        await supervisor.run(records)
        if whole_scorer:
            assert isinstance(records, list)
            await parts.whole.score_all(records)
            for record in records:
                await sink(record)

    def _spares(self) -> int | None:
        """Spare workers per stage: in batch mode, enough for every sample that may wait
        on batches (they lend their seats), else as many as seats."""
        batch = self.options.batch
        if batch is None:
            return None
        return max(self.concurrency, batch.pending)


def _note_replies_left(record: SampleRecord, left: int) -> None:
    """A resumed sample whose journaled replies did not all answer its calls went on live
    (a tool gave another result than the run it resumes had): its transcript says so."""
    if not left:
        return
    said = (
        f"Resumed: {left} reply(ies) the stopped run had received answered no call of this "
        "run (a tool gave another result, and the sample went on live from there)."
    )
    record.events.append(NoteRecord(said, time.time()))
    log.info("resume: a sample went on live", sample=record.sample.id, unused_replies=left)


async def _ignore(_: SampleRecord) -> None:
    return None
