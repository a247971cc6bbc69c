"""How the mock server answers a request in one of the providers' wire formats.

A request is parsed by its format: one the real API refuses is answered with that API's
error, neither counted nor logged. Otherwise it is counted and logged (`traffic.py`),
held for the latency, then failed as planned (`failures.py`), or answered with the
brain's reply (with the server's script, token knobs and prompt cache), whole or as the
format's server-sent events, which a planned failure may break off mid-stream.
"""

from __future__ import annotations

import asyncio
import importlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
from aiohttp import web

from .brain import MockReply, MockRequest, PromptCache, Script, answer
from .failures import STATUSES, STREAM_KINDS, Failure, FailurePlans, error_message
from .formats import Refused, WireFormat
from .traffic import RecordedRequest, Traffic

__all__ = ["Answerer", "Knobs", "StreamHold", "wire_formats"]

#: The wire formats the server speaks: (module of `formats`, class).
_FORMATS = (
    ("openai", "OpenAIFormat"),
    ("openai_responses", "ResponsesFormat"),
    ("anthropic", "AnthropicFormat"),
    ("google", "GoogleFormat"),
    ("azure_openai", "AzureChatFormat"),
    ("azure_openai", "AzureResponsesFormat"),
    ("vertex", "VertexFormat"),
    ("bedrock", "BedrockFormat"),
)


def wire_formats() -> dict[str, WireFormat]:
    """The wire formats the server speaks, by name (those whose module imports).

    Example:
        >>> sorted(wire_formats())[:3]
        ['anthropic', 'azure_openai', 'azure_openai_responses']
    """
    found: dict[str, WireFormat] = {}
    for module, cls in _FORMATS:
        try:
            fmt = getattr(importlib.import_module(f".formats.{module}", __package__), cls)()
        except ImportError:
            continue
        found[fmt.name] = fmt
    return found


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


@dataclass
class Knobs:
    """How the server answers, as a test sets it: latency (seconds, or a range drawn
    from), the script, token counts to report, the delay between streamed events, and
    a hold on streamed replies."""

    latency: float | tuple[float, float] = 0.0
    script: Script | None = None
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    stream_delay: float = 0.0
    hold: StreamHold | None = None


class Answerer:
    """Answers the requests of each wire format (`handler(fmt)` is its aiohttp handler),
    with the server's knobs, failure plans, traffic counters and prompt cache, and its
    random draws (`rng`, shared with the failure plans so a seed gives the same run).

    `hang_release` is set by the server to end the requests left hanging.

    Example:
        >>> app.router.add_post(fmt.route, answerer.handler(fmt))
    """

    def __init__(
        self,
        knobs: Knobs,
        plans: FailurePlans,
        traffic: Traffic,
        prompt_cache: PromptCache,
        rng: random.Random,
    ) -> None:
        self.knobs = knobs
        self.plans = plans
        self.traffic = traffic
        self.prompt_cache = prompt_cache
        self._random = rng
        self.hang_release: asyncio.Event | None = None

    def handler(self, fmt: WireFormat) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """The aiohttp handler of `fmt`'s route."""

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self.answer(fmt, request)

        return handle

    async def answer(self, fmt: WireFormat, http: web.Request) -> web.StreamResponse:
        """Answer `http`, a request in `fmt`, counted in flight while it is answered."""
        peer = http.transport.get_extra_info("peername") if http.transport else None
        self.traffic.arrived(peer)
        try:
            return await self._respond(fmt, http)
        finally:
            self.traffic.left()

    def reply(self, request: MockRequest) -> MockReply:
        """The brain's reply to `request`, with the server's script, token knobs and prompt
        cache (which counts only when neither the reply nor a knob says what was cached)."""
        knobs = self.knobs
        reply = answer(request, knobs.script)
        if request.cache is not None and not reply.cache_numbers and not knobs.cached_tokens:
            used = self.prompt_cache.use(request.cache)
            reply.cached_tokens = used.read
            reply.cache_write_5m_tokens = used.written_5m
            reply.cache_write_1h_tokens = used.written_1h
        reply.cached_tokens = reply.cached_tokens or min(knobs.cached_tokens, reply.input_tokens)
        if knobs.reasoning_tokens and not reply.reasoning_tokens:
            reply.reasoning_tokens = knobs.reasoning_tokens
            reply.output_tokens += reply.reasoning_tokens
        return reply

    async def _respond(self, fmt: WireFormat, http: web.Request) -> web.StreamResponse:
        raw = await http.read()
        try:
            fmt.check_auth(http.method, http.path_qs, http.headers, raw)
            body = msgspec.json.decode(raw)
            request = fmt.parse(body, http.match_info, http.query)
        except Refused as refused:
            more = fmt.error_headers(refused.status, refused.kind)
            return web.json_response(fmt.refusal_body(refused), status=refused.status, headers=more)
        except (msgspec.DecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
            body = fmt.error_body(400, f"invalid request: {exc}")
            return web.json_response(body, status=400, headers=fmt.error_headers(400))
        record = self.traffic.accepted(fmt.name, request, dict(http.headers), body)
        delay = self._delay()
        if delay > 0:
            await asyncio.sleep(delay)
        failure = self.plans.pick(request.model, request.stream)
        midstream = failure is not None and (
            failure.kind in STREAM_KINDS or (request.stream and failure.kind == "malformed")
        )
        if failure is not None and not midstream:
            record.outcome = failure.kind
            record.answered = time.time()
            return await self._fail(fmt, http, failure, request.model)
        reply = self.reply(request)
        if request.stream:
            return await self._stream(fmt, http, request, reply, record, failure)
        record.answered = time.time()
        return web.Response(
            body=msgspec.json.encode(fmt.render(request, reply)),
            content_type="application/json",
            headers={"x-request-id": f"req_{self.traffic.requests}"},
        )

    def _delay(self) -> float:
        latency = self.knobs.latency
        if isinstance(latency, tuple):
            return self._random.uniform(*latency)
        return latency

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
                "content-type": fmt.stream_content_type,
                "cache-control": "no-cache",
                "x-request-id": f"req_{self.traffic.requests}",
            }
        )
        await response.prepare(http)
        knobs = self.knobs
        hold = knobs.hold
        sent = 0
        for event in events[:stop]:
            if sent and knobs.stream_delay > 0:
                await asyncio.sleep(knobs.stream_delay)
            await response.write(event.encode())
            sent += 1
            if event.text and hold is not None:
                await hold.wait()
                hold = None  # once per stream
        record.answered = time.time()
        if failure is None or await self._break_off(fmt, http, response, failure, sent, request):
            await response.write_eof()
        return response

    async def _break_off(
        self,
        fmt: WireFormat,
        http: web.Request,
        response: web.StreamResponse,
        failure: Failure,
        sent: int,
        request: MockRequest,
    ) -> bool:
        """Fail a stream after its `sent` events: cut the connection, or send the error
        event or the malformed event; whether the stream still ends as streams do."""
        if failure.kind == "cut":
            if http.transport is not None:
                http.transport.close()  # what was written goes out, then the end
            return False
        if failure.kind == "stream-error":
            status = failure.status or fmt.stream_error_status
            error = fmt.stream_error(status, error_message(status), sequence=sent, request=request)
            await response.write(error.encode())
        else:  # malformed
            await response.write(fmt.malformed_event().encode())
        return True

    async def _fail(
        self, fmt: WireFormat, http: web.Request, failure: Failure, model: str
    ) -> web.StreamResponse:
        """The answer of a failure that is not mid-stream."""
        kind = failure.kind
        if kind == "hang":
            return await self._hang()
        if kind == "drop":
            if http.transport is not None:
                http.transport.abort()
            return web.Response(status=500)
        if kind == "malformed":
            return web.Response(body=b'{"choices": [oops', content_type="application/json")
        if kind == "incomplete":
            return web.json_response(fmt.incomplete_body())
        return self._error(fmt, failure, model)

    async def _hang(self) -> web.StreamResponse:
        """Never answer, until the server ends the requests left hanging: then a 503."""
        assert self.hang_release is not None
        release = self.hang_release
        with self.traffic.hanging():
            await release.wait()
        return web.Response(status=503)

    def _error(self, fmt: WireFormat, failure: Failure, model: str) -> web.StreamResponse:
        """An error answer in `fmt`: a spent quota, or a status with the wait it announces."""
        headers: dict[str, str] = {"x-request-id": f"req_{self.traffic.requests}"}
        if failure.kind == "quota":
            status, body, more = fmt.quota_error(model, failure.retry_after)
            return web.json_response(body, status=status, headers={**headers, **more})
        status = STATUSES[failure.kind]
        if failure.retry_after is not None:
            wait = failure.retry_after
            if failure.header == "retry-after-ms":
                headers["retry-after-ms"] = str(int(wait * 1000))
            elif failure.header == "reset":
                headers.update(fmt.rate_limit_headers(wait))
            else:
                headers["retry-after"] = f"{wait:g}"
        headers.update(fmt.error_headers(status))
        body = fmt.error_body(status, error_message(status))
        return web.json_response(body, status=status, headers=headers)
