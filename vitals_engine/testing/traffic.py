"""What the mock server received: each request as a `RecordedRequest` (the log) and the
counts a test asserts on (requests, by model, in flight and their peak, connections).

Requests a batch processed are logged and counted as live ones are, with their batch.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .batches import BatchItem, MockBatch
from .brain import MockRequest

__all__ = ["RecordedRequest", "Traffic"]


@dataclass(slots=True)
class RecordedRequest:
    """A request the server received: when, in which format, for which model, what it said.

    `MockServer.log` holds them, oldest first.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     server.fail("429", retry_after=0.1)
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     _ = chat.chat("What's 2+2?")  # answered on the second attempt
        >>> [(entry.model, entry.request.prompt, entry.outcome) for entry in server.log]
        [('gpt-4.1-mini', "What's 2+2?", '429'), ('gpt-4.1-mini', "What's 2+2?", 'ok')]
    """

    at: float
    format: str
    model: str
    request: MockRequest
    headers: dict[str, str]
    body: Any
    outcome: str = "ok"
    answered: float = 0.0  # when the answer (or failure) was sent
    batch: str | None = None  # the batch it came in, if it did
    custom_id: str | None = None  # its id in that batch


class Traffic:
    """The server's counters and request log, under the server's `lock`.

    Example:
        >>> traffic = Traffic(threading.Lock(), keep_log=True)
        >>> traffic.arrived(("127.0.0.1", 50000))
        >>> traffic.in_flight, traffic.peak_in_flight, traffic.connections
        (1, 1, {('127.0.0.1', 50000)})
    """

    def __init__(self, lock: threading.Lock, keep_log: bool) -> None:
        self._lock = lock
        #: Remember every request in `log` (off for benchmarks).
        self.keep_log = keep_log
        self.requests = 0
        self.requests_by_model: collections.Counter[str] = collections.Counter()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.connections: set[tuple[str, int]] = set()
        self.log: list[RecordedRequest] = []

    def arrived(self, peer: Any) -> None:
        """A request is being answered, on the connection from `peer` (address, port)."""
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if peer:
                self.connections.add((str(peer[0]), int(peer[1])))

    def left(self) -> None:
        """A request has its answer."""
        with self._lock:
            self.in_flight -= 1

    @contextlib.contextmanager
    def hanging(self) -> Iterator[None]:
        """Within: a hung request, which is not being answered (not in flight)."""
        with self._lock:
            self.in_flight -= 1
        try:
            yield
        finally:
            with self._lock:
                self.in_flight += 1

    def accepted(
        self, format_name: str, request: MockRequest, headers: dict[str, str], body: Any
    ) -> RecordedRequest:
        """Count a request the server accepted (and log it, if the log is kept); its record,
        stamped now (under the lock: the log is in the order of its times)."""
        with self._lock:
            record = RecordedRequest(
                time.time(), format_name, request.model, request, headers, body
            )
            self._count(record)
        return record

    def _count(self, record: RecordedRequest) -> None:
        self.requests += 1
        self.requests_by_model[record.model] += 1
        if self.keep_log:
            self.log.append(record)

    def count_batched(self, batch: MockBatch, item: BatchItem) -> None:
        """Log and count a request a batch has processed, as a live request is."""
        assert item.request is not None
        outcome = {"succeeded": "ok", "errored": str(item.status)}.get(str(item.outcome), "expired")
        record = RecordedRequest(
            batch.created_at,
            batch.format,
            item.request.model,
            item.request,
            batch.headers,
            item.body,
            outcome,
            item.done_at or time.time(),
            batch=batch.id,
            custom_id=item.custom_id,
        )
        with self._lock:
            self._count(record)

    def per_second(self) -> list[int]:
        """Requests logged in each whole second of the clock, from the first request's
        second to the last's, empty seconds included."""
        with self._lock:
            seconds = [int(entry.at) for entry in self.log]
        if not seconds:
            return []
        counts = collections.Counter(seconds)
        return [counts[second] for second in range(min(seconds), max(seconds) + 1)]

    def clear(self) -> None:
        """Counters and log back to empty, but requests in flight (call it holding the lock)."""
        self.requests = 0
        self.requests_by_model.clear()
        self.peak_in_flight = 0
        self.connections.clear()
        self.log.clear()
