"""Gemini's replies as the live API gave them (`tests/recordings/gemini`), replayed over
real HTTP through our provider.

Each test sends what the recording's request asked and checks the turn against the
recording: text, function calls and their ids, thoughts and thought signatures, the
finish reason, the usage (derived here by hand from the recorded `usageMetadata`:
`thoughtsTokenCount` is output and reasoning, `cachedContentTokenCount` is the cached part
of `promptTokenCount`, `toolUsePromptTokenCount` is more input) and the cost (from
Google's published prices, written out below).
"""

from __future__ import annotations

import dataclasses
import json
from typing import NamedTuple

import pytest

import vitals_engine as ve
from tests.recordings.cassettes import Interaction, load
from tests.replay_server import ReplayServer, chat_options, replies

pytestmark = pytest.mark.anyio

M = 1_000_000
HERE = "gemini/"


class Usd(NamedTuple):
    """Published prices: USD per million tokens (output includes thinking); grounding
    with Google Search in USD per 1,000 grounded prompts."""

    input: float
    output: float
    cached: float
    grounding: float | None = None


# The Gemini API's pricing page (ai.google.dev/gemini-api/docs/pricing), standard tier,
# prompts up to 200K tokens; Grounding with Google Search on Gemini 2.x: $35 per 1,000
# grounded prompts (after the free daily allowance).
GEMINI_2_5_FLASH = Usd(input=0.30, output=2.50, cached=0.03, grounding=35.0)
GEMINI_2_5_PRO = Usd(input=1.25, output=10.00, cached=0.125)
#: Not in vitals_engine/data/prices.json (set in the tests that need them): Gemini 3.5
#: Flash, $1.50 / $9.00 / cached $0.15 (models.dev, providers/google/models/
#: gemini-3.5-flash.toml); Gemini 3.6 Flash (what `gemini-flash-latest` served), its
#: introductory price through 2026-12-31, $0.75 / $3.75 / cached $0.075 (models.dev,
#: citing ai.google.dev/gemini-api/docs/pricing#gemini-3.6-flash).
GEMINI_3_5_FLASH = Usd(input=1.50, output=9.00, cached=0.15)
GEMINI_3_6_FLASH = Usd(input=0.75, output=3.75, cached=0.075)


def set_published(model: str, price: Usd) -> None:
    ve.set_price("Google", model, input=price.input, output=price.output, cached_input=price.cached)


# -- the server and the chats -----------------------------------------------------------


def gemini(server: ReplayServer, model: str, **options) -> ve.Chat:
    return ve.chat_google_gemini(model, **chat_options(server, "/v1beta"), **options)


def prompt_of(interaction: Interaction, index: int = 0) -> str:
    """The text of the recorded request's `index`-th user content."""
    users = [c for c in interaction.request_body["contents"] if c["role"] == "user"]
    return users[index]["parts"][0]["text"]


def parts(interaction: Interaction) -> list[dict]:
    """The recorded reply's parts (every chunk's, in order, for a stream)."""
    chunks = interaction.events() if interaction.streamed else interaction.json()
    if isinstance(chunks, dict):  # a whole reply, not a JSON array of chunks
        chunks = [chunks]
    return [
        part
        for chunk in chunks
        for candidate in chunk.get("candidates", [])
        for part in candidate.get("content", {}).get("parts", [])
    ]


def as_sse(interaction: Interaction) -> Interaction:
    """A `streamGenerateContent` reply recorded without `alt=sse` (a JSON array of the
    chunks) as the same chunks framed as server-sent events, as `alt=sse` sends them."""
    body = b"".join(
        b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\r\n\r\n"
        for chunk in interaction.json()
    )
    headers = {**interaction.headers, "content-type": "text/event-stream"}
    return dataclasses.replace(interaction, headers=headers, body=body)


# -- text and thoughts --------------------------------------------------------------------


async def test_a_streamed_reply_with_its_thoughts(replay):
    """gemini-flash-latest (served by gemini-3.6-flash), streamed with thoughts: the thought
    summary, the signature that came on the last chunk kept with the text "Scoop", and
    291 thinking tokens counted as output and reasoning."""
    (recorded,) = load(HERE + "llm-gemini__test_prompt.yaml")
    set_published("gemini-3.6-flash", GEMINI_3_6_FLASH)
    replay.serve(as_sse(recorded))
    chat = gemini(
        replay,
        "gemini-flash-latest",
        stream=True,
        params={
            "include_thoughts": True,
            "safety_settings": recorded.request_body["safetySettings"],
        },
    )

    assert await chat.chat_async("Name for a pet pelican, just the name") == "Scoop"

    thought, _, signed = parts(recorded)
    turn = chat.last_turn()
    assert turn.contents == [
        ve.ContentThinking(thought["text"]),
        ve.ContentThinking("", signature=signed["thoughtSignature"]),
        ve.ContentText("Scoop"),
    ]
    assert turn.finish_reason == "stop"
    assert turn.model == "gemini-3.6-flash"
    assert turn.tokens == ve.TokenUsage(input=11 - 0, output=2 + 291, reasoning=291)
    g = GEMINI_3_6_FLASH
    assert turn.cost == pytest.approx((11 * g.input + 293 * g.output) / M)
    sent = replay.received[0]
    assert sent.path == "/v1beta/models/gemini-flash-latest:streamGenerateContent"
    assert sent.query == "alt=sse"
    assert sent.headers["x-goog-api-key"] == "sk-test"
    assert sent.body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True}


async def test_a_one_chunk_stream(replay):
    """A stream of one chunk holding the text, the finish reason and the usage."""
    (recorded,) = load(HERE + "chatlas__test_google_simple_streaming_request.yaml")
    replay.serve(recorded)
    chat = gemini(
        replay,
        "gemini-2.5-flash",
        stream=True,
        system_prompt="Be as terse as possible; no punctuation. Do not spell out numbers.",
        params={"temperature": 0},
    )

    assert await chat.chat_async("What is 1 + 1?") == "2"

    turn = chat.last_turn()
    assert turn.contents == [ve.ContentText("2")]
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=25 - 0, output=1 + 66, reasoning=66)
    g = GEMINI_2_5_FLASH
    assert turn.cost == pytest.approx((25 * g.input + 67 * g.output) / M)
    assert replay.received[0].body["systemInstruction"] == {
        "parts": [{"text": "Be as terse as possible; no punctuation. Do not spell out numbers."}]
    }


async def test_streamed_thoughts_then_text_and_the_thoughts_go_back(replay):
    """Four thought chunks (cumulative usage in each), then "3" with the finish reason and
    a final usage with no candidatesTokenCount: 0 + 1,947 thinking tokens out. The
    thoughts go back with the turn."""
    first, second = load(
        HERE + "mirascope__test_call_with_thinking__google_gemini_2_5_flash__stream.yaml"
    )
    replay.serve(first, second)
    chat = gemini(
        replay, "gemini-2.5-flash", stream=True, reasoning=6400, params={"include_thoughts": True}
    )

    assert await chat.chat_async(prompt_of(first)) == "3"
    again = "If you remember what the primes were, then share them, or say 'I don't remember.'"
    assert await chat.chat_async(again) == "I don't remember."
    assert not replay.unserved

    thoughts = "".join(p["text"] for p in parts(first) if p.get("thought"))
    assert thoughts.startswith("**Analyzing Prime Substrings**")
    g = GEMINI_2_5_FLASH
    three, forgot = replies(chat)
    assert three.contents == [ve.ContentThinking(thoughts), ve.ContentText("3")]
    assert three.finish_reason == "stop"
    assert three.tokens == ve.TokenUsage(input=30 - 0, output=0 + 1947, reasoning=1947)
    assert three.cost == pytest.approx((30 * g.input + 1947 * g.output) / M)
    assert forgot.contents == [ve.ContentText("I don't remember.")]
    assert forgot.tokens == ve.TokenUsage(input=365 - 0, output=6 + 77, reasoning=77)
    assert forgot.cost == pytest.approx((365 * g.input + 83 * g.output) / M)
    assert replay.received[1].body["contents"][1] == {
        "role": "model",
        "parts": [{"text": thoughts, "thought": True}, {"text": "3"}],
    }


async def test_a_thinking_budget_and_include_thoughts_go_together(replay):
    """reasoning=6400 and params include_thoughts=True: the request's thinkingConfig holds
    both, as the recorded request did."""
    first, _ = load(
        HERE + "mirascope__test_call_with_thinking__google_gemini_2_5_flash__stream.yaml"
    )
    replay.serve(first)
    chat = gemini(
        replay, "gemini-2.5-flash", stream=True, reasoning=6400, params={"include_thoughts": True}
    )

    await chat.chat_async(prompt_of(first))

    assert first.request_body["generationConfig"]["thinkingConfig"] == {
        "include_thoughts": True,
        "thinking_budget": 6400,
    }
    assert replay.received[0].body["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 6400,
        "includeThoughts": True,
    }


async def test_structured_output_is_the_json_text(replay):
    """`responseMimeType: application/json` with a schema: the JSON text, parsed."""
    (recorded,) = load(
        HERE + "mirascope__test_structured_output__google_gemini_2_5_flash__sync.yaml"
    )
    replay.serve(recorded)
    chat = gemini(replay, "gemini-2.5-flash")
    name = {"type": "string"}
    book = {
        "type": "object",
        "properties": {
            "title": name,
            "author": {
                "type": "object",
                "properties": {"first_name": name, "last_name": name},
                "required": ["first_name", "last_name"],
            },
            "rating": {"type": "integer"},
        },
        "required": ["title", "author", "rating"],
    }

    data = await chat.extract_data_async(prompt_of(recorded), type=book)

    assert data == {
        "title": "THE NAME OF THE WIND",
        "author": {"first_name": "Patrick", "last_name": "Rothfuss"},
        "rating": 7,
    }
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=11 - 0, output=29 + 146, reasoning=146)
    g = GEMINI_2_5_FLASH
    assert turn.cost == pytest.approx((11 * g.input + 175 * g.output) / M)
    assert replay.received[0].body["generationConfig"]["responseMimeType"] == "application/json"


async def test_a_reply_cut_at_max_tokens(replay):
    """`finishReason: MAX_TOKENS` with partial text: finish reason max_tokens; the 38
    thinking tokens are output too."""
    (recorded,) = load(HERE + "mirascope__test_max_tokens__google_gemini_2_5_flash__sync.yaml")
    replay.serve(recorded)
    chat = gemini(replay, "gemini-2.5-flash", params={"max_tokens": 50})

    assert await chat.chat_async("List all U.S. states.") == "Here is a list of all 50 U"

    turn = chat.last_turn()
    assert turn.finish_reason == "max_tokens"
    assert turn.tokens == ve.TokenUsage(input=9 - 0, output=10 + 38, reasoning=38)
    g = GEMINI_2_5_FLASH
    assert turn.cost == pytest.approx((9 * g.input + 48 * g.output) / M)
    assert replay.received[0].body["generationConfig"] == {"maxOutputTokens": 50}


async def test_a_reply_with_no_parts_at_all(replay):
    """gemini-2.5-pro spent its 5 tokens thinking: content {role: model} with no `parts`
    key, MAX_TOKENS, no candidatesTokenCount: an empty turn, 0 + 2 tokens out."""
    (recorded,) = load(
        HERE + "pydantic-ai__test_google_model_max_tokens_thinking_model_empty_response.yaml"
    )
    replay.serve(recorded)
    chat = gemini(
        replay,
        "gemini-2.5-pro",
        system_prompt="You are a helpful chatbot.",
        params={"max_tokens": 5},
    )

    assert await chat.chat_async("What is the capital of France?") == ""

    turn = chat.last_turn()
    assert turn.contents == []
    assert turn.finish_reason == "max_tokens"
    assert turn.tokens == ve.TokenUsage(input=15 - 0, output=0 + 2, reasoning=2)
    g = GEMINI_2_5_PRO
    assert turn.cost == pytest.approx((15 * g.input + 2 * g.output) / M)


# -- caching --------------------------------------------------------------------------------


async def test_an_explicit_cache_is_cached_input(replay):
    """Two asks against a `cachedContent`: 3,512 of each 3,520 prompt tokens came from the
    cache (`cachedContentTokenCount`), priced at the cache price."""
    _create, first, second, _delete = load(
        HERE + "pydantic-ai__test_google_model_cached_content.yaml"
    )
    replay.serve(first, second)
    cache = first.request_body["cachedContent"]

    capital = gemini(replay, "gemini-2.5-flash", params={"cached_content": cache})
    assert await capital.chat_async("What is the capital of France?") == "Paris."
    again = gemini(replay, "gemini-2.5-flash", params={"cached_content": cache})
    assert await again.chat_async("Say the capital one more time.") == "Paris."
    assert not replay.unserved

    g = GEMINI_2_5_FLASH
    turn = capital.last_turn()
    assert turn.tokens == ve.TokenUsage(
        input=3520 - 3512, output=2 + 42, cached_input=3512, reasoning=42
    )
    assert turn.cost == pytest.approx((8 * g.input + 3512 * g.cached + 44 * g.output) / M)
    turn = again.last_turn()
    assert turn.tokens == ve.TokenUsage(
        input=3520 - 3512, output=2 + 51, cached_input=3512, reasoning=51
    )
    assert turn.cost == pytest.approx((8 * g.input + 3512 * g.cached + 53 * g.output) / M)
    sent = replay.received[0].body
    assert sent["cachedContent"] == cache
    assert "systemInstruction" not in sent


async def test_implicit_caching_over_a_conversation(replay):
    """Three turns with a long first message: the first reply already read 3,055 of its
    3,797 prompt tokens from Gemini's implicit cache, the later ones none."""
    recorded = load(
        HERE + "mirascope__test_caching_multi_turn_conversation__google_gemini_2_5_flash.yaml"
    )
    replay.serve(*recorded)
    chat = gemini(replay, "gemini-2.5-flash")

    for index in range(3):
        await chat.chat_async(prompt_of(recorded[index], index))
    assert not replay.unserved

    g = GEMINI_2_5_FLASH
    first, second, third = replies(chat)
    assert [t.text for t in (first, second, third)] == [parts(i)[0]["text"] for i in recorded]
    assert first.tokens == ve.TokenUsage(
        input=3797 - 3055, output=656 + 1549, cached_input=3055, reasoning=1549
    )
    assert first.cost == pytest.approx((742 * g.input + 3055 * g.cached + 2205 * g.output) / M)
    assert second.tokens == ve.TokenUsage(input=4464 - 0, output=137 + 958, reasoning=958)
    assert second.cost == pytest.approx((4464 * g.input + 1095 * g.output) / M)
    assert third.tokens == ve.TokenUsage(input=4610 - 0, output=158 + 934, reasoning=934)
    assert third.cost == pytest.approx((4610 * g.input + 1092 * g.output) / M)
    assert [c["role"] for c in replay.received[2].body["contents"]] == [
        "user",
        "model",
        "user",
        "model",
        "user",
    ]


# -- tools ----------------------------------------------------------------------------------


async def test_url_context_tool_prompt_tokens_are_input(replay):
    """The URL context tool's 2,395 `toolUsePromptTokenCount` tokens are input besides the
    32 of the prompt (`totalTokenCount` 2,515 = 32 + 41 + 2,395 + 47)."""
    (recorded,) = load(HERE + "pydantic-ai__test_google_model_web_fetch_tool.yaml")
    replay.serve(recorded)
    chat = gemini(replay, "gemini-2.5-flash", system_prompt="You are a helpful chatbot.")

    text = await chat.chat_async(prompt_of(recorded))

    assert text == (
        "Pydantic AI is a Python agent framework designed to make it less painful to build "
        "production grade applications with Generative AI."
    )
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert turn.tokens == ve.TokenUsage(input=32 + 2395, output=41 + 47, reasoning=47)
    g = GEMINI_2_5_FLASH
    assert turn.cost == pytest.approx((2427 * g.input + 88 * g.output) / M)


async def test_a_grounded_reply_counts_its_tool_prompt_tokens(replay):
    """Grounding with Google Search, streamed: the answer, and the search's 118
    `toolUsePromptTokenCount` tokens as input besides the 27 of the prompt."""
    (recorded,) = load(HERE + "chatlas__test_google_web_search_streaming.yaml")
    replay.serve(recorded)
    chat = gemini(replay, "gemini-2.5-flash", stream=True, params={"temperature": 0})

    text = await chat.chat_async(prompt_of(recorded))

    assert text == "ggplot2 version 1.0.0 was released to CRAN on 2014-05-21."
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    assert (turn.tokens.input, turn.tokens.output, turn.tokens.reasoning) == (
        27 + 118,
        56 + 173,
        173,
    )
    assert turn.tokens.cached_input == 0


async def test_a_grounded_reply_is_billed_as_one_grounded_prompt(replay):
    """On Gemini 2.x a reply grounded with Google Search is one grounded prompt, billed
    per 1,000 (however many queries it ran): web_searches 1, its fee in the cost."""
    (recorded,) = load(HERE + "chatlas__test_google_web_search_streaming.yaml")
    replay.serve(recorded)
    chat = gemini(replay, "gemini-2.5-flash", stream=True, params={"temperature": 0})

    await chat.chat_async(prompt_of(recorded))

    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(
        input=27 + 118, output=56 + 173, reasoning=173, web_searches=1
    )
    g = GEMINI_2_5_FLASH
    cost = (145 * g.input + 229 * g.output) / M + 1 * g.grounding / 1000
    assert turn.cost == pytest.approx(cost)


async def test_built_in_tools_in_params_go_at_the_top_of_the_request(replay):
    """`params={"tools": [{"googleSearch": {}}]}` is sent as the recorded request sent it:
    a top-level `tools`, not a field of generationConfig."""
    (recorded,) = load(HERE + "chatlas__test_google_web_search_streaming.yaml")
    replay.serve(recorded)
    tools = recorded.request_body["tools"]
    assert tools == [{"googleSearch": {}}]
    chat = gemini(
        replay, "gemini-2.5-flash", stream=True, params={"tools": tools, "temperature": 0}
    )

    await chat.chat_async(prompt_of(recorded))

    sent = replay.received[0].body
    assert sent["tools"] == tools
    assert sent["generationConfig"] == {"temperature": 0}


async def test_parallel_function_calls_with_ids_and_a_signature(replay):
    """gemini-3.5-flash streams two `functionCall` parts in two chunks, with ids, only the
    first signed: the calls keep their ids, the signature goes back on the first call, the
    responses go back by id, and the answer's trailing signature is kept."""
    first, second = load(HERE + "chatlas__test_tools_parallel.yaml")
    set_published("gemini-3.5-flash", GEMINI_3_5_FLASH)
    replay.serve(first, second)
    chat = gemini(
        replay,
        "gemini-3.5-flash",
        stream=True,
        system_prompt="Be very terse, not even punctuation.",
        params={"temperature": 0},
    )
    colours = {"Joe": "sage green", "Hadley": "red"}

    def favorite_color(_person: str) -> str:
        """Returns a person's favourite colour"""
        return colours[_person]

    chat.register_tool(favorite_color)

    assert await chat.chat_async(prompt_of(first)) == "Joe sage green Hadley red"
    assert not replay.unserved

    signature = parts(first)[0]["thoughtSignature"]
    calls, answer = replies(chat)
    assert calls.contents == [
        ve.ContentThinking("", signature=signature),
        ve.ContentToolRequest("0b3pdf3o", "favorite_color", {"_person": "Joe"}),
        ve.ContentToolRequest("brynwdxm", "favorite_color", {"_person": "Hadley"}),
    ]
    assert calls.finish_reason == "tool_calls"
    assert calls.model == "gemini-3.5-flash"
    assert calls.tokens == ve.TokenUsage(input=85 - 0, output=35 + 127, reasoning=127)
    g = GEMINI_3_5_FLASH
    assert calls.cost == pytest.approx((85 * g.input + 162 * g.output) / M)
    assert answer.contents == [
        ve.ContentThinking("", signature=parts(second)[-1]["thoughtSignature"]),
        ve.ContentText("Joe sage green Hadley red"),
    ]
    assert answer.finish_reason == "stop"
    assert answer.tokens == ve.TokenUsage(input=274 - 0, output=5 + 360, reasoning=360)
    assert answer.cost == pytest.approx((274 * g.input + 365 * g.output) / M)
    model, user = replay.received[1].body["contents"][1:]
    joe, hadley = {"_person": "Joe"}, {"_person": "Hadley"}
    assert model == {
        "role": "model",
        "parts": [
            {
                "functionCall": {"name": "favorite_color", "args": joe, "id": "0b3pdf3o"},
                "thoughtSignature": signature,
            },
            {"functionCall": {"name": "favorite_color", "args": hadley, "id": "brynwdxm"}},
        ],
    }
    assert user == {
        "role": "user",
        "parts": [
            {"functionResponse": _response("sage green", "0b3pdf3o")},
            {"functionResponse": _response("red", "brynwdxm")},
        ],
    }


def _response(result: str, call_id: str) -> dict:
    return {"name": "favorite_color", "response": {"result": result}, "id": call_id}


# -- errors ---------------------------------------------------------------------------------


async def test_an_unknown_model_is_a_404_not_found(replay):
    """A 404 NOT_FOUND is a "not found" ProviderError with Gemini's status and words,
    sent once to the model's own path."""
    recorded = load(HERE + "mirascope__test_model_not_found__google_gemini_2_5_flash.yaml")
    replay.serve(*recorded)
    chat = gemini(replay, "this-model-does-not-exist-12345")

    with pytest.raises(ve.ProviderError) as caught:
        await chat.chat_async("This should fail with NotFoundError")

    error = caught.value
    assert type(error) is ve.ProviderError
    assert error.status == 404
    assert error.retryable is False
    assert error.message.startswith(
        "not found: NOT_FOUND: models/this-model-does-not-exist-12345 is not found for API "
        "version v1beta, or is not supported for generateContent."
    )
    assert "Check the model name 'this-model-does-not-exist-12345'" in error.message
    assert len(replay.received) == 1
    assert replay.received[0].path == (
        "/v1beta/models/this-model-does-not-exist-12345:generateContent"
    )
