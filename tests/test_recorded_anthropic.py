"""Anthropic's replies as the live Messages API gave them (`tests/recordings/anthropic`),
replayed over real HTTP through our provider.

Each test sends what the recording's request asked and checks the turn against the
recording: text, tool calls, thinking (with its signature), the finish reason, the usage
(derived here by hand from the recorded usage block, `iterations` and paused replies
summed) and the cost (from Anthropic's published prices, written out below).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

import vitals_engine as ve
from tests.recordings.cassettes import Interaction, load
from tests.replay_server import ReplayServer, chat_options, replies

pytestmark = pytest.mark.anyio

M = 1_000_000
HERE = "anthropic/"
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search"}


class Usd(NamedTuple):
    """Published prices, USD per million tokens: input, output, cache reads, 5-minute and
    1-hour cache writes; web search in USD per 1,000 searches."""

    input: float
    output: float
    cached: float
    write_5m: float
    write_1h: float
    web_search: float = 10.0  # Anthropic's web search tool: $10 per 1,000 searches


# Anthropic's pricing page (platform.claude.com/docs/en/about-claude/pricing): cache
# writes 1.25x input for 5 minutes and 2x for an hour, cache reads 0.1x.
SONNET_4 = Usd(input=3.00, output=15.00, cached=0.30, write_5m=3.75, write_1h=6.00)
SONNET_4_6 = SONNET_4
HAIKU_4_5 = Usd(input=1.00, output=5.00, cached=0.10, write_5m=1.25, write_1h=2.00)
OPUS_4_1 = Usd(input=15.00, output=75.00, cached=1.50, write_5m=18.75, write_1h=30.00)
#: Sonnet 4.5 with the 1M context, a request over 200K input tokens: the whole request at
#: $6 / $22.50 (cache prices scaled alike).
SONNET_4_5_LONG = Usd(input=6.00, output=22.50, cached=0.60, write_5m=7.50, write_1h=12.00)
#: Not in vitals_engine/data/prices.json: Claude Sonnet 5, from its model page
#: (platform.claude.com/docs/en/models/sonnet-5/overview): $2 input, $10 output, $2.50
#: 5-minute and $4 1-hour cache writes, $0.20 cache reads.
SONNET_5 = Usd(input=2.00, output=10.00, cached=0.20, write_5m=2.50, write_1h=4.00)


def set_sonnet_5() -> None:
    s = SONNET_5
    ve.set_price(
        "Anthropic", "claude-sonnet-5", input=s.input, output=s.output, cached_input=s.cached,
        cache_write=s.write_5m, cache_write_1h=s.write_1h, web_search=s.web_search,
    )  # fmt: skip


# -- the server and the chats -----------------------------------------------------------


def claude(server: ReplayServer, model: str, **options) -> ve.Chat:
    return ve.chat_anthropic(model, **chat_options(server, "/v1"), **options)


def prompt_of(interaction: Interaction) -> str:
    """The text of the recorded request's first user message."""
    content = interaction.request_body["messages"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def blocks(interaction: Interaction, kind: str) -> list[dict]:
    """The recorded reply's content blocks of one type."""
    return [block for block in interaction.json()["content"] if block["type"] == kind]


def texts(interaction: Interaction) -> list[ve.ContentText]:
    return [ve.ContentText(block["text"]) for block in blocks(interaction, "text")]


def streamed(interaction: Interaction, delta: str, key: str) -> str:
    """What the recorded stream's deltas of one type add up to."""
    return "".join(
        event["delta"][key]
        for event in interaction.events()
        if event["type"] == "content_block_delta" and event["delta"]["type"] == delta
    )


# -- text, caching, limits ----------------------------------------------------------------


async def test_a_plain_reply_has_its_text_usage_and_price(replay):
    """claude-sonnet-5 answers "2": 30 in, 3 out (of which 0 thinking), nothing cached,
    at Sonnet 5's published prices."""
    (recorded,) = load(HERE + "ellmer__anthropic-basic.yml")
    set_sonnet_5()
    replay.serve(recorded)
    chat = claude(
        replay, "claude-sonnet-5", system_prompt="Be as terse as possible; no punctuation"
    )

    assert await chat.chat_async("What is 1 + 1?") == "2"

    turn = chat.last_turn()
    assert turn.contents == [ve.ContentText("2")]
    assert turn.finish_reason == "stop"
    assert turn.model == "claude-sonnet-5"
    assert turn.service_tier is None  # "standard"
    assert turn.tokens == ve.TokenUsage(input=30, output=3, reasoning=0)
    assert turn.cost == pytest.approx((30 * SONNET_5.input + 3 * SONNET_5.output) / M)
    sent = replay.received[0]
    assert sent.headers["x-api-key"] == "sk-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body["system"] == "Be as terse as possible; no punctuation"


async def test_a_cached_system_prompt_is_written_then_read(replay):
    """A 15K-character system prompt marked for the cache: the first reply wrote 4,167
    tokens (5-minute), the second read them; each is priced with its cache price."""
    first, second = load(
        HERE + "mirascope__test_caching_system_message__anthropic_claude_sonnet_4_0.yaml"
    )
    replay.serve(first, second)
    system = first.request_body["system"][0]["text"]

    hello = claude(replay, "claude-sonnet-4-0", system_prompt=system)
    await hello.chat_async("Hello there.")
    breakfast = claude(replay, "claude-sonnet-4-0", system_prompt=system)
    await breakfast.chat_async("What should I have for breakfast?")

    turn = hello.last_turn()
    assert turn.contents == texts(first)
    assert turn.model == "claude-sonnet-4-20250514"
    assert turn.tokens == ve.TokenUsage(input=8, output=204, cache_write=4167, cache_write_1h=0)
    s = SONNET_4
    assert turn.cost == pytest.approx((8 * s.input + 4167 * s.write_5m + 204 * s.output) / M)
    turn = breakfast.last_turn()
    assert turn.contents == texts(second)
    assert turn.tokens == ve.TokenUsage(input=12, output=350, cached_input=4167)
    assert turn.cost == pytest.approx((12 * s.input + 4167 * s.cached + 350 * s.output) / M)
    assert replay.received[0].body["system"] == [
        {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
    ]


async def test_a_reply_cut_at_max_tokens(replay):
    """`stop_reason: max_tokens` is finish reason max_tokens, with the text so far."""
    (recorded,) = load(HERE + "mirascope__test_max_tokens__anthropic_claude_sonnet_4_0__sync.yaml")
    replay.serve(recorded)
    chat = claude(replay, "claude-sonnet-4-0", params={"max_tokens": 50})

    text = await chat.chat_async("List all U.S. states.")

    assert text == blocks(recorded, "text")[0]["text"]
    assert text.endswith("7. Connecticut\n8. Delaware\n9")
    turn = chat.last_turn()
    assert turn.finish_reason == "max_tokens"
    assert turn.tokens == ve.TokenUsage(input=15, output=50)
    assert turn.cost == pytest.approx((15 * SONNET_4.input + 50 * SONNET_4.output) / M)
    assert replay.received[0].body["max_tokens"] == 50


# -- thinking -----------------------------------------------------------------------------


async def test_thinking_keeps_its_signature(replay):
    """Extended thinking, whole: the thinking block (its text and signature), then "3"."""
    (recorded,) = load(
        HERE
        + "mirascope__test_call_with_thinking_no_include_thoughts__anthropic_claude_sonnet_4_0"
        + "__sync.yaml"
    )
    replay.serve(recorded)
    chat = claude(replay, "claude-sonnet-4-0", reasoning=6400, params={"max_tokens": 16000})

    assert await chat.chat_async(prompt_of(recorded)) == "3"

    (thinking,) = blocks(recorded, "thinking")
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking(thinking["thinking"], thinking["signature"]),
        ve.ContentText("3"),
    ]
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=67, output=933)
    assert turn.cost == pytest.approx((67 * SONNET_4.input + 933 * SONNET_4.output) / M)
    assert replay.received[0].body["thinking"] == {"type": "enabled", "budget_tokens": 6400}


async def test_streamed_thinking_and_its_signature_delta(replay):
    """Streamed thinking: the thinking deltas joined, the signature from its
    `signature_delta`, the text deltas joined; the final usage from `message_delta`."""
    (recorded,) = load(HERE + "llm-anthropic__test_stream_events_thinking.yaml")
    replay.serve(recorded)
    chat = claude(
        replay,
        "claude-haiku-4-5-20251001",
        stream=True,
        reasoning=1024,
        params={"max_tokens": 8192, "temperature": 1.0},
    )

    text = await chat.chat_async("Two names for a pet pelican, be brief")

    signature = streamed(recorded, "signature_delta", "signature")
    assert len(signature) == 656
    assert text == (
        '1. **Pouch** - references their iconic bill pouch\n2. **Pelé** - playful take on "pelican"'
    )
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking(streamed(recorded, "thinking_delta", "thinking"), signature),
        ve.ContentText(text),
    ]
    assert turn.contents[0].thinking.startswith("The user wants two names for a pet pelican")
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=46, output=133)
    assert turn.cost == pytest.approx((46 * HAIKU_4_5.input + 133 * HAIKU_4_5.output) / M)
    assert replay.received[0].body["stream"] is True


# -- tools ----------------------------------------------------------------------------------


async def test_parallel_tool_use_and_its_results(replay):
    """Text and two `tool_use` blocks (stop_reason tool_use), then the answer: the calls go
    back as the assistant's blocks and the results as `tool_result` blocks, by id."""
    first, second = load(
        HERE + "mirascope__test_call_with_tools__anthropic_claude_sonnet_4_0__sync.yaml"
    )
    replay.serve(first, second)
    chat = claude(replay, "claude-sonnet-4-0", system_prompt="Use parallel tool calling.")
    secrets = {"mellon": "Welcome to Moria!", "radiance": "Life before Death"}

    def secret_retrieval_tool(password: str) -> str:
        """A tool that requires a password to retrieve a secret."""
        return secrets[password]

    chat.register_tool(secret_retrieval_tool)

    text = await chat.chat_async(prompt_of(first))

    assert not replay.unserved
    assert text == texts(second)[0].text
    calls, answer = replies(chat)
    assert calls.contents == [
        ve.ContentText("I'll retrieve the secrets for both passwords you provided."),
        ve.ContentToolRequest(
            "toolu_01BUvqBj8Yb34pNAbCJJY1oc", "secret_retrieval_tool", {"password": "mellon"}
        ),
        ve.ContentToolRequest(
            "toolu_01VPuQJ1LonDBYXrr8pqPkqQ", "secret_retrieval_tool", {"password": "radiance"}
        ),
    ]
    assert calls.finish_reason == "tool_calls"
    assert calls.tokens == ve.TokenUsage(input=416, output=109)
    assert calls.cost == pytest.approx((416 * SONNET_4.input + 109 * SONNET_4.output) / M)
    assert answer.finish_reason == "stop"
    assert answer.tokens == ve.TokenUsage(input=602, output=39)
    assert answer.cost == pytest.approx((602 * SONNET_4.input + 39 * SONNET_4.output) / M)
    sent = replay.received[1].body["messages"]
    assert sent[1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": calls.contents[0].text},
                {
                    "type": "tool_use",
                    "id": "toolu_01BUvqBj8Yb34pNAbCJJY1oc",
                    "name": "secret_retrieval_tool",
                    "input": {"password": "mellon"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01VPuQJ1LonDBYXrr8pqPkqQ",
                    "name": "secret_retrieval_tool",
                    "input": {"password": "radiance"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01BUvqBj8Yb34pNAbCJJY1oc",
                    "content": "Welcome to Moria!",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01VPuQJ1LonDBYXrr8pqPkqQ",
                    "content": "Life before Death",
                },
            ],
        },
    ]


async def test_streamed_parallel_tool_use_with_empty_input(replay):
    """Streamed: two `tool_use` blocks whose input came as one empty `input_json_delta`
    each are calls with no arguments; the answer after their results is read."""
    first, second = load(HERE + "llm-anthropic__test_tools.yaml")
    replay.serve(first, second)
    chat = claude(
        replay,
        "claude-haiku-4-5-20251001",
        stream=True,
        params={"max_tokens": 8192, "temperature": 1.0},
    )
    names = iter(["Charles", "Sammy"])

    def pelican_name_generator() -> str:
        """Generate a name for a pet pelican"""
        return next(names)

    chat.register_tool(pelican_name_generator)

    text = await chat.chat_async("Two names for a pet pelican")

    assert not replay.unserved
    assert text == streamed(second, "text_delta", "text")
    assert text.startswith("Here are two great names for your pet pelican:")
    calls, answer = replies(chat)
    assert calls.contents == [
        ve.ContentToolRequest("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
        ve.ContentToolRequest("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
    ]
    assert calls.finish_reason == "tool_calls"
    assert calls.tokens == ve.TokenUsage(input=542, output=62)
    assert calls.cost == pytest.approx((542 * HAIKU_4_5.input + 62 * HAIKU_4_5.output) / M)
    assert answer.tokens == ve.TokenUsage(input=678, output=82)
    assert answer.cost == pytest.approx((678 * HAIKU_4_5.input + 82 * HAIKU_4_5.output) / M)
    results = replay.received[1].body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == [c.id for c in calls.tool_requests]
    assert sorted(r["content"] for r in results) == ["Charles", "Sammy"]


# -- server tools: web search, a paused turn -------------------------------------------------


async def test_web_search_counts_its_searches_and_cache_reads_and_writes(replay):
    """claude-sonnet-5 with the web search tool, three turns: thinking (empty, signed), the
    cited text blocks, one search ($10 per 1,000), and 5-minute cache writes and reads in
    the same reply, each priced as such."""
    recorded = load(HERE + "ellmer__anthropic-web-search.yml")
    set_sonnet_5()
    replay.serve(*recorded)
    chat = claude(replay, "claude-sonnet-5", params={"tools": [WEB_SEARCH_TOOL]})

    await chat.chat_async(prompt_of(recorded[0]))
    assert await chat.chat_async("What month was that?") == "That was **May** (2014)."
    await chat.chat_async("What month was that?")

    assert not replay.unserved
    s = SONNET_5
    first, second, third = replies(chat)
    (thinking,) = blocks(recorded[0], "thinking")
    assert first.contents == [ve.ContentThinking("", thinking["signature"]), *texts(recorded[0])]
    assert first.text == (
        "According to CRAN publish records, ggplot2 1.0.0 was published on 2014-05-21"
        ".\n\n**2014-05-21**"
    )
    assert first.tokens == ve.TokenUsage(
        input=4, output=155, cached_input=2836, reasoning=26, cache_write=11107, web_searches=1
    )
    cost = 4 * s.input + 2836 * s.cached + 11107 * s.write_5m + 155 * s.output
    assert first.cost == pytest.approx(cost / M + 1 * s.web_search / 1000)
    assert second.tokens == ve.TokenUsage(input=2, output=11, cached_input=2836, cache_write=8295)
    cost = 2 * s.input + 2836 * s.cached + 8295 * s.write_5m + 11 * s.output
    assert second.cost == pytest.approx(cost / M)
    (thinking,) = blocks(recorded[2], "thinking")
    assert third.contents == [ve.ContentThinking("", thinking["signature"]), *texts(recorded[2])]
    assert third.tokens == ve.TokenUsage(
        input=2, output=88, cached_input=11131, reasoning=44, cache_write=18
    )
    cost = 2 * s.input + 11131 * s.cached + 18 * s.write_5m + 88 * s.output
    assert third.cost == pytest.approx(cost / M)
    assert replay.received[0].body["tools"] == [WEB_SEARCH_TOOL]
    # the signed thinking block goes back with the turn that made it
    assert replay.received[1].body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "",
        "signature": first.contents[0].signature,
    }


async def test_streamed_web_search_reads_the_final_usage(replay):
    """Streamed web search on claude-opus-4-1: the server tool blocks are not the answer,
    the cited text deltas are; the usage is `message_delta`'s (10,423 in, not
    message_start's 2,039), with its one search."""
    (recorded,) = load(HERE + "llm-anthropic__test_web_search.yaml")
    replay.serve(recorded)
    chat = claude(
        replay,
        "claude-opus-4-1-20250805",
        stream=True,
        params={"max_tokens": 8192, "temperature": 1.0, "tools": [WEB_SEARCH_TOOL]},
    )

    text = await chat.chat_async("What is the current weather in San Francisco?")

    assert text == streamed(recorded, "text_delta", "text")
    assert text.startswith("Based on the search results, here's the current weather")
    turn = chat.last_turn()
    assert all(isinstance(c, ve.ContentText) for c in turn.contents)
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=10423, output=341, web_searches=1)
    cost = (10423 * OPUS_4_1.input + 341 * OPUS_4_1.output) / M + 1 * OPUS_4_1.web_search / 1000
    assert turn.cost == pytest.approx(cost)


async def test_a_paused_turn_is_sent_back_and_joined_with_its_continuation(replay):
    """`stop_reason: pause_turn` after ten searches: our provider sends the paused content
    back as the assistant's and joins the continuation: the text of both, their usage
    summed (both requests over 200K input: long-context prices), fifteen searches."""
    paused, rest = load(HERE + "pydantic-ai__test_pause_turn_web_search_vcr.yaml")
    replay.serve(paused, rest)
    chat = claude(
        replay,
        "claude-sonnet-4-5",
        reasoning=4096,
        params={"max_tokens": 15000, "tools": [WEB_SEARCH_TOOL]},
    )

    text = await chat.chat_async(prompt_of(paused))

    assert len(replay.received) == 2
    assert not replay.unserved
    first_reply = paused.json()
    second = replay.received[1].body["messages"]
    assert second[-1] == {"role": "assistant", "content": first_reply["content"]}
    assert second[-1]["content"][-1]["type"] == "server_tool_use"  # its result came next
    assert rest.json()["content"][0]["type"] == "web_search_tool_result"

    turn = chat.last_turn()
    assert len(replies(chat)) == 1
    (thinking,) = blocks(paused, "thinking")
    assert turn.contents == [
        ve.ContentThinking(thinking["thinking"], thinking["signature"]),
        *texts(paused),
        *texts(rest),
    ]
    assert text == "".join(c.text for c in [*texts(paused), *texts(rest)])
    assert text.startswith("I'll run these searches for you one at a time. Let me begin:")
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(
        input=401468 + 494549, output=792 + 1245, web_searches=10 + 5
    )
    long = SONNET_4_5_LONG
    cost = (896017 * long.input + 2037 * long.output) / M + 15 * long.web_search / 1000
    assert turn.cost == pytest.approx(cost)


# -- compaction: usage by iteration ----------------------------------------------------------


async def test_compaction_usage_is_the_sum_of_its_iterations(replay):
    """A compacted reply: the top level counts only the last iteration (229 in, 5 out, no
    cache write); the bill is both, the compaction's 55,096 5-minute cache writes too."""
    (recorded,) = load(HERE + "pydantic-ai__test_anthropic_compaction_usage_with_cache.yaml")
    replay.serve(recorded)
    chat = claude(
        replay,
        "claude-sonnet-4-6",
        system_prompt="You are a helpful assistant. Be very brief.",
        params={"context_management": recorded.request_body["context_management"]},
    )

    assert await chat.chat_async(prompt_of(recorded)) == "Hello!"

    turn = chat.last_turn()
    (summary,) = blocks(recorded, "compaction")
    assert turn.contents == [ve.ContentCompaction(summary["content"]), ve.ContentText("Hello!")]
    assert turn.tokens == ve.TokenUsage(
        input=100 + 229, output=131 + 5, cache_write=55096 + 0, cache_write_1h=0 + 0
    )
    s = SONNET_4_6
    assert turn.cost == pytest.approx((329 * s.input + 55096 * s.write_5m + 136 * s.output) / M)


async def test_streamed_compaction_usage_is_the_sum_of_its_iterations(replay):
    """Streamed: `iterations` come in `message_delta` (a compaction that read 55,096 cached
    tokens, then the reply), its top-level counts the last iteration's."""
    (recorded,) = load(
        HERE + "pydantic-ai__test_anthropic_compaction_usage_with_cache_streaming.yaml"
    )
    replay.serve(recorded)
    chat = claude(
        replay,
        "claude-sonnet-4-6",
        stream=True,
        system_prompt="You are a helpful assistant. Be very brief.",
        params={"context_management": recorded.request_body["context_management"]},
    )

    assert await chat.chat_async(prompt_of(recorded)) == "Hello! 👋"

    turn = chat.last_turn()
    summary = "".join(
        event["delta"]["content"]
        for event in recorded.events()
        if event["type"] == "content_block_delta" and event["delta"]["type"] == "compaction_delta"
    )
    assert summary
    assert turn.contents[0] == ve.ContentCompaction(summary)  # its deltas joined
    assert turn.tokens == ve.TokenUsage(input=100 + 181, output=83 + 8, cached_input=55096 + 0)
    s = SONNET_4_6
    assert turn.cost == pytest.approx((281 * s.input + 55096 * s.cached + 91 * s.output) / M)


async def test_a_single_iteration_is_counted_once(replay):
    """`iterations` holding the one message iteration: 136 in, 16 out, as the top level."""
    (recorded,) = load(HERE + "pydantic-ai__test_anthropic_compaction_round_trip.yaml")
    replay.serve(recorded)
    chat = claude(replay, "claude-sonnet-4-6", system_prompt="Be brief.")

    text = await chat.chat_async("What did I say earlier?")

    assert text == 'According to the conversation summary, you said "hello" earlier.'
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=136, output=16)
    assert turn.cost == pytest.approx((136 * SONNET_4_6.input + 16 * SONNET_4_6.output) / M)


async def test_the_compaction_block_goes_back_with_its_turn(replay):
    """The compaction summary a reply opened with goes back, first in that assistant
    message, as the recorded round trip sends it, so the API need not compact again."""
    (compacted,) = load(HERE + "pydantic-ai__test_anthropic_compaction_usage_with_cache.yaml")
    (follow_up,) = load(HERE + "pydantic-ai__test_anthropic_compaction_round_trip.yaml")
    replay.serve(compacted, follow_up)
    chat = claude(
        replay,
        "claude-sonnet-4-6",
        params={"context_management": compacted.request_body["context_management"]},
    )

    await chat.chat_async(prompt_of(compacted))
    await chat.chat_async("What did I say earlier?")

    (summary,) = blocks(compacted, "compaction")
    assistant = replay.received[1].body["messages"][1]
    assert assistant["content"][0] == {"type": "compaction", "content": summary["content"]}


# -- errors ---------------------------------------------------------------------------------


async def test_an_unknown_model_is_a_404_not_found(replay):
    """A 404 `not_found_error` is a "not found" ProviderError with Anthropic's type and
    words and the request id of its `request-id` header, sent once."""
    recorded = load(HERE + "mirascope__test_model_not_found__anthropic_claude_sonnet_4_0.yaml")
    replay.serve(*recorded)
    chat = claude(replay, "this-model-does-not-exist-12345")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("This should fail with NotFoundError")

    error = caught.value
    assert type(error) is ve.ProviderError
    assert error.status == 404
    assert error.retryable is False
    assert error.request_id == "req_011CWbzicpaYMyAiiXobLkzi"
    assert error.message.startswith(
        "not found: not_found_error: model: this-model-does-not-exist-12345. "
        "Check the model name 'this-model-does-not-exist-12345'"
    )
    assert len(replay.received) == 1


async def test_an_effort_the_model_refuses_is_a_400(replay):
    """claude-opus-4-6 refuses effort 'xhigh' (it takes high, low, max, medium): our
    reasoning='xhigh' goes as 'max'; the recorded 400 is a ProviderError with its words."""
    (recorded,) = load(
        HERE + "pydantic-ai__test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml"
    )
    replay.serve(recorded)
    chat = claude(replay, "claude-opus-4-6", reasoning="xhigh")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("What is 2+2?")

    assert type(caught.value) is ve.ProviderError
    assert caught.value.status == 400
    assert caught.value.message == (
        "invalid_request_error: This model does not support effort level 'xhigh'. "
        "Supported levels: high, low, max, medium."
    )
    sent = replay.received[0].body
    assert sent["output_config"] == {"effort": "max"}
    assert sent["thinking"] == {"type": "adaptive"}
