"""Finished samples handed to the caller while the run goes on.

`task.stream_async()` returns a `SampleStream`: an async context manager
that starts the run in a task group of its own and, inside the block, an
async iterator over each sample as it is solved and scored:

```python
async with task.stream_async() as samples:
    async for record in samples:
        ...
```

The hand-over is a zero-capacity memory stream, so a slow consumer slows the
run instead of growing memory. Leaving the block before the end cancels the
run (the finished samples are logged with status "cancelled"). A context
manager, not a bare async generator: a generator that yields from inside a
task group cannot be closed safely when its consumer stops early.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream, TaskGroup

from .._errors import TaskStateError
from .._sync import carry, raise_carried
from ..samples import SampleRecord

__all__ = ["SampleStream", "Sink", "first_error"]

Sink = Callable[[SampleRecord], Awaitable[None]]


class SampleStream:
    """The samples of a run, as they finish.

    `task.stream_async()` returns it: an async context manager that starts the run and,
    inside the block, an async iterator over each sample (a `SampleRecord`) as it is
    solved and scored. A slow consumer slows the run; leaving the block before the end
    cancels it (the finished samples are logged with status "cancelled").

    Example:
        >>> import asyncio
        >>> rows = [{"input": f"What's 2+{n}?", "target": str(2 + n)} for n in (1, 2, 3)]
        >>> task = ve.Task(rows, ve.generate(ve.chat_mock()), ve.detect_includes())
        >>> async def main():
        ...     async with task.stream_async(max_concurrency=1, progress=False) as samples:
        ...         async for record in samples:
        ...             print(record.sample.id, record.result)
        >>> asyncio.run(main())
        1 2 + 1 = 3
        2 2 + 2 = 4
        3 2 + 3 = 5
        >>> task.metrics
        {'accuracy': 1.0}
    """

    def __init__(self, run: Callable[[Sink], Awaitable[None]]) -> None:
        self._run = run
        self._group: TaskGroup | None = None
        self._send: ObjectSendStream[SampleRecord] | None = None
        self._receive: ObjectReceiveStream[SampleRecord] | None = None
        self._finished = False

    async def __aenter__(self) -> SampleStream:
        self._send, self._receive = anyio.create_memory_object_stream[SampleRecord](0)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(carry, self._produce)
        return self

    async def _produce(self) -> None:
        assert self._send is not None
        async with self._send:
            await self._run(self._send.send)
        self._finished = True

    def __aiter__(self) -> SampleStream:
        if self._receive is None:
            raise TaskStateError(
                "Use the stream inside `async with`: "
                "`async with task.stream_async() as samples: async for s in samples: ...`"
            )
        return self

    async def __anext__(self) -> SampleRecord:
        assert self._receive is not None
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None
        assert self._receive is not None
        if not self._finished:
            self._group.cancel_scope.cancel()
        await self._receive.aclose()
        try:
            return await self._group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise_carried(group)
            raise first_error(group) from None

    def __repr__(self) -> str:
        state = "finished" if self._finished else "running" if self._group else "not started"
        return f"<SampleStream {state}>"


def first_error(group: BaseException) -> BaseException:
    """The error a user should see from a task group: the first leaf that is not a
    cancellation (or the exception itself when it is not a group)."""
    cancelled = anyio.get_cancelled_exc_class()
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            pending[:0] = list(exc.exceptions)
        else:
            leaves.append(exc)
    return next((e for e in leaves if not isinstance(e, cancelled)), leaves[0] if leaves else group)
