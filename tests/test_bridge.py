"""The bridge, as agents see it: the official `anthropic` and `openai` SDKs as its clients
(streaming and not), each call served by a chat of another provider against the mock
server, over real HTTP on 127.0.0.1; and inside a task, where its calls are the sample's
(tokens and cost by role, the agent's tool calls in the transcript, a failure raised)."""

from __future__ import annotations

import contextlib
import json

import anthropic
import anyio
import openai
import pytest

import vitals_engine as ve
from vitals_engine.testing import MockToolCall, reply, trajectory
from vitals_engine.vocab.transcript import ToolRecord
from vitals_engine.vocab.turns import ContentToolRequest

pytestmark = pytest.mark.anyio

WEATHER = {
    "name": "weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _openai_chat(server):
    return ve.chat_openai("gpt-4.1-mini", base_url=server.base_url(), api_key="real-key")


def _anthropic_chat(server):
    return ve.chat_anthropic(
        "claude-sonnet-4-5", base_url=server.base_url("anthropic"), api_key="real-key"
    )


def _tool_script(request):
    """Call `weather` first; once its result is back, say what it said."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return reply(
            tool_calls=[MockToolCall("call_1", "weather", {"city": "Paris"})], finish="tool_calls"
        )
    return reply(f"It is {results[-1].text} in Paris.")


@pytest.mark.parametrize("stream", [False, True])
async def test_an_anthropic_client_is_served_by_an_openai_chat(server, stream):
    """Claude's Messages API in, OpenAI's Chat Completions out: the tool call and the answer
    reach the SDK, the chat's model serves (not the one the client named), and the mock
    sees the chat's key, never the bridge's."""
    server.script(_tool_script)
    async with (
        ve.bridge(_openai_chat(server)) as address,
        anthropic.AsyncAnthropic(base_url=address.base_url, api_key=address.api_key) as client,
    ):
        tool = {
            **{k: WEATHER[k] for k in ("name", "description")},
            "input_schema": WEATHER["parameters"],
        }
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = await _anthropic_create(client, stream, messages, [tool])
        assert first.stop_reason == "tool_use"
        (use,) = [block for block in first.content if block.type == "tool_use"]
        assert (use.name, use.input) == ("weather", {"city": "Paris"})
        messages += [
            {"role": "assistant", "content": [block.model_dump() for block in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ]
        second = await _anthropic_create(client, stream, messages, [tool])
        assert second.content[0].text == "It is sunny in Paris."
        assert second.usage.output_tokens > 0
        assert address.bridge.calls == 2
    assert server.requests_by_model == {"gpt-4.1-mini": 2}
    assert all(entry.headers.get("Authorization") == "Bearer real-key" for entry in server.log)


async def _anthropic_create(client, stream, messages, tools):
    kwargs = {"model": "claude-opus-4-1", "max_tokens": 1024, "messages": messages, "tools": tools}
    if not stream:
        return await client.messages.create(**kwargs)
    async with client.messages.stream(**kwargs) as events:
        return await events.get_final_message()


@pytest.mark.parametrize("stream", [False, True])
async def test_an_openai_chat_completions_client_is_served_by_an_anthropic_chat(server, stream):
    """Chat Completions in, Anthropic's Messages out, with a tool round trip."""
    server.script(_tool_script)
    async with (
        ve.bridge(_anthropic_chat(server)) as address,
        openai.AsyncOpenAI(base_url=address.openai_base_url, api_key=address.api_key) as client,
    ):
        tools = [{"type": "function", "function": WEATHER}]
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        first = await _completion(client, stream, messages, tools)
        (call,) = first.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "weather",
            {"city": "Paris"},
        )
        messages += [
            {"role": "assistant", "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "rainy"},
        ]
        second = await _completion(client, stream, messages, tools)
        assert second.content == "It is rainy in Paris."
    assert server.requests_by_model == {"claude-sonnet-4-5": 2}


async def _completion(client, stream, messages, tools):
    kwargs = {"model": "gpt-5", "messages": messages, "tools": tools}
    if not stream:
        return (await client.chat.completions.create(**kwargs)).choices[0].message
    async with client.chat.completions.stream(**kwargs) as events:
        return (await events.get_final_completion()).choices[0].message


@pytest.mark.parametrize("stream", [False, True])
async def test_an_openai_responses_client_is_served_by_an_anthropic_chat(server, stream):
    """The Responses API (as Codex speaks it: the whole input each time, store=false, fields
    the bridge has no use for) in, Anthropic's Messages out, with a tool round trip."""
    server.script(_tool_script)
    async with (
        ve.bridge(_anthropic_chat(server)) as address,
        openai.AsyncOpenAI(base_url=address.openai_base_url, api_key=address.api_key) as client,
    ):
        tools = [{"type": "function", **WEATHER}]
        items: list = [{"role": "user", "content": "Weather in Paris?"}]
        first = await _response(client, stream, items, tools)
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("weather", {"city": "Paris"})
        items += [item.model_dump(exclude_none=True) for item in first.output]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "windy"})
        second = await _response(client, stream, items, tools)
        assert second.output_text == "It is windy in Paris."
        assert second.usage.output_tokens > 0
    assert server.requests_by_model == {"claude-sonnet-4-5": 2}


async def _response(client, stream, items, tools):
    kwargs = {
        "model": "gpt-5-codex",
        "input": items,
        "tools": tools,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "abc",
        "extra_body": {"client_metadata": {"session": "x"}},
    }
    if not stream:
        return await client.responses.create(**kwargs)
    async with client.responses.stream(**kwargs) as events:
        return await events.get_final_response()


async def test_a_client_without_the_bridges_key_is_refused(server):
    """A request without the key the bridge handed out is a 401 in the API's own shape,
    and reaches no model."""
    async with (
        ve.bridge(_openai_chat(server)) as address,
        anthropic.AsyncAnthropic(
            base_url=address.base_url, api_key="sk-real-looking", max_retries=0
        ) as client,
    ):
        with pytest.raises(anthropic.AuthenticationError):
            await client.messages.create(
                model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
    assert server.requests == 0


async def test_a_call_that_fails_ends_the_block_and_is_raised(server, no_retries):
    """A model call that fails past the retries answers the agent with an error, cancels
    the block that opened the bridge, and is raised there."""
    server.fail("500", times=None)

    async def agent() -> None:
        async with (
            ve.bridge(_openai_chat(server)) as address,
            anthropic.AsyncAnthropic(
                base_url=address.base_url, api_key=address.api_key, max_retries=0
            ) as client,
        ):
            with contextlib.suppress(anthropic.InternalServerError):  # or cancelled before
                await client.messages.create(
                    model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
                )
            await anyio.sleep_forever()  # the failure cancels this

    with pytest.raises(ve.ProviderError):
        await agent()
    assert server.requests >= 1


async def test_an_agents_calls_are_the_samples(server, tmp_path):
    """In a task, a solver whose agent talks to the bridge: its calls are the sample's
    (tokens and cost by role and model), its tool calls are `tool` events of the sample's
    transcript, and its conversation is the sample's chat."""
    server.script(trajectory(("weather", {"city": "Oslo"}), submit=None))
    chat = _openai_chat(server)
    tool = {"name": "weather", "description": "Weather.", "input_schema": WEATHER["parameters"]}

    async def agent(input, **_):
        async with (
            ve.bridge(chat) as address,
            anthropic.AsyncAnthropic(base_url=address.base_url, api_key=address.api_key) as client,
        ):
            messages = [{"role": "user", "content": input}]
            while True:
                got = await client.messages.create(
                    model="any", max_tokens=100, messages=messages, tools=[tool]
                )
                uses = [block for block in got.content if block.type == "tool_use"]
                if not uses:
                    return ve.Solution(got.content[0].text, chat=address.bridge.chat)
                messages += [
                    {"role": "assistant", "content": [b.model_dump() for b in got.content]},
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": uses[0].id,
                                "content": "snow",
                            }
                        ],
                    },
                ]

    task = ve.Task(
        [{"input": "Weather in Oslo?", "target": "done"}], agent, ve.detect_includes(), dir=tmp_path
    )
    async with task.stream_async() as samples:
        (record,) = [record async for record in samples]
    assert task.metrics == {"accuracy": 1.0}
    (row,) = task.get_cost().to_dicts()
    assert (row["role"], row["model"]) == ("solver", "gpt-4.1-mini")
    assert row["input_tokens"] > 0
    assert row["output_tokens"] > 0
    tools = [e for e in record.events if isinstance(e, ToolRecord)]
    assert [(e.function, e.arguments, e.result) for e in tools] == [
        ("weather", {"city": "Oslo"}, "snow")
    ]
    turns = task.get_samples()["solver_chat"][0].turns
    assert [c.name for t in turns for c in t.contents if isinstance(c, ContentToolRequest)] == [
        "weather"
    ]


@pytest.mark.parametrize(("chat_cap", "sent"), [(None, 777), (321, 321)])
async def test_the_agents_output_cap_serves_unless_the_chat_sets_one(server, chat_cap, sent):
    """An Anthropic chat without its own `max_tokens` takes the agent's (Claude Code asks
    for 32,000; the chat's default of 4,096 would cut its long edits); one with its own
    keeps it, as every parameter of the chat wins."""
    params = {} if chat_cap is None else {"max_tokens": chat_cap}
    chat = ve.chat_anthropic(
        "claude-sonnet-4-5", base_url=server.base_url("anthropic"), api_key="k", params=params
    )
    async with (
        ve.bridge(chat) as address,
        anthropic.AsyncAnthropic(base_url=address.base_url, api_key=address.api_key) as client,
    ):
        await client.messages.create(
            model="m", max_tokens=777, messages=[{"role": "user", "content": "hi"}]
        )
    assert server.log[-1].body["max_tokens"] == sent
