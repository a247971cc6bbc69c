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
`python -m vitals_engine.testing --port N`. This module is its public face (knobs,
counters, lifecycle); `answering.py` answers a request, `failures.py` plans failures
and `traffic.py` counts and logs what came.

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
  (`formats/google.py`);
- Azure OpenAI under `base_url("azure")` (`formats/azure_openai.py`): Chat Completions
  and the Responses API at the v1 (`/openai/v1/...`) and dated (`?api-version=`) routes,
  behind its test api-key or an Entra ID token from a managed-identity endpoint
  (`/msi/token`, App Service's), with Azure's content filter and 401/429 bodies.
- Vertex AI, under `base_url("vertex")` (`formats/vertex.py`): Gemini and Claude
  (`rawPredict`, `streamRawPredict`) at `/v1/projects/{p}/locations/{l}/publishers/...`,
  each call needing a bearer the mock issued and its clock has not expired
  (`wire_format("vertex").advance(s)` moves that clock); the OAuth token endpoint
  `POST /google/token` (service-account and authorized-user grants) and the metadata
  server's token routes under `/computeMetadata/v1/`.
- Amazon Bedrock's Converse and ConverseStream, `POST {base_url("bedrock")}/model/{id}/converse`
  and `/converse-stream` (`formats/bedrock.py`): SigV4 checked for the test key pair
  (`formats/aws.py`) or keys issued by `GET /aws/credentials` (a container credentials
  endpoint; `wire_format("bedrock").keys` sets their lifetime and moves their clock),
  event-stream frames, `x-amzn-ErrorType` errors.

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
from collections.abc import Iterator
from typing import Any

from aiohttp import web

from .answering import Answerer, Knobs, StreamHold, wire_formats
from .batches import BatchKnobs, BatchStore, add_routes
from .brain import MockReply, PromptCache, Script
from .failures import KINDS, Failure, FailurePlans, announced_wait
from .formats import WireFormat
from .traffic import RecordedRequest, Traffic

__all__ = ["Failure", "MockServer", "RecordedRequest", "StreamHold"]

#: The fewest tokens a prompt prefix needs to be cached, unless a test says otherwise.
MIN_CACHEABLE_TOKENS = 1024


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
        self._initial = Knobs(latency=latency, stream_delay=stream_delay)
        self._knobs = Knobs(latency=latency, stream_delay=stream_delay)
        rng = random.Random(seed)  # one sequence of draws: latencies and failures
        self._lock = threading.Lock()
        self._traffic = Traffic(self._lock, keep_log)
        self._plans = FailurePlans(self._lock, rng)
        self._prompt_cache = PromptCache(MIN_CACHEABLE_TOKENS)
        self._formats = wire_formats()
        self._answerer = Answerer(self._knobs, self._plans, self._traffic, self._prompt_cache, rng)
        self._batches = BatchStore(
            self._lock,
            reply=self._answerer.reply,
            record=self._traffic.count_batched,
            delay=batch_delay,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- what it received -------------------------------------------------------------

    @property
    def requests(self) -> int:
        """Requests received (those the API would refuse are not counted)."""
        return self._traffic.requests

    @property
    def requests_by_model(self) -> collections.Counter[str]:
        """Requests received, by model."""
        return self._traffic.requests_by_model

    @property
    def in_flight(self) -> int:
        """Requests being answered now (a hung one is not)."""
        return self._traffic.in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most requests there have been in flight at once."""
        return self._traffic.peak_in_flight

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The client connections requests came on (their client address and port)."""
        return self._traffic.connections

    @property
    def log(self) -> list[RecordedRequest]:
        """The requests received, oldest first (empty when `keep_log` is off)."""
        return self._traffic.log

    def per_second(self) -> list[int]:
        """Requests received in each whole second of the clock (from the first request's
        second to the last's, empty seconds included), from the request log.

        Example:
            >>> max(server.per_second()) <= 2 * rpm / 60   # a rate held, with a second's burst
        """
        return self._traffic.per_second()

    # -- knobs ------------------------------------------------------------------

    @property
    def latency(self) -> float | tuple[float, float]:
        return self._knobs.latency

    @latency.setter
    def latency(self, value: float | tuple[float, float]) -> None:
        self._knobs.latency = value

    @property
    def stream_delay(self) -> float:
        """Seconds between two events of a streamed reply."""
        return self._knobs.stream_delay

    @stream_delay.setter
    def stream_delay(self, value: float) -> None:
        self._knobs.stream_delay = value

    @property
    def cached_tokens(self) -> int:
        return self._knobs.cached_tokens

    @cached_tokens.setter
    def cached_tokens(self, value: int) -> None:
        self._knobs.cached_tokens = value

    @property
    def reasoning_tokens(self) -> int:
        return self._knobs.reasoning_tokens

    @reasoning_tokens.setter
    def reasoning_tokens(self, value: int) -> None:
        self._knobs.reasoning_tokens = value

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
        self._knobs.script = fn

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
        wait = announced_wait(kind, retry_after)
        self._plans.add(Failure(kind, times, model, wait, header, after, status))

    def failure_rate(
        self, rate: float, kind: str = "429", *, retry_after: float | None = None
    ) -> None:
        """Fail a random share `rate` of requests with `kind` (0 turns it off); `retry_after`
        as in `fail()`. "cut" and "stream-error" fail a share of the streamed requests."""
        if kind not in KINDS:
            raise ValueError(f"unknown failure kind {kind!r}")
        failure = Failure(kind, None, None, announced_wait(kind, retry_after))
        self._plans.rate = (rate, failure) if rate else None

    def hold_stream(self, timeout: float = 10.0) -> StreamHold:
        """Hold streamed replies after their first text delta until `release()` on the
        returned hold (at most `timeout` seconds each). `reset()` ends it."""
        if self._loop is None:
            raise RuntimeError("start the server before holding its streams")
        hold = StreamHold(self._loop, timeout)
        self._knobs.hold = hold
        return hold

    def rpm(self, limit: int | None) -> None:
        """Answer 429 + Retry-After beyond `limit` requests in any 60 s window."""
        self._plans.limit_rpm(limit)

    def reset(self) -> None:
        """Back to how the server started: counters, request log, failures, limits,
        scripts, latency, stream delay, held streams, token knobs, the prompt cache and its
        minimum, and batches with their knobs, plans and counters."""
        with self._lock:
            knobs = self._knobs
            hold = knobs.hold
            knobs.latency = self._initial.latency
            knobs.stream_delay = self._initial.stream_delay
            knobs.hold = None
            if hold is not None:
                hold.release()
            knobs.cached_tokens = 0
            knobs.reasoning_tokens = 0
            knobs.script = None
            self._prompt_cache.clear()
            self._prompt_cache.minimum = MIN_CACHEABLE_TOKENS
            self._traffic.clear()
            self._plans.clear()
        self._batches.reset()
        self._release_hangs()

    def _release_hangs(self) -> None:
        """End every request left hanging (they answer 503) so the next test starts clean."""
        loop, old = self._loop, self._answerer.hang_release
        if loop is None or old is None:
            return
        self._answerer.hang_release = asyncio.Event()
        loop.call_soon_threadsafe(old.set)

    def wire_format(self, name: str) -> WireFormat:
        """The server's wire format `name` ("bedrock" ...), whose own knobs a test sets.

        Example:
            >>> server.wire_format("bedrock").keys.advance(3600)
        """
        return self._formats[name]

    def base_url(self, provider: str = "openai") -> str:
        """The base URL a provider constructor takes to talk to this server."""
        root = f"http://{self.host}:{self.port}"
        if provider in ("bedrock", "azure", "vertex"):  # their paths start at the host
            return root
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
        self._answerer.hang_release = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        add_routes(app.router, self._batches, self._formats)  # first: see add_routes
        for fmt in self._formats.values():
            app.router.add_post(fmt.route, self._answerer.handler(fmt))
            for method, path, handler in fmt.more_routes():
                app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096, reuse_address=True)
        await site.start()
        server = site._server  # the bound socket tells the free port we got
        if self.port == 0 and server is not None and getattr(server, "sockets", None):
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _close(self) -> None:
        if self._answerer.hang_release is not None:
            self._answerer.hang_release.set()
        if self._runner is not None:
            await self._runner.cleanup()


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
