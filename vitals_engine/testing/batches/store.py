"""The batches the mock server holds, whatever their API: each request of a batch, how
the batch stands, its state machine (in progress, cancelling, ended), the knobs that
plan failures, expiries and spoiled results, and the files OpenAI's Files API stores."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..brain import MockReply, MockRequest
from ..formats import Refused, WireFormat

__all__ = [
    "BATCH_KINDS",
    "DAY",
    "FLAWS",
    "MONTH",
    "BatchCounts",
    "BatchItem",
    "BatchStore",
    "MockBatch",
    "ResultsPlan",
    "StoredFile",
    "new_id",
    "rfc3339",
    "unix_time",
]

#: Failures a request inside a batch can have (`MockServer.fail_in_batch`).
BATCH_KINDS = frozenset({"400", "429", "500", "expired"})
_MESSAGES = {
    400: "Invalid request",
    429: "Rate limit reached for requests",
    500: "The server had an error while processing your request",
}
#: Bad lines a batch's results can carry (`MockServer.spoil_batch_results`).
FLAWS = frozenset({"junk", "truncated", "no-id", "null-id", "numeric-id", "duplicate"})
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed because the batch was cancelled."
DAY = 24 * 3600
MONTH = 30 * DAY


def new_id() -> str:
    return uuid.uuid4().hex[:24]


def rfc3339(at: float | None) -> str | None:
    """`at` (unix seconds) as an RFC 3339 time, as Anthropic and Gemini write times."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def unix_time(at: float | None) -> int | None:
    """`at` as whole unix seconds, as OpenAI writes times."""
    return None if at is None else int(at)


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """How the requests of a batch stand: still processing, or how each ended.

    Example:
        >>> BatchCounts(succeeded=3, errored=1, expired=1).failed
        2
    """

    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    cancelled: int = 0

    @property
    def failed(self) -> int:
        """Requests that ended without an answer: errored, expired or cancelled."""
        return self.errored + self.expired + self.cancelled


@dataclass(slots=True)
class BatchItem:
    """One request of a batch: what was sent and, once processed, how it ended."""

    custom_id: str
    body: Any
    request: MockRequest | None  # None: the API would refuse the body (answered 400)
    invalid: str = ""
    metadata: Any = None  # Gemini's per-request metadata, echoed back
    outcome: str | None = None  # succeeded | errored | expired | cancelled
    status: int = 200
    message: str = ""
    response: dict[str, Any] | None = None
    done_at: float | None = None
    #: How the API refuses the body, when it does with an error of its own.
    refused: Refused | None = None


@dataclass(slots=True)
class ResultsPlan:
    """How the results of a batch are served spoiled (`MockServer.spoil_batch_results`):
    bad lines (`flaws`, each one of `FLAWS`) and `lost` finished requests left out while
    the batch's counts still count them, on the first `reads` reads (None: on every one)."""

    flaws: tuple[str, ...] = ()
    lost: int = 0
    reads: int | None = None

    def take(self) -> bool:
        """Whether this read of the results is spoiled (counting it)."""
        if self.reads is None:
            return True
        if self.reads <= 0:
            return False
        self.reads -= 1
        return True


@dataclass(slots=True)
class MockBatch:
    """A batch the mock holds, whatever its format.

    `state` is "in_progress", "cancelling" or "ended"; once ended, `outcome` says how:
    "completed", "expired", "cancelled" or "failed" (an OpenAI input file the API refuses).

    Example:
        >>> batch = server.batches["msgbatch_…"]
        >>> batch.state, batch.outcome, batch.counts.succeeded, batch.custom_ids
        ('ended', 'completed', 2, ['a', 'b'])
    """

    id: str
    format: str
    custom_ids: list[str]
    created_at: float
    state: str = "in_progress"
    outcome: str | None = None
    ended_at: float | None = None
    cancel_requested_at: float | None = None
    #: Requests that finish before the batch expires (None: it does not expire).
    expire_after: int | None = None
    delay: float = 0.0
    #: How its results are spoiled, if they are.
    spoiled: ResultsPlan | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    items: list[BatchItem] = field(default_factory=list, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    started: float = field(default_factory=time.monotonic, repr=False)

    @property
    def ended(self) -> bool:
        return self.state == "ended"

    @property
    def counts(self) -> BatchCounts:
        """The requests still processing and how the others ended."""
        tally = collections.Counter(item.outcome for item in self.items)
        return BatchCounts(
            processing=tally[None],
            succeeded=tally["succeeded"],
            errored=tally["errored"],
            expired=tally["expired"],
            cancelled=tally["cancelled"],
        )

    def due(self, index: int) -> float:
        """When request `index` finishes (monotonic clock): spread over the batch's delay."""
        return self.started + self.delay * (index + 1) / max(1, len(self.items))


@dataclass(slots=True)
class StoredFile:
    """A file of OpenAI's Files API: an uploaded batch input, or a batch's output."""

    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: float
    #: The batch whose results it holds (None: an uploaded file).
    batch: str | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": int(self.created_at),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": int(self.created_at + MONTH),
            "status_details": None,
        }


@dataclass(slots=True)
class _ItemFailure:
    kind: str
    times: int | None
    model: str | None


Reply = Callable[[MockRequest], MockReply]
Record = Callable[[MockBatch, BatchItem], None]


class BatchStore:
    """The batches the server holds, their knobs and counters, and their state machine.

    Everything changes on the server's loop, under the server's lock, so tests may read
    from another thread. `reply` answers a request as a live one would be; `record`
    logs and counts a processed request.

    Example:
        >>> store = BatchStore(threading.Lock(), reply=..., record=..., delay=0.0)
        >>> store.fail_in_batch("429", times=2)
        >>> store.expire_batches(finished=1)
    """

    def __init__(self, lock: threading.Lock, *, reply: Reply, record: Record, delay: float) -> None:
        self._lock = lock
        self._reply = reply
        self._record = record
        self._initial_delay = delay
        self._formats: dict[str, WireFormat] = {}
        self.delay = delay
        self.enabled = True
        self.max_requests: int | None = None
        self.batches: dict[str, MockBatch] = {}
        self.files: dict[str, StoredFile] = {}
        self.submissions: collections.Counter[str] = collections.Counter()
        self.polls: collections.Counter[str] = collections.Counter()
        self._failures: list[_ItemFailure] = []
        self._expiries: list[int] = []
        self._spoiled: list[ResultsPlan] = []

    def fail_in_batch(self, kind: str, *, times: int | None = 1, model: str | None = None) -> None:
        """Fail the next `times` batched requests (for `model`, or any) with `kind`."""
        if kind not in BATCH_KINDS:
            raise ValueError(f"unknown batch failure kind {kind!r}; one of {sorted(BATCH_KINDS)}")
        if times is not None and times <= 0:
            return
        with self._lock:
            self._failures.append(_ItemFailure(kind, times, model))

    def expire_batches(self, times: int = 1, *, finished: int = 0) -> None:
        """Expire the next `times` batches after the delay, `finished` of their requests done."""
        with self._lock:
            self._expiries.extend([max(0, finished)] * times)

    def spoil_results(
        self, flaws: tuple[str, ...], *, lost: int = 0, times: int = 1, reads: int | None = None
    ) -> None:
        """Spoil the results of the next `times` batches (see `ResultsPlan`)."""
        unknown = sorted(set(flaws) - FLAWS)
        if unknown:
            raise ValueError(f"unknown result flaws {unknown}; each one of {sorted(FLAWS)}")
        with self._lock:
            self._spoiled.extend(ResultsPlan(flaws, max(0, lost), reads) for _ in range(times))

    def reset(self) -> None:
        """Forget every batch, file, plan and counter; knobs back to how they started."""
        with self._lock:
            self.delay = self._initial_delay
            self.enabled = True
            self.max_requests = None
            self.batches.clear()
            self.files.clear()
            self.submissions.clear()
            self.polls.clear()
            self._failures.clear()
            self._expiries.clear()
            self._spoiled.clear()

    def store_file(
        self, filename: str, purpose: str, content: bytes, batch: str | None = None
    ) -> StoredFile:
        stored = StoredFile(f"file-{new_id()}", filename, purpose, content, time.time(), batch)
        with self._lock:
            self.files[stored.id] = stored
        return stored

    def delete_file(self, file_id: str) -> bool:
        """Delete a stored file; False when there was none."""
        with self._lock:
            return self.files.pop(file_id, None) is not None

    def get(self, batch_id: str, *formats: WireFormat) -> MockBatch | None:
        """The batch `batch_id` of requests in one of `formats`, brought up to date."""
        batch = self.batches.get(batch_id)
        if batch is None or batch.format not in {fmt.name for fmt in formats}:
            return None
        self.advance(batch)
        return batch

    def poll(self, batch: MockBatch) -> None:
        """Count a status request of `batch`."""
        with self._lock:
            self.polls[batch.id] += 1

    def submit(
        self,
        fmt: WireFormat,
        batch_id: str,
        items: list[BatchItem],
        headers: Mapping[str, str],
        extra: dict[str, Any] | None = None,
    ) -> MockBatch:
        """Take a batch of `items` in: it ends after the delay (or expires, if planned)."""
        self._formats[fmt.name] = fmt
        with self._lock:
            batch = MockBatch(
                batch_id,
                fmt.name,
                [item.custom_id for item in items],
                time.time(),
                expire_after=self._expiries.pop(0) if self._expiries else None,
                delay=self.delay,
                spoiled=self._spoiled.pop(0) if self._spoiled else None,
                extra=extra or {},
                items=items,
                headers=dict(headers),
            )
            self.batches[batch.id] = batch
            self.submissions.update(batch.custom_ids)
        asyncio.get_running_loop().call_later(batch.delay, self._end_in_time, batch.id)
        return batch

    def refuse(self, fmt: WireFormat, batch_id: str, extra: dict[str, Any]) -> MockBatch:
        """Take in a batch the API refuses after submission: it has failed, no request ran."""
        now = time.time()
        batch = MockBatch(batch_id, fmt.name, [], now, "ended", "failed", now, extra=extra)
        with self._lock:
            self.batches[batch.id] = batch
        return batch

    def cancel(self, batch: MockBatch, *, at_once: bool = False) -> None:
        """Cancel `batch`: "cancelling" now, then (soon, or `at_once`) ended with its
        unfinished requests cancelled. An ended batch stays as it is."""
        self.advance(batch)
        if batch.ended or batch.state == "cancelling":
            return
        with self._lock:
            batch.state = "cancelling"
            batch.cancel_requested_at = time.time()
        if at_once:
            self._end(batch, "cancelled")
        else:
            asyncio.get_running_loop().call_soon(self._end, batch, "cancelled")

    def end_soon(self) -> None:
        """Let every batch in progress end at its next poll (its delay is up)."""
        with self._lock:
            for batch in self.batches.values():
                if batch.state == "in_progress":
                    batch.delay = 0.0

    def advance(self, batch: MockBatch, *, finish: bool = False) -> None:
        """Process the requests of `batch` whose time has come; end it once its time is up."""
        if batch.state != "in_progress":
            return
        now = time.monotonic()
        finish = finish or now >= batch.started + batch.delay
        limit = len(batch.items) if batch.expire_after is None else batch.expire_after
        for index, item in enumerate(batch.items[:limit]):
            if item.outcome is None and (finish or now >= batch.due(index)):
                self._process(batch, item)
        if finish:
            self._end(batch, "completed" if batch.expire_after is None else "expired")

    def _end_in_time(self, batch_id: str) -> None:
        batch = self.batches.get(batch_id)
        if batch is not None:
            self.advance(batch, finish=True)

    def _end(self, batch: MockBatch, outcome: str) -> None:
        if batch.ended:
            return
        now = time.time()
        left = "cancelled" if outcome == "cancelled" else "expired"
        with self._lock:
            for item in batch.items:
                if item.outcome is None:
                    item.outcome = left
                    item.message = _CANCELLED if left == "cancelled" else _EXPIRED
                    item.done_at = now
            batch.state = "ended"
            batch.outcome = outcome
            batch.ended_at = now

    def _pick_failure(self, model: str) -> str | None:
        with self._lock:
            for plan in self._failures:
                if plan.model is None or plan.model == model:
                    if plan.times is not None:
                        plan.times -= 1
                        if plan.times <= 0:
                            self._failures.remove(plan)
                    return plan.kind
        return None

    def _process(self, batch: MockBatch, item: BatchItem) -> None:
        fmt = self._formats[batch.format]
        outcome, status, message, response = "succeeded", 200, "", None
        request = item.request
        kind = None if request is None else self._pick_failure(request.model)
        if request is None:
            refused = item.refused
            status = 400 if refused is None else refused.status
            outcome, message = "errored", item.invalid if refused is None else refused.message
        elif kind == "expired":
            outcome, message = "expired", _EXPIRED
        elif kind is not None:
            status = int(kind)
            outcome, message = "errored", _MESSAGES[status]
        else:
            try:
                response = fmt.render(request, self._reply(request))
            except Exception as exc:  # a test's script raised: this request fails, not the batch
                outcome, status, message = "errored", 500, f"{type(exc).__name__}: {exc}"
        with self._lock:
            item.outcome, item.status, item.message = outcome, status, message
            item.response = response
            item.done_at = time.time()
        if request is not None:
            self._record(batch, item)
