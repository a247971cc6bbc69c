"""A run's batch queues: one per endpoint, each gathering model calls into provider batches.

A call waits in its endpoint's queue. The queue is submitted as one batch when it
holds `Batch.size` requests (or as many as the provider takes in one batch, by count
or bytes), or `Batch.wait` seconds after its first request. A submitted batch is
asked about every `Batch.poll` seconds at first, less often (up to ten times that)
the longer it runs; once it has ended, each call gets its own outcome: a reply, a
`ProviderError` as a live call would raise (the run's retry policy then sends a
retryable one again, in a later batch), or, for a request that expired or was
cancelled before it ran, a place in the next batch.

At most `Batch.pending` calls wait in batches at once: the next ones wait for room
before they join a queue, so memory stays bounded whatever the dataset's size.

A run that ends with batches still out (an error stopped it, or it was cancelled)
asks their providers to cancel them, unless `Batch(cancel_batches=False)`: nothing
would take their results.

A server without the batch API (404 at the first submission) stops the run with a
`ConfigError` naming the endpoint: every later call in batch mode would fail alike.

`BatchQueues` runs its timers and pollers in a task group of its own, entered by the
engine around the run (`async with queues:`).

Example:
    >>> async with BatchQueues(Batch(size=100, wait=5)) as queues:
    ...     turn = await queues.call(provider, request)
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from .._errors import ConfigError, ProviderError, ProviderUnavailable
from .._logging import log
from ..pacing.batch import Batch
from ..pacing.clock import Clock, SystemClock
from ..providers.batch import BatchApi, BatchEntry, BatchOutcome, BatchUnsupported
from ..vocab.calls import ChatRequest
from ..vocab.turns import Turn
from .apis import batch_api

__all__ = ["BatchCounts", "BatchQueues"]

#: A request that expired or was cancelled this many times fails (retryable).
MAX_REQUEUES = 3
#: Seconds an ended run gives its providers to take the cancellation of its batches.
CANCEL_WITHIN = 30.0
#: Body keys a batch request must not carry (a batch is never streamed).
_STREAM_KEYS = ("stream", "stream_options")


@dataclass(slots=True)
class BatchCounts:
    """What the run's batches are doing, for the progress bar and the log."""

    queued: int = 0  # calls waiting to be submitted
    submitted: int = 0  # batches submitted and not ended
    done: int = 0  # batches ended
    waiting: int = 0  # calls waiting in submitted batches
    requests: int = 0  # requests submitted in all


@dataclass(slots=True, eq=False)
class _Call:
    entry: BatchEntry
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: BatchOutcome | None = None
    error: BaseException | None = None
    batch_id: str = ""


class BatchQueues:
    """The batch queues of one run, by endpoint (see the module's docstring).

    Args:
        options: the run's `Batch` options (None: only models made with their own
            `batch=` send batches).
        clock: the run's clock.
        on_change: called when the counts change.
        apis: the batch API of a provider (tests pass stand-ins).
        at_work: how many samples the run has at work (in a stage); when every one of
            them waits on a batch, no request can join a queue before a batch answers,
            so the queues go at once instead of waiting out `Batch.wait`.
    """

    def __init__(
        self,
        options: Batch | None,
        clock: Clock | None = None,
        on_change: Callable[[], None] | None = None,
        apis: Callable[[Any], BatchApi] = batch_api,
        at_work: Callable[[], int] | None = None,
    ) -> None:
        self.options = options
        self.clock = clock or SystemClock()
        self.on_change = on_change
        self.apis = apis
        self.at_work = at_work
        self._checking = False
        self.counts = BatchCounts()
        self._queues: dict[tuple[str, str, str], _EndpointQueue] = {}
        self._ids = itertools.count()
        self._prefix = secrets.token_hex(4)
        self._room = anyio.Semaphore((options or Batch()).pending)
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> BatchQueues:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()  # timers and pollers of calls no one waits for
        await self._tg.__aexit__(None, None, None)  # the run's own error goes on as itself
        out = [(queue, batch_id) for queue in self._queues.values() for batch_id in queue.out]
        if out and (self.options or Batch()).cancel_batches is not False:
            await self._cancel(out)

    async def _cancel(self, out: list[tuple[_EndpointQueue, str]]) -> None:
        """The run ended before these batches did (an error, a cancelled run): nothing will
        take their results, so ask their providers to cancel them (what ran is billed)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WITHIN):
            for queue, batch_id in out:
                try:
                    await queue.api.cancel(batch_id)
                except ProviderError as exc:
                    log.warning("could not cancel a batch", batch=batch_id, error=str(exc))
                else:
                    log.info("cancelled a batch the run left", batch=batch_id)

    def takes(self, provider: Any) -> bool:
        own = getattr(provider, "batch", None)
        if own is False:
            return False
        return own is not None or self.options is not None

    async def call(self, provider: Any, request: ChatRequest) -> tuple[Turn, str]:
        async with self._room:
            queue = self._queues.get(provider.endpoint)
            if queue is None:
                own = getattr(provider, "batch", None)
                options = own if isinstance(own, Batch) else (self.options or Batch())
                queue = _EndpointQueue(self, provider, self.apis(provider), options)
                self._queues[provider.endpoint] = queue
            return await queue.call(request)

    def nudge(self) -> None:
        """Something changed in the run (a request joined a queue, a sample left a stage):
        if every sample at work now waits on a batch, submit what is queued."""
        if self.at_work is None or self._checking or self._tg is None or not self._quiet():
            return
        if not any(queue.waiting for queue in self._queues.values()):
            return
        self._checking = True
        self._tg.start_soon(self._flush_if_quiet)

    async def _flush_if_quiet(self) -> None:
        try:
            for _ in range(3):  # let samples that are just starting (spares, woken) start
                await anyio.lowlevel.checkpoint()
        finally:
            self._checking = False
        if self._quiet():
            for queue in self._queues.values():
                queue._flush()

    def _quiet(self) -> bool:
        """Whether every sample at work waits on a batch (no request can join a queue)."""
        assert self.at_work is not None
        return self.at_work() <= self.counts.queued + self.counts.waiting

    def _custom_id(self) -> str:
        return f"ve-{self._prefix}-{next(self._ids)}"

    def _start(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._tg is None:
            raise RuntimeError("BatchQueues must be entered (`async with`) before calls")
        self._tg.start_soon(fn, *args)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


class _EndpointQueue:
    """One endpoint's queue and its batches in flight."""

    def __init__(self, owner: BatchQueues, provider: Any, api: BatchApi, options: Batch) -> None:
        self.owner = owner
        self.provider = provider
        self.api = api
        self.options = options
        self.cap = max(1, min(options.size, api.max_requests))
        self.waiting: list[_Call] = []
        self.bytes = 0
        self.generation = 0  # bumped at each flush: a timer of an earlier one does nothing
        self.out: set[str] = set()  # ids of the batches submitted and not ended
        self.unsupported: BaseException | None = None

    async def call(self, request: ChatRequest) -> tuple[Turn, str]:
        body = {k: v for k, v in self.provider.body(request).items() if k not in _STREAM_KEYS}
        gone = "expired"
        for _ in range(MAX_REQUEUES):
            call = self._enqueue(body)
            await call.done.wait()
            if call.error is not None:
                raise call.error
            outcome = call.outcome
            assert outcome is not None
            if outcome.kind in ("succeeded", "errored"):
                return self.api.turn(outcome), call.batch_id
            gone = outcome.kind
            log.info(
                "batched request re-queued",
                model=self.provider.model_id,
                outcome=outcome.kind,
            )
        raise ProviderUnavailable(
            f"the request {gone} in {MAX_REQUEUES} batches in a row",
            provider=self.provider.name,
            model=self.provider.model,
        )

    def _enqueue(self, body: dict[str, Any]) -> _Call:
        if self.unsupported is not None:
            raise self.unsupported
        entry = BatchEntry(self.owner._custom_id(), body)
        size = self.api.entry_size(entry)
        if self.waiting and self.bytes + size > self.api.max_bytes:
            self._flush()
        call = _Call(entry)
        self.waiting.append(call)
        self.bytes += size
        counts = self.owner.counts
        counts.queued += 1
        if len(self.waiting) >= self.cap:
            self._flush()
        elif len(self.waiting) == 1:
            self.owner._start(self._flush_after, self.generation)
        self.owner._changed()
        self.owner.nudge()
        return call

    async def _flush_after(self, generation: int) -> None:
        await self.owner.clock.sleep(self.options.wait)
        if generation == self.generation and self.waiting:
            self._flush()

    def _flush(self) -> None:
        calls, self.waiting, self.bytes = self.waiting, [], 0
        self.generation += 1
        if calls:
            self.owner._start(self._run_batch, calls)

    async def _run_batch(self, calls: list[_Call]) -> None:
        counts = self.owner.counts
        counts.queued -= len(calls)
        try:
            batch_id = await self.api.submit([call.entry for call in calls])
        except BatchUnsupported as exc:
            self.unsupported = ConfigError(f"Batch mode: {exc.message}.")
            self._settle(calls, error=self.unsupported)
            return
        except ProviderError as exc:
            self._settle(calls, error=exc)
            return
        counts.submitted += 1
        counts.waiting += len(calls)
        counts.requests += len(calls)
        self.out.add(batch_id)
        self.owner._changed()
        try:
            outcomes = await self._outcomes(batch_id)
            self.out.discard(batch_id)
        except ProviderError as exc:
            self.out.discard(batch_id)
            self._settle(calls, error=exc)
            return
        finally:
            counts.submitted -= 1
            counts.done += 1
            counts.waiting -= len(calls)
            self.owner._changed()
        by_id = {outcome.custom_id: outcome for outcome in outcomes}
        for call in calls:
            call.batch_id = batch_id
            call.outcome = by_id.get(call.entry.custom_id) or BatchOutcome(
                call.entry.custom_id, "expired", 0, None
            )
            call.done.set()

    async def _outcomes(self, batch_id: str) -> list[BatchOutcome]:
        """Poll batch `batch_id` until it has ended; its outcomes. A poll that fails is
        tried again at the next turn (a batch runs for hours: a blip must not lose it)."""
        asked = 0
        while True:
            await self.owner.clock.sleep(_poll_wait(self.options.poll, asked))
            asked += 1
            try:
                state = await self.api.state(batch_id)
            except BatchUnsupported:
                raise
            except ProviderError as exc:
                if not exc.retryable:
                    raise
                log.info("batch poll failed", batch=batch_id, error=str(exc))
                continue
            if state.failed is not None:
                raise ProviderError(
                    f"batch {batch_id} failed: {state.failed}",
                    provider=self.provider.name,
                    model=self.provider.model,
                )
            if state.ended:
                return await self.api.outcomes(state)

    def _settle(self, calls: list[_Call], *, error: BaseException) -> None:
        for call in calls:
            call.error = error
            call.done.set()
        self.owner._changed()


def _poll_wait(poll: float, asked: int) -> float:
    """Seconds before the next ask about a batch asked about `asked` times: an eighth of
    `poll` at first, doubling up to `poll` (a small batch may end in seconds), then
    `poll`, growing by half past the tenth ask up to ten times `poll` (a batch that
    runs for hours is not asked about every few seconds).

    Example:
        >>> [_poll_wait(8, n) for n in range(6)]
        [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    """
    if asked < 3:
        return poll / 2 ** (3 - asked)
    return min(poll * 10, poll * 1.5 ** max(0, asked - 10))
