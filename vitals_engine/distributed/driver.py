"""The driver of a distributed run: the user's process hands samples to Ray workers and
takes them back finished.

Work is pulled: the driver feeds each worker a parcel of records from the run's
lazy source (`worker.feed`) whenever a parcel's worth of that worker's share of
the concurrency is free, so records are made as workers have room for them and
a slow worker takes fewer. What finishes comes back at once over one stream per
worker (`worker.serve`, a few times a second at most, whatever the rate), with
each record's journal line: the records' results are copied onto the driver's
own records (those the run keeps), their usage is added to the run's ledger, and
they go with their lines to the same sink as in a local run (journal, log,
`stream_async()`, progress). Ray is called per parcel, never per sample.

Replies: each model reply a worker receives comes back with its next report (at most
`worker.TICK` seconds later), before the record of its sample, and the driver
appends it to the run's journal (`replies`), so a resumed run does not buy it again.
A parcel carries the replies an earlier run journaled for its samples. While a
sample is at work, the driver keeps the lines of its replies: if its worker dies, the
worker that runs it next gets them, and those calls are not sent again.

Before any worker starts, the solver, the scorer, their keyword arguments and
one sample are cloudpickled: what cannot be sent is a ConfigError naming it. Each
worker gets the run's options whole (`WorkerPlan`), with its share of the
concurrency, and the run's trace context (W3C), which its samples' spans continue.

RateLimits: the driver starts the run's `LimitsHub` (a Ray actor), whose
endpoint coordinators lease each endpoint's rpm, tpm and concurrency to the
workers (`coordinator.py`, `leases.py`), so they hold for the cluster. At the
end, their concurrency changes go to the run's log as a local run's do.

Placement: the workers go to the cluster's alive nodes with CPUs in turn, the
driver's node first (Ray's "SPREAD" alone is best effort: it put both workers of a
two-node run on one node about half the time), and the hub to the driver's node,
so that losing another node loses workers but never the hub. A worker whose node
is gone before it starts cannot be placed: it counts as a worker that died.

Start: a run's workers and hub are Ray actors kept by the process between runs
(`pool.py`): the first run starts them (a Ray process each, seconds), later runs
find them ready. A run that ends well gives them back, to be stopped after
`Ray(keep_alive=...)` seconds idle; a run that does not kills them. A kept actor
that died meanwhile is replaced. A worker that cannot load the run (a module its
solver needs is missing on its node) is a ConfigError saying so.

Faults: a worker that dies (its actor killed, its process or node lost) loses
nothing. Its slots go back to the coordinators. The records it had at work go
back to the front of a queue that every feeder takes from before the source, and
the other workers run them. What it had finished came back already and was
journaled. A record whose worker died `MAX_DEATHS` times while running it is not
sent again: it fails as a sample error. A feeder with nothing to take waits while
records are at work anywhere, since they may come back. When every worker is
dead, `WorkerLostError`.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import math
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from .._errors import ConfigError, VitalsError, WorkerLostError
from .._logging import log
from .._sync import Interrupted, on_asyncio
from .._words import plural
from ..engine.run import Run
from ..engine.work import RunWork
from ..log.journal_format import decode_reply
from ..samples import SampleError, SampleRecord
from ..vocab.usage import UsageLedger
from .backend import Ray, import_ray
from .coordinator import LimitsHub
from .pool import POOL
from .wire import Finished, Replied, finished_in, live_in, parcel_out
from .worker import SampleWorker, WorkerPlan

__all__ = ["LAST_REPORT", "MAX_DEATHS", "PARCEL_SIZE", "check_sendable", "execute_on_ray"]

#: Records per parcel fed to a worker at most (a worker hands back each as it finishes).
PARCEL_SIZE = 64

#: A record whose worker died this many times while running it fails (a sample error).
MAX_DEATHS = 3

#: What the coordinators of the last Ray run in this process reported, by endpoint
#: (their concurrency changes, how often they were called): for benchmarks.
LAST_REPORT: dict[tuple[str, str, str], dict[str, Any]] = {}

_ADVICE = (
    "Solvers and scorers run on Ray workers are sent there with cloudpickle, so they "
    "must be picklable: no open files, locks, threads or clients bound to an event "
    "loop in what they hold; make such things inside the function instead."
)


def _pickled(what: str, value: Any) -> bytes:
    cloudpickle = importlib.import_module("ray.cloudpickle")
    try:
        return cloudpickle.dumps(value)
    except Exception as exc:
        raise ConfigError(f"{what} cannot be sent to Ray workers: {exc!r}. {_ADVICE}") from exc


def check_sendable(work: RunWork, sample: Any = None) -> None:
    """Raise a ConfigError, before any request, when a run of `work` cannot go to Ray
    workers. A whole-dataset stage runs on the driver: it is not sent."""
    import_ray()
    for spec, kwargs in ((work.solver, work.solver_kwargs), (work.scorer, work.scorer_kwargs)):
        if spec is None or spec.vectorized:
            continue
        _pickled(f"The {spec.role} {spec.name}", spec)
        for name, value in kwargs.items():
            _pickled(f"The {spec.role} argument {name}=", value)
    if sample is not None:
        _pickled("A dataset sample", sample)


async def _with_whole_dataset_stage(
    backend: Ray,
    run: Run,
    records: Iterable[SampleRecord],
    sink: Callable[[list[SampleRecord], list[bytes] | None], Awaitable[None]],
    scorer_label: str | None,
    keep_chats: bool,
    replies: Callable[[list[bytes]], None] | None,
) -> None:
    """A run with a vectorized solver or scorer: its whole-dataset stage takes every sample
    at once, on the driver; the other stage, per sample, runs on the workers."""
    work, counts = run.work, run.counts
    solver, scorer = work.solver, work.scorer
    if (solver is None or solver.vectorized) and (scorer is None or scorer.vectorized):
        await run.execute(records, lambda record: sink([record], None))  # nothing to spread
        return
    records = list(records)
    if solver is not None and solver.vectorized:
        counts.start()
        async with run.under_way() as parts:
            await parts.whole.solve_all(records)
        await execute_on_ray(
            backend,
            run,
            records,
            sink,
            work=work.without("solver"),
            scorer_label=scorer_label,
            keep_chats=keep_chats,
            usage_of="scorer",
            replies=replies,
        )
        return
    solved: list[SampleRecord] = []

    async def keep(finished: list[SampleRecord], lines: list[bytes] | None) -> None:
        solved.extend(finished)

    await execute_on_ray(
        backend,
        run,
        records,
        keep,
        work=work.without("scorer"),
        keep_chats=True,
        replies=replies,
    )
    async with run.under_way() as parts:
        await parts.whole.score_all(solved)
    counts.failed_later(sum(1 for r in solved if r.error is not None and r.error.stage == "score"))
    await sink(solved, None)
    counts.stop()


def _plan(
    run: Run,
    work: RunWork,
    concurrency: int,
    cluster_concurrency: int,
    scorer_label: str | None,
    keep_chats: bool,
) -> bytes:
    """What every worker of the run gets (`WorkerPlan`), cloudpickled: the run's options
    whole, each worker's share of its concurrency, the `work` that runs on the workers."""
    cache = run.cache
    return _pickled(
        "The run",
        WorkerPlan(
            work=RunWork(
                work.solver,
                work.scorer,
                work.solver_kwargs,
                work.scorer_kwargs,
                sandbox=work.sandbox,
            ),
            options=run.options,
            concurrency=concurrency,
            cluster_concurrency=cluster_concurrency,
            scorer_label=scorer_label,
            keep_chats=keep_chats,
            live=run.live is not None,
            cache_task=cache.task if cache is not None else None,
            cache_log=cache.log if cache is not None else None,
            task=run.observer.task,
            run_id=run.observer.run_id,
            trace_context=run.observer.carrier_out(),
        ),
    )


def _start(ray: Any, backend: Ray) -> None:
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        ray.init(address=backend.address, include_dashboard=False, ignore_reinit_error=True)
    except Exception as exc:
        where = f"at {backend.address!r}" if backend.address else "locally"
        raise ConfigError(f"Could not start or join a Ray cluster {where}: {exc}") from exc


def _reraised(ray: Any, exc: BaseException) -> BaseException:
    """What a worker raised, as itself when it is ours (or an interrupt)."""
    cause = getattr(exc, "cause", None)
    if not isinstance(exc, ray.exceptions.RayTaskError):
        return exc
    if isinstance(cause, Interrupted):
        return cause.interrupt
    if isinstance(cause, VitalsError | KeyboardInterrupt | SystemExit):
        return cause
    return exc


async def _result(ray: Any, ref: Any, threads: anyio.CapacityLimiter) -> Any:
    try:
        if on_asyncio():
            return await ref
        return await anyio.to_thread.run_sync(ray.get, ref, abandon_on_cancel=True, limiter=threads)
    except ray.exceptions.RayTaskError as exc:
        raise _reraised(ray, exc) from None


async def _results(ray: Any, stream: Any, threads: anyio.CapacityLimiter) -> AsyncIterator[Any]:
    """What a Ray streaming generator yields, as it yields it."""
    if on_asyncio():
        async for ref in stream:
            yield await _result(ray, ref, threads)
        return
    while True:  # trio: Ray's generators are waited on in threads
        ref = await anyio.to_thread.run_sync(
            next, stream, None, abandon_on_cancel=True, limiter=threads
        )
        if ref is None:
            return
        yield await _result(ray, ref, threads)


async def execute_on_ray(
    backend: Ray,
    run: Run,
    records: Iterable[SampleRecord],
    sink: Callable[[list[SampleRecord], list[bytes] | None], Awaitable[None]],
    *,
    work: RunWork | None = None,
    scorer_label: str | None = None,
    keep_chats: bool = False,
    usage_of: str | None = None,
    replies: Callable[[list[bytes]], None] | None = None,
) -> None:
    """Solve and/or score `records` on Ray workers, handing the finished ones to `sink`
    (in the driver's event loop) as they come back, a parcel at a time: what `Run.execute`
    does in process one by one.

    `sink` gets each parcel's records with their journal lines, composed by the workers
    with `scorer_label` as the scorer's name (or None, for records that failed here and
    are to be composed by the sink). The records come back spilled (`SampleRecord.spill`,
    their usage kept) unless `keep_chats`. A vectorized solver or scorer runs here, on every
    sample at once. `work`: what runs on the workers (default: the run's). `usage_of`:
    the one role whose usage the records bring (the run's ledger has the other's
    already); None: both. `replies` takes the journal lines of the model replies the
    workers received, as they come back (the run's journal)."""
    if work is None:
        work = run.work
        if work.vectorized:
            await _with_whole_dataset_stage(
                backend, run, records, sink, scorer_label, keep_chats, replies
            )
            return
    ray = import_ray()
    check_sendable(work)
    source = _started(run, records)
    if source is None:  # no record: the run is over
        return
    await anyio.to_thread.run_sync(_start, ray, backend)
    shape = _Shape.of(ray, backend, run)
    payload = _plan(run, work, shape.per_worker, shape.concurrency, scorer_label, keep_chats)
    on_ray = _OnRay(ray, backend, run, work, shape, source, sink, usage_of, replies)
    await on_ray.execute(payload)
    run.counts.stop()


def _started(run: Run, records: Iterable[SampleRecord]) -> Iterator[SampleRecord] | None:
    """Start the run: its records, the first one checked for sending; None when there are
    none (the run is over)."""
    source = iter(records)
    first = next(source, None)
    run.counts.start()
    if first is None:
        run.counts.stop()
        return None
    _pickled("A dataset sample", first.sample)
    return itertools.chain([first], source)


@dataclass(frozen=True, slots=True)
class _Shape:
    """How a run spreads over the cluster: its workers, the samples at work across them
    and on each, and the most records a parcel holds."""

    workers: int
    concurrency: int
    per_worker: int
    parcel_size: int

    @classmethod
    def of(cls, ray: Any, backend: Ray, run: Run) -> _Shape:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        workers = backend.workers or max(1, cpus)
        concurrency = backend.max_concurrency or run.concurrency
        total = run.counts.total
        if total:
            concurrency = min(concurrency, total)
            workers = min(workers, concurrency)
        per_worker = math.ceil(concurrency / workers)
        size = max(1, min(PARCEL_SIZE, per_worker // 2 or 1))
        return cls(workers, concurrency, per_worker, size)


class _OnRay:
    """One run's workers, seen from the driver, and the steps that drive them: start the
    hub and each worker (`execute`, `_begin`), feed each worker parcels (`_feeder`, `_take`),
    take back what it finishes (`_reader`, `_finish`), and send on what a dead one left
    (`_lost`). See the module docstring."""

    def __init__(
        self,
        ray: Any,
        backend: Ray,
        run: Run,
        work: RunWork,
        shape: _Shape,
        source: Iterator[SampleRecord],
        sink: Callable[[list[SampleRecord], list[bytes] | None], Awaitable[None]],
        usage_of: str | None,
        replies: Callable[[list[bytes]], None] | None = None,
    ) -> None:
        self.ray, self.backend, self.run, self.work, self.shape = ray, backend, run, work, shape
        self.source, self.sink, self.usage_of = source, sink, usage_of
        self.journal_replies = replies
        #: The journal lines of the replies of each sample at work, by key.
        self.replied: dict[tuple[int | str, int], list[bytes]] = {}
        self.cloudpickle = importlib.import_module("ray.cloudpickle")
        self.here, nodes = _nodes(ray)
        self.key = (ray.get_runtime_context().get_job_id(), SampleWorker)
        workers = shape.workers
        self.threads = anyio.CapacityLimiter(2 * workers + 1)
        self.dead = (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError)
        self.placed = [nodes[index % len(nodes)] if nodes else None for index in range(workers)]
        self.hub: Any = None
        self.actors: list[Any] = [None] * workers
        self.ids: list[int] = []
        self.alive = [True] * workers
        # the records each worker has at work, by key: sent and not back
        self.at_work: list[dict[tuple[int | str, int], SampleRecord]] = [{} for _ in range(workers)]
        self.again: deque[SampleRecord] = deque()  # a dead worker's records: before the source
        self.deaths: dict[tuple[int | str, int], int] = {}
        self.texts = run.live  # the streamed text of the samples at work, for the live viewer
        self.shown: list[set[tuple[int | str, int]]] = [set() for _ in range(workers)]
        # what each worker's samples at work had spent, at its last report
        self.spent_at_work: list[UsageLedger | None] = [None] * workers
        self.changed = anyio.Event()

    async def execute(self, payload: bytes) -> None:
        """Start the hub and the workers (kept ones first), run every record, and hand
        the actors back (kept for the next run if this one ended well)."""
        ray, key, workers = self.ray, self.key, self.shape.workers
        self.payload = payload
        POOL.forget(lambda kept: kept[0] == key[0])  # those of an earlier Ray are gone
        self.hub = POOL.take_hub(key)
        self.ids = [POOL.worker_id() for _ in range(workers)]
        self.actors = [POOL.take_worker(key, self.placed[index]) for index in range(workers)]
        ended_well = False
        try:
            await self._start_hub()
            async with anyio.create_task_group() as tg:
                for index in range(workers):
                    tg.start_soon(self._work, index)
            _keep_history(self.run, await self._wait(self.hub.reports.remote()))
            ended_well = True
        finally:
            if self.texts is not None:
                self.texts.clear()
            await _hand_back(
                ray,
                self.backend,
                key,
                self.hub,
                self.actors,
                self.placed,
                self.alive,
                ended_well,
                self.threads,
            )

    async def _wait(self, ref: Any) -> Any:
        return await _result(self.ray, ref, self.threads)

    # -- starting ------------------------------------------------------------------------

    async def _start_hub(self) -> None:
        """The kept hub, started on this run; a new one if there was none or it died."""
        concurrency, workers = self.shape.concurrency, self.shape.workers
        start = lambda hub: hub.begin.remote(concurrency, workers)  # noqa: E731
        if self.hub is not None and await self._reused(self.hub, start):
            return
        strategy = _on(self.ray, self.here, "DEFAULT")
        actor = self.ray.remote(num_cpus=0, scheduling_strategy=strategy)(LimitsHub)
        self.hub = actor.remote(concurrency, workers)

    def _new_worker(self, index: int) -> Any:
        # serve, feed, stop, and room for the coordinators' pushes beside them
        actor = self.ray.remote(num_cpus=0, max_concurrency=16)(SampleWorker)
        strategy = _on(self.ray, self.placed[index], "SPREAD")
        return actor.options(scheduling_strategy=strategy).remote()

    async def _reused(self, handle: Any, call: Callable[[Any], Any]) -> bool:
        """Start a kept actor on this run: False if it died while it waited."""
        try:
            await self._wait(call(handle))
        except self.dead:
            with contextlib.suppress(Exception):
                self.ray.kill(handle)
            return False
        return True

    async def _begin(self, index: int) -> None:
        """Start worker `index` on this run (a new one if it had none or its own died)."""
        payload, hub, worker_id = self.payload, self.hub, self.ids[index]
        start = lambda worker: worker.begin.remote(payload, hub, worker_id)  # noqa: E731
        actors = self.actors
        try:
            if actors[index] is not None and await self._reused(actors[index], start):
                return
            actors[index] = self._new_worker(index)
            with contextlib.suppress(*self.dead):  # its feeder and reader hear of it too
                await self._wait(start(actors[index]))
        except self.ray.exceptions.RayTaskError as exc:
            raise ConfigError(
                f"A Ray worker could not load the run's solver and scorer: {exc.cause!r}. "
                "What they use must be importable on every node: install it there, or "
                "give Ray a runtime_env (a local Ray shares this environment, but not "
                "modules found only through the current directory or sys.path changes)."
            ) from None

    async def _work(self, index: int) -> None:
        await self._begin(index)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reader, index)
            tg.start_soon(self._feeder, index)

    # -- feeding ---------------------------------------------------------------------------

    def _notify(self) -> None:
        """Wake the feeders: room was made, or records came back to the queue."""
        self.changed.set()
        self.changed = anyio.Event()

    def _take(self) -> list[SampleRecord]:
        """The next parcel: records a dead worker left first, then the source's."""
        size, again = self.shape.parcel_size, self.again
        parcel = [again.popleft() for _ in range(min(size, len(again)))]
        parcel.extend(itertools.islice(self.source, size - len(parcel)))
        return parcel

    async def _feeder(self, index: int) -> None:
        """Feed worker `index` a parcel whenever a parcel's worth of its share is free."""
        worker, mine = self.actors[index], self.at_work[index]
        per_worker, size = self.shape.per_worker, self.shape.parcel_size
        while self.alive[index]:
            if per_worker - len(mine) < size:
                await self.changed.wait()
                continue
            parcel = self._take()
            if not parcel:
                if not any(self.at_work):  # nothing at work can come back to the queue: done
                    break
                await self.changed.wait()  # records at work may yet come back
                continue
            for record in parcel:
                mine[record.key] = record
            earlier = self.run.journal.replies
            try:
                blob = parcel_out(
                    parcel,
                    fresh=self.work.solver is not None,
                    replies=earlier.of(r.key for r in parcel) if earlier else (),
                )
            except Exception as exc:  # a record that cannot be serialised
                raise ConfigError(f"A parcel of samples cannot be sent to Ray: {exc}") from exc
            try:
                await self._wait(worker.feed.remote(blob))
            except self.dead:  # its reader hears it too, and sends its records elsewhere
                return
        self._notify()
        with contextlib.suppress(*self.dead):
            await self._wait(worker.stop.remote())

    # -- taking back -----------------------------------------------------------------------

    async def _reader(self, index: int) -> None:
        """Take what worker `index` finishes, as it finishes, until it is stopped."""
        mine, texts = self.at_work[index], self.texts
        try:
            async for blob in _results(self.ray, self.actors[index].serve.remote(), self.threads):
                finished: list[Finished]
                replied: list[Replied]
                finished, live, spent, replied = self.cloudpickle.loads(blob)
                if spent is not None:
                    self.spent_at_work[index] = spent
                if replied:  # before the records of their samples
                    self._replied(replied)
                ours = [mine.pop((done[0], done[1])) for done in finished]
                lines = [
                    finished_in(record, done) for record, done in zip(ours, finished, strict=True)
                ]
                if ours:
                    await self._finish(ours, lines)
                    self._notify()
                if live is not None and texts is not None:
                    self.shown[index] = live_in(texts, live, mine, self.shown[index])
        except self.dead as exc:
            await self._lost(index, exc)

    def _replied(self, replied: list[Replied]) -> None:
        """Replies a worker received: to the run's journal, and kept by sample while it
        is at work (for another worker, should this one die)."""
        kept = self.replied
        for sample_id, epoch, line in replied:
            kept.setdefault((sample_id, epoch), []).append(line)
        if self.journal_replies is not None:
            self.journal_replies([line for _, _, line in replied])

    async def _finish(self, finished: list[SampleRecord], lines: list[bytes] | None) -> None:
        """Count finished records into the run (usage, retries, failures) and hand them
        to the sink."""
        run, texts = self.run, self.texts
        counts, replied = run.counts, self.replied
        for record in finished:
            replied.pop(record.key, None)
            if texts is not None:
                texts.drop(record.key)
            run.ledger.merge(record.usage, role=self.usage_of)
            counts.finished(record, retries=record.retries)
            if record.spilled:
                record.spill()  # its usage is in the run's ledger: drop the worker's copy
        await self.sink(finished, lines)
        counts.emit()

    # -- a worker lost ---------------------------------------------------------------------

    async def _lost(self, index: int, exc: BaseException) -> None:
        """Worker `index` died (its stream says so, after what it had handed back): its
        records at work go to the others, or fail once they have lost `MAX_DEATHS` workers."""
        left = self._let_go(index, exc)
        self._pass_on_replies(left)
        for record in reversed(left):
            self.deaths[record.key] = times = self.deaths.get(record.key, 0) + 1
            if times < MAX_DEATHS:
                self.again.appendleft(record)
        self._notify()
        given_up = [record for record in left if self.deaths[record.key] >= MAX_DEATHS]
        for record in given_up:
            record.error = SampleError(
                stage="solve" if self.work.solver is not None else "score",
                type="WorkerLostError",
                message=f"the worker running it died {MAX_DEATHS} times",
            )
        if given_up:
            await self._finish(given_up, None)
        if not any(self.alive):
            self._all_lost()

    def _pass_on_replies(self, left: list[SampleRecord]) -> None:
        """The replies a dead worker's samples received, for the worker that runs them
        next: those calls are not sent again."""
        earlier, replied = self.run.journal.replies, self.replied
        for record in left:
            lines = replied.pop(record.key, None)
            if lines and earlier is not None:
                earlier.add(decode_reply(line) for line in lines)

    def _let_go(self, index: int, exc: BaseException) -> list[SampleRecord]:
        """Worker `index` is gone: its slots back to the hub, what its samples at work spent
        counted, its actor killed. Returns the records it had at work."""
        mine = self.at_work[index]
        left = list(mine.values())
        mine.clear()
        if self.texts is not None:
            self.shown[index] = live_in(self.texts, [], mine, self.shown[index])
        self.alive[index] = False
        spent = self.spent_at_work[index]
        if spent is not None:  # their next run does not carry what they spent there
            self.run.ledger.merge(spent, role=self.usage_of)
        log.warning(
            f"Ray worker {index + 1} of {self.shape.workers} died; its unfinished samples go to "
            f"the other workers: {exc}"
        )
        with contextlib.suppress(Exception):  # if it is only unreachable
            self.ray.kill(self.actors[index], no_restart=True)
        self.hub.forget.remote(self.ids[index])
        return left

    def _all_lost(self) -> None:
        counts = self.run.counts
        left = (counts.total - counts.done) if counts.total else len(self.again)
        raise WorkerLostError(
            f"Every Ray worker of the run died ({self.shape.workers} in all); "
            f"{plural(left, 'sample')} {'was' if left == 1 else 'were'} left unfinished. "
            "The finished ones were journaled: run again with resume=True to run only "
            "those left.",
            left=left,
        )


async def _hand_back(
    ray: Any,
    backend: Ray,
    key: Any,
    hub: Any,
    actors: list[Any],
    placed: list[str | None],
    alive: list[bool],
    ended_well: bool,
    threads: anyio.CapacityLimiter,
) -> None:
    """Keep a run's actors for the next run (`POOL`) if it ended well, else kill them."""

    def kill(actor: Any) -> None:
        with contextlib.suppress(Exception):  # gone already, or Ray with it
            ray.kill(actor)

    kept: list[tuple[str | None, Any]] = []
    for index, actor in enumerate(actors):
        if actor is None:
            continue
        if ended_well and alive[index]:
            with contextlib.suppress(Exception):
                await _result(ray, actor.end.remote(), threads)
                kept.append((placed[index], actor))
                continue
        kill(actor)
    if ended_well:
        POOL.give_back(key, hub, kept, backend.keep_alive, kill)
    else:
        kill(hub)


def _nodes(ray: Any) -> tuple[str | None, list[str]]:
    """The driver's node (None if it has none in the cluster, as with Ray Client) and
    the alive nodes with CPUs, the driver's first: where workers go, in turn."""
    try:
        here: str | None = ray.get_runtime_context().get_node_id()
    except Exception:
        here = None
    nodes = sorted(
        str(node["NodeID"])
        for node in ray.nodes()
        if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0
    )
    if here in nodes:
        nodes.remove(here)
        nodes.insert(0, here)
    return here, nodes


def _on(ray: Any, node: str | None, otherwise: str) -> Any:
    """Schedule on `node` (not softly: a soft affinity put an actor on another node about
    half the time just after the cluster started), or `otherwise` when there is none."""
    if node is None:
        return otherwise
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id=node, soft=False)


def _keep_history(run: Run, reports: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    """Put the coordinators' concurrency changes where a local run's go (the run's
    endpoint limiters), for the log."""
    LAST_REPORT.clear()
    LAST_REPORT.update(reports)
    for endpoint, report in reports.items():
        run.limits.get(endpoint, None).history = list(report["history"])
