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

Endpoints, each in its provider's wire format (the module of each format has its
shapes in its docstring):

- OpenAI Chat Completions, `POST {base_url("openai")}/chat/completions` (`formats/openai.py`);
- OpenAI's Responses API, `POST {base_url("openai")}/responses` (`formats/openai_responses.py`):
  `input` items, flat function tools, `text.format`, `reasoning`, `include`, `store`;
  a `response` with `reasoning` (its `encrypted_content` read back from a later
  request), `message` and `function_call` items; named stream events;
- Anthropic Messages, `POST {base_url("anthropic")}/messages` (`formats/anthropic.py`),
  with prompt caching and `pause_turn`;
- Gemini `generateContent` and `streamGenerateContent`, under `base_url("google")`
  (`formats/google.py`).

A request the real API refuses is answered with that API's status and error body
(OpenAI's `{"error": {"message", "type", "param", "code"}}`), and is neither counted
nor logged: the Responses API's unknown or moved parameters and Chat Completions-shaped
tools; what OpenAI's reasoning models refuse on both OpenAI endpoints (`o1`, `o3`,
`o4-mini` ..., `gpt-5` and later but not `-chat` models: sampling parameters unless
the reasoning effort is "none", `max_tokens` on Chat Completions, the `system` role on
`o1-mini` / `o1-preview`; see `formats/openai_rules.py`); more than 4 Anthropic cache
breakpoints; a Gemini `thinkingConfig` with both a budget and a level.

Knobs: `latency` (seconds, or a (low, high) range drawn at random),
`fail(kind, times=, model=)` for the next requests, `failure_rate(rate,
kind=)` for a random share of them, `rpm(limit)` for a per-minute request
limit answered with 429 + Retry-After, `script(fn)` for per-test replies,
`cached_tokens` / `reasoning_tokens` to report in usage blocks.
Failure kinds: "429", "500", "503", "529", "400", "401", "404",
"quota" (the account's quota or credit is spent: OpenAI's 429 `insufficient_quota`,
Anthropic's 400 "Your credit balance is too low ...", Gemini's 429
`RESOURCE_EXHAUSTED` with a per-day `QuotaFailure` and a `RetryInfo`; none of them
says Retry-After unless `fail(..., retry_after=)` does), "malformed" (invalid JSON),
"incomplete" (JSON without the promised fields), "hang" (never answers), "drop"
(closes the connection).

A scripted `MockReply` may also say, beside its text, tool calls, reasoning and
token counts: `finish="pause_turn"` with `web_searches=[query, ...]` (Anthropic's
`stop_reason: "pause_turn"` after `server_tool_use` and `web_search_tool_result`
blocks, and `usage.server_tool_use.web_search_requests`; the Responses API's
`web_search_call` items); the cache's numbers, `cached_tokens` (read),
`cache_write_5m_tokens` and `cache_write_1h_tokens` (written), which take the
place of the prompt cache below; `tool_use_prompt_tokens` (Gemini's
`toolUsePromptTokenCount`). A request that ends with the assistant's content
(`request.continuing`, after a `pause_turn`) is answered as the brain goes on.

Prompt caching (Anthropic's `cache_control` breakpoints, on tools, system blocks and
message blocks): the server keeps the prompt prefixes written, per model, in
`prompt_cache`. A prefix up to a breakpoint of at least `min_cacheable_tokens`
tokens (1024 unless told; the mock's tokens are whitespace words) is written the first
time (`cache_creation_input_tokens`, split by ttl in `cache_creation`) and read by a
later request with the same prefix within its ttl, 5 minutes or an hour from its last
use (`cache_read_input_tokens`), looking back up to 20 blocks before each breakpoint;
`input_tokens` is the rest. A shorter prefix is not cached, without an error, as with
the API. The cache's clock moves with `prompt_cache.advance(seconds)`, so a test of a
ttl never waits; `reset()` empties the cache.

```python
server.min_cacheable_tokens = 10
server.script(lambda req: reply("paused", finish="pause_turn", web_searches=["rain"]))
server.fail("quota", model="gpt-4.1-mini")
server.prompt_cache.advance(301)               # 5-minute entries have expired
```

Streaming: a request that asks for it (OpenAI and Anthropic `"stream": true`,
Gemini `:streamGenerateContent?alt=sse`) is answered with the provider's real
server-sent events: the same reply as the whole answer, its text and
thinking a word per delta, tool calls as the format streams them, usage,
and the format's completion marker. Its knobs:

- `stream_delay`: seconds between two events (the first goes at once);
- failure kinds only for streamed requests (others pass them by):
  "cut" (the connection closes after some events) and "stream-error" (an
  error event after some events: Anthropic `overloaded_error`, an OpenAI
  error chunk, the Responses API's `response.failed` (or, for a status under 500,
  an `error` event), a Gemini error chunk; `fail(..., status=429)` for another
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
- `spoil_batch_results(*flaws, lost=0, times=1, reads=None)`: the results of the
  next batches are served spoiled (their counts untouched), as a provider's results
  file has been seen: a bad line for each flaw, "junk" (a line that is no result:
  not JSON, or a string among Gemini's responses), "truncated" (the last line cut
  short, without its newline; Gemini's: its `metadata` alone), "no-id", "null-id",
  "numeric-id" (a line without its custom id, with null, with 12345; Gemini's
  `metadata.key`), "duplicate" (a second line for a request, carrying another
  request's answer); `lost` leaves out that many requests that succeeded (OpenAI:
  from the output file) while the counts still count them completed; `reads`: only
  the first that many reads of the results are spoiled (None: every read), so a
  client that asks again gets them whole (see `batches/spoiled.py`);
- `end_batches()`: every batch in progress ends at its next poll;
- `batches_enabled = False`: every batch route answers 404 (a server without them);
- `max_batch_requests`: a batch of more requests is refused with 400;
- `batches` (id → `MockBatch`: state, outcome, counts, times, custom_ids),
  `batch_submissions` (a Counter of the custom ids submitted in accepted
  batches: nothing sent twice means no count above 1; a request that expired
  goes again under its custom id, so its count is how often it was sent) and
  `batch_polls` (a Counter of status requests by batch id).

```python
server.batch_delay = 0
server.fail_in_batch("429", times=1)
server.expire_batches(finished=2)
server.spoil_batch_results("junk", "duplicate", lost=1)
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

from .batches import BatchItem, BatchKnobs, BatchStore, MockBatch, add_routes
from .brain import MockReply, MockRequest, PromptCache, Script, answer
from .formats import Refused, WireFormat

__all__ = ["Failure", "MockServer", "RecordedRequest", "StreamHold"]

_STATUS = {"429": 429, "500": 500, "503": 503, "529": 529, "400": 400, "401": 401, "404": 404}
#: The fewest tokens a prompt prefix needs to be cached, unless a test says otherwise.
MIN_CACHEABLE_TOKENS = 1024
#: Failures that only a streamed request can have.
STREAM_KINDS = frozenset({"cut", "stream-error"})
KINDS = frozenset(_STATUS) | {"quota", "malformed", "incomplete", "hang", "drop"} | STREAM_KINDS
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
    """A planned failure: what kind, for which model, how many more times.

    `MockServer.fail()` and `failure_rate()` plan them.

    Example:
        >>> from vitals_engine.testing import Failure
        >>> Failure("429", times=2, retry_after=0.5).applies("gpt-4.1-mini", streaming=False)
        True
        >>> Failure("cut").applies("gpt-4.1-mini", streaming=False)  # streamed replies only
        False
    """

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

    Example:
        >>> import threading
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer() as server:
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x",
        ...                           stream=True)
        ...     hold = server.hold_stream()
        ...     threading.Timer(0.05, hold.release).start()  # what the test checks meanwhile
        ...     print(chat.chat("What's 2+2?"), hold.held, hold.timed_out)
        2 + 2 = 4 1 False
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


def _wait(kind: str, retry_after: float | None) -> float | None:
    """The Retry-After a failure announces: as asked, else 1 s for a 429 and none otherwise."""
    return 1.0 if retry_after is None and kind == "429" else retry_after


def _formats() -> list[WireFormat]:
    import importlib

    found: list[WireFormat] = []
    for module, cls in (
        ("openai", "OpenAIFormat"),
        ("openai_responses", "ResponsesFormat"),
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


class MockServer(BatchKnobs):
    """The mock model server. Use as a context manager, or `start()` / `stop()`.

    Args:
        port: 0 for a free port.
        host: the address to listen on.
        latency: seconds before each answer, or a (low, high) range.
        seed: seed of the random draws (latency ranges, failure rates).
        keep_log: remember every request in `server.log` (turn off for benchmarks).
        stream_delay: seconds between two events of a streamed reply.
        batch_delay: seconds from a batch's submission until it has ended.

    Example:
        >>> from vitals_engine.testing import MockServer
        >>> with MockServer(latency=0.01) as server:
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     server.fail("429", retry_after=0.1)  # the next request; the chat retries it
        ...     print(chat.chat("What's 2+2?"), server.requests)
        2 + 2 = 4 2
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
        self._prompt_cache = PromptCache(MIN_CACHEABLE_TOKENS)

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

    @property
    def prompt_cache(self) -> PromptCache:
        """The prompt prefixes Anthropic requests cached (`len()`, `advance(seconds)`,
        `clear()`); see `PromptCache`."""
        return self._prompt_cache

    @property
    def min_cacheable_tokens(self) -> int:
        """The fewest tokens a prompt prefix needs to be cached (1024 unless told)."""
        return self._prompt_cache.minimum

    @min_cacheable_tokens.setter
    def min_cacheable_tokens(self, value: int) -> None:
        self._prompt_cache.minimum = value

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
        scripts, latency, stream delay, held streams, token knobs, the prompt cache and its
        minimum, and batches with their knobs, plans and counters."""
        with self._lock:
            self._state.latency = self._initial_latency
            self._state.stream_delay = self._initial_stream_delay
            hold, self._state.hold = self._state.hold, None
            if hold is not None:
                hold.release()
            self._state.cached_tokens = 0
            self._state.reasoning_tokens = 0
            self._prompt_cache.clear()
            self._prompt_cache.minimum = MIN_CACHEABLE_TOKENS
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
        except Refused as refused:
            return web.json_response(fmt.refusal_body(refused), status=refused.status)
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
            return await self._fail(fmt, http, failure, request.model)
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
        """The brain's reply to `request`, with the server's script, token knobs and prompt
        cache (which counts only when neither the reply nor a knob says what was cached)."""
        reply = answer(request, self._state.script)
        if request.cache is not None and not reply.cache_numbers and not self._state.cached_tokens:
            used = self._prompt_cache.use(request.cache)
            reply.cached_tokens = used.read
            reply.cache_write_5m_tokens = used.written_5m
            reply.cache_write_1h_tokens = used.written_1h
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
        sent = 0
        for event in events[:stop]:
            if sent and self._state.stream_delay > 0:
                await asyncio.sleep(self._state.stream_delay)
            await response.write(event.encode())
            sent += 1
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
                error = fmt.stream_error(status, _message(status), sequence=sent, request=request)
                await response.write(error.encode())
            else:  # malformed
                await response.write(fmt.malformed_event().encode())
        await response.write_eof()
        return response

    async def _fail(
        self, fmt: WireFormat, http: web.Request, failure: Failure, model: str
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
        headers: dict[str, str] = {"x-request-id": f"req_{self.requests}"}
        if kind == "quota":
            status, body, more = fmt.quota_error(model, failure.retry_after)
            return web.json_response(body, status=status, headers={**headers, **more})
        status = _STATUS[kind]
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
    """`with mock_server(latency=0.1) as server: ...` (same as `with MockServer(...)`).

    Example:
        >>> from vitals_engine.testing import mock_server
        >>> with mock_server(latency=0.01) as server:
        ...     chat = ve.chat_anthropic("claude-sonnet-4-5", api_key="x",
        ...                              base_url=server.base_url("anthropic"))
        ...     chat.chat("What's 2+2?")
        '2 + 2 = 4'
    """
    with MockServer(**kwargs) as server:
        yield server


def reply(text: str = "", **kwargs: Any) -> MockReply:
    """A scripted reply (text, tool_calls, reasoning, finish, token counts).

    Example:
        >>> from vitals_engine.testing import MockServer, reply
        >>> with MockServer() as server:
        ...     server.script(lambda request: reply("scripted", output_tokens=3))
        ...     chat = ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="x")
        ...     print(chat.chat("What's 2+2?"), chat.last_turn().tokens.output)
        scripted 3
    """
    return MockReply(text=text, **kwargs)
