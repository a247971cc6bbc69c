"""The Ray actor that runs samples through our engine in its own event loop.

A worker serves one run at a time and may serve several in turn (the driver keeps
it between runs: `pool.py`). A run begins with `begin(payload, hub, id)`: a payload
of cloudpickled bytes (the solver's and scorer's specs, their keyword arguments,
the run's options whole, its share of the concurrency), the run's limits
hub and the worker's id there. For the run it holds one `Run` and one pool of
connections: every parcel of samples it works on shares them; `end()` closes them. Its
endpoint limiters lease their capacity from the run's coordinators (`leases.py`),
which push grants, give-back requests and pauses to `adjust`.

The driver makes two kinds of calls, so that Ray is called per parcel, never per
sample. `feed(parcel)` hands over a parcel of records (cloudpickled, one blob) and
returns at once; the worker runs it (per-sample stages; the supervisor, limits
and retries as in a local run). `serve()` is one long call per run: a Ray
streaming generator that yields what finished, gathered over at most `TICK`
seconds, until `stop()` is called and nothing is at work. Each finished record
comes with its journal line, composed and encoded here so the driver only writes
it. Unless the driver streams records to its caller, the records come back
spilled (their chats are in the line) and without their sample's content (the
driver has it). While replies stream, `serve()` also sends a snapshot of the
text of the samples at work, at most every `LIVE_EVERY` seconds, for the live
viewer. With what finished, and at least every `SPENT_EVERY` seconds while it
changes, it sends the usage of the samples still at work (what this worker's
calls spent beyond the usage of the records it sent back): if the worker dies,
the driver counts those tokens, which its samples' next run does not carry.
Each model reply goes to the driver as it arrives, with what finished: `serve()`
sends it (its journal line, composed here, with its sample's id and epoch) at most
`TICK` seconds later, and before the record of its sample, for the driver to
append to the run's journal (a resumed run answers that call from it). The replies
an earlier run journaled for the samples of a parcel come with the parcel and
answer the same calls here. When the driver's run is traced, the plan carries its trace
context, and the worker's samples are spans of that trace (if the worker's process has
OpenTelemetry set up). A parcel that raises (an error that stops the run) is
raised by `serve()`. Ray is imported here only inside the actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from .._sync import carry
from ..caching.lookup import CacheUse
from ..chats.layers.replies import Replies
from ..engine.live_texts import LiveTexts
from ..engine.observing import RunObserver
from ..engine.options import RunOptions
from ..engine.run import Run, RunJournal
from ..engine.work import RunWork
from ..log.compose import compose_sample
from ..log.journal_format import encode_reply, encode_sample
from ..pacing.clock import SystemClock
from ..samples import SampleRecord
from ..transport.pool import TransportPool, using_pool
from ..vocab.model_calls import JournaledReply
from ..vocab.usage import UsageLedger
from .coordinator import Endpoint
from .leases import SharedLimitsRegistry
from .wire import Finished, LiveSnapshot, Replied, finished_out, live_out, parcel_parts

__all__ = ["LIVE_EVERY", "SPENT_EVERY", "TICK", "SampleWorker", "WorkerPlan"]

#: Seconds `serve()` gathers finished records for before it yields them again.
TICK = 0.05

#: Seconds between two snapshots of the live text sent to the driver, at least.
LIVE_EVERY = 0.25

#: Seconds between two reports of the usage of samples at work, while nothing finishes.
SPENT_EVERY = 1.0


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What every worker of a run needs to build its `Run` (sent cloudpickled)."""

    #: What runs on the workers: the run's per-sample solver and/or scorer.
    work: RunWork
    #: The run's options, whole, as eval() checked them.
    options: RunOptions
    #: This worker's share of the run's concurrency: its `Run`'s `max_concurrency`.
    concurrency: int
    #: The concurrency of the whole cluster: an endpoint's total when its limits set none.
    cluster_concurrency: int
    #: The scorer's name in the log (`compose_sample`).
    scorer_label: str | None = None
    #: Send the records back whole (chats included): the driver streams them.
    keep_chats: bool = False
    #: Send the streamed text of in-flight samples (for the live viewer).
    live: bool = False
    #: The task and log the replies it keeps in the run's cache name as their origin.
    cache_task: str | None = None
    cache_log: str | None = None
    #: The run's task and id, on what the worker logs.
    task: str | None = None
    run_id: str | None = None
    #: The driver's trace of the run, as W3C trace context (`traceparent`, `tracestate`):
    #: the worker's samples continue it (None: the run is not traced).
    trace_context: dict[str, str] | None = None


class _ParcelTexts(LiveTexts):
    """A worker's live texts. Its one `Run` executes many parcels at once: a parcel that
    ends must not clear the texts of the others (each goes as its sample finishes)."""

    __slots__ = ()

    def clear(self) -> None:
        pass


class SampleWorker:
    """One worker of distributed runs (made a Ray actor by the driver), one run at a time:
    `begin`, then `feed` and `serve` until `stop`, then `end`; then maybe another run."""

    def __init__(self) -> None:
        self.cloudpickle = importlib.import_module("ray.cloudpickle")
        self.plan: WorkerPlan | None = None

    async def begin(self, payload: bytes, hub: Any = None, index: int = 0) -> None:
        """Start a run: its plan (`WorkerPlan`, cloudpickled), its limits hub, and this
        worker's id there (unique over the hub's life)."""
        self.plan = plan = self.cloudpickle.loads(payload)
        self.hub = hub
        self.index = index
        self.run: Run | None = None  # made in the actor's event loop, on the first parcel
        self.pool = TransportPool(max(1, plan.concurrency))
        self.finished: list[Finished] = []
        #: The replies that arrived since the last report, for the driver's journal; the
        #: run's `Replies` takes each as it arrives, and those of earlier runs.
        self.replied: list[Replied] = []
        self.replies = Replies(self._replied)
        self.parcels: set[asyncio.Task[None]] = set()
        self.failure: BaseException | None = None
        self.stopping = False
        self.more = asyncio.Event()  # something finished, failed or streamed, or stop()
        self.texts = _ParcelTexts(on_change=self._text_changed) if plan.live else None
        self.texts_changed = False
        self.texts_sent = 0.0  # time.monotonic() of the last snapshot sent
        #: The usage of the records sent back, in the roles that run here.
        self.sent = UsageLedger()
        work = plan.work
        self.roles = [r for r, spec in (("solver", work.solver), ("scorer", work.scorer)) if spec]
        self.spent_sent = 0.0  # time.monotonic() of the last report of usage at work
        self.spent_shown: object = []  # what it reported, to send only changes

    async def end(self) -> None:
        """The run is over (`serve()` has ended): close its connections, let go of it."""
        await self.pool.aclose()
        self.run = None
        self.plan = None

    def _run(self) -> Run:
        if self.run is None:
            plan = self.plan
            assert plan is not None, "begin() first"
            options = plan.options
            clock = SystemClock()
            limits = None
            if self.hub is not None:
                me = importlib.import_module("ray").get_runtime_context().current_actor
                limits = SharedLimitsRegistry(
                    self.hub, self.index, me, options.rate_limits, plan.cluster_concurrency, clock
                )
            self.run = Run(
                work=plan.work,
                options=replace(options, max_concurrency=plan.concurrency),
                journal=RunJournal(replies=self.replies),
                cache=CacheUse(options.cache, task=plan.cache_task, log=plan.cache_log),
                limits=limits,
                observer=RunObserver(
                    task=plan.task, run_id=plan.run_id, carrier=plan.trace_context
                ),
                live=self.texts,
                clock=clock,
            )
        return self.run

    async def feed(self, parcel: bytes) -> None:
        """Start running a parcel of records (`wire.parcel_out`), with the replies an
        earlier run journaled for them; return at once."""
        records, earlier = parcel_parts(parcel)
        if earlier:
            self.replies.add(earlier)
        # an interrupt (KeyboardInterrupt, SystemExit from a solver) would leave the actor's
        # event loop; as `Interrupted` it stops the run like any fatal error
        task = asyncio.ensure_future(carry(self._execute, records))
        self.parcels.add(task)
        task.add_done_callback(self._parcel_done)

    async def _execute(self, records: list[SampleRecord]) -> None:
        async def keep(record: SampleRecord) -> None:
            for role in self.roles:
                self.sent.merge(record.usage, role=role)
            self.finished.append(self._finished(record))
            self.more.set()

        with using_pool(self.pool):
            await self._run().execute(records, keep)

    def _replied(self, reply: JournaledReply) -> None:
        """A model reply arrived: its journal line goes to the driver with the next report."""
        self.replied.append((reply.sample, reply.epoch, encode_reply(reply)))
        self.more.set()

    def _parcel_done(self, task: asyncio.Task[None]) -> None:
        self.parcels.discard(task)
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()
        self.more.set()

    async def serve(self) -> AsyncIterator[bytes]:
        """What finished (a list of `wire.Finished`), a snapshot of the live text when it
        changed (`wire.live_out`, else None), the usage of the samples at work when it
        changed (a `UsageLedger`, else None) and the replies that arrived (a list of
        `wire.Replied`, the driver writes them before the records), cloudpickled as a
        4-tuple: at most every `TICK` seconds (the text at most every `LIVE_EVERY`, the
        usage alone at most every `SPENT_EVERY`), until `stop()` and nothing at work (a
        Ray streaming generator)."""
        try:
            while True:
                if self.failure is not None:
                    raise self.failure
                now = time.monotonic()
                texts_due = self.texts_changed and now - self.texts_sent >= LIVE_EVERY
                spent = self._spent_at_work()
                due = spent and now - self.spent_sent >= SPENT_EVERY
                if self.finished or self.replied or texts_due or due:
                    out, self.finished = self.finished, []
                    replied, self.replied = self.replied, []
                    texts = self._texts() if texts_due else None
                    if spent is not None:
                        self.spent_sent, self.spent_shown = now, spent[1]
                    at_work = spent[0] if spent is not None else None
                    yield self.cloudpickle.dumps((out, texts, at_work, replied))
                    await asyncio.sleep(TICK)
                    continue
                if self.texts_changed:  # changed since the last snapshot, sent just now
                    await asyncio.sleep(self.texts_sent + LIVE_EVERY - now)
                    continue
                if self.stopping and not self.parcels:
                    return
                self.more.clear()
                with contextlib.suppress(TimeoutError):  # to report the usage at work
                    await asyncio.wait_for(self.more.wait(), SPENT_EVERY)
        finally:
            for task in list(self.parcels):
                task.cancel()

    def _spent_at_work(self) -> tuple[UsageLedger, object] | None:
        """What the samples at work have spent so far, and its summary, when it changed
        since the last report (else None)."""
        if self.run is None:
            return None
        at_work = self.run.ledger.less(self.sent)  # its ledger has only the calls made here
        shown = sorted((key, row.requests, row.tokens.total) for key, row in at_work.rows.items())
        return None if shown == self.spent_shown else (at_work, shown)

    def _text_changed(self) -> None:
        self.texts_changed = True
        self.more.set()

    def _texts(self) -> LiveSnapshot:
        assert self.texts is not None
        self.texts_changed, self.texts_sent = False, time.monotonic()
        return live_out(self.texts)

    async def stop(self) -> None:
        """No more parcels will come: `serve()` ends once the ones at work are back."""
        self.stopping = True
        self.more.set()

    def _finished(self, record: SampleRecord) -> Finished:
        plan = self.plan
        assert plan is not None
        line = encode_sample(compose_sample(record, plan.scorer_label))
        if not plan.keep_chats:
            usage = record.usage
            record.spill()
            record.usage = usage  # the driver adds it to the run's ledger
        return finished_out(record, line)

    async def adjust(
        self, worker: int, endpoint: Endpoint, grant: int, shed: int, pause_for: float, trim: bool
    ) -> None:
        """A push from an endpoint's coordinator to worker id `worker`: slots granted or
        asked back, a pause (one meant for an earlier run is left alone)."""
        if self.run is not None and isinstance(self.run.limits, SharedLimitsRegistry):
            self.run.limits.adjust(worker, endpoint, grant, shed, pause_for, trim)

    def ready(self) -> bool:
        """True once the actor is up (its constructor ran, the payload loaded)."""
        return True
