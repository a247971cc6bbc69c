"""OpenAI's replies as the live API gave them (`tests/recordings/openai_*`), replayed over
real HTTP through our providers: the Responses API and Chat Completions.

Each test sends what the recording's request asked and checks the turn against the
recording: text, tool calls, reasoning items (their encrypted content and item id), the
finish reason, the usage (derived here by hand from the recorded usage block) and the
cost (from OpenAI's published prices, written out below with where they come from).
"""

from __future__ import annotations

import dataclasses
import http.client
import json
from typing import NamedTuple

import anyio
import pytest

import vitals_engine as ve
from tests.recordings.cassettes import Interaction, load
from tests.replay_server import ReplayServer, chat_options, replies
from vitals_engine.chats.dispatch import call_model
from vitals_engine.vocab.model_calls import ChatRequest, ToolDef

pytestmark = pytest.mark.anyio

M = 1_000_000
RESPONSES = "openai_responses/"
CHAT = "openai_chat/"


class Usd(NamedTuple):
    """Published prices: USD per million tokens; `web_search` per 1,000 calls."""

    input: float
    output: float
    cached: float
    cache_write: float | None = None
    web_search: float | None = None


# OpenAI's pricing page (platform.openai.com/docs/pricing), standard tier, per 1M tokens
# (GPT-5.2 to 5.5 as copies of that page give them: not read from OpenAI's own page here).
GPT_5_5 = Usd(input=5.00, output=30.00, cached=0.50)
GPT_5_4 = Usd(input=2.50, output=15.00, cached=0.25)
GPT_5_2 = Usd(input=1.75, output=14.00, cached=0.175)
GPT_5 = Usd(input=1.25, output=10.00, cached=0.125)
GPT_5_FLEX = Usd(input=0.625, output=5.00, cached=0.0625)  # Flex processing: half price
GPT_5_MINI = Usd(input=0.25, output=2.00, cached=0.025)
GPT_4_1_NANO = Usd(input=0.10, output=0.40, cached=0.025)
GPT_4O = Usd(input=2.50, output=10.00, cached=1.25)
O3_MINI = Usd(input=1.10, output=4.40, cached=0.55)
#: Not in vitals_engine/data/prices.json: GPT-5.6, from OpenAI's preview announcement
#: (June 2026, quoted by Simon Willison and the Help Center preview): Sol $5 / $30, Terra
#: $2.50 / $15, cache reads 90% off, cache writes 1.25x input. The web_search tool: $10
#: per 1,000 calls on every model (pricing page, built-in tools).
GPT_5_6_SOL = Usd(input=5.00, output=30.00, cached=0.50, cache_write=6.25, web_search=10.0)
GPT_5_6_TERRA = Usd(input=2.50, output=15.00, cached=0.25, cache_write=3.125)


def set_published(model: str, price: Usd) -> None:
    ve.set_price(
        "OpenAI",
        model,
        input=price.input,
        output=price.output,
        cached_input=price.cached,
        cache_write=price.cache_write,
        web_search=price.web_search,
    )


# -- the server and the chats -----------------------------------------------------------


def responses(server: ReplayServer, model: str, **options) -> ve.Chat:
    return ve.chat_openai(model, api="responses", **chat_options(server), **options)


def completions(server: ReplayServer, model: str, **options) -> ve.Chat:
    return ve.chat_openai(model, api="chat_completions", **chat_options(server), **options)


def prompt_of(interaction: Interaction, index: int = 0) -> str:
    """The text of the recorded request's `index`-th user message."""
    body = interaction.request_body
    messages = body.get("input") or body.get("messages")
    content = [m for m in messages if m.get("role") == "user"][index]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def output(interaction: Interaction, kind: str) -> list[dict]:
    """The recorded response's output items of one type."""
    return [item for item in interaction.json()["output"] if item["type"] == kind]


# -- the replay server itself --------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        RESPONSES + "llm__test_responses_basic_streaming.yaml",  # event: / data:, LF
        "gemini/chatlas__test_tools_parallel.yaml",  # data: only, CRLF
        "anthropic/llm-anthropic__test_tools.yaml",
    ],
)
async def test_a_recorded_stream_is_served_byte_for_byte(replay, name):
    """The replay server sends a recorded SSE body chunked, with its recorded status and
    content type, and its bytes exactly as recorded."""
    recorded = load(name)[0]
    replay.serve(recorded)
    host, port = replay.base_url.removeprefix("http://").split(":")

    def fetch() -> tuple[int, str | None, str | None, bytes]:
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            connection.request("POST", recorded.path, body=b"{}")
            response = connection.getresponse()
            return (
                response.status,
                response.getheader("transfer-encoding"),
                response.getheader("content-type"),
                response.read(),
            )
        finally:
            connection.close()

    status, framing, kind, body = await anyio.to_thread.run_sync(fetch)

    assert (status, framing, kind) == (200, "chunked", recorded.content_type)
    assert kind.startswith("text/event-stream")
    assert body == recorded.body
    assert replay.received[0].path == recorded.path


# -- Responses API: text ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("llm__test_responses_basic_non_streaming.yaml", False),
        ("llm__test_responses_basic_streaming.yaml", True),
    ],
)
async def test_a_plain_reply_has_its_text_usage_and_price(replay, name, stream):
    """gpt-5.5 answers "pong", whole or streamed: the text, a stop, 11 in and 5 out at
    gpt-5.5's prices; the request keeps nothing at OpenAI and asks for encrypted reasoning."""
    (recorded,) = load(RESPONSES + name)
    replay.serve(recorded)
    chat = responses(replay, "gpt-5.5", reasoning="low", stream=stream)

    assert await chat.chat_async(prompt_of(recorded)) == "pong"

    turn = chat.last_turn()
    assert turn.contents == [ve.ContentText("pong")]
    assert turn.finish_reason == "stop"
    assert turn.model == "gpt-5.5-2026-04-23"
    assert turn.service_tier is None  # "default"
    assert turn.tokens == ve.TokenUsage(input=11 - 0, output=5, reasoning=0)
    assert turn.cost == pytest.approx((11 * GPT_5_5.input + 5 * GPT_5_5.output) / M)
    sent = replay.received[0].body
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["reasoning"] == {"effort": "low"}
    assert sent.get("stream", False) is stream
    assert replay.received[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("mirascope__test_max_tokens__openai_gpt_4o_responses__sync.yaml", False),
        ("mirascope__test_max_tokens__openai_gpt_4o_responses__stream.yaml", True),
    ],
)
async def test_an_incomplete_reply_stopped_at_its_output_limit(replay, name, stream):
    """`status: incomplete` for `max_output_tokens` (streamed: a `response.incomplete`
    event, no `response.completed`) is the truncated text and finish reason max_tokens."""
    (recorded,) = load(RESPONSES + name)
    replay.serve(recorded)
    chat = responses(replay, "gpt-4o", stream=stream, params={"max_tokens": 50})

    text = await chat.chat_async("List all U.S. states.")

    assert text == (
        "Sure! Here is a list of all 50 U.S. states:\n\n1. Alabama\n2. Alaska\n3. Arizona\n"
        "4. Arkansas\n5. California\n6. Colorado\n7. Connecticut\n8. Delaware\n9. Florida"
    )
    turn = chat.last_turn()
    assert turn.finish_reason == "max_tokens"
    assert turn.tokens == ve.TokenUsage(input=14 - 0, output=50)
    assert turn.cost == pytest.approx((14 * GPT_4O.input + 50 * GPT_4O.output) / M)
    assert replay.received[0].body["max_output_tokens"] == 50


async def test_structured_output_is_the_json_text(replay):
    """A `json_schema` reply is its JSON text, parsed into what was asked for."""
    (recorded,) = load(RESPONSES + "chatlas__test_chat_structured.yaml")
    replay.serve(recorded)
    chat = responses(replay, "gpt-5.4")
    schema = recorded.request_body["text"]["format"]["schema"]

    data = await chat.extract_data_async(prompt_of(recorded), type=schema)

    assert data == {"name": "John", "age": 15}
    turn = chat.last_turn()
    assert turn.contents == [ve.ContentText('{"name":"John","age":15}')]
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=44 - 0, output=17)
    assert turn.cost == pytest.approx((44 * GPT_5_4.input + 17 * GPT_5_4.output) / M)
    assert replay.received[0].body["text"]["format"]["type"] == "json_schema"


async def test_cached_input_is_priced_as_cached(replay):
    """4,331 of 4,334 input tokens read from the cache (and `cache_write_tokens: 0`): 3
    uncached, 4,331 cached, at gpt-5.6-terra's prices."""
    (recorded,) = load(RESPONSES + "ellmer__structured-data-examples-summarisation.yml")
    set_published("gpt-5.6-terra", GPT_5_6_TERRA)
    replay.serve(recorded)
    chat = responses(replay, "gpt-5.6-terra")
    schema = recorded.request_body["text"]["format"]["schema"]

    data = await chat.extract_data_async(prompt_of(recorded), type=schema)

    message = output(recorded, "message")[0]
    assert chat.last_turn().text == message["content"][0]["text"]
    assert data["author"] == "Anthropic"
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=4334 - 4331 - 0, output=317, cached_input=4331)
    t = GPT_5_6_TERRA
    assert turn.cost == pytest.approx((3 * t.input + 4331 * t.cached + 317 * t.output) / M)


async def test_a_web_search_reply_counts_its_search_and_cache_writes(replay):
    """A `web_search_call` item is one search ($10 per 1,000); `cache_write_tokens` (4,418,
    undocumented) is input written to the cache, out of `input`; reasoning is output."""
    (recorded,) = load(
        RESPONSES
        + "pydantic-ai__test_openai_responses_model_web_search_tool_without_external_access.yaml"
    )
    set_published("gpt-5.6-sol", GPT_5_6_SOL)
    replay.serve(recorded)
    chat = responses(
        replay, "gpt-5.6", params={"tools": [{"type": "web_search"}], "tool_choice": "auto"}
    )

    await chat.chat_async(prompt_of(recorded))

    turn = chat.last_turn()
    text = output(recorded, "message")[0]["content"][0]["text"]
    assert text.startswith("1889 ([toureiffel.paris]")
    assert turn.contents == [ve.ContentText(text)]
    assert turn.finish_reason == "stop"
    assert turn.model == "gpt-5.6-sol"
    assert turn.tokens == ve.TokenUsage(
        input=8576 - 0 - 4418,
        output=52,
        cached_input=0,
        reasoning=32,
        cache_write=4418,
        web_searches=1,
    )
    s = GPT_5_6_SOL
    tokens = 4158 * s.input + 4418 * s.cache_write + 52 * s.output
    assert turn.cost == pytest.approx(tokens / M + 1 * s.web_search / 1000)
    assert replay.received[0].body["tools"] == [{"type": "web_search"}]


# -- Responses API: reasoning -----------------------------------------------------------


async def test_a_reasoning_summary_and_its_encrypted_content_are_kept(replay):
    """A reasoning item becomes `ContentThinking`: its summary as the text, its encrypted
    content as the signature, its item id as the id; reasoning tokens are output."""
    (recorded,) = load(RESPONSES + "pydantic-ai__test_reasoning_summary_auto.yaml")
    replay.serve(recorded)
    chat = responses(
        replay,
        "gpt-5.2",
        system_prompt="You are a helpful coding assistant.",
        params={"reasoning": {"effort": "high", "summary": "auto"}},
    )

    await chat.chat_async(prompt_of(recorded))

    (reasoning,) = output(recorded, "reasoning")
    (message,) = output(recorded, "message")
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking(
            reasoning["summary"][0]["text"],
            reasoning["encrypted_content"],
            id="rs_0b028a7a2aca8d68006942f4e0d380819398dfa502c33bce7b",
        ),
        ve.ContentText(message["content"][0]["text"]),
    ]
    assert turn.text.startswith("```python\ndef factorial(n: int) -> int:")
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=34 - 0, output=226, reasoning=59)
    assert turn.cost == pytest.approx((34 * GPT_5_2.input + 226 * GPT_5_2.output) / M)
    sent = replay.received[0].body
    assert sent["instructions"] == "You are a helpful coding assistant."
    assert sent["reasoning"] == {"effort": "high", "summary": "auto"}


async def test_a_streamed_reasoning_summary_reads_its_text_and_usage(replay):
    """gpt-5's streamed reply (summary in 320 deltas, then "3"): the reasoning item by its
    id, without encrypted content (none was sent), the text, 32 in and 839 out."""
    first, second = load(
        RESPONSES + "mirascope__test_call_with_thinking__openai_gpt_5_responses__stream.yaml"
    )
    replay.serve(first, second)
    chat = responses(
        replay, "gpt-5", stream=True, params={"reasoning": {"effort": "medium", "summary": "auto"}}
    )

    assert await chat.chat_async(prompt_of(first)) == "3"

    turn = chat.last_turn()
    thinking, text = turn.contents
    assert isinstance(thinking, ve.ContentThinking)
    assert thinking.id == "rs_0a1097cbfef27a8c00696afa2459008196a08a4261aba00f56"
    assert thinking.signature is None
    assert thinking.thinking.startswith("**Exploring prime numbers**")
    assert text == ve.ContentText("3")
    assert turn.finish_reason == "stop"
    assert turn.service_tier is None  # "default"
    assert turn.tokens == ve.TokenUsage(input=32 - 0, output=839, reasoning=832)
    assert turn.cost == pytest.approx((32 * GPT_5.input + 839 * GPT_5.output) / M)

    again = "If you remember what the primes were, then share them, or say 'I don't remember.'"
    assert await chat.chat_async(again) == "I don't remember."

    # Nothing is stored at OpenAI (store: false) and this item has no encrypted content:
    # it cannot go back, so the next request holds the text only.
    sent = replay.received[1].body["input"]
    assert [item.get("type", item.get("role")) for item in sent] == ["user", "assistant", "user"]
    assert sent[1] == {"role": "assistant", "content": "3"}
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking("", None, id="rs_0a1097cbfef27a8c00696afa340cac81969cbdf59ae7fcc4d7"),
        ve.ContentText("I don't remember."),
    ]
    assert turn.tokens == ve.TokenUsage(input=62 - 0, output=10, reasoning=0)


async def test_a_reasoning_summary_in_parts_keeps_them_apart(replay):
    """The three `summary_text` parts of one reasoning item stay paragraphs of the thinking
    text, not one run-on string."""
    first, _ = load(
        RESPONSES + "mirascope__test_call_with_thinking__openai_gpt_5_responses__stream.yaml"
    )
    replay.serve(first)
    chat = responses(replay, "gpt-5", stream=True)

    await chat.chat_async(prompt_of(first))

    completed = next(e for e in first.events() if e["type"] == "response.completed")
    summary = completed["response"]["output"][0]["summary"]
    assert len(summary) == 3
    thinking = chat.last_turn().contents[0]
    assert thinking.thinking == "\n\n".join(part["text"] for part in summary)


async def test_encrypted_reasoning_goes_back_with_the_tool_loop(replay):
    """gpt-5.5's tool loop over three requests: the reasoning item of the first reply
    (encrypted, no summary) is sent back, by id, before its function call and output, and
    each reply is read and priced alone."""
    recorded = load(RESPONSES + "llm__test_responses_round_trips_encrypted_reasoning.yaml")
    replay.serve(*recorded)
    chat = responses(replay, "gpt-5.5", reasoning="high")

    def lookup_population(country: str) -> int:
        """Returns the current population of the specified fictional country."""
        return 123124

    def can_have_dragons(population: int) -> bool:
        """Returns True if the specified population can have dragons."""
        return True

    chat.register_tool(lookup_population)
    chat.register_tool(can_have_dragons)

    text = await chat.chat_async(prompt_of(recorded[0]))

    assert text == "Pundora has a population of 123,124 — and yes, it can have dragons."
    assert not replay.unserved
    (reasoning,) = output(recorded[0], "reasoning")
    reasoning_id = "rs_0f4809b27460351d0169fab21897dc8196960e8680fb72a88d"
    first, second, third = replies(chat)
    assert first.contents == [
        ve.ContentThinking("", reasoning["encrypted_content"], id=reasoning_id),
        ve.ContentToolRequest(
            "call_uy7tfNVokIN7NjFF6k7OtLyl", "lookup_population", {"country": "Pundora"}
        ),
    ]
    assert first.finish_reason == "tool_calls"
    assert first.tokens == ve.TokenUsage(input=94 - 0, output=85, reasoning=63)
    assert first.cost == pytest.approx((94 * GPT_5_5.input + 85 * GPT_5_5.output) / M)
    assert second.contents == [
        ve.ContentToolRequest(
            "call_jwY8kllWAsnoSXtjXZQ5KR6i", "can_have_dragons", {"population": 123124}
        )
    ]
    assert second.tokens == ve.TokenUsage(input=192 - 0, output=21, reasoning=0)
    assert third.finish_reason == "stop"
    assert third.tokens == ve.TokenUsage(input=227 - 0, output=24, reasoning=0)
    assert third.cost == pytest.approx((227 * GPT_5_5.input + 24 * GPT_5_5.output) / M)

    sent = replay.received[2].body["input"]
    assert sent[1:] == [
        {
            "type": "reasoning",
            "id": reasoning_id,
            "summary": [],
            "encrypted_content": reasoning["encrypted_content"],
        },
        {
            "type": "function_call",
            "call_id": "call_uy7tfNVokIN7NjFF6k7OtLyl",
            "name": "lookup_population",
            "arguments": '{"country":"Pundora"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_uy7tfNVokIN7NjFF6k7OtLyl",
            "output": "123124",
        },
        {
            "type": "function_call",
            "call_id": "call_jwY8kllWAsnoSXtjXZQ5KR6i",
            "name": "can_have_dragons",
            "arguments": '{"population":123124}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_jwY8kllWAsnoSXtjXZQ5KR6i",
            "output": "true",
        },
    ]
    # the same items, in the same order, as the recorded request that got this reply
    recorded_kinds = [i.get("type", "message") for i in recorded[2].request_body["input"]]
    assert [i.get("type", "message") for i in sent] == recorded_kinds


async def test_reasoning_between_tool_calls_goes_back_in_order(replay):
    """Four rounds of reasoning and calls: each request carries every earlier reasoning
    item before its own call, as the recording's did; the last reply's five parallel
    calls come back with their ids and arguments."""
    recorded = load(RESPONSES + "llm__test_responses_interleaved_reasoning_between_tool_calls.yaml")
    replay.serve(*recorded)
    provider = responses(replay, "gpt-5.5", reasoning="high").provider
    lookup = ToolDef(
        "db_lookup",
        "Look a key up in the database.",
        {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    )
    # what the tool answered, as the next recorded request says
    answers = {
        "start": "Begin with the value 7.",
        "7": "unknown key",
        "step1": "unknown key",
    }
    turns = [ve.Turn.user(prompt_of(recorded[0]))]
    got = []
    for _ in recorded:
        turn = await call_model(provider, ChatRequest(list(turns), tools=[lookup]))
        got.append(turn)
        turns.append(turn)
        results = [
            ve.ContentToolResult(c.id, c.name, answers.get(c.arguments["key"], "unknown key"))
            for c in turn.tool_requests
        ]
        turns.append(ve.Turn("user", results))
    assert not replay.unserved

    usage = [(88, 65, 45), (171, 118, 98), (302, 217, 196), (532, 119, 17)]
    for turn, interaction, (inp, out, reasoning) in zip(got, recorded, usage, strict=True):
        (item,) = output(interaction, "reasoning")
        calls = output(interaction, "function_call")
        assert turn.contents[0] == ve.ContentThinking("", item["encrypted_content"], id=item["id"])
        assert turn.tool_requests == [
            ve.ContentToolRequest(c["call_id"], "db_lookup", {"key": _key(c)}) for c in calls
        ]
        assert turn.finish_reason == "tool_calls"
        assert turn.tokens == ve.TokenUsage(input=inp - 0, output=out, reasoning=reasoning)
        assert turn.cost == pytest.approx((inp * GPT_5_5.input + out * GPT_5_5.output) / M)
    assert [c.arguments["key"] for c in got[3].tool_requests] == [
        "begin",
        "value",
        "the value 7",
        "Begin with the value 7.",
        "start2",
    ]
    for ours, theirs in zip(replay.received, recorded, strict=True):
        assert _shape(ours.body["input"]) == _shape(theirs.request_body["input"])


def _key(call: dict) -> str:
    return json.loads(call["arguments"])["key"]


def _shape(items: list[dict]) -> list[tuple]:
    """Input items as (type, reasoning id or call id, encrypted content, output)."""
    return [
        (
            item.get("type", "message"),
            item.get("id") if item.get("type") == "reasoning" else item.get("call_id"),
            item.get("encrypted_content"),
            item.get("output"),
        )
        for item in items
    ]


async def test_a_streamed_function_call_and_flex_tier(replay):
    """Streamed: the reasoning item and a function call whose arguments came in deltas are
    read from `response.completed`; its usage (448 reasoning tokens) is only there; the
    flex tier that served it prices it at flex prices."""
    (recorded,) = load(RESPONSES + "pydantic-ai__test_openai_responses_streaming_usage.yaml")
    replay.serve(recorded)
    provider = responses(
        replay,
        "gpt-5",
        stream=True,
        reasoning="low",
        params={"service_tier": "flex", "tool_choice": "required"},
    ).provider
    final_result = ToolDef(
        "final_result",
        "The final response.",
        {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
    )

    turn = await call_model(
        provider, ChatRequest([ve.Turn.user(prompt_of(recorded))], tools=[final_result])
    )

    completed = next(e for e in recorded.events() if e["type"] == "response.completed")
    reasoning = completed["response"]["output"][0]
    assert turn.contents == [
        ve.ContentThinking("", reasoning["encrypted_content"], id=reasoning["id"]),
        ve.ContentToolRequest("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666}),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.service_tier == "flex"
    assert turn.tokens == ve.TokenUsage(input=53 - 0, output=469, reasoning=448)
    assert turn.cost == pytest.approx((53 * GPT_5_FLEX.input + 469 * GPT_5_FLEX.output) / M)
    assert replay.received[0].body["stream"] is True


async def test_a_refused_reasoning_history_then_a_fresh_reply(replay):
    """gpt-5 with a detailed summary; then a 400 for a reasoning item "without its required
    following item" is a ProviderError with OpenAI's words (our request did send the
    reasoning item with its message after it); then the next reply reads as usual."""
    first, refused, third = load(
        RESPONSES + "pydantic-ai__test_openai_responses_thinking_with_modified_history.yaml"
    )
    replay.serve(first, refused, third)
    chat = responses(
        replay, "gpt-5", params={"reasoning": {"effort": "low", "summary": "detailed"}}
    )

    await chat.chat_async("What is the meaning of life?")

    (reasoning,) = output(first, "reasoning")
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking(
            reasoning["summary"][0]["text"], reasoning["encrypted_content"], id=reasoning["id"]
        ),
        ve.ContentText(output(first, "message")[0]["content"][0]["text"]),
    ]
    assert turn.tokens == ve.TokenUsage(input=13 - 0, output=248, reasoning=64)
    assert turn.cost == pytest.approx((13 * GPT_5.input + 248 * GPT_5.output) / M)

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("Anything to add?")
    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 400
    assert caught.value.message == (
        "Item 'rs_68c42de022c881948db7ed1cc2529f2e0202c9ad459e0d23' of type 'reasoning' was "
        "provided without its required following item."
    )
    sent = replay.received[1].body["input"]
    assert [item.get("type", item.get("role")) for item in sent] == [
        "user",
        "reasoning",
        "assistant",
        "user",
    ]
    assert len(chat.turns) == 2  # the failed exchange left the conversation as it was

    await chat.chat_async("Anything to add?")

    turn = chat.last_turn()
    assert turn.text == output(third, "message")[0]["content"][0]["text"]
    assert turn.tokens == ve.TokenUsage(input=142 - 0, output=355, reasoning=128)
    assert not replay.unserved


async def test_parallel_function_calls_and_their_outputs(replay):
    """gpt-4.1-nano calls `dice` twice in one reply; both outputs go back by call id and the
    final text is read; each reply is priced alone."""
    first, second = load(RESPONSES + "ellmer__chat-tools-parallel.yml")
    replay.serve(first, second)
    chat = responses(replay, "gpt-4.1-nano", system_prompt="Be terse", params={"temperature": 0})
    rolls = iter([2, 5])

    def dice() -> int:
        """Rolls a six-sided die"""
        return next(rolls)

    chat.register_tool(dice)

    assert await chat.chat_async("Roll two dice and compute the total.") == "The total is 7."
    assert not replay.unserved

    calls, answer = replies(chat)
    assert calls.contents == [
        ve.ContentToolRequest("call_xseDNO4uZC4ayRmQEcIj7tX9", "dice", {}),
        ve.ContentToolRequest("call_2rGZg0Ye80XFPI8l6Law8ouK", "dice", {}),
    ]
    assert calls.finish_reason == "tool_calls"
    assert calls.tokens == ve.TokenUsage(input=44 - 0 - 0, output=40)
    assert calls.cost == pytest.approx((44 * GPT_4_1_NANO.input + 40 * GPT_4_1_NANO.output) / M)
    assert answer.finish_reason == "stop"
    assert answer.tokens == ve.TokenUsage(input=78 - 0 - 0, output=8)
    assert answer.cost == pytest.approx((78 * GPT_4_1_NANO.input + 8 * GPT_4_1_NANO.output) / M)
    sent = replay.received[1].body
    assert sent["instructions"] == "Be terse"
    outputs = [i for i in sent["input"] if i.get("type") == "function_call_output"]
    assert [i["call_id"] for i in outputs] == [c.id for c in calls.tool_requests]
    assert sorted(i["output"] for i in outputs) == ["2", "5"]


# -- Responses API: errors --------------------------------------------------------------


async def test_an_unknown_model_is_a_400_provider_error_not_a_config_error(replay):
    """/v1/responses answers an unknown model with a 400 `model_not_found`: a ProviderError
    with OpenAI's words, sent once (a 400 is not retried)."""
    recorded = load(RESPONSES + "mirascope__test_model_not_found__openai_gpt_4o_responses.yaml")
    replay.serve(*recorded)
    chat = responses(replay, "this-model-does-not-exist-12345")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("This should fail with NotFoundError")

    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 400
    assert caught.value.retryable is False
    assert caught.value.message == (
        "The requested model 'this-model-does-not-exist-12345' does not exist."
    )
    assert len(replay.received) == 1


async def test_a_404_that_names_the_model_is_not_the_wrong_api_config_error(replay):
    """OpenAI's recorded 404 `model_not_found` body (Chat Completions' answer), served at
    /v1/responses: the endpoint exists, so it is a "not found" ProviderError, not the
    ConfigError that says the server does not speak the Responses API."""
    recorded = load(CHAT + "mirascope__test_model_not_found__openai_gpt_4o_completions.yaml")[0]
    replay.serve(dataclasses.replace(recorded, path="/v1/responses"))
    chat = responses(replay, "this-model-does-not-exist-12345")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("This should fail with NotFoundError")

    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 404
    assert "does not exist or you do not have access to it" in caught.value.message


async def test_a_refused_parameter_on_a_streamed_request_is_a_400(replay):
    """A streamed request with temperature -1 gets a whole JSON 400, not a stream: a
    ProviderError with OpenAI's words."""
    (recorded,) = load(RESPONSES + "pydantic-ai__test_openai_responses_model_http_error.yaml")
    replay.serve(recorded)
    chat = responses(replay, "gpt-4o", stream=True, params={"temperature": -1})

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("What is the capital of France?")

    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 400
    assert caught.value.message == (
        "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got "
        "-1 instead."
    )
    assert replay.received[0].body["stream"] is True


async def test_insufficient_quota_inside_a_stream_is_quota_exhausted(replay):
    """A 200 stream whose third event is an `error` of type `insufficient_quota` (then
    `response.failed`) is QuotaExhausted, which stops the run, with OpenAI's words."""
    (recorded,) = load(RESPONSES + "vercel-ai__openai-error.1.chunks.txt")
    replay.serve(recorded)
    chat = responses(replay, "gpt-5-nano", stream=True)

    with pytest.raises(ve.QuotaExhausted) as caught:
        await chat.chat_async("Hello")

    assert caught.value.stops_run is True
    assert caught.value.retryable is False
    assert "You exceeded your current quota" in caught.value.message
    assert "after 2 events" in caught.value.message


async def test_insufficient_quota_inside_a_stream_carries_status_429(replay):
    """The quota error event stands for a 429 (`insufficient_quota`), and says so."""
    (recorded,) = load(RESPONSES + "vercel-ai__openai-error.1.chunks.txt")
    replay.serve(recorded)
    chat = responses(replay, "gpt-5-nano", stream=True)

    with pytest.raises(ve.QuotaExhausted) as caught:
        await chat.chat_async("Hello")

    assert caught.value.status == 429


async def test_insufficient_quota_as_a_429_body_is_quota_exhausted(replay):
    """OpenAI's `insufficient_quota` error body (status assumed 429: not recorded) is
    QuotaExhausted, not a RateLimitError to wait out."""
    (recorded,) = load(RESPONSES + "vercel-ai__openai-error.1.json")
    replay.serve(recorded)
    chat = responses(replay, "gpt-5-nano")

    with pytest.raises(ve.QuotaExhausted) as caught:
        await chat.chat_async("Hello")

    assert not isinstance(caught.value, ve.RateLimitError)
    assert caught.value.status == 429
    assert "You exceeded your current quota" in caught.value.message
    assert len(replay.received) == 1


# -- Chat Completions -------------------------------------------------------------------


async def test_chat_completions_cached_prompt_tokens(replay):
    """The same long system prompt twice: the first reply reads 3,659 uncached input, the
    second 3,584 of its 3,663 from the cache (`prompt_tokens_details.cached_tokens`)."""
    first, second = load(
        CHAT + "mirascope__test_caching_system_message__openai_gpt_4o_completions.yaml"
    )
    replay.serve(first, second)
    system = first.request_body["messages"][0]["content"]

    hello = completions(replay, "gpt-4o", system_prompt=system)
    await hello.chat_async("Hello there.")
    breakfast = completions(replay, "gpt-4o", system_prompt=system)
    await breakfast.chat_async("What should I have for breakfast?")

    turn = hello.last_turn()
    assert turn.text == first.json()["choices"][0]["message"]["content"]
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=3659 - 0, output=28)
    assert turn.cost == pytest.approx((3659 * GPT_4O.input + 28 * GPT_4O.output) / M)
    turn = breakfast.last_turn()
    assert turn.text == second.json()["choices"][0]["message"]["content"]
    assert turn.tokens == ve.TokenUsage(input=3663 - 3584, output=117, cached_input=3584)
    cost = 79 * GPT_4O.input + 3584 * GPT_4O.cached + 117 * GPT_4O.output
    assert turn.cost == pytest.approx(cost / M)
    assert replay.received[1].body["messages"][0] == {"role": "system", "content": system}


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("mirascope__test_max_tokens__openai_gpt_5_mini_completions__sync.yaml", False),
        ("mirascope__test_max_tokens__openai_gpt_5_mini_completions__stream.yaml", True),
    ],
)
async def test_a_reply_whose_budget_went_to_reasoning(replay, name, stream):
    """gpt-5-mini spent all 50 tokens reasoning: no text, finish reason max_tokens, 50
    output tokens all reasoning (streamed: from the usage-only last chunk)."""
    (recorded,) = load(CHAT + name)
    replay.serve(recorded)
    chat = completions(replay, "gpt-5-mini", stream=stream, params={"max_tokens": 50})

    assert await chat.chat_async("List all U.S. states.") == ""

    turn = chat.last_turn()
    assert turn.contents == []
    assert turn.finish_reason == "max_tokens"
    assert turn.tokens == ve.TokenUsage(input=13 - 0, output=50, reasoning=50)
    assert turn.cost == pytest.approx((13 * GPT_5_MINI.input + 50 * GPT_5_MINI.output) / M)
    sent = replay.received[0].body
    assert sent["max_completion_tokens"] == 50
    assert "max_tokens" not in sent
    if stream:
        assert sent["stream_options"] == {"include_usage": True}


async def test_a_refused_stop_parameter_then_the_reply_without_it(replay):
    """gpt-5-mini refuses `stop` with a 400 `unsupported_parameter`: a ProviderError with
    OpenAI's words; the request without it is answered."""
    refused, answered = load(
        CHAT + "mirascope__test_call_with_params__openai_gpt_5_mini_completions.yaml"
    )
    replay.serve(refused, answered)
    params = {"max_tokens": 500, "seed": 42}

    with pytest.raises(ve.ProviderError) as caught:
        await completions(replay, "gpt-5-mini", params={**params, "stop": ["4242"]}).chat_async(
            "What is 4200 + 42?"
        )
    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 400
    assert caught.value.message == "Unsupported parameter: 'stop' is not supported with this model."

    chat = completions(replay, "gpt-5-mini", params=params)
    assert await chat.chat_async("What is 4200 + 42?") == "4242"
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=15 - 0, output=11, reasoning=0)
    assert turn.cost == pytest.approx((15 * GPT_5_MINI.input + 11 * GPT_5_MINI.output) / M)
    assert replay.received[1].body["max_completion_tokens"] == 500


async def test_chat_completions_unknown_model_is_a_404_not_found(replay):
    """/v1/chat/completions answers an unknown model with a 404: a "not found" ProviderError
    naming the model, sent once."""
    recorded = load(CHAT + "mirascope__test_model_not_found__openai_gpt_4o_completions.yaml")
    replay.serve(*recorded)
    chat = completions(replay, "this-model-does-not-exist-12345")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("This should fail with NotFoundError")

    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 404
    assert caught.value.retryable is False
    assert "The model `this-model-does-not-exist-12345` does not exist" in caught.value.message
    assert "Check the model name 'this-model-does-not-exist-12345'" in caught.value.message
    assert len(replay.received) == 1


async def test_o1_mini_gets_its_system_prompt_as_the_opening_user_message(replay):
    """The recording is o1-mini refusing the `developer` role (400 `unsupported_value`,
    OpenAI's words kept below): our request sends such a model's system prompt as the
    opening user message instead. (The replay answers with the recorded refusal whatever
    we send, so the error is the recording's.)"""
    (recorded,) = load(CHAT + "pydantic-ai__test_openai_o1_mini_system_role[developer].yaml")
    assert recorded.request_body["messages"][0]["role"] == "developer"
    replay.serve(recorded)
    chat = completions(replay, "o1-mini", system_prompt="You are a helpful assistant.")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("Hello")

    assert caught.value.status == 400
    assert caught.value.message == (
        "Unsupported value: 'messages[0].role' does not support 'developer' with this model."
    )
    assert replay.received[0].body["messages"][0] == {
        "role": "user",
        "content": "You are a helpful assistant.",
    }


async def test_reasoning_tokens_of_a_chat_completion(replay):
    """o3-mini: 64 of its 87 completion tokens were reasoning; `max_tokens` went as
    `max_completion_tokens`."""
    (recorded,) = load(CHAT + "pydantic-ai__test_max_completion_tokens[o3-mini].yaml")
    replay.serve(recorded)
    chat = completions(replay, "o3-mini", params={"max_tokens": 100})

    assert await chat.chat_async("hello") == "Hello there! How can I help you today?"

    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert turn.model == "o3-mini-2025-01-31"
    assert turn.tokens == ve.TokenUsage(input=7 - 0, output=87, reasoning=64)
    assert turn.cost == pytest.approx((7 * O3_MINI.input + 87 * O3_MINI.output) / M)
    assert replay.received[0].body["max_completion_tokens"] == 100


async def test_parallel_tool_calls_of_a_chat_completion(replay):
    """gpt-4.1-nano calls two tools at once (content null): both go back as `tool` messages
    by id; the answer, and a follow-up question in the same chat, are read and priced."""
    recorded = load(CHAT + "ellmer__openai-tool.yml")
    replay.serve(*recorded)
    chat = completions(
        replay,
        "gpt-4.1-nano",
        system_prompt="Always use a tool to answer. Reply with 'It is ____.'.",
        params={"seed": 1014, "temperature": 0},
    )

    def current_date() -> str:
        """Gets the current date"""
        return "2024-01-01"

    def current_month() -> str:
        """Gets the current month"""
        return "February"

    chat.register_tool(current_date)
    chat.register_tool(current_month)

    assert await chat.chat_async("What's the current date in Y-M-D format?") == (
        "It is 2024-01-01."
    )
    assert await chat.chat_async("What month is it? Provide the full name") == "It is February."
    assert not replay.unserved

    calls, date, month = replies(chat)
    assert calls.contents == [
        ve.ContentToolRequest("call_yhGyidjUReGGf2WQsn5XKimB", "current_date", {}),
        ve.ContentToolRequest("call_iRYEuLBYtXfpVzzRpU6vqdzt", "current_month", {}),
    ]
    assert calls.finish_reason == "tool_calls"
    assert calls.tokens == ve.TokenUsage(input=78 - 0, output=39)
    assert date.tokens == ve.TokenUsage(input=138 - 0, output=11)
    assert month.tokens == ve.TokenUsage(input=165 - 0, output=5)
    n = GPT_4_1_NANO
    for turn, (inp, out) in zip((calls, date, month), [(78, 39), (138, 11), (165, 5)], strict=True):
        assert turn.cost == pytest.approx((inp * n.input + out * n.output) / M)
    sent = replay.received[1].body["messages"]
    assert sent[2]["tool_calls"] == [
        {
            "id": "call_yhGyidjUReGGf2WQsn5XKimB",
            "type": "function",
            "function": {"name": "current_date", "arguments": "{}"},
        },
        {
            "id": "call_iRYEuLBYtXfpVzzRpU6vqdzt",
            "type": "function",
            "function": {"name": "current_month", "arguments": "{}"},
        },
    ]
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": "call_yhGyidjUReGGf2WQsn5XKimB", "content": "2024-01-01"},
        {"role": "tool", "tool_call_id": "call_iRYEuLBYtXfpVzzRpU6vqdzt", "content": "February"},
    ]
