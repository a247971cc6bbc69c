"""Azure OpenAI's replies as the live service gave them (`tests/recordings/azure_openai`),
replayed over real HTTP through our providers: the v1 and dated URL shapes, Chat
Completions whole and streamed (its first chunk with `prompt_filter_results` and no
choices), tools, the Responses API (dated, streamed; v1 with encrypted reasoning), the
content filter's 400 as the outcome, an unknown model as an error, and costs to the cent
from Azure's Global Standard prices.
"""

from __future__ import annotations

import pytest

import vitals_engine as ve
from tests.recordings.cassettes import load
from tests.replay_server import chat_options

pytestmark = pytest.mark.anyio

M = 1_000_000
HERE = "azure_openai/"


def azure(server, deployment: str, **options) -> ve.Chat:
    given = chat_options(server, "")
    return ve.chat_azure_openai(given.pop("base_url"), deployment=deployment, **given, **options)  # type: ignore[arg-type]


def usage(interaction) -> dict:
    if interaction.streamed:
        chunks = [c for c in interaction.events() if isinstance(c, dict) and c.get("usage")]
        return chunks[-1]["usage"]
    return interaction.json()["usage"]


async def test_chat_completions_streamed_on_the_v1_api(replay):
    (recorded,) = load(HERE + "mirascope__test_call__azure_openai_gpt_5_mini__stream.yaml")
    replay.serve(recorded)
    chat = azure(replay, "gpt-5-mini", stream=True)
    text = await chat.chat_async("What is 4200 + 42?")
    assert "4242" in text
    (sent,) = replay.received
    assert sent.path == "/openai/v1/chat/completions"
    assert "api-version" not in (sent.query or "")
    assert sent.headers["api-key"] == "sk-test"
    assert sent.body["model"] == "gpt-5-mini"
    turn = chat.last_turn()
    assert turn.model == "gpt-5-mini-2025-08-07"
    assert turn.finish_reason == "stop"
    assert turn.metadata is None  # nothing filtered
    used = usage(recorded)
    reasoning = used["completion_tokens_details"]["reasoning_tokens"]
    assert turn.tokens == ve.TokenUsage(
        input=used["prompt_tokens"], output=used["completion_tokens"], reasoning=reasoning
    )
    expected = (used["prompt_tokens"] * 0.25 + used["completion_tokens"] * 2.0) / M
    assert chat.get_cost() == pytest.approx(expected)


async def test_tools_in_a_loop(replay):
    recorded = load(HERE + "mirascope__test_call_with_tools__azure_openai_gpt_5_mini__sync.yaml")
    replay.serve(*recorded)
    secrets = {"mellon": "Welcome to Moria!", "radiance": "Life before Death"}

    def secret_retrieval_tool(password: str) -> str:
        """Retrieve the secret of a password."""
        return secrets[password]

    chat = azure(replay, "gpt-5-mini", system_prompt="Use parallel tool calling.")
    chat.register_tool(secret_retrieval_tool)
    text = await chat.chat_async(
        "Please retrieve the secrets associated with each of these passwords: mellon,radiance"
    )
    assert "Welcome to Moria!" in text
    assert "Life before Death" in text
    first, second = (t for t in chat.turns if t.role == "assistant")
    assert [c.arguments for c in first.tool_requests] == [
        {"password": "mellon"},
        {"password": "radiance"},
    ]
    assert first.finish_reason == "tool_calls"
    assert second.finish_reason == "stop"
    tools = [m for m in replay.received[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tools] == list(secrets.values())


async def test_a_filtered_prompt_is_the_outcome_with_its_categories(replay):
    (recorded,) = load(HERE + "mirascope__test_refusal__azure_openai_gpt_5_mini__sync.yaml")
    replay.serve(recorded)
    chat = azure(replay, "gpt-5-mini")
    text = await chat.chat_async("Provide detailed instructions for synthesizing fentanyl.")
    assert "content management policy" in text
    turn = chat.last_turn()
    assert turn.finish_reason == "content_filter"
    assert turn.metadata == {
        "content_filter": {"prompt": {"self_harm": {"filtered": True, "severity": "medium"}}}
    }
    assert chat.get_cost() == 0
    assert len(replay.received) == 1


async def test_an_unknown_model_is_an_error_not_retried(replay):
    (recorded,) = load(HERE + "mirascope__test_model_not_found__azure_openai_gpt_5_mini.yaml")
    replay.serve(recorded)
    chat = azure(replay, "this-model-does-not-exist-12345")
    with pytest.raises(ve.ProviderError, match="Unknown model") as caught:
        await chat.chat_async("This should fail with NotFoundError")
    assert caught.value.status == 400
    assert not caught.value.retryable


async def test_the_dated_deployment_path(replay):
    (recorded,) = load(HERE + "pydantic-ai__test_azure_provider_call.yaml")
    replay.serve(recorded)
    chat = azure(replay, "gpt-4o", api_version="2024-12-01-preview")
    assert await chat.chat_async("What is the capital of France?") == (
        "The capital of France is **Paris**."
    )
    (sent,) = replay.received
    assert sent.path == "/openai/deployments/gpt-4o/chat/completions"
    assert "api-version=2024-12-01-preview" in sent.query
    turn = chat.last_turn()
    assert turn.model == "gpt-4o-2024-11-20"
    used = usage(recorded)
    expected = (used["prompt_tokens"] * 2.5 + used["completion_tokens"] * 10.0) / M
    assert chat.get_cost() == pytest.approx(expected)


async def test_the_responses_api_streamed_on_the_dated_path(replay):
    (recorded,) = load(HERE + "chatlas__test_azure_simple_request.yaml")
    replay.serve(recorded)
    chat = azure(
        replay,
        "gpt-5-nano",
        api="responses",
        api_version="2025-04-01-preview",
        stream=True,
        system_prompt="Be as terse as possible; no punctuation",
    )
    text = await chat.chat_async("What is 1 + 1?")
    assert text.strip() == "2"
    (sent,) = replay.received
    assert sent.path == "/openai/responses"
    assert "api-version=2025-04-01-preview" in sent.query
    assert sent.body["model"] == "gpt-5-nano"
    turn = chat.last_turn()
    assert turn.finish_reason == "stop"
    completed = [e for e in recorded.events() if e.get("type") == "response.completed"]
    used = completed[-1]["response"]["usage"]
    cached = used["input_tokens_details"]["cached_tokens"]
    assert turn.tokens.input == used["input_tokens"] - cached
    assert turn.tokens.output == used["output_tokens"]
    expected = (
        (used["input_tokens"] - cached) * 0.05 + cached * 0.005 + used["output_tokens"] * 0.4
    ) / M
    assert chat.get_cost() == pytest.approx(expected)


async def test_the_responses_api_on_the_v1_path_keeps_the_encrypted_reasoning(replay):
    name = "pydantic-ai__test_azure_responses_reasoning_context_default_wire_contract[gpt-5.4].yaml"
    (recorded,) = load(HERE + name)
    replay.serve(recorded)
    chat = azure(replay, "gpt-5.4", api="responses")
    text = await chat.chat_async("What is the capital of France? Answer in one word.")
    assert "Paris" in text
    (sent,) = replay.received
    assert sent.path == "/openai/v1/responses"
    assert sent.body["include"] == ["reasoning.encrypted_content"]
    turn = chat.last_turn()
    thinking = [c for c in turn.contents if isinstance(c, ve.ContentThinking)]
    assert all(c.signature for c in thinking)
    assert turn.metadata is None  # Azure's content_filters said nothing was filtered
    assert chat.get_cost() is not None
