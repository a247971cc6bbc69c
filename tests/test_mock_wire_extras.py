"""The mock server's newer wire behaviours over real HTTP: each provider's quota error,
Anthropic's prompt caching (written, read, expired) and `pause_turn` with server-side web
searches, and Gemini's usage counts and thinking configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from vitals_engine.testing import MockReply, MockServer
from vitals_engine.transport.sse import EventStreamParser


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=10) as client:
        yield client


def claude(client: httpx.Client, server: MockServer, **body: Any) -> httpx.Response:
    """POST an Anthropic Messages request (a sum unless told otherwise)."""
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "What's 2+2?"}],
        **body,
    }
    return client.post(server.base_url("anthropic") + "/messages", json=body)


def gemini(client: httpx.Client, server: MockServer, **body: Any) -> httpx.Response:
    """POST a Gemini generateContent request (a sum unless told otherwise)."""
    body = {"contents": [{"role": "user", "parts": [{"text": "What's 2+2?"}]}], **body}
    return client.post(f"{server.base_url('google')}/models/gemini-x:generateContent", json=body)


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def cached_system(n: int, ttl: str | None = None) -> list[dict[str, Any]]:
    """A system prompt of `n` words with a cache breakpoint (of `ttl`, if given)."""
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl is not None:
        control["ttl"] = ttl
    return [{"type": "text", "text": words(n), "cache_control": control}]


# -- quota ---------------------------------------------------------------------------------------


def test_openai_quota_error_on_both_endpoints(client, server):
    """fail("quota") answers OpenAI's 429 insufficient_quota (no Retry-After), on chat
    completions and the Responses API alike, and is logged as a quota failure."""
    base = server.base_url("openai")
    server.fail("quota", times=2)
    answers = [
        client.post(
            base + "/chat/completions",
            json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]},
        ),
        client.post(base + "/responses", json={"model": "gpt-4.1", "input": "hi"}),
    ]
    for response in answers:
        assert response.status_code == 429
        assert "retry-after" not in response.headers
        assert response.json() == {
            "error": {
                "message": "You exceeded your current quota, please check your plan and billing "
                "details. For more information on this error, read the docs: "
                "https://platform.openai.com/docs/guides/error-codes/api-errors.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        }
    assert [r.outcome for r in server.log] == ["quota", "quota"]


def test_anthropic_quota_error_is_its_credit_balance_400(client, server):
    """Anthropic's spent credit is a 400 invalid_request_error saying the balance is too low."""
    server.fail("quota")
    response = claude(client, server)
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    assert body["error"] == {
        "type": "invalid_request_error",
        "message": "Your credit balance is too low to access the Anthropic API. Please go to "
        "Plans & Billing to upgrade or purchase credits.",
    }
    assert body["request_id"].startswith("req_")
    assert claude(client, server).status_code == 200


def test_gemini_quota_error_names_a_daily_quota(client, server):
    """Gemini's spent quota is a 429 RESOURCE_EXHAUSTED whose details name a per-day quota of
    the model (QuotaFailure) and when to retry (RetryInfo), as asked or until the day ends."""
    server.fail("quota", retry_after=42)
    response = gemini(client, server)
    assert response.status_code == 429
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert "You exceeded your current quota" in error["message"]
    assert "model: gemini-x" in error["message"]
    kinds = {d["@type"].rsplit(".", 1)[-1]: d for d in error["details"]}
    (violation,) = kinds["QuotaFailure"]["violations"]
    assert violation["quotaId"] == "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
    assert violation["quotaDimensions"]["model"] == "gemini-x"
    assert kinds["RetryInfo"]["retryDelay"] == "42s"
    assert "retry-after" not in response.headers  # the wait is in the body's RetryInfo
    server.fail("quota")
    delay = gemini(client, server).json()["error"]["details"][-1]["retryDelay"]
    assert 0 < float(delay.removesuffix("s")) <= 24 * 3600


# -- prompt caching ------------------------------------------------------------------------------


def test_a_cached_prefix_is_written_then_read_then_expires(client, server):
    """The prefix up to a breakpoint is written the first time, read by the next request
    with the same prefix, and written again once its 5 minutes have passed."""
    server.min_cacheable_tokens = 10
    system = cached_system(12)

    def usage() -> dict[str, Any]:
        response = claude(client, server, system=system)
        assert response.status_code == 200, response.text
        return response.json()["usage"]

    written = usage()
    assert written == {
        "input_tokens": 2,
        "cache_creation_input_tokens": 12,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
        "cache_creation": {"ephemeral_5m_input_tokens": 12, "ephemeral_1h_input_tokens": 0},
    }
    read = usage()
    assert (read["cache_read_input_tokens"], read["cache_creation_input_tokens"]) == (12, 0)
    assert read["input_tokens"] == 2
    server.prompt_cache.advance(299)  # a read refreshes the entry: 5 minutes from now
    assert usage()["cache_read_input_tokens"] == 12
    server.prompt_cache.advance(301)
    expired = usage()
    assert (expired["cache_read_input_tokens"], expired["cache_creation_input_tokens"]) == (0, 12)
    assert len(server.prompt_cache) == 1


def test_an_hour_long_entry_outlives_five_minutes(client, server):
    """A breakpoint with ttl "1h" is written under ephemeral_1h and read after 5 minutes."""
    server.min_cacheable_tokens = 10
    first = claude(client, server, system=cached_system(12, "1h")).json()["usage"]
    assert first["cache_creation"] == {
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": 12,
    }
    server.prompt_cache.advance(3000)
    later = claude(client, server, system=cached_system(12, "1h")).json()["usage"]
    assert later["cache_read_input_tokens"] == 12
    server.prompt_cache.advance(3601)
    assert (
        claude(client, server, system=cached_system(12, "1h")).json()["usage"][
            "cache_read_input_tokens"
        ]
        == 0
    )


def test_short_prefixes_are_not_cached_and_the_cache_is_per_model(client, server):
    """A prefix under min_cacheable_tokens (1024 by default) is neither written nor an
    error; a prefix cached for one model is not read by another; reset() empties it."""
    short = claude(client, server, system=cached_system(50)).json()["usage"]
    assert (short["cache_creation_input_tokens"], short["input_tokens"]) == (0, 52)
    assert len(server.prompt_cache) == 0
    server.min_cacheable_tokens = 10
    assert (
        claude(client, server, system=cached_system(50)).json()["usage"][
            "cache_creation_input_tokens"
        ]
        == 50
    )
    other = claude(client, server, model="claude-y", system=cached_system(50)).json()["usage"]
    assert (other["cache_read_input_tokens"], other["cache_creation_input_tokens"]) == (0, 50)
    server.reset()
    assert server.min_cacheable_tokens == 1024
    assert len(server.prompt_cache) == 0


def test_a_growing_conversation_reads_the_prefix_it_wrote_before(client, server):
    """With the breakpoint on the last message each turn, a turn reads the prefix the turn
    before wrote (found looking back from its breakpoint) and writes only what is new;
    tools come first in the prefix and count in the prompt."""
    server.min_cacheable_tokens = 10
    tool = {
        "name": "lookup",
        "description": "Look a word up.",
        "input_schema": {"type": "object", "properties": {}},
    }
    tool_tokens = len(msgspec.json.encode(tool).decode().split())
    system = [{"type": "text", "text": words(20)}]

    def turn(texts: list[str]) -> dict[str, Any]:
        messages = []
        for i, text in enumerate(texts):
            block: dict[str, Any] = {"type": "text", "text": text}
            if i == len(texts) - 1:
                block["cache_control"] = {"type": "ephemeral"}
            messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": [block]})
        response = claude(client, server, system=system, tools=[tool], messages=messages)
        assert response.status_code == 200, response.text
        return response.json()["usage"]

    first = turn(["What's 2+2?"])
    prefix = tool_tokens + 20 + 2
    assert (first["cache_creation_input_tokens"], first["input_tokens"]) == (prefix, 0)
    second = turn(["What's 2+2?", "2 + 2 = 4", "And 3+4?"])
    assert second["cache_read_input_tokens"] == prefix
    assert second["cache_creation_input_tokens"] == 5 + 2
    assert second["input_tokens"] == 0


@pytest.mark.parametrize(
    ("system", "message"),
    [
        (
            [
                {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
                for i in range(5)
            ],
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            [
                {"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
            ],
            "a cache_control block with ttl='1h' must not come after one with ttl='5m'",
        ),
        (
            [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "2h"}}],
            "system.0.cache_control.ephemeral.ttl: Input should be '5m' or '1h'",
        ),
    ],
)
def test_breakpoints_the_api_refuses(client, server, system, message):
    """More than 4 breakpoints, a 1h one after a 5m one, or an unknown ttl is a 400."""
    response = claude(client, server, system=system)
    assert response.status_code == 400
    assert response.json()["error"] == {"type": "invalid_request_error", "message": message}
    assert server.requests == 0


def test_scripted_cache_numbers_take_the_caches_place(client, server):
    """A MockReply's cache numbers are rendered as given (the cache is not consulted), on
    Anthropic and OpenAI alike."""
    server.min_cacheable_tokens = 10
    server.script(
        lambda req: MockReply(
            text="ok",
            input_tokens=100,
            cached_tokens=60,
            cache_write_5m_tokens=10,
            cache_write_1h_tokens=20,
        )
    )
    usage = claude(client, server, system=cached_system(12)).json()["usage"]
    assert usage["input_tokens"] == 10
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (60, 30)
    assert usage["cache_creation"] == {
        "ephemeral_5m_input_tokens": 10,
        "ephemeral_1h_input_tokens": 20,
    }
    assert len(server.prompt_cache) == 0
    chat = client.post(
        server.base_url("openai") + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    ).json()["usage"]
    assert (chat["prompt_tokens"], chat["prompt_tokens_details"]) == (100, {"cached_tokens": 60})


# -- pause_turn ------------------------------------------------------------------------------------


def paused(request) -> MockReply:
    """A model that searches and pauses, then answers once it goes on."""
    if request.continuing:
        return MockReply(text="It will rain.")
    return MockReply(text="Let me search.", finish="pause_turn", web_searches=["rain berlin"])


def test_pause_turn_then_the_model_goes_on(client, server):
    """A pause_turn reply carries the server tool's call and result blocks and the search
    count; sending its content back as the last assistant message gets the rest."""
    server.script(paused)
    first = claude(client, server).json()
    assert first["stop_reason"] == "pause_turn"
    use, result, text = first["content"]
    assert (use["type"], use["name"], use["input"]) == (
        "server_tool_use",
        "web_search",
        {"query": "rain berlin"},
    )
    assert use["id"].startswith("srvtoolu_")
    assert (result["type"], result["tool_use_id"]) == ("web_search_tool_result", use["id"])
    assert result["content"][0]["type"] == "web_search_result"
    assert text == {"type": "text", "text": "Let me search."}
    assert first["usage"]["server_tool_use"] == {"web_search_requests": 1}
    messages = [
        {"role": "user", "content": "What's 2+2?"},
        {"role": "assistant", "content": first["content"]},
    ]
    second = claude(client, server, messages=messages).json()
    assert (second["stop_reason"], second["content"]) == (
        "end_turn",
        [{"type": "text", "text": "It will rain."}],
    )
    assert "server_tool_use" not in second["usage"]
    assert server.log[-1].request.continuing


def test_pause_turn_streams_the_server_tool_blocks(client, server):
    """Streamed, the server_tool_use block's input comes as input_json_delta fragments, the
    result block whole, and message_delta says pause_turn with the search count."""
    server.script(paused)
    response = claude(client, server, stream=True)
    data = [msgspec.json.decode(e.data) for e in EventStreamParser().feed(response.text)]
    starts = [d["content_block"] for d in data if d["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["server_tool_use", "web_search_tool_result", "text"]
    assert starts[0]["input"] == {}
    pieces = [
        d["delta"]["partial_json"]
        for d in data
        if d["type"] == "content_block_delta" and d["index"] == 0
    ]
    assert msgspec.json.decode("".join(pieces)) == {"query": "rain berlin"}
    (delta,) = [d for d in data if d["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "pause_turn"
    assert delta["usage"] == {"output_tokens": 3, "server_tool_use": {"web_search_requests": 1}}


def test_thinking_sent_back_reaches_the_brain(client, server):
    """A thinking block sent back (with the mock's signature) is the assistant message's
    reasoning for a script to see."""
    seen: list[str | None] = []

    def script(request):
        seen.append(request.messages[1].reasoning if len(request.messages) > 1 else None)
        return MockReply(text="2 + 2 = 4", reasoning="add them")

    server.script(script)
    first = claude(client, server).json()
    messages = [
        {"role": "user", "content": "What's 2+2?"},
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": "And 3+4?"},
    ]
    assert claude(client, server, messages=messages).status_code == 200
    assert seen == [None, "add them"]


# -- Gemini --------------------------------------------------------------------------------------


def test_gemini_usage_counts_thoughts_cache_and_tool_prompts(client, server):
    """usageMetadata counts thoughts beside the candidates, the cached part of the prompt,
    and tool-use prompt tokens, all in the total."""
    server.script(
        lambda req: MockReply(
            text="2 + 2 = 4",
            reasoning="add them",
            input_tokens=30,
            output_tokens=12,
            reasoning_tokens=7,
            cached_tokens=20,
            tool_use_prompt_tokens=4,
        )
    )
    usage = gemini(client, server).json()["usageMetadata"]
    assert usage == {
        "promptTokenCount": 30,
        "candidatesTokenCount": 5,
        "thoughtsTokenCount": 7,
        "cachedContentTokenCount": 20,
        "toolUsePromptTokenCount": 4,
        "totalTokenCount": 30 + 12 + 4,
    }


@pytest.mark.parametrize(
    "thinking",
    [
        {"thinkingBudget": 1024, "includeThoughts": True},
        {"thinkingBudget": -1},
        {"thinkingLevel": "low"},
        {"thinking_level": "high"},
    ],
)
def test_gemini_takes_a_thinking_budget_or_level(client, server, thinking):
    """generationConfig.thinkingConfig takes a budget or a level (in either case of names)."""
    response = gemini(client, server, generationConfig={"thinkingConfig": thinking})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("thinking", "message"),
    [
        (
            {"thinkingBudget": 1024, "thinkingLevel": "low"},
            "You can only set only one of thinking budget and thinking level.",
        ),
        ({"thinkingLevel": "extreme"}, "thinking_level"),
        ({"thinkingBudget": "lots"}, "thinking_budget"),
        ({"budget": 5}, 'Unknown name "budget"'),
    ],
)
def test_gemini_refuses_a_thinking_config_it_cannot_read(client, server, thinking, message):
    """A budget and a level both, an unknown level, a budget not an integer, or an unknown
    field of thinkingConfig is a 400 INVALID_ARGUMENT."""
    response = gemini(client, server, generationConfig={"thinkingConfig": thinking})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert message in error["message"]


# -- what the real agent CLIs send ----------------------------------------------------------

AGENT_CLI_REQUESTS = sorted(
    (Path(__file__).parent / "recordings" / "agent_clis").rglob("*-POST-*.json")
)


@pytest.mark.parametrize(
    "recorded", AGENT_CLI_REQUESTS, ids=lambda path: f"{path.parent.name}/{path.name}"
)
def test_the_mock_takes_every_request_the_real_agent_clis_sent(recorded, client, server):
    """Each request Claude Code and Codex sent (recorded verbatim) is answered, not refused
    for a field or a message the real API takes (Codex's `client_metadata`, Claude Code's
    system messages among its messages), and the request log keeps it as sent."""
    sent = msgspec.json.decode(recorded.read_bytes())
    provider = "anthropic" if sent["path"].startswith("/v1/messages") else "openai"
    url = server.base_url(provider).rstrip("/") + sent["path"].removeprefix("/v1")
    headers = {"x-api-key": "x", "authorization": "Bearer x", "anthropic-version": "2023-06-01"}
    response = client.post(url, json=sent["body"], headers=headers)
    assert response.status_code == 200, response.text
    assert server.log[-1].body == sent["body"]
