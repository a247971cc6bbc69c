"""The providers' batch APIs on the mock server: many requests sent at once, results later.

Each request of a batch is answered by the same brain and the format's own
`render()` as a live request (so a batched reply equals a live one, usage
block included), is recorded in `server.log` (with its batch and custom id)
and counted in `server.requests`. A batch ends `batch_delay` seconds after
its submission; until then it is in progress, its requests finishing one by
one over that time (a poll sees them done so far). Routes, relative to the
server's root:

OpenAI (`/v1`), a JSONL file of requests uploaded first:

- `POST /v1/files` (multipart: `purpose=batch`, `file` a `.jsonl`, each line
  `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`)
  → file object `{"id": "file-…", "object": "file", "bytes", "created_at",
  "filename", "purpose", "status": "processed", "expires_at", "status_details"}`;
  `GET /v1/files/{id}`, `GET /v1/files/{id}/content` (the bytes), `DELETE /v1/files/{id}`;
- `POST /v1/batches` (`input_file_id`, `endpoint` "/v1/chat/completions",
  `completion_window` "24h", optional `metadata`) → batch object, `"status": "validating"`;
  `GET /v1/batches/{id}`; `GET /v1/batches?limit=&after=` (newest first: `{"object":
  "list", "data", "first_id", "last_id", "has_more"}`); `POST /v1/batches/{id}/cancel` →
  `"cancelling"`, then `"cancelled"`.
  Batch object: `id` "batch_…", `object` "batch", `endpoint`, `errors`, `input_file_id`,
  `completion_window`, `status` (validating, in_progress, cancelling, completed, failed,
  expired, cancelled), `output_file_id`, `error_file_id` (null until there is one),
  `created_at`, `in_progress_at`, `expires_at`, `finalizing_at`, `completed_at`, `failed_at`,
  `expired_at`, `cancelling_at`, `cancelled_at` (unix seconds or null), `request_counts`
  `{total, completed, failed}`, `metadata`. A file the API would refuse (a line not JSON,
  a duplicate or missing `custom_id`, another `url` or `method`, two models, no lines)
  makes a `failed` batch whose `errors` is `{"object": "list", "data": [{"code", "message",
  "param", "line"}]}` (codes `invalid_json_line`, `duplicate_custom_id`, `url_mismatch`,
  `model_mismatch`, `empty_file`, `invalid_request`).
  Output file lines: `{"id": "batch_req_…", "custom_id", "response": {"status_code": 200,
  "request_id", "body": <chat.completion>}, "error": null}`; the error file holds a failed
  request as a non-200 `response` whose body is the format's error body, or (expired,
  cancelled) `"response": null, "error": {"code": "batch_expired" | "batch_cancelled",
  "message"}`. Expired and cancelled requests count as `failed`.

Anthropic (`/v1`):

- `POST /v1/messages/batches` with `{"requests": [{"custom_id", "params"}]}` → message batch
  `{"id": "msgbatch_…", "type": "message_batch", "processing_status": "in_progress" |
  "canceling" | "ended", "request_counts": {processing, succeeded, errored, canceled,
  expired}, "ended_at", "created_at", "expires_at", "archived_at", "cancel_initiated_at",
  "results_url"}` (RFC 3339 times; `results_url` once ended);
- `GET /v1/messages/batches/{id}`, `POST /v1/messages/batches/{id}/cancel`;
- `GET /v1/messages/batches/{id}/results` (once ended; 400 before) → JSONL lines
  `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored",
  "error": {"type": "error", "error": {"type", "message"}}} | {"type": "canceled"} |
  {"type": "expired"}}`.

Gemini (`/v1beta`), inlined requests only:

- `POST /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"display_name",
  "input_config": {"requests": {"requests": [{"request": {GenerateContentRequest},
  "metadata": {"key": …}}]}}}}` (camelCase keys as well) → the long-running operation
  `{"name": "batches/…", "metadata": {"@type": "…GenerateContentBatch", "model":
  "models/{model}", "displayName", "createTime", "updateTime", "batchStats", "state",
  "name"}}`, `state` BATCH_STATE_PENDING;
- `GET /v1beta/batches/{id}` → the operation, `state` BATCH_STATE_RUNNING, then
  SUCCEEDED, EXPIRED or CANCELLED with `"done": true`, `metadata.endTime`, and the
  responses in both `response` (`{"@type": "…GenerateContentBatchOutput",
  "inlinedResponses": {"inlinedResponses": [...]}}`) and `metadata.output`
  (`{"inlinedResponses": {"inlinedResponses": [...]}}`);
- `GET /v1beta/batches?pageSize=&pageToken=` → `{"operations": [...], "nextPageToken"}`,
  newest first;
- `POST /v1beta/batches/{id}:cancel` → `{}`; the batch is CANCELLED at once (Gemini has
  no cancelling state).

This is the shape `GET batches/{id}` has on the wire: an `Operation` whose
`metadata` is the `GenerateContentBatch` (camelCase, as every Gemini REST
response), the output nested twice (`inlinedResponses.inlinedResponses`,
`InlinedResponses` being a message of its own) and mirrored under `response`
once done, which is where Google's REST guide reads it; the SDKs read
`metadata.output`. Like proto3 JSON, `done` is left out until true and
`batchStats` counts are strings, zeros left out (`requestCount`,
`successfulRequestCount`, `failedRequestCount`, `pendingRequestCount`). An
inlined response is `{"response": {GenerateContentResponse}, "metadata"}` or
`{"error": {"code", "message"}, "metadata"}`, the error a `google.rpc.Status`:
its `code` is the gRPC code (3 INVALID_ARGUMENT for a 400, 8 RESOURCE_EXHAUSTED
for a 429, 13 INTERNAL for a 500, 4 DEADLINE_EXCEEDED when expired, 1
CANCELLED), not the HTTP status. `metadata` is echoed as sent; `metadata.key`
is the custom id the counters use (else `batches/…#index`). An expired or
cancelled batch also carries its finished responses (the real API may not).

Every batch route answers 404 with the format's error body when batches are
turned off, a batch of another format is not found (404), and a batch over
`max_batch_requests` is refused with 400. Cancelling an ended batch returns it
unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from aiohttp import web

from .brain import MockReply, MockRequest
from .formats import WireFormat

__all__ = [
    "BATCH_KINDS",
    "BatchCounts",
    "BatchItem",
    "BatchStore",
    "MockBatch",
    "StoredFile",
    "add_routes",
]

#: Failures a request inside a batch can have (`MockServer.fail_in_batch`).
BATCH_KINDS = frozenset({"400", "429", "500", "expired"})
_MESSAGES = {
    400: "Invalid request",
    429: "Rate limit reached for requests",
    500: "The server had an error while processing your request",
}
_EXPIRED = "This request could not be executed before the completion window expired."
_CANCELLED = "This request was not executed because the batch was cancelled."
_DAY = 24 * 3600
_MONTH = 30 * _DAY


def _hex() -> str:
    return uuid.uuid4().hex[:24]


def _rfc3339(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _unix(at: float | None) -> int | None:
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

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": int(self.created_at),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": int(self.created_at + _MONTH),
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

    def store_file(self, filename: str, purpose: str, content: bytes) -> StoredFile:
        stored = StoredFile(f"file-{_hex()}", filename, purpose, content, time.time())
        with self._lock:
            self.files[stored.id] = stored
        return stored

    def delete_file(self, file_id: str) -> bool:
        """Delete a stored file; False when there was none."""
        with self._lock:
            return self.files.pop(file_id, None) is not None

    def get(self, batch_id: str, fmt: WireFormat) -> MockBatch | None:
        """The batch `batch_id` of `fmt`'s API, brought up to date."""
        batch = self.batches.get(batch_id)
        if batch is None or batch.format != fmt.name:
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
            outcome, status, message = "errored", 400, item.invalid
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


# -- the APIs ------------------------------------------------------------------------------------


def _parse(fmt: WireFormat, body: Any, path: Mapping[str, str]) -> tuple[MockRequest | None, str]:
    """`body` as the format's request, or None and why the API would refuse it."""
    try:
        request = fmt.parse(body, path, {})
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"invalid request: {exc}"
    request.stream = False  # a batch answers whole replies
    return request, ""


class _BadRequest(Exception):
    """A submission the API refuses with 400."""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Api:
    """The batch routes of one format, over the store."""

    def __init__(self, store: BatchStore, fmt: WireFormat) -> None:
        self.store = store
        self.fmt = fmt

    def add_routes(self, router: web.UrlDispatcher) -> None:
        raise NotImplementedError

    def route(self, router: web.UrlDispatcher, method: str, path: str, handler: Handler) -> None:
        async def guarded(http: web.Request) -> web.StreamResponse:
            if not self.store.enabled:
                return self.error(404, f"Not found: {http.method} {http.path}")
            try:
                return await handler(http)
            except _BadRequest as exc:
                return self.error(400, str(exc))

        router.add_route(method, path, guarded)

    def error(self, status: int, message: str) -> web.Response:
        return web.json_response(self.fmt.error_body(status, message), status=status)

    def not_found(self, batch_id: str) -> web.Response:
        return self.error(404, f"No batch found with id '{batch_id}'")

    async def json(self, http: web.Request) -> dict[str, Any]:
        try:
            body = msgspec.json.decode(await http.read())
        except msgspec.DecodeError as exc:
            raise _BadRequest(f"invalid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise _BadRequest("the request body must be a JSON object")
        return body

    def check_size(self, count: int) -> None:
        cap = self.store.max_requests
        if cap is not None and count > cap:
            raise _BadRequest(f"a batch may hold at most {cap} requests, not {count}")


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(msgspec.json.encode(line) + b"\n" for line in lines)


class _OpenAIBatches(_Api):
    def add_routes(self, router: web.UrlDispatcher) -> None:
        self.route(router, "POST", "/v1/files", self.upload)
        self.route(router, "GET", "/v1/files/{file_id}", self.file)
        self.route(router, "DELETE", "/v1/files/{file_id}", self.delete_file)
        self.route(router, "GET", "/v1/files/{file_id}/content", self.content)
        self.route(router, "POST", "/v1/batches", self.create)
        self.route(router, "GET", "/v1/batches", self.list_batches)
        self.route(router, "GET", "/v1/batches/{batch_id}", self.retrieve)
        self.route(router, "POST", "/v1/batches/{batch_id}/cancel", self.cancel)

    async def upload(self, http: web.Request) -> web.StreamResponse:
        form = await http.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, web.FileField) or not isinstance(purpose, str):
            raise _BadRequest("'file' and 'purpose' are required")
        if purpose == "batch" and not upload.filename.endswith(".jsonl"):
            raise _BadRequest("Invalid file format for Batch API. Must be .jsonl")
        stored = self.store.store_file(upload.filename, purpose, upload.file.read())
        return web.json_response(stored.describe())

    def _file(self, http: web.Request) -> StoredFile | None:
        return self.store.files.get(http.match_info["file_id"])

    async def file(self, http: web.Request) -> web.StreamResponse:
        stored = self._file(http)
        if stored is None:
            return self.error(404, f"No such File object: {http.match_info['file_id']}")
        return web.json_response(stored.describe())

    async def delete_file(self, http: web.Request) -> web.StreamResponse:
        file_id = http.match_info["file_id"]
        if not self.store.delete_file(file_id):
            return self.error(404, f"No such File object: {file_id}")
        return web.json_response({"id": file_id, "object": "file", "deleted": True})

    async def content(self, http: web.Request) -> web.StreamResponse:
        stored = self._file(http)
        if stored is None:
            return self.error(404, f"No such File object: {http.match_info['file_id']}")
        return web.Response(body=stored.content, content_type="application/octet-stream")

    async def create(self, http: web.Request) -> web.StreamResponse:
        body = await self.json(http)
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if not isinstance(file_id, str) or not isinstance(endpoint, str):
            raise _BadRequest("'input_file_id', 'endpoint' and 'completion_window' are required")
        if endpoint != self.fmt.route:
            raise _BadRequest(f"this mock batches {self.fmt.route} only, not {endpoint!r}")
        if body.get("completion_window") != "24h":
            raise _BadRequest("completion_window: only '24h' is supported")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise _BadRequest("metadata must be an object of strings")
        source = self.store.files.get(file_id)
        if source is None:
            return self.error(404, f"No such File object: {file_id}")
        items, errors = self._items(source.content.decode("utf-8", "replace"), endpoint)
        self.check_size(len(items))
        extra = {
            "endpoint": endpoint,
            "input_file_id": file_id,
            "metadata": metadata,
            "errors": None,
        }
        batch_id = f"batch_{_hex()}"
        if errors:
            extra["errors"] = {"object": "list", "data": errors}
            batch = self.store.refuse(self.fmt, batch_id, extra)
        else:
            batch = self.store.submit(self.fmt, batch_id, items, http.headers, extra)
        return web.json_response(self._describe(batch, fresh=True))

    async def list_batches(self, http: web.Request) -> web.StreamResponse:
        """`GET /v1/batches?limit=&after=`: the batches, newest first, a page at a time."""
        try:
            limit = max(1, min(100, int(http.query.get("limit", "20"))))
        except ValueError:
            raise _BadRequest("limit must be a whole number") from None
        newest = [b for b in reversed(self.store.batches.values()) if b.format == self.fmt.name]
        after = http.query.get("after")
        if after is not None:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1 :] if after in ids else []
        page = newest[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": [self._describe(batch) for batch in page],
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
                "has_more": len(newest) > limit,
            }
        )

    def _items(self, text: str, endpoint: str) -> tuple[list[BatchItem], list[dict[str, Any]]]:
        """The requests of an input file, and what the API's validation would say of it."""
        items: list[BatchItem] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()

        def fail(code: str, message: str, line: int, param: str | None = None) -> None:
            errors.append({"code": code, "message": message, "param": param, "line": line})

        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError:
                fail("invalid_json_line", "This line is not parseable as valid JSON.", number)
                continue
            if not isinstance(entry, dict):
                fail("invalid_json_line", "This line is not a JSON object.", number)
                continue
            custom_id, body = entry.get("custom_id"), entry.get("body")
            if not isinstance(custom_id, str) or not custom_id:
                fail("invalid_request", "Missing required parameter 'custom_id'.", number)
                continue
            if custom_id in seen:
                fail("duplicate_custom_id", f"The custom_id {custom_id!r} is a duplicate.", number)
                continue
            seen.add(custom_id)
            if entry.get("method") != "POST":
                fail("invalid_request", "The method must be 'POST'.", number, "method")
            if entry.get("url") != endpoint:
                fail("url_mismatch", f"The url must be the batch's endpoint {endpoint}.", number)
            if not isinstance(body, dict):
                fail("invalid_request", "Missing required parameter 'body'.", number, "body")
                continue
            if isinstance(body.get("model"), str):
                models.add(body["model"])
                if len(models) > 1:
                    fail("model_mismatch", "A batch's requests must all use one model.", number)
            request, invalid = _parse(self.fmt, body, {})
            items.append(BatchItem(custom_id, body, request, invalid))
        if not items and not errors:
            fail("empty_file", "The input file is empty.", 1)
        return items, errors

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.poll(batch)
        return web.json_response(self._describe(batch))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.cancel(batch)
        return web.json_response(self._describe(batch))

    def _describe(self, batch: MockBatch, *, fresh: bool = False) -> dict[str, Any]:
        """The batch object; `fresh`: as `POST /v1/batches` answers it, still validating."""
        if batch.ended and batch.outcome != "failed" and "output_file_id" not in batch.extra:
            self._write_outputs(batch)
        counts = batch.counts
        outcome = batch.outcome if batch.ended else None
        status = "validating" if fresh else (outcome or batch.state)
        cancelling = batch.cancel_requested_at

        def at(when: str) -> int | None:
            return _unix(batch.ended_at) if outcome == when and not fresh else None

        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.extra["endpoint"],
            "errors": batch.extra["errors"] if not fresh else None,
            "input_file_id": batch.extra["input_file_id"],
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.extra.get("output_file_id"),
            "error_file_id": batch.extra.get("error_file_id"),
            "created_at": int(batch.created_at),
            "in_progress_at": None if fresh or outcome == "failed" else int(batch.created_at),
            "expires_at": int(batch.created_at + _DAY),
            "finalizing_at": at("completed"),
            "completed_at": at("completed"),
            "failed_at": at("failed"),
            "expired_at": at("expired"),
            "cancelling_at": _unix(cancelling),
            "cancelled_at": at("cancelled"),
            "request_counts": {
                "total": len(batch.items),
                "completed": counts.succeeded,
                "failed": counts.failed,
            },
            "metadata": batch.extra["metadata"],
        }

    def _write_outputs(self, batch: MockBatch) -> None:
        """The output and error files of an ended batch (each only if it has lines)."""
        output: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for item in batch.items:
            line: dict[str, Any] = {"id": f"batch_req_{_hex()}", "custom_id": item.custom_id}
            if item.outcome in ("succeeded", "errored"):
                ok = item.outcome == "succeeded"
                body = item.response if ok else self.fmt.error_body(item.status, item.message)
                line["response"] = {
                    "status_code": item.status,
                    "request_id": f"req_{_hex()}",
                    "body": body,
                }
                line["error"] = None
                (output if ok else failed).append(line)
            else:
                code = "batch_cancelled" if item.outcome == "cancelled" else "batch_expired"
                line["response"] = None
                line["error"] = {"code": code, "message": item.message}
                failed.append(line)
        for key, lines, name in (
            ("output_file_id", output, "output"),
            ("error_file_id", failed, "error"),
        ):
            stored = None
            if lines:
                filename = f"{batch.id}_{name}.jsonl"
                stored = self.store.store_file(filename, "batch_output", _jsonl(lines))
            batch.extra[key] = None if stored is None else stored.id


_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


_PROCESSING = {"in_progress": "in_progress", "cancelling": "canceling", "ended": "ended"}


class _AnthropicBatches(_Api):
    def add_routes(self, router: web.UrlDispatcher) -> None:
        base = f"{self.fmt.route}/batches"
        self.route(router, "POST", base, self.create)
        self.route(router, "GET", base + "/{batch_id}", self.retrieve)
        self.route(router, "POST", base + "/{batch_id}/cancel", self.cancel)
        self.route(router, "GET", base + "/{batch_id}/results", self.results)

    async def create(self, http: web.Request) -> web.StreamResponse:
        requests = (await self.json(http)).get("requests")
        if not isinstance(requests, list) or not requests:
            raise _BadRequest("requests: Field required (a non-empty list)")
        self.check_size(len(requests))
        items: list[BatchItem] = []
        seen: set[str] = set()
        for index, entry in enumerate(requests):
            custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
            params = entry.get("params") if isinstance(entry, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                raise _BadRequest(f"requests.{index}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if custom_id in seen:
                raise _BadRequest(f"requests.{index}: duplicate custom_id {custom_id!r}")
            if not isinstance(params, dict):
                raise _BadRequest(f"requests.{index}.params: Field required")
            seen.add(custom_id)
            request, invalid = _parse(self.fmt, params, {})
            items.append(BatchItem(custom_id, params, request, invalid))
        batch = self.store.submit(self.fmt, f"msgbatch_{_hex()}", items, http.headers)
        return web.json_response(self._describe(batch, http))

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.poll(batch)
        return web.json_response(self._describe(batch, http))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        self.store.cancel(batch)
        return web.json_response(self._describe(batch, http))

    async def results(self, http: web.Request) -> web.StreamResponse:
        batch = self.store.get(http.match_info["batch_id"], self.fmt)
        if batch is None:
            return self.not_found(http.match_info["batch_id"])
        if not batch.ended:
            raise _BadRequest(f"Message Batch {batch.id} has not yet ended: no results yet")
        lines = [{"custom_id": i.custom_id, "result": self._result(i)} for i in batch.items]
        return web.Response(body=_jsonl(lines), content_type="application/x-jsonl")

    def _result(self, item: BatchItem) -> dict[str, Any]:
        if item.outcome == "succeeded":
            return {"type": "succeeded", "message": item.response}
        if item.outcome == "errored":
            return {"type": "errored", "error": self.fmt.error_body(item.status, item.message)}
        return {"type": "canceled" if item.outcome == "cancelled" else "expired"}

    def _describe(self, batch: MockBatch, http: web.Request) -> dict[str, Any]:
        counts = batch.counts
        results = f"{http.url.origin()}{self.fmt.route}/batches/{batch.id}/results"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": _PROCESSING[batch.state],
            "request_counts": {
                "processing": counts.processing,
                "succeeded": counts.succeeded,
                "errored": counts.errored,
                "canceled": counts.cancelled,
                "expired": counts.expired,
            },
            "ended_at": _rfc3339(batch.ended_at),
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + _DAY),
            "archived_at": None,
            "cancel_initiated_at": _rfc3339(batch.cancel_requested_at),
            "results_url": results if batch.ended else None,
        }


#: The gRPC code (google.rpc.Code) of a per-request error, by HTTP status or outcome.
_GRPC: dict[int | str, int] = {400: 3, 429: 8, 500: 13, "expired": 4, "cancelled": 1}
_GEMINI_STATE = {
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
    "failed": "BATCH_STATE_FAILED",
}
_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1main."


def _either(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    """A field of a Gemini request, sent in camelCase or snake_case (proto JSON takes both)."""
    return obj.get(camel, obj.get(snake))


class _GeminiBatches(_Api):
    def add_routes(self, router: web.UrlDispatcher) -> None:
        models, batches = "/v1beta/models/{model:[^/:]+}", "/v1beta/batches/{batch_id:[^/:]+}"
        self.route(router, "POST", models + ":batchGenerateContent", self.create)
        self.route(router, "GET", "/v1beta/batches", self.list_batches)
        self.route(router, "GET", batches, self.retrieve)
        self.route(router, "POST", batches + ":cancel", self.cancel)

    async def create(self, http: web.Request) -> web.StreamResponse:
        model = http.match_info["model"]
        spec = (await self.json(http)).get("batch")
        if not isinstance(spec, dict):
            raise _BadRequest("* BatchGenerateContentRequest.batch: batch is not specified")
        name = _either(spec, "displayName", "display_name")
        if not isinstance(name, str) or not name:
            raise _BadRequest("* GenerateContentBatch.display_name: display_name is required")
        source = _either(spec, "inputConfig", "input_config") or {}
        if not isinstance(source, dict):
            raise _BadRequest("* GenerateContentBatch.input_config: must be an object")
        if _either(source, "fileName", "file_name"):
            raise _BadRequest("this mock takes inlined requests only, not input_config.file_name")
        requests = (source.get("requests") or {}).get("requests")
        if not isinstance(requests, list) or not requests:
            raise _BadRequest("* GenerateContentBatch.input_config: requests are required")
        self.check_size(len(requests))
        batch_id = f"batches/{_hex()}"
        items: list[BatchItem] = []
        for index, entry in enumerate(requests):
            if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
                raise _BadRequest(f"* InlinedRequest[{index}].request: request is required")
            body = {k: v for k, v in entry["request"].items() if k != "model"}
            metadata = entry.get("metadata")
            key = metadata.get("key") if isinstance(metadata, dict) else None
            custom_id = key if isinstance(key, str) else f"{batch_id}#{index}"
            path = {"model_action": f"{model}:generateContent"}
            request, invalid = _parse(self.fmt, body, path)
            items.append(BatchItem(custom_id, body, request, invalid, metadata))
        extra = {"model": model, "display_name": name}
        batch = self.store.submit(self.fmt, batch_id, items, http.headers, extra)
        return web.json_response(self._operation(batch, fresh=True))

    async def list_batches(self, http: web.Request) -> web.StreamResponse:
        """`GET /v1beta/batches?pageSize=&pageToken=`: the batch operations, newest first."""
        try:
            size = max(1, min(1000, int(http.query.get("pageSize", "50"))))
            start = int(http.query.get("pageToken") or 0)
        except ValueError:
            raise _BadRequest("pageSize and pageToken must be whole numbers") from None
        newest = [b for b in reversed(self.store.batches.values()) if b.format == self.fmt.name]
        page = newest[start : start + size]
        listed: dict[str, Any] = {"operations": [self._operation(b) for b in page]}
        if start + size < len(newest):
            listed["nextPageToken"] = str(start + size)
        return web.json_response(listed)

    def _find(self, http: web.Request) -> MockBatch | None:
        return self.store.get(f"batches/{http.match_info['batch_id']}", self.fmt)

    async def retrieve(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(f"batches/{http.match_info['batch_id']}")
        self.store.poll(batch)
        return web.json_response(self._operation(batch))

    async def cancel(self, http: web.Request) -> web.StreamResponse:
        batch = self._find(http)
        if batch is None:
            return self.not_found(f"batches/{http.match_info['batch_id']}")
        self.store.cancel(batch, at_once=True)
        return web.json_response({})

    def _operation(self, batch: MockBatch, *, fresh: bool = False) -> dict[str, Any]:
        """The long-running operation `GET batches/{id}` answers (`fresh`: just created)."""
        counts = batch.counts
        stats = {
            "requestCount": len(batch.items),
            "successfulRequestCount": counts.succeeded,
            "failedRequestCount": counts.failed,
            "pendingRequestCount": counts.processing,
        }
        if batch.ended and batch.outcome is not None:
            state = _GEMINI_STATE[batch.outcome]
        else:
            state = "BATCH_STATE_PENDING" if fresh else "BATCH_STATE_RUNNING"
        changes = [batch.created_at, batch.cancel_requested_at or 0.0, batch.ended_at or 0.0]
        metadata: dict[str, Any] = {
            "@type": _TYPES + "GenerateContentBatch",
            "model": f"models/{batch.extra['model']}",
            "displayName": batch.extra["display_name"],
            "createTime": _rfc3339(batch.created_at),
            "updateTime": _rfc3339(max(changes)),
            "batchStats": {key: str(value) for key, value in stats.items() if value},
            "state": state,
            "name": batch.id,
        }
        operation: dict[str, Any] = {"name": batch.id, "metadata": metadata}
        if batch.ended:
            responses = [self._inlined(item) for item in batch.items]
            output = {"inlinedResponses": {"inlinedResponses": responses}}
            metadata["endTime"] = _rfc3339(batch.ended_at)
            metadata["output"] = output
            operation["done"] = True
            operation["response"] = {"@type": _TYPES + "GenerateContentBatchOutput", **output}
        return operation

    def _inlined(self, item: BatchItem) -> dict[str, Any]:
        entry: dict[str, Any]
        if item.outcome == "succeeded":
            entry = {"response": item.response}
        else:
            code = _GRPC[item.status if item.outcome == "errored" else str(item.outcome)]
            entry = {"error": {"code": code, "message": item.message}}
        if item.metadata is not None:
            entry["metadata"] = item.metadata
        return entry


_APIS: dict[str, type[_Api]] = {
    "openai": _OpenAIBatches,
    "anthropic": _AnthropicBatches,
    "google": _GeminiBatches,
}


def add_routes(
    router: web.UrlDispatcher, store: BatchStore, formats: Mapping[str, WireFormat]
) -> None:
    """Add the batch routes of each format in `formats` to `router`.

    Add them before the formats' live routes: Gemini's `models/{model}:batchGenerateContent`
    would otherwise be taken by `models/{model_action}`.

    Example:
        >>> add_routes(app.router, store, {"openai": OpenAIFormat()})
    """
    for name, fmt in formats.items():
        api = _APIS.get(name)
        if api is not None:
            api(store, fmt).add_routes(router)
