"""The supervisor: one task group that runs samples through the stages of a run.

```
source ──solve_q──> solver workers (N) ──score_q──> scorer workers (M) ──done_q──> sink
```

Invariants:
- Every actor is a child of the supervisor's task group: cancelling the run
  cancels them all, and none outlives `run()`.
- Queues are bounded memory streams, so a slow stage pushes back on the
  ones before it instead of buffering the dataset; the source is lazy, so
  memory grows with concurrency, not with the number of samples.
- Each worker holds its own clone of its streams; a stage's output closes
  exactly when its last worker is done, which ends the next stage.
- A stage function records a sample's failure on the record and returns;
  an exception that escapes it is fatal and ends the whole run.
- Scoring starts as soon as a sample is solved (pipelined). A run with only
  one stage (`task.solve()` or `task.score()`) wires the source to it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from ..samples import SampleRecord

__all__ = ["Stage", "Supervisor"]

Stage = Callable[[SampleRecord], Awaitable[None]]
Sink = Callable[[SampleRecord], Awaitable[None]]


class Supervisor:
    """Run records through an optional solve stage and an optional score stage into a sink.

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
    ) -> None:
        self.solve = solve
        self.score = score
        self.sink = sink
        self.concurrency = max(1, concurrency)
        self.score_concurrency = max(1, score_concurrency or concurrency)

    async def run(self, records: Iterable[SampleRecord]) -> None:
        stages = [
            (fn, workers)
            for fn, workers in (
                (self.solve, self.concurrency),
                (self.score, self.score_concurrency),
            )
            if fn is not None
        ]
        async with anyio.create_task_group() as tg:
            send, receive = anyio.create_memory_object_stream[SampleRecord](self.concurrency)
            tg.start_soon(self._source, records, send)
            for fn, workers in stages:
                out_send, out_receive = anyio.create_memory_object_stream[SampleRecord](workers)
                async with receive, out_send:
                    for _ in range(workers):
                        tg.start_soon(self._worker, fn, receive.clone(), out_send.clone())
                receive = out_receive
            tg.start_soon(self._drain, receive)

    @staticmethod
    async def _source(
        records: Iterable[SampleRecord], send: ObjectSendStream[SampleRecord]
    ) -> None:
        async with send:
            for record in records:
                await send.send(record)

    @staticmethod
    async def _worker(
        fn: Stage,
        receive: ObjectReceiveStream[SampleRecord],
        send: ObjectSendStream[SampleRecord],
    ) -> None:
        async with receive, send:
            async for record in receive:
                if record.error is None:
                    await fn(record)
                await send.send(record)

    async def _drain(self, receive: ObjectReceiveStream[SampleRecord]) -> None:
        async with receive:
            async for record in receive:
                await self.sink(record)
