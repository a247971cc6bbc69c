"""A run's batch queues: one per endpoint, each gathering model calls into provider batches.

A call waits in its endpoint's queue. The queue is submitted as one batch when it
holds `Batch.size` requests (or as many as the provider takes in one batch, by count
or bytes), or `Batch.wait` seconds after its first request. A submitted batch is
asked about every `Batch.poll` seconds at first, less often (up to ten times that)
the longer it runs; once it has ended, each call gets its own outcome: a reply, a
`ProviderError` as a live call would raise (the run's retry policy then sends a
retryable one again, in a later batch), or, for a request that expired or was
cancelled before it ran, a place in the next batch (under the same custom id), at most
`MAX_REQUEUES` times: then it fails, and the retry policy does not send it again.

The results are read as `batching/results.py` says: a bad line loses only its own
request (a retryable failure), a duplicate is dropped, and a request the provider
counts as ended but left out of its results is asked for again, never sent again.

At most `Batch.pending` calls wait in batches at once: the next ones wait for room
before they join a queue, so memory stays bounded whatever the dataset's size.

A run that ends with batches still out (an error stopped it, or it was cancelled)
asks their providers to cancel them, unless `Batch(cancel_batches=False)`: nothing
would take their results.

A server without the batch API (404 at the first submission) stops the run with a
`ConfigError` naming the endpoint: every later call in batch mode would fail alike.

Crash safety: given a `journal`, each batch is recorded before it is submitted (its
endpoint and requests: the caller and a digest of the body of each) and again once the
provider took it (its id) and once it ended. A run resumed from that journal passes the
records back (`earlier`): a call that the earlier run already sent (same sample, epoch,
role, endpoint and body) takes its outcome from that batch, polled anew, instead of
going out again. A batch recorded but never known to be submitted (the process died
between the two records, or the provider refused it) is not followed: its requests go
out again.

`BatchQueues` runs its timers and pollers in a task group of its own, entered by the
engine around the run (`async with queues:`).

Example:
    >>> async with BatchQueues(Batch(size=100, wait=5)) as queues:
    ...     turn = await queues.call(provider, request)
"""

from __future__ import annotations

import collections
import itertools
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import msgspec

from .._errors import ConfigError, ProviderError
from .._logging import log
from ..pacing.batch_mode import Batch, Caller
from ..pacing.clock import Clock, SystemClock
from ..providers.batch_api import BatchApi, BatchEntry, BatchOutcome, BatchState, BatchUnsupported
from ..vocab.batch_records import BatchRecord, BatchRequest, body_digest
from ..vocab.model_calls import ChatRequest
from ..vocab.turns import Turn
from .apis import batch_api
from .results import REFETCHES, BatchResults

__all__ = ["BatchCounts", "BatchQueues", "ask_in_terminal"]

#: Times a request that expired or was cancelled goes in the next batch; expired once
#: more, it fails, and is not retried (four batches in all).
MAX_REQUEUES = 3
#: Seconds an ended run gives its providers to take the cancellation of its batches.
CANCEL_WITHIN = 30.0
#: Body keys a batch request must not carry (a batch is never streamed).
_STREAM_KEYS = ("stream", "stream_options")


def ask_in_terminal(batches: int, requests: int) -> bool:
    """Ask on the terminal whether to cancel the batches a stopped run left out with
    their providers (yes unless the answer is no); yes at once without a terminal.

    Example:
        >>> ask_in_terminal(2, 20000)   # the user answers "n"
        False
    """
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return True
    sys.stderr.write(
        f"\nThe run stopped with {batches} batch{'es' if batches != 1 else ''} out "
        f"({requests} requests). Cancel {'them' if batches != 1 else 'it'} with the "
        "provider? Answer n to leave them running: eval(resume=True) takes their "
        "results later. [Y/n] "
    )
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return True
    return answer.strip().lower() not in ("n", "no")


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
    caller: Caller | None
    digest: str
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: BatchOutcome | None = None
    error: BaseException | None = None
    batch_id: str = ""


@dataclass(slots=True, eq=False)
class _Earlier:
    """A batch an earlier run of these samples submitted: followed once a call needs it."""

    record: BatchRecord
    #: The custom ids of its requests the records name.
    ids: list[str] = field(default_factory=list)
    followed: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    results: BatchResults | None = None
    error: BaseException | None = None


#: What finds an earlier run's request: (sample id, epoch, role, endpoint, body digest).
_EarlierKey = tuple[Any, int, str, tuple[str, str, str], str]


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
        journal: takes what is known of each batch, before it is submitted and as it
            goes (the run's journal: see the module's docstring).
        earlier: the batches an earlier run of these samples recorded (a resumed run).
        ask: asked (batches, requests) whether to cancel the batches left out by a run
            the user stopped, when `Batch.cancel_batches` is None (None: cancel them).
    """

    def __init__(
        self,
        options: Batch | None,
        clock: Clock | None = None,
        on_change: Callable[[], None] | None = None,
        apis: Callable[[Any], BatchApi] = batch_api,
        at_work: Callable[[], int] | None = None,
        journal: Callable[[BatchRecord], None] | None = None,
        earlier: Sequence[BatchRecord] = (),
        ask: Callable[[int, int], bool] | None = ask_in_terminal,
    ) -> None:
        self.options = options
        self.clock = clock or SystemClock()
        self.on_change = on_change
        self.apis = apis
        self.at_work = at_work
        self.journal = journal
        self.ask = ask
        self._checking = False
        self.counts = BatchCounts()
        #: What is known of every batch of the run (and of those it resumed), by key,
        #: without their requests: for the log and the viewer.
        self.records: dict[str, BatchRecord] = {}
        self._earlier: dict[_EarlierKey, collections.deque[tuple[_Earlier, str]]] = {}
        self._take_in(earlier)
        self._queues: dict[tuple[str, str, str], _EndpointQueue] = {}
        self._ids = itertools.count()
        self._batch_keys = itertools.count()
        self._prefix = secrets.token_hex(4)
        self._room = anyio.Semaphore((options or Batch()).pending)
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> BatchQueues:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()  # timers and pollers of calls no one waits for
        try:
            await self._tg.__aexit__(None, None, None)  # the run's own error goes on as itself
        finally:  # a cancelled run (Ctrl-C) too: its own cancellation is raised here
            out = [(q, batch_id) for q in self._queues.values() for batch_id in q.out]
            requests = sum(n for q in self._queues.values() for n in q.out.values())
            if out and await self._cancelling(exc_type, len(out), requests):
                await self._cancel(out)

    async def _cancelling(
        self, exc_type: type[BaseException] | None, batches: int, requests: int
    ) -> bool:
        """Whether to cancel the batches a run that ended early left out: as
        `Batch.cancel_batches` says, else, for a run the user stopped (Ctrl-C), as they
        answer `ask` (a terminal's question), else yes."""
        choice = (self.options or Batch()).cancel_batches
        if choice is not None:
            return choice
        stopped = exc_type is not None and issubclass(
            exc_type, (KeyboardInterrupt, anyio.get_cancelled_exc_class())
        )
        if not stopped or self.ask is None:
            return True
        answer = True
        with anyio.CancelScope(shield=True):
            answer = await anyio.to_thread.run_sync(self.ask, batches, requests)
        return answer

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

    def _take_in(self, earlier: Sequence[BatchRecord]) -> None:
        """Index the requests of the batches an earlier run submitted, by the call each was."""
        for record in earlier:
            self.records[record.key] = msgspec.structs.replace(record, entries=None)
            if record.id is None and record.status is not None:
                continue  # not submitted: the provider refused it
            # (without an id and a status: the run died while it was being submitted)
            batch = _Earlier(self.records[record.key], [r.custom_id for r in record.entries or ()])
            for request in record.entries or ():
                if request.sample is None:
                    continue
                key = (request.sample, request.epoch, request.role, record.endpoint, request.digest)
                self._earlier.setdefault(key, collections.deque()).append(
                    (batch, request.custom_id)
                )

    def _take_earlier(
        self, caller: Caller | None, endpoint: tuple[str, str, str], digest: str
    ) -> tuple[_Earlier, str] | None:
        """The earlier run's request of this call, if it sent one not yet taken."""
        if caller is None or not self._earlier:
            return None
        key = (caller[0], caller[1], caller[2], endpoint, digest)
        found = self._earlier.get(key)
        if not found:
            return None
        taken = found.popleft()
        if not found:
            del self._earlier[key]
        return taken

    def _record(self, record: BatchRecord) -> None:
        """Journal what is now known of a batch (raising the journal's write error: a batch
        must not go out unrecorded) and keep it, without requests, for the log."""
        if self.journal is not None:
            self.journal(record)
        known = self.records.get(record.key)
        compact = msgspec.structs.replace(record, entries=None) if record.entries else record
        self.records[record.key] = compact if known is None else known.merged(compact)

    def _batch_key(self) -> str:
        return f"vb-{self._prefix}-{next(self._batch_keys)}"

    def takes(self, provider: Any) -> bool:
        own = getattr(provider, "batch", None)
        if own is False:
            return False
        return own is not None or self.options is not None

    @property
    def resumed(self) -> bool:
        """Whether requests of an earlier run's batches are still to be taken."""
        return bool(self._earlier)

    async def answered(
        self, provider: Any, request: ChatRequest, caller: Caller | None
    ) -> tuple[Turn, str] | None:
        """The reply a batch of the earlier run gave this very call, if one did (for a
        resumed run that is not in batch mode: what was paid for is taken); None: send
        it. The reply and the id of its batch."""
        if caller is None or not self._earlier:
            return None
        digest = body_digest(_batch_body(provider, request))
        return await self._queue(provider).answered(caller, digest)

    async def call(
        self, provider: Any, request: ChatRequest, caller: Caller | None = None
    ) -> tuple[Turn, str]:
        async with self._room:
            return await self._queue(provider).call(request, caller)

    def _queue(self, provider: Any) -> _EndpointQueue:
        queue = self._queues.get(provider.endpoint)
        if queue is None:
            own = getattr(provider, "batch", None)
            options = own if isinstance(own, Batch) else (self.options or Batch())
            queue = _EndpointQueue(self, provider, self.apis(provider), options)
            self._queues[provider.endpoint] = queue
        return queue

    def nudge(self) -> None:
        """Something changed in the run (a request joined a queue, a sample left a stage):
        if every sample at work now waits on a batch, submit what is queued."""
        if self.at_work is None or self._checking or self._tg is None or not self._queues:
            return  # no queue yet: no call waits on a batch
        if not self._quiet() or not any(queue.waiting for queue in self._queues.values()):
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
        #: The batches submitted and not ended: id -> how many requests.
        self.out: dict[str, int] = {}
        self.unsupported: BaseException | None = None

    async def call(self, request: ChatRequest, caller: Caller | None) -> tuple[Turn, str]:
        body = _batch_body(self.provider, request)
        owner = self.owner
        digest = body_digest(body) if owner.journal is not None or owner._earlier else ""
        if caller is not None and owner._earlier:
            found = await self.answered(caller, digest)
            if found is not None:
                return found
        gone = "expired"
        custom_id = self.owner._custom_id()  # the request's, in each batch it goes in
        for _ in range(1 + MAX_REQUEUES):
            call = self._enqueue(body, caller, digest, custom_id)
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
        raise ProviderError(  # not retried: the retry policy would send it as often again
            f"the request {gone} in {1 + MAX_REQUEUES} batches in a row (sent again "
            f"{MAX_REQUEUES} times at most); it is not sent again",
            provider=self.provider.name,
            model=self.provider.model,
        )

    async def answered(self, caller: Caller, digest: str) -> tuple[Turn, str] | None:
        """The reply of the earlier run's batches to this call, if one answered it: its
        requests of this call are taken in the order it sent them, up to the first that
        succeeded (one that failed, expired or was cancelled was sent again then, or is
        sent again now: None)."""
        while (
            earlier := self.owner._take_earlier(caller, self.provider.endpoint, digest)
        ) is not None:
            outcome, batch_id = await self._from_earlier(*earlier)
            if outcome.kind == "succeeded":
                return self.api.turn(outcome), batch_id
        return None

    async def _from_earlier(self, batch: _Earlier, custom_id: str) -> tuple[BatchOutcome, str]:
        """The outcome of request `custom_id` of a batch an earlier run submitted."""
        counts = self.owner.counts
        counts.waiting += 1
        self.owner._changed()
        try:
            if not batch.followed:
                batch.followed = True
                self.owner._start(self._follow, batch)
            await batch.done.wait()
        finally:
            counts.waiting -= 1
            self.owner._changed()
        if batch.error is not None:
            raise batch.error
        batch_id = batch.record.id or ""
        found = batch.results.of(custom_id) if batch.results is not None else None
        if not isinstance(found, BatchOutcome):  # not taken (lost, or its line unreadable)
            found = BatchOutcome(custom_id, "expired", 0, None)  # ... so sent again
        return found, batch_id

    async def _follow(self, batch: _Earlier) -> None:
        """Poll a batch an earlier run submitted until it has ended; take its outcomes. One
        the provider no longer knows (or refuses to say) counts as expired: its calls go
        out again."""
        counts = self.owner.counts
        counts.submitted += 1
        batch_id = batch.record.id
        try:
            if batch_id is None:
                batch_id = await self._found(batch.record)
                if batch_id is None:
                    return
                batch.record = msgspec.structs.replace(batch.record, id=batch_id)
            self.out[batch_id] = batch.record.requests or 0
            self.owner._changed()
            state, results = await self._outcomes(batch_id, batch.ids, at_once=True)
        except ProviderError as exc:
            log.warning(
                "could not take the outcomes of a batch of the earlier run: its requests are "
                "sent again",
                batch=batch_id,
                error=str(exc),
            )
        else:
            batch.results = results
            if batch.record.ended is None:
                self._ended(batch.record.key, state, results)
        finally:
            if batch_id is not None:
                self.out.pop(batch_id, None)
            counts.submitted -= 1
            counts.done += 1
            batch.done.set()
            self.owner._changed()

    async def _found(self, record: BatchRecord) -> str | None:
        """The provider's id of a batch the earlier run died submitting (asked by the label
        it was submitted under), journaled; None, with a warning, when it cannot be found:
        its requests are sent again."""
        try:
            found = await self.api.find(record.key, record.created or 0.0)
        except ProviderError as exc:
            log.warning("could not look for a batch", batch=record.key, error=str(exc))
            found = None
        if found is None:
            log.warning(
                "a batch of the earlier run was being submitted when it stopped, and the "
                "provider cannot say whether it took it: its requests are sent again",
                batch=record.key,
                provider=record.provider,
            )
            return None
        self.owner._record(BatchRecord(key=record.key, id=found))
        return found

    def _ended(self, key: str, state: BatchState, results: BatchResults) -> None:
        self.owner._record(
            BatchRecord(
                key=key,
                ended=time.time(),
                status=state.status,
                counts=dict(state.counts),
                notes=results.notes or None,
            )
        )

    def _enqueue(
        self, body: dict[str, Any], caller: Caller | None, digest: str, custom_id: str
    ) -> _Call:
        if self.unsupported is not None:
            raise self.unsupported
        entry = BatchEntry(custom_id, body)
        size = self.api.entry_size(entry)
        if self.waiting and self.bytes + size > self.api.max_bytes:
            self._flush()
        call = _Call(entry, caller, digest)
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
        owner = self.owner
        counts = owner.counts
        counts.queued -= len(calls)
        key = owner._batch_key()
        provider = self.provider
        try:
            owner._record(
                BatchRecord(
                    key=key,
                    provider=provider.name,
                    base_url=provider.base_url,
                    model=provider.model,
                    requests=len(calls),
                    created=time.time(),
                    entries=[_request(call) for call in calls]
                    if owner.journal is not None
                    else None,
                )
            )
        except Exception as exc:  # the journal could not take it: the batch stays here
            self._settle(calls, error=exc)
            return
        try:
            batch_id = await self.api.submit([call.entry for call in calls], key)
        except ProviderError as exc:
            owner._record(BatchRecord(key=key, status="not submitted", ended=time.time()))
            if isinstance(exc, BatchUnsupported):
                self.unsupported = exc = ConfigError(f"Batch mode: {exc.message}.")
            self._settle(calls, error=exc)
            return
        counts.submitted += 1
        counts.waiting += len(calls)
        counts.requests += len(calls)
        self.out[batch_id] = len(calls)
        try:
            owner._record(BatchRecord(key=key, id=batch_id, submitted=time.time()))
        finally:
            owner._changed()
        try:
            state, results = await self._outcomes(
                batch_id, [call.entry.custom_id for call in calls]
            )
            self.out.pop(batch_id, None)
            self._ended(key, state, results)
        except ProviderError as exc:
            self.out.pop(batch_id, None)
            owner._record(BatchRecord(key=key, ended=time.time(), status=f"failed: {exc}"))
            self._settle(calls, error=exc)
            return
        finally:
            counts.submitted -= 1
            counts.done += 1
            counts.waiting -= len(calls)
            self.owner._changed()
        for call in calls:
            call.batch_id = batch_id
            found = results.of(call.entry.custom_id)
            if isinstance(found, BatchOutcome):
                call.outcome = found
            else:
                call.error = found
            call.done.set()

    async def _outcomes(
        self, batch_id: str, ids: Sequence[str], *, at_once: bool = False
    ) -> tuple[BatchState, BatchResults]:
        """Poll batch `batch_id` until it has ended (asking at once, for a batch submitted
        long ago); its last state and the verdict of its results on requests `ids`
        (reported). A poll that fails is tried again at the next turn (a batch runs for
        hours: a blip must not lose it)."""
        state = await self._end_of(batch_id, at_once=at_once)
        state, results = await self._results(state, ids)
        results.report()
        return state, results

    async def _results(
        self, state: BatchState, ids: Sequence[str]
    ) -> tuple[BatchState, BatchResults]:
        """The results of ended batch `state`, asked for again (`REFETCHES` more times,
        after `poll`, twice and four times that) while they lack requests the provider
        counts as ended, or while fetching them fails for a retryable reason."""
        clock, poll = self.owner.clock, self.options.poll
        reads = 0
        while True:
            if reads:
                await clock.sleep(poll * 2 ** (reads - 1))
            reads += 1
            try:
                if reads > 1:  # its files (their ids, its inlined responses) as they are now
                    fresh = await self.api.state(state.id)
                    state = fresh if fresh.ended else state
                outcomes = await self.api.outcomes(state)
            except ProviderError as exc:
                if not exc.retryable or reads > REFETCHES:
                    raise
                log.info("batch results could not be fetched", batch=state.id, error=str(exc))
                continue
            answered = state.answered
            results = BatchResults.read(self.provider, state.id, ids, outcomes, answered, reads)
            if not results.short or reads > REFETCHES:
                return state, results
            log.info(
                "batch results lack requests the provider counts as ended: asked again",
                batch=state.id,
                missing=len(results.missing),
            )

    async def _end_of(self, batch_id: str, *, at_once: bool) -> BatchState:
        """Poll batch `batch_id` until it has ended; its last state."""
        asked = 0
        while True:
            if asked or not at_once:
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
                return state

    def _settle(self, calls: list[_Call], *, error: BaseException) -> None:
        for call in calls:
            call.error = error
            call.done.set()
        self.owner._changed()


def _batch_body(provider: Any, request: ChatRequest) -> dict[str, Any]:
    """The body of `request` in a batch: as a live call's, never streamed."""
    return {k: v for k, v in provider.body(request).items() if k not in _STREAM_KEYS}


def _request(call: _Call) -> BatchRequest:
    caller = call.caller
    if caller is None:
        return BatchRequest(call.entry.custom_id, None, 0, "", call.digest)
    return BatchRequest(call.entry.custom_id, caller[0], caller[1], caller[2], call.digest)


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
    return min(poll * 10, poll * 1.5 ** min(6, max(0, asked - 10)))  # 1.5**6 > 10: capped
