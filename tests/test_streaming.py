"""Streamed replies (server-sent events) from all three providers, over the mock server:
the same Turn as a whole reply, text handed to the run's sink as it arrives, auto-streaming
where Anthropic requires it, and streams that break, carry errors or stall."""

from __future__ import annotations

import anyio
import httpx
import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import sums
from vitals_engine.pacing.scope import CallScope
from vitals_engine.testing import MockReply, MockRequest, MockToolCall
from vitals_engine.testing.formats import StreamEvent
from vitals_engine.testing.formats.anthropic import AnthropicFormat
from vitals_engine.testing.formats.google import GoogleFormat
from vitals_engine.testing.formats.openai import OpenAIFormat
from vitals_engine.transport.base import Timeouts
from vitals_engine.vocab.turns import Turn

pytestmark = pytest.mark.anyio

PROVIDERS = ["openai", "anthropic", "google"]
MODELS = {"openai": "gpt-test", "anthropic": "claude-test", "google": "gemini-test"}
MAKE = {
    "openai": ve.chat_openai,
    "anthropic": ve.chat_anthropic,
    "google": ve.chat_google_gemini,
}
FORMATS = {"openai": OpenAIFormat, "anthropic": AnthropicFormat, "google": GoogleFormat}
TWENTY_WORDS = " ".join(f"word{i}" for i in range(20))


def chat(server, provider: str, **options) -> ve.Chat:
    return MAKE[provider](
        MODELS[provider], base_url=server.base_url(provider), api_key="k", **options
    )


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def untimed(turns: list[Turn]) -> list[Turn]:
    """The turns without when they were made and how long they took."""
    return [msgspec.structs.replace(t, started_at=None, duration=None) for t in turns]


# -- the same reply, streamed ---------------------------------------------------------------


def thinks_then_calls_add(request: MockRequest) -> MockReply | None:
    if len(request.messages) > 1:
        return None  # after the tool result: the brain's "The tool returned 5."
    call = MockToolCall("call_0_add", "add", {"a": 2, "b": 3})
    return MockReply(text="Let me add them.", reasoning="Two numbers: add.", tool_calls=[call])


CASES = {
    "text": ("What's 2+2?", None, False),
    "tool-call": ("Use add on 2 and 3", None, True),
    "thinking-text-and-tool": ("Add 2 and 3", thinks_then_calls_add, True),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_reply_is_the_same_turn_as_a_whole_one(server, provider, case):
    """For the same prompt a streamed chat ends with the same turns as a non-streamed one:
    text, thinking (with its signature, which the mock checks when it comes back), tool
    calls with their arguments, tokens (cached and reasoning too), finish reason, model."""
    prompt, script, tools = CASES[case]
    server.cached_tokens = 1
    server.reasoning_tokens = 3
    server.script(script)
    chats = {}
    for stream in (False, True):
        chats[stream] = chat(server, provider, stream=stream)
        if tools:
            chats[stream].register_tool(add)
        await chats[stream].chat_async(prompt)
    assert untimed(chats[True].turns) == untimed(chats[False].turns)
    whole, streamed = chats[False].turns[1], chats[True].turns[1]
    assert streamed.tokens is not None
    assert streamed.tokens.output > 0
    if case != "text":
        assert streamed.tool_requests == whole.tool_requests != []
    streamed_requests = [r.request.stream for r in server.log]
    assert streamed_requests == [False] * (len(server.log) // 2) + [True] * (len(server.log) // 2)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_streamed_request_asks_for_a_stream(server, provider):
    """OpenAI sends `stream: true` and asks for the usage chunk; Anthropic sends
    `stream: true`; Gemini calls `:streamGenerateContent?alt=sse` with the same body."""
    await chat(server, provider).chat_async("What's 2+2?")
    await chat(server, provider, stream=True).chat_async("What's 2+2?")
    whole, streamed = server.log
    extra = {
        "openai": {"stream": True, "stream_options": {"include_usage": True}},
        "anthropic": {"stream": True},
        "google": {},
    }[provider]
    assert streamed.body == {**whole.body, **extra}
    assert (whole.request.stream, streamed.request.stream) == (False, True)


async def test_a_stream_in_params_streams_unless_stream_false(server):
    """`params={"stream": True}` streams (it used to break the reply); `stream=False` wins
    over it, and the request then carries no stream keys at all."""
    params = {"stream": True, "stream_options": {"include_usage": True}}
    asked = chat(server, "openai", params=params)
    assert await asked.chat_async("What's 2+2?") == "2 + 2 = 4"
    refused = chat(server, "openai", params=params, stream=False)
    assert await refused.chat_async("What's 2+2?") == "2 + 2 = 4"
    streamed, whole = server.log
    assert streamed.request.stream
    assert not whole.request.stream
    assert "stream" not in whole.body
    assert "stream_options" not in whole.body


# -- Anthropic streams by itself where the API requires it ----------------------------------


@pytest.mark.parametrize(
    ("params", "stream", "streams"),
    [
        ({"max_tokens": 21_333}, None, False),
        ({"max_tokens": 21_334}, None, True),
        ({"thinking": {"type": "enabled", "budget_tokens": 20_000}}, None, True),
        ({"max_tokens": 64_000}, False, False),
        ({"max_tokens": 100}, True, True),
    ],
    ids=["at-the-limit", "above-it", "thinking-budget-above-it", "stream-false", "stream-true"],
)
async def test_anthropic_streams_by_itself_above_21333_max_tokens(server, params, stream, streams):
    """With stream=None, Anthropic streams a request whose max_tokens (thinking budget
    included) is above 21,333, which the API would refuse whole (expected over 10
    minutes); stream=True or False decides alone."""
    claude = chat(server, "anthropic", params=params, stream=stream)
    assert await claude.chat_async("What's 2+2?") == "2 + 2 = 4"
    (record,) = server.log
    assert record.request.stream is streams
    assert record.body.get("stream", False) is streams


@pytest.mark.parametrize("provider", ["openai", "google"])
async def test_other_providers_stream_only_when_asked(server, provider):
    """OpenAI and Gemini never stream by themselves, however large max_tokens is."""
    await chat(server, provider, params={"max_tokens": 64_000}).chat_async("What's 2+2?")
    (record,) = server.log
    assert record.request.stream is False


# -- text as it arrives ---------------------------------------------------------------------


class Sink:
    """Collects (attempt key, delta) pairs as `CallScope.on_text`."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, str]] = []

    def __call__(self, key: object, delta: str) -> None:
        self.calls.append((key, delta))

    @property
    def keys(self) -> list[object]:
        return list(dict.fromkeys(key for key, _ in self.calls))

    def text(self, key: object) -> list[str]:
        return [delta for k, delta in self.calls if k is key]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_sink_gets_each_text_delta_in_order(server, provider):
    """Each piece of the reply's text goes to the scope's sink as it comes, in order, under
    one key for the attempt; thinking does not; the pieces make the reply's text."""
    server.script(lambda r: MockReply(text=TWENTY_WORDS, reasoning="secret thoughts here"))
    sink = Sink()
    with CallScope(role="solver", on_text=sink):
        reply = await chat(server, provider, stream=True).chat_async("Say twenty words")
    assert reply == TWENTY_WORDS
    (key,) = sink.keys
    assert sink.text(key) == [f"word{i} " for i in range(19)] + ["word19"]
    assert "".join(sink.text(key)) == reply


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_attempt_streams_under_a_fresh_key(server, provider):
    """A stream that fails after some text and is retried starts afresh under a new key:
    the first key holds only the broken attempt's pieces, the second the whole text."""
    server.fail("stream-error", after=4)
    sink = Sink()
    retry = ve.Retry(max_attempts=2, backoff=0.01)
    with CallScope(role="solver", on_text=sink):
        text = await chat(server, provider, stream=True, retry=retry).chat_async(TWENTY_WORDS)
    assert text == TWENTY_WORDS
    first, second = sink.keys
    assert 0 < len(sink.text(first)) < 20
    assert "".join(sink.text(first)) == TWENTY_WORDS[: len("".join(sink.text(first)))]
    assert "".join(sink.text(second)) == TWENTY_WORDS


async def test_without_a_sink_a_stream_still_answers(server):
    """Outside a run (no scope, so no sink) a streamed reply is simply the reply."""
    assert await chat(server, "openai", stream=True).chat_async("What's 2+2?") == "2 + 2 = 4"


async def test_the_first_delta_reaches_the_sink_before_the_stream_ends(server):
    """Text reaches the sink while the reply is still being made: the server holds the
    stream after its first text delta until the sink has seen it.

    NEEDS INCREMENTAL TRANSPORT STREAMING: with a transport whose stream() reads the whole
    body first (the seam's fallback), the first delta only arrives after the end, the hold
    runs out and this test fails.
    """
    hold = server.hold_stream(timeout=5)
    seen: list[str] = []

    def sink(key: object, delta: str) -> None:
        seen.append(delta)
        hold.release()

    with anyio.fail_after(30), CallScope(role="solver", on_text=sink):
        reply = await chat(server, "openai", stream=True).chat_async("What's 2+2?")
    assert reply == "2 + 2 = 4" == "".join(seen)
    assert hold.held == 1
    assert not hold.timed_out, (
        "the first delta reached the sink only after the stream ended: the transport "
        "read the whole body before handing it over"
    )


# -- streams that break -----------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_stream_is_retried_by_the_engine(server, provider, tmp_path):
    """In a Task run, a stream whose connection closes mid-reply is retried, counted in the
    sample's retries, and the sample's answer is the whole reply, never the partial one."""
    server.fail("cut")
    solver = ve.generate(chat(server, provider, stream=True))
    task = ve.Task(sums(1), solver=solver, scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async(retry=ve.Retry(max_attempts=3, backoff=0.01))
    (record,) = task._state.records
    assert record.retries == 1
    assert "ProviderUnavailable" in record.calls[0].retries[0].reason
    assert task.get_samples()["result"].to_list() == ["0 + 0 = 0"]
    assert [r.outcome for r in server.log] == ["cut", "ok"]


def sse(events: list[StreamEvent]) -> bytes:
    return b"".join(event.encode() for event in events)


def canned_stream(provider: str, events: list[StreamEvent]) -> httpx.AsyncClient:
    """An httpx client answering every request with these events."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=sse(events))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def rendered(provider: str, text: str = "2 + 2 = 4") -> list[StreamEvent]:
    """The mock server's events for a reply of `text`, in `provider`'s format."""
    request = MockRequest(provider, MODELS[provider], stream=True, stream_usage=True)
    reply = MockReply(text=text, input_tokens=2, output_tokens=5)
    return FORMATS[provider]().render_stream(request, reply)


@pytest.mark.usefixtures("no_retries")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_ends_before_its_marker_is_unavailable(provider):
    """A body that ends cleanly but before the completion marker (OpenAI's [DONE],
    Anthropic's message_stop, Gemini's last chunk with a finishReason) is a retryable
    ProviderUnavailable saying how many events came; the partial reply is not the answer."""
    events = rendered(provider)[:-1]
    client = canned_stream(provider, events)
    with pytest.raises(ve.ProviderUnavailable, match=rf"stream was cut after {len(events)} ev"):
        await chat_on(provider, client).chat_async("What's 2+2?")
    await client.aclose()


def chat_on(provider: str, client: httpx.AsyncClient) -> ve.Chat:
    base = {"google": "https://g.test/v1beta"}.get(provider, "https://api.test/v1")
    return MAKE[provider](MODELS[provider], base_url=base, api_key="k", client=client, stream=True)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_whole_canned_stream_is_the_reply(provider):
    """The same events up to their marker are the reply (the canned streams above are
    whole but for their marker)."""
    client = canned_stream(provider, rendered(provider))
    assert await chat_on(provider, client).chat_async("What's 2+2?") == "2 + 2 = 4"
    await client.aclose()


@pytest.mark.usefixtures("no_retries")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_connection_closed_mid_stream_is_unavailable(server, provider):
    """The mock's "cut" (the connection closes after some events) is ProviderUnavailable."""
    server.fail("cut")
    with pytest.raises(ve.ProviderUnavailable):
        await chat(server, provider, stream=True).chat_async("What's 2+2?")


@pytest.mark.usefixtures("no_retries")
@pytest.mark.parametrize(
    ("provider", "status", "error", "said"),
    [
        ("anthropic", None, ve.ProviderUnavailable, "overloaded_error: Overloaded"),
        ("anthropic", 429, ve.RateLimitError, "rate_limit_error"),
        ("anthropic", 400, ve.ProviderError, "invalid_request_error"),
        ("openai", None, ve.ProviderUnavailable, "The server had an error"),
        ("openai", 429, ve.RateLimitError, "Rate limit reached"),
        ("openai", 401, ve.AuthenticationError, "Incorrect API key"),
        ("google", None, ve.ProviderUnavailable, "UNAVAILABLE"),
        ("google", 429, ve.RateLimitError, "RESOURCE_EXHAUSTED"),
    ],
)
async def test_an_error_event_is_classified_like_its_status(server, provider, status, error, said):
    """An error event mid-stream is the error its HTTP status would be: overloaded (the
    mock's default) retryable ProviderUnavailable, a rate limit RateLimitError, a bad
    request a plain ProviderError; the message keeps the provider's words and says it
    came in the stream."""
    server.fail("stream-error", status=status)
    with pytest.raises(ve.ProviderError) as info:
        await chat(server, provider, stream=True).chat_async("What's 2+2?")
    assert type(info.value) is error
    assert said in info.value.message
    assert "an error event in the stream, after" in info.value.message
    assert info.value.retryable is (error in (ve.ProviderUnavailable, ve.RateLimitError))
    assert info.value.status == (status or FORMATS[provider].stream_error_status)


@pytest.mark.usefixtures("no_retries")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_event_that_is_not_json_is_malformed(server, provider):
    """An event whose data is not JSON is MalformedResponse, naming the event and its data."""
    server.fail("malformed")
    with pytest.raises(ve.MalformedResponse, match=r"event \d+ of the stream .* not valid JSON"):
        await chat(server, provider, stream=True).chat_async("What's 2+2?")


# -- the read timeout applies between events ------------------------------------------------


@pytest.mark.usefixtures("no_retries")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_gap_between_events_longer_than_the_read_timeout_fails(server, provider):
    """Timeouts(read=) bounds the wait for each next event: a longer gap is a timeout."""
    server.stream_delay = 2.0
    slow = chat(server, provider, stream=True, timeouts=Timeouts(read=0.2))
    with pytest.raises(ve.ProviderTimeout):
        await slow.chat_async("What's 2+2?")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_longer_than_the_read_timeout_with_short_gaps_succeeds(server, provider):
    """A stream whose events come more often than the read timeout may take longer in all
    than the timeout: only the gaps count."""
    server.stream_delay = 0.05
    read = 0.5
    request = MockRequest(provider, MODELS[provider], stream=True)
    gaps = len(FORMATS[provider]().render_stream(request, MockReply(text=TWENTY_WORDS))) - 1
    assert gaps * server.stream_delay > read  # the whole stream outlasts the read timeout
    slow = chat(server, provider, stream=True, timeouts=Timeouts(read=read))
    assert await slow.chat_async(TWENTY_WORDS) == TWENTY_WORDS


# -- a server that answers a streamed request whole ------------------------------------------


async def test_a_json_answer_to_a_streamed_request_is_read_whole():
    """A server that ignores `stream: true` and answers with one JSON body is read as a
    whole answer, not as a stream with no events."""
    body = {
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1},
    }
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    )
    assert await chat_on("openai", client).chat_async("What's 2+2?") == "4"
    await client.aclose()


async def test_a_failing_sink_never_fails_the_call(server, caplog):
    """The live text is a view: a sink that raises is dropped with a warning, and the reply
    still arrives whole."""
    server.script(lambda r: MockReply(text=TWENTY_WORDS))
    seen: list[str] = []

    def broken(key: object, delta: str) -> None:
        seen.append(delta)
        raise RuntimeError("the viewer's buffer broke")

    with CallScope(role="solver", on_text=broken):
        reply = await chat(server, "openai", stream=True).chat_async("Say twenty words")
    assert reply == TWENTY_WORDS
    assert seen == ["word0 "]
    assert "live text" in caplog.text
