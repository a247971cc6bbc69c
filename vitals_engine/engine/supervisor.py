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
  given, is awaited before each pull (a budget holding samples back).
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

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator

import anyio
import anyio.lowlevel
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._sync import INTERRUPTS, Interrupted, raise_carried
from ..pacing.seats import Seat, Seats, sit
from ..samples import SampleRecord

__all__ = ["Sink", "Stage", "Supervisor"]

Stage = Callable[[SampleRecord], Awaitable[None]]
Sink = Callable[[SampleRecord], Awaitable[None]]
Gate = Callable[[], Awaitable[None]]


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
        #: Awaited before each record is taken from the source (a budget's warm-up).
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
        # Spare workers are started only when a seat is first lent; each needs its own
        # clone of its stream end, cloned from one kept open until its stage runs dry.
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
                        spare_ends += [spare_send, spare_receive]
                        solve, score = self.solve, self.score
                        solve_seats: Seats = Seats(
                            self.concurrency,
                            spawn=lambda: tg.start_soon(
                                self._first_stage,
                                source,
                                solve,
                                spare_send.clone(),
                                Seat(solve_seats),
                            ),
                            on_close=spare_send.close,
                            spares=self.spares,
                        )
                        for _ in range(self.concurrency):
                            tg.start_soon(
                                self._first_stage, source, solve, send.clone(), Seat(solve_seats)
                            )
                        score_seats: Seats = Seats(
                            self.score_concurrency,
                            spawn=lambda: tg.start_soon(
                                self._second_stage,
                                spare_receive.clone(),
                                score,
                                Seat(score_seats),
                            ),
                            on_close=spare_receive.close,
                            spares=self.spares,
                        )
                        for _ in range(self.score_concurrency):
                            tg.start_soon(
                                self._second_stage, receive.clone(), score, Seat(score_seats)
                            )
                else:
                    stage = self.solve or self.score
                    workers = self.concurrency if self.solve is not None else self.score_concurrency
                    seats: Seats = Seats(
                        workers,
                        spawn=lambda: tg.start_soon(self._only_stage, source, stage, Seat(seats)),
                        spares=self.spares,
                    )
                    for _ in range(workers):
                        tg.start_soon(self._only_stage, source, stage, Seat(seats))
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
        seat: Seat,
    ) -> None:
        async with send:
            await _work(seat, _pull(source, self.gate), fn, send.send)

    async def _second_stage(
        self, receive: ObjectReceiveStream[SampleRecord], fn: Stage, seat: Seat
    ) -> None:
        async with receive:
            await _work(seat, _receive(receive), fn, self.sink)

    async def _only_stage(
        self, source: Iterator[SampleRecord], fn: Stage | None, seat: Seat
    ) -> None:
        # A stage that never awaits must still let the other workers run: checkpoint.
        await _work(seat, _pull(source, self.gate), fn, self.sink, checkpoint=True)


def _at_most(count: int, cap: int | None) -> int:
    return count if cap is None else min(count, cap)


Next = Callable[[], Awaitable[SampleRecord | None]]


def _pull(source: Iterator[SampleRecord], gate: Gate | None = None) -> Next:
    async def pull() -> SampleRecord | None:
        return next(source, None)

    async def pull_after(gate: Gate) -> SampleRecord | None:
        await gate()
        return next(source, None)

    return pull if gate is None else functools.partial(pull_after, gate)


def _receive(receive: ObjectReceiveStream[SampleRecord]) -> Next:
    async def take() -> SampleRecord | None:
        try:
            return await receive.receive()
        except anyio.EndOfStream:
            return None

    return take


async def _work(
    seat: Seat, next_record: Next, fn: Stage | None, hand_off: Sink, *, checkpoint: bool = False
) -> None:
    """One worker: with a seat, take a record, run the stage on it (unless it already
    failed), hand it on; until the records run out."""
    sit(seat)
    while True:
        await seat.take()
        try:
            record = await next_record()
            if record is None:
                seat.seats.close()
                return
            if fn is not None and record.error is None:
                await fn(record)
            await hand_off(record)
        except INTERRUPTS as exc:
            raise Interrupted(exc) from None
        finally:
            seat.leave()
        if checkpoint:
            await anyio.lowlevel.checkpoint()
