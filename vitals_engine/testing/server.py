"""A local mock model server: real HTTP on 127.0.0.1, the providers' real wire formats.

```python
from vitals_engine.testing import MockServer

with MockServer(latency=0.05) as server:
    chat = ve.chat_openai(model="gpt-4.1-mini", base_url=server.base_url("openai"), api_key="x")
    chat.chat("What's 2+2?")            # '2 + 2 = 4'
    server.fail("429", times=2, retry_after=1)
    server.requests_by_model             # Counter({'gpt-4.1-mini': 1})
```

The server runs its own asyncio loop in a background thread (so tests on
trio, sync tests and benchmarks can all use it), or in the foreground with
`python -m vitals_engine.testing --port N`.

Knobs: `latency` (seconds, or a (low, high) range drawn at random),
`fail(kind, times=, model=)` for the next requests, `failure_rate(rate,
kind=)` for a random share of them, `rpm(limit)` for a per-minute request
limit answered with 429 + Retry-After, `script(fn)` for per-test replies,
`cached_tokens` / `reasoning_tokens` to report in usage blocks.
Failure kinds: "429", "500", "503", "529", "400", "401", "404",
"malformed" (invalid JSON), "incomplete" (JSON without the promised
fields), "hang" (never answers), "drop" (closes the connection).

Streaming: a request that asks for it (OpenAI and Anthropic `"stream": true`,
Gemini `:streamGenerateContent?alt=sse`) is answered with the provider's real
server-sent events: the same reply as the whole answer, its text and
thinking a word per delta, tool calls as the format streams them, usage,
and the format's completion marker. Its knobs:

- `stream_delay`: seconds between two events (the first goes at once);
- failure kinds only for streamed requests (others pass them by):
  "cut" (the connection closes after some events) and "stream-error" (an
  error event after some events: Anthropic `overloaded_error`, an OpenAI
  error chunk, a Gemini error chunk; `fail(..., status=429)` for another
  kind); on a streamed request "malformed" sends an event that is not JSON.
  `fail(..., after=n)` sends n events first (default: half of them);
- `hold_stream()`: streamed replies pause after their first text delta until
  the test releases them (to see text arrive before the stream ends).

```python
server.stream_delay = 0.05
server.fail("cut", after=3)                    # the next streamed reply breaks off
server.fail("stream-error", status=429)        # ... or carries a rate-limit error event
```

Batches: the three providers' batch APIs (OpenAI `/v1/files` + `/v1/batches`,
Anthropic `/v1/messages/batches`, Gemini `models/{model}:batchGenerateContent`
+ `batches/{id}`; the wire shapes are in `batches.py`). Each request of a batch
is answered as a live one would be (same brain, same `render()`, usage
included), logged in `server.log` with its `batch` and `custom_id`, and
counted in `requests`. Their knobs and counters:

- `batch_delay`: seconds from submission until a batch has ended (default
  0.02; 0 ends it at once); until then it is in progress, its requests
  finishing one by one;
- `fail_in_batch(kind, times=1, model=None)`: the next batched requests fail,
  as the provider reports a failed request inside a batch: "400" (invalid
  request), "429" (rate limited), "500" (server error), "expired";
  `fail()` is for live requests only, and this for batched ones only;
- `expire_batches(times=1, finished=0)`: the next batches expire after the
  delay, `finished` of their requests done and the rest expired; cancelling
  through the API makes a batch cancelling, then cancelled, its unfinished
  requests cancelled;
- `end_batches()`: every batch in progress ends at its next poll;
- `batches_enabled = False`: every batch route answers 404 (a server without them);
- `max_batch_requests`: a batch of more requests is refused with 400;
- `batches` (id → `MockBatch`: state, outcome, counts, times, custom_ids),
  `batch_submissions` (a Counter of the custom ids submitted in accepted
  batches: nothing sent twice means no count above 1) and `batch_polls` (a
  Counter of status requests by batch id).

```python
server.batch_delay = 0
server.fail_in_batch("429", times=1)
server.expire_batches(finished=2)
assert max(server.batch_submissions.values()) == 1
```
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from aiohttp import web

from .batches import BatchItem, BatchStore, MockBatch, add_routes
from .brain import MockReply, MockRequest, Script, answer
from .formats import WireFormat

__all__ = ["Failure", "MockServer", "RecordedRequest", "StreamHold"]

_STATUS = {"429": 429, "500": 500, "503": 503, "529": 529, "400": 400, "401": 401, "404": 404}
#: Failures that only a streamed request can have.
STREAM_KINDS = frozenset({"cut", "stream-error"})
KINDS = frozenset(_STATUS) | {"malformed", "incomplete", "hang", "drop"} | STREAM_KINDS
_MESSAGES = {
    429: "Rate limit reached for requests",
    401: "Incorrect API key provided",
    404: "The model does not exist",
    400: "Invalid request",
    529: "Overloaded",
    503: "The model is overloaded. Please try again later.",
}


def _message(status: int) -> str:
    return _MESSAGES.get(status, "The server had an error while processing your request")


@dataclass(slots=True)
class Failure:
    """A planned failure: what kind, for which model, how many more times."""

    kind: str
    times: int | None = 1  # None: every time
    model: str | None = None
    retry_after: float | None = None
    header: str = "retry-after"  # or "retry-after-ms", or "reset" (provider reset headers)
    after: int | None = None  # streamed: events sent before the failure (None: half)
    status: int | None = None  # "stream-error": the HTTP status it stands for

    def applies(self, model: str, streaming: bool) -> bool:
        """Whether this failure is for a request to `model`, streamed or not."""
        return (self.model is None or self.model == model) and (
            streaming or self.kind not in STREAM_KINDS
        )


class StreamHold:
    """Holds streamed replies after their first text delta until `release()`.

    Made by `MockServer.hold_stream()`. A reply waits at most `timeout` seconds, then
    goes on and `timed_out` says so. `release()` may be called from any thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        self._loop = loop
        self._released = asyncio.Event()
        self.timeout = timeout
        #: Streams that reached the hold.
        self.held = 0
        self.timed_out = False

    def release(self) -> None:
        """Let held streams (and later ones) go on."""
        self._loop.call_soon_threadsafe(self._released.set)

    async def wait(self) -> None:
        self.held += 1
        try:
            await asyncio.wait_for(self._released.wait(), self.timeout)
        except TimeoutError:
            self.timed_out = True


@dataclass(slots=True)
class RecordedRequest:
    """A request the server received: when, in which format, for which model, what it said."""

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


def _wait(kind: str, retry_after: float | None) -> float | None:
    """The Retry-After a failure announces: as asked, else 1 s for a 429 and none otherwise."""
    return 1.0 if retry_after is None and kind == "429" else retry_after


def _formats() -> list[WireFormat]:
    import importlib

    found: list[WireFormat] = []
    for module, cls in (
        ("openai", "OpenAIFormat"),
        ("anthropic", "AnthropicFormat"),
        ("google", "GoogleFormat"),
    ):
        try:
            found.append(getattr(importlib.import_module(f".formats.{module}", __package__), cls)())
        except ImportError:
            continue
    return found


@dataclass
class _State:
    latency: float | tuple[float, float] = 0.0
    script: Script | None = None
    plans: list[Failure] = field(default_factory=list)
    rate: tuple[float, Failure] | None = None
    rpm_limit: int | None = None
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    keep_log: bool = True
    stream_delay: float = 0.0
    hold: StreamHold | None = None


class MockServer:
    """The mock model server. Use as a context manager, or `start()` / `stop()`.

    Args:
        port: 0 for a free port.
        latency: seconds before each answer, or a (low, high) range.
        seed: seed of the random draws (latency ranges, failure rates).
        keep_log: remember every request in `server.log` (turn off for benchmarks).
        stream_delay: seconds between two events of a streamed reply.
        batch_delay: seconds from a batch's submission until it has ended.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        latency: float | tuple[float, float] = 0.0,
        seed: int = 0,
        keep_log: bool = True,
        stream_delay: float = 0.0,
        batch_delay: float = 0.02,
    ) -> None:
        self.host = host
        self.port = port
        self._state = _State(latency=latency, keep_log=keep_log, stream_delay=stream_delay)
        self._initial_latency = latency
        self._initial_stream_delay = stream_delay
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._formats = {f.name: f for f in _formats()}
        self.requests = 0
        self.requests_by_model: collections.Counter[str] = collections.Counter()
        #: Requests being answered now, and the most there have been at once.
        self.in_flight = 0
        self.peak_in_flight = 0
        #: The client connections requests came on (their client address and port).
        self.connections: set[tuple[str, int]] = set()
        self.log: list[RecordedRequest] = []
        self._minute: collections.deque[float] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._hang_release: asyncio.Event | None = None
        self._batches = BatchStore(
            self._lock, reply=self._reply, record=self._record_batched, delay=batch_delay
        )

    # -- knobs ------------------------------------------------------------------

    @property
    def latency(self) -> float | tuple[float, float]:
        return self._state.latency

    @latency.setter
    def latency(self, value: float | tuple[float, float]) -> None:
        self._state.latency = value

    @property
    def stream_delay(self) -> float:
        """Seconds between two events of a streamed reply."""
        return self._state.stream_delay

    @stream_delay.setter
    def stream_delay(self, value: float) -> None:
        self._state.stream_delay = value

    @property
    def cached_tokens(self) -> int:
        return self._state.cached_tokens

    @cached_tokens.setter
    def cached_tokens(self, value: int) -> None:
        self._state.cached_tokens = value

    @property
    def reasoning_tokens(self) -> int:
        return self._state.reasoning_tokens

    @reasoning_tokens.setter
    def reasoning_tokens(self, value: int) -> None:
        self._state.reasoning_tokens = value

    def script(self, fn: Script | None) -> None:
        """Answer with `fn(request)` (a string or a `MockReply`; None falls back)."""
        self._state.script = fn

    def fail(
        self,
        kind: str,
        *,
        times: int | None = 1,
        model: str | None = None,
        retry_after: float | None = None,
        header: str = "retry-after",
        after: int | None = None,
        status: int | None = None,
    ) -> None:
        """Fail the next `times` requests (for `model`, or any) with `kind`.

        `retry_after` seconds go into the answer's `header` ("retry-after",
        "retry-after-ms", or "reset" for the provider's rate-limit reset headers);
        a 429 says 1 s unless told otherwise, other kinds say nothing unless told.
        "cut" and "stream-error" fail only streamed requests (the next ones that are);
        `after` events go out before them (default: half the reply's), and `status`
        is the HTTP status a "stream-error" stands for (default: the format's overload).
        """
        if kind not in KINDS:
            raise ValueError(f"unknown failure kind {kind!r}; one of {sorted(KINDS)}")
        if times is not None and times <= 0:
            return
        wait = _wait(kind, retry_after)
        plan = Failure(kind, times, model, wait, header, after, status)
        with self._lock:
            self._state.plans.append(plan)

    def failure_rate(
        self, rate: float, kind: str = "429", *, retry_after: float | None = None
    ) -> None:
        """Fail a random share `rate` of requests with `kind` (0 turns it off); `retry_after`
        as in `fail()`. "cut" and "stream-error" fail a share of the streamed requests."""
        if kind not in KINDS:
            raise ValueError(f"unknown failure kind {kind!r}")
        failure = Failure(kind, None, None, _wait(kind, retry_after))
        self._state.rate = (rate, failure) if rate else None

    def hold_stream(self, timeout: float = 10.0) -> StreamHold:
        """Hold streamed replies after their first text delta until `release()` on the
        returned hold (at most `timeout` seconds each). `reset()` ends it."""
        if self._loop is None:
            raise RuntimeError("start the server before holding its streams")
        hold = StreamHold(self._loop, timeout)
        self._state.hold = hold
        return hold

    # -- batches --------------------------------------------------------------------------

    @property
    def batch_delay(self) -> float:
        """Seconds from a batch's submission until it has ended."""
        return self._batches.delay

    @batch_delay.setter
    def batch_delay(self, value: float) -> None:
        self._batches.delay = value

    @property
    def batches_enabled(self) -> bool:
        """False: every batch route answers 404, as from a server without batch APIs."""
        return self._batches.enabled

    @batches_enabled.setter
    def batches_enabled(self, value: bool) -> None:
        self._batches.enabled = value

    @property
    def max_batch_requests(self) -> int | None:
        """The most requests a batch may hold (None: no cap); more is refused with 400."""
        return self._batches.max_requests

    @max_batch_requests.setter
    def max_batch_requests(self, value: int | None) -> None:
        self._batches.max_requests = value

    @property
    def batches(self) -> dict[str, MockBatch]:
        """The batches submitted, by id ("batch_…", "msgbatch_…", "batches/…")."""
        return self._batches.batches

    @property
    def batch_submissions(self) -> collections.Counter[str]:
        """How many times each custom id came in an accepted batch."""
        return self._batches.submissions

    @property
    def batch_polls(self) -> collections.Counter[str]:
        """Status requests (`GET` of a batch), by batch id."""
        return self._batches.polls

    def fail_in_batch(self, kind: str, *, times: int | None = 1, model: str | None = None) -> None:
        """Fail the next `times` batched requests (for `model`, or any) with `kind`: one of
        "400", "429", "500" (answered with that error inside the batch's results) or
        "expired" (reported expired while the batch completes).

        Example:
            >>> server.fail_in_batch("429", times=2, model="gpt-4.1-mini")
        """
        self._batches.fail_in_batch(kind, times=times, model=model)

    def expire_batches(self, times: int = 1, *, finished: int = 0) -> None:
        """Let the next `times` batches expire after `batch_delay`, their first `finished`
        requests answered and the rest expired.

        Example:
            >>> server.expire_batches(finished=2)    # the next batch: 2 results, the rest expired
        """
        self._batches.expire_batches(times, finished=finished)

    def end_batches(self) -> None:
        """End every batch in progress now (its next poll finds it ended, every request
        answered), whatever `batch_delay` was when it came in.

        Example:
            >>> server.batch_delay = 3600    # batches that wait ...
            >>> server.end_batches()         # ... until the test lets them end
        """
        self._batches.end_soon()

    def per_second(self) -> list[int]:
        """Requests received in each whole second of the clock (from the first request's
        second to the last's, empty seconds included), from the request log.

        Example:
            >>> max(server.per_second()) <= 2 * rpm / 60   # a rate held, with a second's burst
        """
        with self._lock:
            seconds = [int(entry.at) for entry in self.log]
        if not seconds:
            return []
        counts = collections.Counter(seconds)
        return [counts[second] for second in range(min(seconds), max(seconds) + 1)]

    def rpm(self, limit: int | None) -> None:
        """Answer 429 + Retry-After beyond `limit` requests in any 60 s window."""
        self._state.rpm_limit = limit
        self._minute.clear()

    def reset(self) -> None:
        """Back to how the server started: counters, request log, failures, limits,
        scripts, latency, stream delay, held streams, token knobs, and batches with
        their knobs, plans and counters."""
        with self._lock:
            self._state.latency = self._initial_latency
            self._state.stream_delay = self._initial_stream_delay
            hold, self._state.hold = self._state.hold, None
            if hold is not None:
                hold.release()
            self._state.cached_tokens = 0
            self._state.reasoning_tokens = 0
            self.requests = 0
            self.requests_by_model.clear()
            self.peak_in_flight = 0
            self.connections.clear()
            self.log.clear()
            self._state.plans.clear()
            self._state.rate = None
            self._state.rpm_limit = None
            self._state.script = None
            self._minute.clear()
        self._batches.reset()
        self._release_hangs()

    def _release_hangs(self) -> None:
        """End every request left hanging (they answer 503) so the next test starts clean."""
        loop, old = self._loop, self._hang_release
        if loop is None or old is None:
            return
        self._hang_release = asyncio.Event()
        loop.call_soon_threadsafe(old.set)

    def base_url(self, provider: str = "openai") -> str:
        """The base URL a provider constructor takes to talk to this server."""
        root = f"http://{self.host}:{self.port}"
        return f"{root}/v1beta" if provider in ("google", "gemini") else f"{root}/v1"

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> MockServer:
        """Start serving in a background thread; returns once the port is open."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=serve, name="vitals-mock-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop = None
            self._thread = None

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def serve_forever(self) -> None:
        """Serve in the current asyncio loop until cancelled (the command line uses this)."""
        await self._open()
        try:
            await asyncio.Event().wait()
        finally:
            await self._close()

    async def _open(self) -> None:
        self._closing = asyncio.Event()
        self._hang_release = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        add_routes(app.router, self._batches, self._formats)  # first: see add_routes
        for fmt in self._formats.values():
            app.router.add_post(fmt.route, self._handler(fmt))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096, reuse_address=True)
        await site.start()
        server = site._server  # the bound socket tells the free port we got
        if self.port == 0 and server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _close(self) -> None:
        if self._closing is not None:
            self._closing.set()
        if self._hang_release is not None:
            self._hang_release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- answering ------------------------------------------------------------------------

    def _handler(self, fmt: WireFormat) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._answer(fmt, request)

        return handle

    def _pick_failure(self, model: str, streaming: bool) -> Failure | None:
        with self._lock:
            for plan in self._state.plans:
                if plan.applies(model, streaming):
                    if plan.times is not None:
                        plan.times -= 1
                        if plan.times <= 0:
                            self._state.plans.remove(plan)
                    return plan
            rate = self._state.rate
            if (
                rate is not None
                and rate[1].applies(model, streaming)
                and self._random.random() < rate[0]
            ):
                return rate[1]
            limit = self._state.rpm_limit
            if limit is not None:
                now = time.monotonic()
                while self._minute and now - self._minute[0] >= 60:
                    self._minute.popleft()
                if len(self._minute) >= limit:
                    wait = 60 - (now - self._minute[0])
                    return Failure("429", None, model, round(wait, 3))
                self._minute.append(now)
        return None

    def _delay(self) -> float:
        latency = self._state.latency
        if isinstance(latency, tuple):
            return self._random.uniform(*latency)
        return latency

    async def _answer(self, fmt: WireFormat, http: web.Request) -> web.StreamResponse:
        peer = http.transport.get_extra_info("peername") if http.transport else None
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            if peer:
                self.connections.add((str(peer[0]), int(peer[1])))
        try:
            return await self._respond(fmt, http)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _respond(self, fmt: WireFormat, http: web.Request) -> web.StreamResponse:
        raw = await http.read()
        try:
            body = msgspec.json.decode(raw)
            request = fmt.parse(body, http.match_info, http.query)
        except (msgspec.DecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return web.json_response(fmt.error_body(400, f"invalid request: {exc}"), status=400)
        with self._lock:
            self.requests += 1
            self.requests_by_model[request.model] += 1
            record = RecordedRequest(
                time.time(), fmt.name, request.model, request, dict(http.headers), body
            )
            if self._state.keep_log:
                self.log.append(record)
        delay = self._delay()
        if delay > 0:
            await asyncio.sleep(delay)
        failure = self._pick_failure(request.model, request.stream)
        midstream = failure is not None and (
            failure.kind in STREAM_KINDS or (request.stream and failure.kind == "malformed")
        )
        if failure is not None and not midstream:
            record.outcome = failure.kind
            record.answered = time.time()
            return await self._fail(fmt, http, failure)
        reply = self._reply(request)
        if request.stream:
            return await self._stream(fmt, http, request, reply, record, failure)
        record.answered = time.time()
        return web.Response(
            body=msgspec.json.encode(fmt.render(request, reply)),
            content_type="application/json",
            headers={"x-request-id": f"req_{self.requests}"},
        )

    def _reply(self, request: MockRequest) -> MockReply:
        """The brain's reply to `request`, with the server's script and token knobs."""
        reply = answer(request, self._state.script)
        reply.cached_tokens = reply.cached_tokens or min(
            self._state.cached_tokens, reply.input_tokens
        )
        if self._state.reasoning_tokens and not reply.reasoning_tokens:
            reply.reasoning_tokens = self._state.reasoning_tokens
            reply.output_tokens += reply.reasoning_tokens
        return reply

    def _record_batched(self, batch: MockBatch, item: BatchItem) -> None:
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
            self.requests += 1
            self.requests_by_model[item.request.model] += 1
            if self._state.keep_log:
                self.log.append(record)

    async def _stream(
        self,
        fmt: WireFormat,
        http: web.Request,
        request: MockRequest,
        reply: MockReply,
        record: RecordedRequest,
        failure: Failure | None,
    ) -> web.StreamResponse:
        """Send `reply` as the format's server-sent events, failing mid-stream as planned."""
        events = fmt.render_stream(request, reply)
        stop = len(events) + 1  # never
        if failure is not None:
            record.outcome = failure.kind
            stop = len(events) // 2 if failure.after is None else min(failure.after, len(events))
        response = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "x-request-id": f"req_{self.requests}",
            }
        )
        await response.prepare(http)
        hold = self._state.hold
        for sent, event in enumerate(events):
            if sent == stop:
                break
            if sent and self._state.stream_delay > 0:
                await asyncio.sleep(self._state.stream_delay)
            await response.write(event.encode())
            if event.text and hold is not None:
                await hold.wait()
                hold = None  # once per stream
        record.answered = time.time()
        if failure is not None:
            if failure.kind == "cut":
                if http.transport is not None:
                    http.transport.close()  # what was written goes out, then the end
                return response
            if failure.kind == "stream-error":
                status = failure.status or fmt.stream_error_status
                await response.write(fmt.stream_error(status, _message(status)).encode())
            else:  # malformed
                await response.write(fmt.malformed_event().encode())
        await response.write_eof()
        return response

    async def _fail(
        self, fmt: WireFormat, http: web.Request, failure: Failure
    ) -> web.StreamResponse:
        kind = failure.kind
        if kind == "hang":
            assert self._hang_release is not None
            with self._lock:
                self.in_flight -= 1  # a hung request is not being answered
            try:
                await self._hang_release.wait()
            finally:
                with self._lock:
                    self.in_flight += 1
            return web.Response(status=503)
        if kind == "drop":
            if http.transport is not None:
                http.transport.abort()
            return web.Response(status=500)
        if kind == "malformed":
            return web.Response(body=b'{"choices": [oops', content_type="application/json")
        if kind == "incomplete":
            return web.json_response(fmt.incomplete_body())
        status = _STATUS[kind]
        headers: dict[str, str] = {"x-request-id": f"req_{self.requests}"}
        message = _message(status)
        if failure.retry_after is not None:
            wait = failure.retry_after
            if failure.header == "retry-after-ms":
                headers["retry-after-ms"] = str(int(wait * 1000))
            elif failure.header == "reset":
                headers.update(fmt.rate_limit_headers(wait))
            else:
                headers["retry-after"] = f"{wait:g}"
        return web.json_response(fmt.error_body(status, message), status=status, headers=headers)


@contextlib.contextmanager
def mock_server(**kwargs: Any) -> Iterator[MockServer]:
    """`with mock_server(latency=0.1) as server: ...` (same as `with MockServer(...)`)."""
    with MockServer(**kwargs) as server:
        yield server


def reply(text: str = "", **kwargs: Any) -> MockReply:
    """A scripted reply (text, tool_calls, reasoning, finish, token counts)."""
    return MockReply(text=text, **kwargs)
