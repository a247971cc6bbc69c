"""The supervisor: one task group that runs samples through the stages of a run.

```
records (lazy) ──> solver workers (N) ──score stream──> scorer workers (M) ──> sink
```

Invariants:
- Every actor is a child of the supervisor's task group: cancelling the run
  cancels them all, and none outlives `run()`.
- The records come from a lazy iterator that the first stage's workers pull
  from directly (a `next()` never awaits, so in one event loop it needs no
  lock): a record is made only when a worker is free to take it, so memory
  grows with concurrency, not with the number of samples. A `gate`, when
  given, is awaited before each pull (a budget holding samples back, an
  endpoint admitting them). What it lets in (a `Pass`) the worker holds past
  its sample's end and hands to the gate again with its next pull, which may
  renew it rather than let it go and wait for another; it is released when
  the worker stops, or before it waits for a seat.
- A stage starts its workers as they are needed (`Crew`): one at first, and
  one more whenever every worker it has is busy with a sample, up to the
  stage's concurrency. A stage whose samples are held back (a gate, a slow
  source, a fast scorer) keeps few tasks, however high its concurrency:
  idle workers would cost memory and the collector's time, not speed.
- A worker works on a sample only while it holds one of its stage's seats
  (`seats.py`); a sample waiting out a retry lends its seat to a parked
  worker, or to a spare one started then (at most as many as seats).
- Between the stages is one bounded memory stream: a slow scorer stage
  pushes back on the solvers instead of buffering the dataset. Each worker
  holds its own clone of its stream end; the stream closes exactly when
  the last solver worker is done, which ends the scorer stage.
- The last stage hands each finished record to the sink itself; the sink
  may await (a slow consumer of `stream_async()` slows the run).
- A stage function records a sample's failure on the record and returns;
  an exception that escapes it is fatal and ends the whole run. So does a
  KeyboardInterrupt or SystemExit, which leaves `run()` as itself (carried
  out of its worker as `Interrupted`: see `_sync.py`).
- Scoring starts as soon as a sample is solved (pipelined). A run with only
  one stage (`task.solve()` or `task.score()`) has no stream at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

import anyio
import anyio.lowlevel
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._sync import INTERRUPTS, Interrupted, raise_carried
from ..pacing.seats import Seat, Seats, sit
from ..samples import SampleRecord

__all__ = ["Gate", "Pass", "Sink", "Stage", "Supervisor"]

Stage = Callable[[SampleRecord], Awaitable[None]]
Sink = Callable[[SampleRecord], Awaitable[None]]


class Pass(Protocol):
    """What a gate let a worker's sample in with (its places at the endpoints)."""

    def release(self) -> None: ...


#: Awaited before a record is taken, with the pass the worker holds from its last sample
#: (None: none); returns the pass for this one (that one renewed, or a new one: the gate
#: released the old). On an exception the gate has released the pass it was given.
Gate = Callable[[Pass | None], Awaitable[Pass | None]]


class Supervisor:
    """Run records through an optional solve stage and an optional score stage into a sink.

    `total`, when known, is how many records there are: no stage starts more
    workers than that, however high `concurrency` is.

    Example:
        >>> sup = Supervisor(solve=solve_one, score=score_one, sink=collect, concurrency=100)
        >>> await sup.run(records)
    """

    def __init__(
        self,
        *,
        solve: Stage | None,
        score: Stage | None,
        sink: Sink,
        concurrency: int,
        score_concurrency: int | None = None,
        total: int | None = None,
        spares: int | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.solve = solve
        #: Awaited before each record is taken from the source (see `Gate`).
        self.gate = gate
        self.score = score
        self.sink = sink
        # No stage needs more workers (or seats, or stream buffer) than there are records.
        cap = max(1, total) if total is not None else None
        self.concurrency = _at_most(max(1, concurrency), cap)
        self.score_concurrency = _at_most(max(1, score_concurrency or concurrency), cap)
        #: Spare workers a stage may start for seats lent (None: as many as seats).
        self.spares = None if spares is None else _at_most(spares, cap)

    async def run(self, records: Iterable[SampleRecord]) -> None:
        source = iter(records)
        # Workers are started as they are needed; each needs its own clone of its stream
        # end, cloned from one kept open until its stage runs dry.
        spare_ends: list[
            MemoryObjectSendStream[SampleRecord] | MemoryObjectReceiveStream[SampleRecord]
        ] = []
        try:
            async with anyio.create_task_group() as tg:
                if self.solve is not None and self.score is not None:
                    send, receive = anyio.create_memory_object_stream[SampleRecord](
                        self.score_concurrency
                    )
                    async with send, receive:
                        spare_send, spare_receive = send.clone(), receive.clone()
                        receive_stats = spare_receive.statistics
                        spare_ends += [spare_send, spare_receive]
                        solve, score = self.solve, self.score
                        solvers = Crew(
                            self.concurrency,
                            lambda crew: tg.start_soon(
                                self._first_stage, source, solve, spare_send.clone(), crew
                            ),
                            _made_on_demand,
                            on_close=spare_send.close,
                            spares=self.spares,
                        )
                        scorers = Crew(
                            self.score_concurrency,
                            lambda crew: tg.start_soon(
                                self._second_stage, spare_receive.clone(), score, crew
                            ),
                            lambda: receive_stats().current_buffer_used,
                            on_close=spare_receive.close,
                            spares=self.spares,
                        )
                        solvers.grow()
                        scorers.grow()
                else:
                    stage = self.solve or self.score
                    workers = self.concurrency if self.solve is not None else self.score_concurrency
                    Crew(
                        workers,
                        lambda crew: tg.start_soon(self._only_stage, source, stage, crew),
                        _made_on_demand,
                        spares=self.spares,
                    ).grow()
        except BaseExceptionGroup as group:
            raise_carried(group)
            raise
        finally:
            for end in spare_ends:
                end.close()

    async def _first_stage(
        self,
        source: Iterator[SampleRecord],
        fn: Stage,
        send: ObjectSendStream[SampleRecord],
        crew: Crew,
    ) -> None:
        async with send:
            await _work(crew, _pull(source), fn, send.send, gate=self.gate)

    async def _second_stage(
        self, receive: ObjectReceiveStream[SampleRecord], fn: Stage, crew: Crew
    ) -> None:
        async with receive:
            await _work(crew, _receive(receive), fn, self.sink)

    async def _only_stage(
        self, source: Iterator[SampleRecord], fn: Stage | None, crew: Crew
    ) -> None:
        # A stage that never awaits must still let the other workers run: checkpoint.
        await _work(crew, _pull(source), fn, self.sink, gate=self.gate, checkpoint=True)


class Crew:
    """The workers of one stage and its seats (`Seats`), the workers started as they are
    needed: one more whenever a worker takes a sample and more samples wait for the
    stage than it has free workers, up to `limit`; spare workers for lent seats come on
    top, as `Seats` allows. A stage so grows by a worker per event-loop turn while its
    samples keep every worker busy, which is no slower than starting them all at once:
    each first sample costs the same CPU either way.

    `start(crew)` starts one worker; `waiting()` is how many samples wait for the stage
    beyond the one just taken (a source that makes them on demand always has one more).

    Example:
        >>> crew = Crew(100, lambda crew: tg.start_soon(worker, crew), lambda: 1)
        >>> crew.grow()      # the first worker
        >>> crew.busy()      # a worker took a sample: another starts if work waits
        >>> crew.free()      # it is done with it
    """

    __slots__ = ("_start", "_waiting", "idle", "limit", "seats", "started")

    def __init__(
        self,
        limit: int,
        start: Callable[[Crew], object],
        waiting: Callable[[], int],
        *,
        on_close: Callable[[], object] | None = None,
        spares: int | None = None,
    ) -> None:
        self.limit = limit
        self.seats = Seats(limit, spawn=self.spare, on_close=on_close, spares=spares)
        self._start = start
        self._waiting = waiting
        #: Workers started (spares not counted), and those without a sample now.
        self.started = 0
        self.idle = 0

    def grow(self) -> None:
        """Start one more worker, unless the stage has all it may have or has run dry."""
        if self.started < self.limit and not self.seats.closed:
            self.started += 1
            self.spare()

    def spare(self) -> None:
        """Start a worker beyond the limit (a spare, for a seat lent)."""
        self.idle += 1
        self._start(self)

    def busy(self) -> None:
        self.idle -= 1
        if self._waiting() > self.idle:
            self.grow()

    def free(self) -> None:
        self.idle += 1


def _made_on_demand() -> int:
    """`Crew(waiting=)` of a stage whose samples a source makes as they are asked for."""
    return 1


def _at_most(count: int, cap: int | None) -> int:
    return count if cap is None else min(count, cap)


Next = Callable[[], Awaitable[SampleRecord | None]]


def _pull(source: Iterator[SampleRecord]) -> Next:
    async def pull() -> SampleRecord | None:
        return next(source, None)

    return pull


def _receive(receive: ObjectReceiveStream[SampleRecord]) -> Next:
    async def take() -> SampleRecord | None:
        try:
            return await receive.receive()
        except anyio.EndOfStream:
            return None

    return take


async def _work(
    crew: Crew,
    next_record: Next,
    fn: Stage | None,
    hand_off: Sink,
    *,
    gate: Gate | None = None,
    checkpoint: bool = False,
) -> None:
    """One worker: with a seat (and past the gate), take a record, run the stage on it
    (unless it already failed), hand it on; until the records run out."""
    seat = Seat(crew.seats)
    sit(seat)
    held: Pass | None = None
    try:
        while True:
            if held is not None and crew.seats.full:
                held, last = None, held
                last.release()  # not held while the worker waits for a seat
            await seat.take()
            try:
                if gate is not None:
                    held, last = None, held
                    held = await gate(last)
                record = await next_record()
                if record is None:
                    seat.seats.close()
                    return
                crew.busy()
                try:
                    if fn is not None and record.error is None:
                        await fn(record)
                    await hand_off(record)
                finally:
                    crew.free()
            except INTERRUPTS as exc:
                raise Interrupted(exc) from None
            finally:
                seat.leave()
            if checkpoint:
                await anyio.lowlevel.checkpoint()
    finally:
        if held is not None:
            held.release()
