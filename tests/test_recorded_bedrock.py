"""Amazon Bedrock's replies as the live Converse and ConverseStream APIs gave them
(`tests/recordings/bedrock`), replayed over real HTTP through our provider.

Each test sends what the recording's request asked (signed with the mock's test keys: the
replay server does not check signatures) and checks the turn against the recording: text,
tool calls, reasoning (its signature, or redacted), the finish reason, the usage and the
cost at the prices written out below (the platform's published on-demand prices).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import pytest

import vitals_engine as ve
from tests.recordings.cassettes import Interaction, load
from tests.replay_server import ReplayServer, replies
from vitals_engine.testing.formats.aws import TEST_ACCESS_KEY, TEST_SECRET_KEY

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("aws_keys")]

M = 1_000_000
HERE = "bedrock/"


class Usd(NamedTuple):
    """USD per million tokens: input, output, cache reads, cache writes."""

    input: float
    output: float
    cached: float = 0.0
    write: float = 0.0


# Amazon Bedrock's pricing page (aws.amazon.com/bedrock/pricing), on-demand, US regions:
# Nova Micro; Claude Sonnet 4 and 3.7 Sonnet (cache writes 1.25x input, reads 0.1x);
# Claude Sonnet 4.5 through a geographic (us.) cross-region profile, 10% above in-region.
NOVA_MICRO = Usd(0.035, 0.14)
SONNET_4 = Usd(3.00, 15.00, 0.30, 3.75)
SONNET_3_7 = Usd(3.00, 15.00, 0.30, 3.75)
US_SONNET_4_5 = Usd(3.30, 16.50, 0.33, 4.125)
LLAMA_4_MAVERICK = Usd(0.24, 0.97)

PRICES = {
    "us.amazon.nova-micro-v1:0": NOVA_MICRO,
    "us.anthropic.claude-sonnet-4-20250514-v1:0": SONNET_4,
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0": SONNET_3_7,
    "us.anthropic.claude-sonnet-4-5-20250929-v1:0": US_SONNET_4_5,
    "us.meta.llama4-maverick-17b-instruct-v1:0": LLAMA_4_MAVERICK,
}


@pytest.fixture
def aws_keys(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for model, p in PRICES.items():
        ve.set_price("Bedrock", model, input=p.input, output=p.output,
                     cached_input=p.cached or None, cache_write=p.write or None)  # fmt: skip


@pytest.fixture(scope="module")
def replay():
    with ReplayServer() as server:
        yield server


def model_of(interaction: Interaction) -> str:
    return interaction.path.split("/")[2].replace("%3A", ":")


def bedrock(server: ReplayServer, model: str, **options) -> ve.Chat:
    return ve.chat_aws_bedrock(
        model, region="us-east-1", base_url=server.base_url,
        retry=ve.Retry(max_attempts=1), timeouts=ve.Timeouts(connect=5, read=10, total=30),
        **options,
    )  # fmt: skip


def cost(p: Usd, input: int, output: int, cached: int = 0, written: int = 0) -> float:
    return (input * p.input + output * p.output + cached * p.cached + written * p.write) / M


def system_of(interaction: Interaction) -> str | None:
    texts = [b["text"] for b in interaction.request_body.get("system") or [] if "text" in b]
    return "\n".join(texts) or None


# -- text ----------------------------------------------------------------------------------


async def test_a_plain_reply_has_its_text_usage_and_price(replay):
    """Nova Micro answers "Hello!": 7 in, 30 out, end_turn, at Nova Micro's price."""
    (recorded,) = load(HERE + "pydantic-ai__test_bedrock_model.yaml")
    replay.serve(recorded)
    model = model_of(recorded)
    chat = bedrock(replay, model, system_prompt=system_of(recorded))
    text = await chat.chat_async("Hello!")
    reply = recorded.json()
    assert text == reply["output"]["message"]["content"][0]["text"]
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=7, output=30)
    assert turn.cost == pytest.approx(cost(NOVA_MICRO, 7, 30))
    sent = replay.received[0]
    assert sent.path == recorded.path  # the model id quoted as the SDKs quote it
    assert sent.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
    assert sent.body["system"] == recorded.request_body["system"]
    assert sent.body["messages"] == recorded.request_body["messages"]
    assert chat.get_cost() == pytest.approx(cost(NOVA_MICRO, 7, 30))


async def test_a_streamed_reply_is_put_together(replay):
    """ConverseStream's frames (CRC-checked) give the same turn: the deltas' text, the
    usage of the metadata event."""
    (recorded,) = load(HERE + "pydantic-ai__test_bedrock_model_stream.yaml")
    replay.serve(recorded)
    chat = bedrock(replay, model_of(recorded), system_prompt=system_of(recorded),
                   stream=True, params={"temperature": 0.0})  # fmt: skip
    text = await chat.chat_async("What is the capital of France?")
    expected = "".join(
        e["contentBlockDelta"]["delta"]["text"]
        for e in recorded.events()
        if "contentBlockDelta" in e
    )
    assert text == expected
    assert text.startswith("The capital of France is Paris.")
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=13, output=82)
    assert turn.cost == pytest.approx(cost(NOVA_MICRO, 13, 82))
    assert replay.received[0].body["inferenceConfig"] == {"temperature": 0.0}


# -- tools ---------------------------------------------------------------------------------


async def test_a_streamed_tool_call_and_its_result(replay):
    """A streamed toolUse (its input in fragments) runs the tool; the result goes back as a
    toolResult and the model answers with it; both calls are counted."""
    first, second = load(HERE + "pydantic-ai__test_bedrock_model_iter_stream.yaml")
    replay.serve(first, second)
    chat = bedrock(replay, model_of(first), system_prompt=system_of(first), stream=True,
                   params={"top_p": 0.5})  # fmt: skip

    def get_temperature(city: str) -> str:
        """Get the temperature in a city."""
        return "30°C"

    chat.register_tool(get_temperature)
    text = await chat.chat_async("What is the temperature of the capital of France?")
    assert text == "The current temperature in Paris, the capital of France, is 30°C."
    call = next(c for c in replies(chat)[0].contents if isinstance(c, ve.ContentToolRequest))
    assert call.name == "get_temperature"
    assert call.arguments == {"city": "Paris"}
    assert replies(chat)[0].finish_reason == "tool_calls"
    back = replay.received[1].body["messages"][2]["content"][0]["toolResult"]
    assert back["toolUseId"] == call.id
    assert back["content"] == [{"text": "30°C"}]
    usage = [t.tokens for t in replies(chat)]
    assert usage == [ve.TokenUsage(input=471, output=91), ve.TokenUsage(input=577, output=18)]
    assert chat.get_cost() == pytest.approx(cost(NOVA_MICRO, 471 + 577, 91 + 18))


async def test_a_tool_call_with_thinking_sends_the_reasoning_back(replay):
    """Claude 3.7 with thinking: the reply's reasoningText (with its signature), its text
    and a toolUse; the second request sends the reasoning back as it came."""
    first, second = load(HERE + "pydantic-ai__test_bedrock_anthropic_tool_with_thinking.yaml")
    replay.serve(first, second)
    chat = bedrock(replay, model_of(first), reasoning=1024)

    def get_user_country() -> str:
        """Get the user's country."""
        return "Mexico"

    chat.register_tool(get_user_country)
    text = await chat.chat_async("What is the largest city in the user country?")
    assert text.startswith("Based on your location in Mexico, the largest city is Mexico City")
    thinking = replies(chat)[0].contents[0]
    recorded = first.json()["output"]["message"]["content"][0]["reasoningContent"]
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.thinking == recorded["reasoningText"]["text"]
    assert thinking.signature == recorded["reasoningText"]["signature"]
    assert replay.received[0].body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    sent_back = replay.received[1].body["messages"][1]["content"][0]
    assert sent_back == {"reasoningContent": recorded}
    tokens = [t.tokens for t in replies(chat)]
    assert tokens == [ve.TokenUsage(input=397, output=130), ve.TokenUsage(input=539, output=106)]
    assert chat.get_cost() == pytest.approx(cost(SONNET_3_7, 397 + 539, 130 + 106))


async def test_a_conversation_with_a_tool_result_then_text(replay):
    """Llama 4 Maverick answers a conversation whose history holds a tool call and result."""
    (recorded,) = load(
        HERE + "pydantic-ai__test_bedrock_llama_tool_result_followed_by_text_accepted.yaml"
    )
    replay.serve(recorded)
    chat = bedrock(replay, model_of(recorded))

    def get_expenses() -> str:
        """Get the expenses."""
        return "ok"

    chat.register_tool(get_expenses)
    chat.set_turns([
        ve.Turn("user", [ve.ContentText("show me my expenses")]),
        ve.Turn("assistant", [ve.ContentToolRequest("t1", "get_expenses", {})]),
        ve.Turn("user", [ve.ContentToolResult("t1", "get_expenses", value="ok")]),
        ve.Turn("assistant", [ve.ContentText(".")]),
    ])  # fmt: skip
    assert await chat.chat_async("Thanks. Now just say the word DONE.") == "DONE"
    sent = replay.received[0].body["messages"]
    assert sent[2]["content"][0]["toolResult"]["toolUseId"] == "t1"
    assert chat.last_turn().tokens == ve.TokenUsage(input=186, output=2)
    assert chat.last_turn().cost == pytest.approx(cost(LLAMA_4_MAVERICK, 186, 2))


# -- reasoning ---------------------------------------------------------------------------------


async def test_streamed_reasoning_comes_with_its_signature(replay):
    """Claude Sonnet 4 streams its reasoning text in deltas, then its signature."""
    (recorded,) = load(HERE + "pydantic-ai__test_bedrock_model_thinking_part_stream.yaml")
    replay.serve(recorded)
    chat = bedrock(replay, model_of(recorded), reasoning=1024, stream=True)
    text = await chat.chat_async("Hello")
    deltas = [
        e["contentBlockDelta"]["delta"] for e in recorded.events() if "contentBlockDelta" in e
    ]
    reasoning = "".join(
        d["reasoningContent"].get("text", "") for d in deltas if "reasoningContent" in d
    )
    signature = [d["reasoningContent"]["signature"] for d in deltas
                 if "signature" in d.get("reasoningContent", {})]  # fmt: skip
    thinking = chat.last_turn().contents[0]
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.thinking == reasoning
    assert thinking.signature == signature[0]
    assert text == "".join(d.get("text", "") for d in deltas)
    assert chat.last_turn().tokens == ve.TokenUsage(input=36, output=73)
    assert chat.last_turn().cost == pytest.approx(cost(SONNET_4, 36, 73))


async def test_redacted_reasoning_is_kept_redacted(replay):
    """Redacted reasoning blocks stay opaque (`redacted=True`), the text after them is the
    reply."""
    (recorded,) = load(HERE + "pydantic-ai__test_bedrock_model_thinking_part_redacted_stream.yaml")
    replay.serve(recorded)
    chat = bedrock(replay, model_of(recorded), reasoning=1024, stream=True)
    prompt = recorded.request_body["messages"][0]["content"][0]["text"]
    text = await chat.chat_async(prompt)
    assert text.startswith("I notice you've sent what appears to be some kind of command")
    contents = chat.last_turn().contents
    redacted = [c for c in contents if isinstance(c, ve.ContentThinking)]
    assert len(redacted) == 2
    assert all(c.redacted for c in redacted)
    assert redacted[0].thinking.startswith("RXRrRUNrZ0lCeEFCR0FJcVFKVGZxUy9Q")
    assert chat.last_turn().tokens == ve.TokenUsage(input=92, output=253)
    assert chat.last_turn().cost == pytest.approx(cost(SONNET_3_7, 92, 253))


async def test_thinking_with_a_cache_point_on_a_cross_region_profile(replay):
    """Claude Sonnet 4.5 through the us. profile thinks with a 4,000-token budget; the
    reply is priced at the profile's price."""
    (recorded,) = load(HERE + "ellmer__aws-bedrock-thinking.yml")
    # The recorder sent the model id's colon unquoted; ours quotes it (as botocore does):
    # the same resource.
    replay.serve(dataclasses.replace(recorded, path=recorded.path.replace(":", "%3A")))
    chat = bedrock(replay, model_of(recorded), reasoning=4000, prompt_cache="5m",
                   params={"temperature": 1})  # fmt: skip
    text = await chat.chat_async("Create a riddle for data scientists")
    reply = recorded.json()["output"]["message"]["content"]
    assert text == reply[-1]["text"]
    thinking = chat.last_turn().contents[0]
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.signature == reply[0]["reasoningContent"]["reasoningText"]["signature"]
    sent = replay.received[0].body
    assert (
        sent["additionalModelRequestFields"]
        == recorded.request_body["additionalModelRequestFields"]
    )
    # ellmer put a cache point after the first message; ours come with a conversation to
    # continue (prompt_cache.py), so the text alone is the same
    assert sent["messages"][0]["content"][0] == recorded.request_body["messages"][0]["content"][0]
    assert chat.last_turn().tokens == ve.TokenUsage(input=43, output=459)
    assert chat.last_turn().cost == pytest.approx(cost(US_SONNET_4_5, 43, 459))


# -- the prompt cache ----------------------------------------------------------------------------


async def test_cache_writes_then_reads_are_priced_to_the_cent(replay):
    """The first request writes 1,322 tokens to the cache, the second reads them: each
    priced with its cache price (us. Sonnet 4.5)."""
    first, second = load(HERE + "pydantic-ai__test_bedrock_cache_write_and_read.yaml")
    replay.serve(first, second)
    model = model_of(first)
    body = first.request_body
    chat = bedrock(replay, model, params={k: v for k, v in body.items() if k != "messages"})
    # The request as recorded (a document block and hand-placed cache points) goes out
    # through params= and the turns it names; here the reply's usage is what is checked.
    chat.set_turns([])
    for interaction in (first, second):
        turn = await _send_recorded(chat, interaction)
        assert turn.contents == [ve.ContentText("21")]
    written = ve.TokenUsage(input=2, output=5, cache_write=1322)
    read = ve.TokenUsage(input=2, output=5, cached_input=1322)
    assert [t.tokens for t in replies(chat)] == [written, read]
    costs = [t.cost for t in replies(chat)]
    assert costs[0] == pytest.approx(cost(US_SONNET_4_5, 2, 5, written=1322))
    assert costs[1] == pytest.approx(cost(US_SONNET_4_5, 2, 5, cached=1322))
    assert round(sum(costs), 2) == round(cost(US_SONNET_4_5, 4, 10, 1322, 1322), 2)


async def _send_recorded(chat: ve.Chat, interaction: Interaction) -> ve.Turn:
    """Send the recorded request body as is through the chat's provider (the wire path:
    signing, the transport, parsing, pricing), and keep the reply as the chat's."""
    provider = chat.provider
    original = provider.body
    provider.body = lambda request: dict(interaction.request_body)  # type: ignore[method-assign]
    try:
        await chat.chat_async("What is 10 + 11?")
    finally:
        provider.body = original  # type: ignore[method-assign]
    turn = chat.last_turn()
    assert turn is not None
    return turn


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["pydantic-ai__test_bedrock_error.yaml", "pydantic-ai__test_bedrock_streaming_error.yaml"],
)
async def test_an_unknown_model_id_says_so(replay, name):
    """The ValidationException for a model id Bedrock does not know: not retried, and the
    error says to check the id, its profile prefix and the region."""
    (recorded,) = load(HERE + name)
    replay.serve(recorded)
    chat = bedrock(replay, model_of(recorded), stream=name.endswith("streaming_error.yaml"))
    with pytest.raises(ve.ProviderError) as info:
        await chat.chat_async("hello")
    error = info.value
    assert error.status == 400
    assert not error.retryable
    assert "The provided model identifier is invalid." in str(error)
    assert "does not know the model id 'us.does-not-exist-model-v1:0'" in str(error)
