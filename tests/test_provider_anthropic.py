"""Anthropic's Messages API, both sides: our provider against the mock server over real HTTP."""

from __future__ import annotations

import httpx
import msgspec
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads
from vitals_engine import chat_anthropic
from vitals_engine.providers.anthropic import AnthropicProvider
from vitals_engine.testing import MockReply
from vitals_engine.testing.formats.anthropic import signature_of
from vitals_engine.transport.base import Timeouts
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import Turn

pytestmark = pytest.mark.usefixtures("no_retries")

KEY = "sk-ant-test-secret-0123456789"
PNG = b"\x89PNG\r\n\x1a\n fake image bytes"


@pytest.fixture(autouse=True)
def priced():
    ve.set_price("Anthropic", "claude-test", input=3, output=15, cached_input=0.3)


def claude(server, model="claude-test", **kwargs):
    return chat_anthropic(model, base_url=server.base_url("anthropic"), api_key=KEY, **kwargs)


def cost(input, output, cached=0):
    return (input * 3 + output * 15 + cached * 0.3) / 1_000_000


def canned(*bodies):
    """An httpx client answering each request with the next body, recording what was sent."""
    sent: list[dict] = []
    queue = list(bodies)

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(msgspec.json.decode(request.content))
        return httpx.Response(200, json=queue.pop(0))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), sent


def message(content, stop_reason="end_turn", **usage):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2, **usage},
    }


# -- conversation ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_plain_chat_sends_a_messages_request(server):
    """A prompt goes to /v1/messages with the key, the API version and max_tokens; the
    reply comes back as text with tokens, finish reason and model."""
    chat = claude(server)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    sent = server.log[-1]
    assert sent.format == "anthropic"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "What's 2+2?"}],
    }
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=2, output=5)
    assert turn.finish_reason == "stop"
    assert turn.model == "claude-test"
    assert chat.provider.model_id == "anthropic/claude-test"


@pytest.mark.anyio
async def test_system_prompt_is_the_top_level_system_field(server):
    """The system prompt travels as Anthropic's `system` field, never as a message."""
    chat = claude(server, system_prompt="Be brief.")
    await chat.chat_async("What's 1+1?")
    assert server.log[-1].request.system == "Be brief."
    assert server.log[-1].body["system"] == "Be brief."
    assert [m["role"] for m in server.log[-1].body["messages"]] == ["user"]


@pytest.mark.anyio
async def test_multi_turn_sends_the_whole_conversation(server):
    """The second request carries the first exchange and the new prompt, in order."""
    chat = claude(server)
    await chat.chat_async("What's 1+1?")
    assert await chat.chat_async("What's 2+3?") == "2 + 3 = 5"
    messages = server.log[-1].body["messages"]
    assert messages == [
        {"role": "user", "content": "What's 1+1?"},
        {"role": "assistant", "content": [{"type": "text", "text": "1 + 1 = 2"}]},
        {"role": "user", "content": "What's 2+3?"},
    ]
    assert len(server.log[-1].request.messages) == 3


@pytest.mark.anyio
async def test_params_merge_with_per_call_params_winning(server):
    """Chat params and per-call params land in the body; the call's win, and a given
    max_tokens replaces the default."""
    chat = claude(server, params={"temperature": 0, "max_tokens": 100, "top_k": 5})
    await chat.chat_async("Hello", temperature=0.5)
    body = server.log[-1].body
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.5, 100, 5)
    assert server.log[-1].request.max_tokens == 100


@pytest.mark.anyio
async def test_images_inline_and_by_url(server):
    """Inline images go as base64 sources, remote ones as url sources, beside the text."""
    chat = claude(server)
    inline = ve.ContentImage.from_bytes(PNG, "image/png")
    remote = ve.ContentImage(url="https://example.com/cat.jpg")
    await chat.chat_async("Describe these", inline, remote)
    (sent,) = server.log[-1].body["messages"]
    assert sent["content"] == [
        {"type": "text", "text": "Describe these"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": inline.data},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]
    assert server.log[-1].request.messages[-1].images == 2


# -- tools --------------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@pytest.mark.anyio
async def test_tool_call_round_trip(server):
    """Tools go as {name, description, input_schema}; the model's tool_use runs the tool and
    its tool_result goes back in a user message."""
    chat = claude(server)
    chat.register_tool(add)
    assert await chat.chat_async("Use add on 3 and 4") == "The tool returned 7."
    first, second = server.log[-2].body, server.log[-1].body
    (tool,) = first["tools"]
    assert tool["name"] == "add"
    assert tool["description"] == "Add two integers."
    assert tool["input_schema"]["required"] == ["a", "b"]
    assert "tool_choice" not in first
    call, result = second["messages"][-2:]
    assert call == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_0_add", "name": "add", "input": {"a": 3, "b": 4}}
        ],
    }
    assert result == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_0_add", "content": "7"}],
    }
    calling = chat.turns[1]
    assert calling.finish_reason == "tool_calls"
    assert calling.tool_requests[0].arguments == {"a": 3, "b": 4}


@pytest.mark.anyio
async def test_a_tool_that_raises_is_reported_with_is_error(server):
    """A tool's exception goes back as a tool_result with is_error, and the chat still answers."""
    chat = claude(server)
    chat.register_tool(divide)
    reply = await chat.chat_async("Use divide on 1 and 0")
    assert reply == "The tool failed with ZeroDivisionError: division by zero."
    (result,) = server.log[-1].body["messages"][-1]["content"]
    assert result == {
        "type": "tool_result",
        "tool_use_id": "call_0_divide",
        "content": "ZeroDivisionError: division by zero",
        "is_error": True,
    }
    assert server.log[-1].request.messages[-1].tool_error is True


# -- structured output ----------------------------------------------------------------


class City(msgspec.Struct):
    name: str
    population: int


@pytest.mark.anyio
async def test_structured_output_with_a_struct_uses_a_forced_tool(server):
    """extract_data forces the `_structured_output` tool; its input comes back as the JSON
    reply, not as a tool call to run."""
    chat = claude(server)
    city = await chat.extract_data_async("Name a city", type=City)
    assert city == City(name="mock", population=1)
    body = server.log[-1].body
    assert body["tool_choice"] == {"type": "tool", "name": "_structured_output"}
    (tool,) = body["tools"]
    assert tool["name"] == "_structured_output"
    assert tool["input_schema"]["properties"].keys() == {"name", "population"}
    turn = chat.last_turn()
    assert msgspec.json.decode(turn.text) == {"name": "mock", "population": 1}
    assert turn.tool_requests == []
    assert turn.finish_reason == "stop"
    assert len(server.log) == 1


@pytest.mark.anyio
async def test_structured_output_with_a_json_schema_dict(server):
    """A JSON-schema dict is the forced tool's input schema as is."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}, "sure": {"type": "boolean"}},
        "required": ["answer", "sure"],
    }
    chat = claude(server)
    assert await chat.extract_data_async("What's 2+2?", type=schema) == {
        "answer": 1,
        "sure": True,
    }
    assert server.log[-1].body["tools"][0]["input_schema"] == schema


@pytest.mark.anyio
async def test_structured_output_of_a_non_object_is_wrapped_and_unwrapped(server):
    """The API wants an object schema, so a list is wrapped in `value` and unwrapped again."""
    chat = claude(server)
    assert await chat.extract_data_async("Some numbers", type=list[int]) == [1]
    (tool,) = server.log[-1].body["tools"]
    assert tool["name"] == "_structured_output_value"
    assert tool["input_schema"] == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"type": "integer"}}},
        "required": ["value"],
    }


@pytest.mark.anyio
async def test_structured_output_next_to_tools_keeps_both(server):
    """User tools stay offered beside the structured-output tool."""
    chat = claude(server)
    chat.register_tool(add)
    await chat.extract_data_async("Name a city", type=City)
    names = [t["name"] for t in server.log[-1].body["tools"]]
    assert names == ["add", "_structured_output"]


@pytest.mark.anyio
async def test_text_around_a_structured_answer_is_dropped():
    """When Claude writes text beside the structured tool call, the reply is the JSON alone
    (thinking kept), so extract_data still validates."""
    client, _ = canned(
        message(
            [
                {"type": "thinking", "thinking": "A city...", "signature": "sig"},
                {"type": "text", "text": "Here is the city:"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "_structured_output",
                    "input": {"name": "Paris", "population": 2100000},
                },
            ],
            stop_reason="tool_use",
        )
    )
    chat = chat_anthropic("claude-test", api_key=KEY, client=client)
    assert await chat.extract_data_async("A city", type=City) == City("Paris", 2100000)
    turn = chat.last_turn()
    assert turn.contents[0] == ve.ContentThinking("A city...", "sig")
    assert turn.text == '{"name":"Paris","population":2100000}'
    assert turn.finish_reason == "stop"


def test_thinking_params_raise_max_tokens_and_unforce_structured_output():
    """With extended thinking on, max_tokens defaults above the budget and the structured
    tool is offered with tool_choice auto (the API refuses forced tools while thinking)."""
    provider = AnthropicProvider(
        "claude-test",
        api_key=KEY,
        params={"thinking": {"type": "enabled", "budget_tokens": 2000}},
    )
    body = provider.body(ChatRequest([ve.Turn.user("Hi")], output_schema=msgspec.json.schema(City)))
    assert body["max_tokens"] == 4096 + 2000
    assert body["tool_choice"] == {"type": "auto"}


# -- tokens and cost ------------------------------------------------------------------


@pytest.mark.anyio
async def test_cached_tokens_are_split_from_input_and_priced(server):
    """cache_read_input_tokens become cached_input, input excludes them, and the cost is
    the price arithmetic."""
    server.cached_tokens = 2
    chat = claude(server, system_prompt="You are a careful calculator.")
    await chat.chat_async("What's 2+2?")
    tokens = chat.last_turn().tokens
    assert tokens == ve.TokenUsage(input=5, output=5, cached_input=2)
    assert chat.get_cost() == pytest.approx(cost(5, 5, cached=2))
    assert chat.get_tokens()["cached_input"].to_list() == [2]


@pytest.mark.anyio
async def test_a_model_without_a_price_costs_none(server):
    """An unknown price is None, never 0."""
    chat = claude(server, model="claude-unpriced-model")
    await chat.chat_async("Hello")
    assert chat.last_turn().tokens.total > 0
    assert chat.get_cost() is None


@pytest.mark.anyio
async def test_cache_writes_are_their_own_tokens_and_reads_are_cached_input():
    """Tokens written to the prompt cache are neither plain input nor cached input (Inspect's
    `input_tokens_cache_write`); those read from it are cached input."""
    client, _ = canned(
        message(
            [{"type": "text", "text": "ok"}],
            cache_creation_input_tokens=10,
            cache_read_input_tokens=4,
        )
    )
    chat = chat_anthropic("claude-test", api_key=KEY, client=client)
    await chat.chat_async("Hi")
    tokens = chat.last_turn().tokens
    assert tokens == ve.TokenUsage(input=3, output=2, cached_input=4, cache_write=10)
    assert tokens.prompt == 17


# -- thinking -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_thinking_blocks_and_signatures_round_trip(server):
    """A thinking block comes back with its signature and is sent back unchanged next turn."""
    server.script(lambda req: MockReply(text="4", reasoning="2+2: two and two make four"))
    chat = claude(server)
    assert await chat.chat_async("What's 2+2?") == "4"
    thinking, text = chat.last_turn().contents
    signature = signature_of("2+2: two and two make four")
    assert thinking == ve.ContentThinking("2+2: two and two make four", signature)
    assert text == ve.ContentText("4")
    server.script(None)
    await chat.chat_async("And 3+3?")
    assert server.log[-1].body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "2+2: two and two make four", "signature": signature},
            {"type": "text", "text": "4"},
        ],
    }


@pytest.mark.anyio
async def test_a_tampered_thinking_block_is_refused_with_400(server):
    """The mock checks signatures as the API does: an edited thinking block is a 400."""
    chat = claude(server)
    chat.set_turns(
        [
            ve.Turn.user("Hi"),
            ve.Turn("assistant", [ve.ContentThinking("edited", "bad-sig"), ve.ContentText("Hey")]),
        ]
    )
    with pytest.raises(ve.ProviderError, match="signature") as caught:
        await chat.chat_async("Again")
    assert caught.value.status == 400


@pytest.mark.anyio
async def test_thinking_without_a_signature_is_not_sent():
    """Reasoning without a signature (from another provider) is dropped: the API refuses it."""
    client, sent = canned(message([{"type": "text", "text": "ok"}]))
    chat = chat_anthropic("claude-test", api_key=KEY, client=client)
    chat.set_turns(
        [
            ve.Turn.user("Hi"),
            ve.Turn("assistant", [ve.ContentThinking("hmm"), ve.ContentText("Hey")]),
        ]
    )
    await chat.chat_async("Again")
    assert sent[0]["messages"][1]["content"] == [{"type": "text", "text": "Hey"}]


@pytest.mark.anyio
async def test_redacted_thinking_round_trips_its_data():
    """A redacted_thinking block is kept (data and all) and sent back as it came."""
    client, sent = canned(
        message(
            [
                {"type": "redacted_thinking", "data": "EncRypted=="},
                {"type": "text", "text": "Done"},
            ]
        ),
        message([{"type": "text", "text": "Again"}]),
    )
    chat = chat_anthropic("claude-test", api_key=KEY, client=client)
    assert await chat.chat_async("Hi") == "Done"
    assert chat.last_turn().contents[0] == ve.ContentThinking("EncRypted==", redacted=True)
    await chat.chat_async("More")
    assert sent[1]["messages"][1]["content"][0] == {
        "type": "redacted_thinking",
        "data": "EncRypted==",
    }


# -- finish reasons ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("finish", "expected"),
    [("stop", "stop"), ("max_tokens", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_finish_reasons_from_the_server(server, finish, expected):
    """end_turn, max_tokens and refusal map to stop, max_tokens and content_filter."""
    server.script(lambda req: MockReply(text="cut", finish=finish))
    chat = claude(server)
    await chat.chat_async("Hello")
    assert chat.last_turn().finish_reason == expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("stop_sequence", "stop"),
        ("model_context_window_exceeded", "max_tokens"),
        ("something_new", "unknown"),
        (None, "unknown"),
    ],
)
async def test_finish_reasons_the_server_cannot_send(stop_reason, expected):
    """Other stop reasons map where they mean the same; unknown ones are "unknown"."""
    client, _ = canned(message([{"type": "text", "text": "x"}], stop_reason=stop_reason))
    chat = chat_anthropic("claude-test", api_key=KEY, client=client)
    await chat.chat_async("Hello")
    assert chat.last_turn().finish_reason == expected


# -- errors ---------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("header", ["retry-after", "reset"])
async def test_429_is_a_rate_limit_error_with_the_wait(server, header):
    """A 429 carries the wait from retry-after or from anthropic-ratelimit-*-reset."""
    server.fail("429", retry_after=3, header=header)
    with pytest.raises(ve.RateLimitError, match="rate_limit_error") as caught:
        await claude(server).chat_async("Hello")
    assert caught.value.retry_after == pytest.approx(3, abs=0.5)
    assert caught.value.retryable
    assert caught.value.request_id == "req_1"


@pytest.mark.anyio
async def test_529_overloaded_is_retryable_unavailability(server):
    """Anthropic's 529 (overloaded) is ProviderUnavailable, and says overloaded_error."""
    server.fail("529")
    with pytest.raises(ve.ProviderUnavailable, match="overloaded_error: Overloaded") as caught:
        await claude(server).chat_async("Hello")
    assert caught.value.status == 529
    assert caught.value.retryable


@pytest.mark.anyio
async def test_500_is_retryable_unavailability(server):
    """A 500 is ProviderUnavailable with Anthropic's api_error message."""
    server.fail("500")
    with pytest.raises(ve.ProviderUnavailable, match="api_error") as caught:
        await claude(server).chat_async("Hello")
    assert caught.value.status == 500


@pytest.mark.anyio
async def test_401_names_the_key_variable(server):
    """A 401 is an AuthenticationError pointing at ANTHROPIC_API_KEY."""
    server.fail("401")
    with pytest.raises(ve.AuthenticationError, match="ANTHROPIC_API_KEY") as caught:
        await claude(server).chat_async("Hello")
    assert "authentication_error" in str(caught.value)
    assert not caught.value.retryable


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "said"), [("400", "invalid_request_error"), ("404", "not found")])
async def test_400_and_404_are_not_retryable(server, kind, said):
    """A 400 or 404 is a plain ProviderError that retrying cannot fix."""
    server.fail(kind)
    with pytest.raises(ve.ProviderError, match=said) as caught:
        await claude(server).chat_async("Hello")
    assert type(caught.value) is ve.ProviderError
    assert not caught.value.retryable
    assert caught.value.status == int(kind)


@pytest.mark.anyio
@pytest.mark.parametrize(("kind", "excerpt"), [("malformed", "oops"), ("incomplete", "msg_")])
async def test_malformed_and_incomplete_bodies(server, kind, excerpt):
    """Invalid JSON and a message without `content` are MalformedResponse with an excerpt."""
    server.fail(kind)
    with pytest.raises(ve.MalformedResponse, match=excerpt) as caught:
        await claude(server).chat_async("Hello")
    assert excerpt in caught.value.body


@pytest.mark.anyio
async def test_a_dropped_connection_is_unavailability(server):
    """A connection closed mid-request is ProviderUnavailable, named for the model."""
    server.fail("drop")
    with pytest.raises(ve.ProviderUnavailable) as caught:
        await claude(server).chat_async("Hello")
    assert (caught.value.provider, caught.value.model) == ("Anthropic", "claude-test")


@pytest.mark.anyio
async def test_a_hanging_server_times_out(server):
    """No answer within the read timeout is ProviderTimeout."""
    server.fail("hang")
    chat = claude(server, timeouts=Timeouts(connect=1, read=0.2))
    with pytest.raises(ve.ProviderTimeout):
        await chat.chat_async("Hello")


def test_a_missing_key_names_the_variable(monkeypatch):
    """Without api_key= or ANTHROPIC_API_KEY the first call says which variable to set."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    chat = chat_anthropic("claude-test")
    with pytest.raises(ve.AuthenticationError, match="ANTHROPIC_API_KEY"):
        chat.chat("hi")


def test_the_key_is_read_from_the_environment(monkeypatch):
    """ANTHROPIC_API_KEY is the default key, and the default URL is Anthropic's."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    provider = chat_anthropic().provider
    assert isinstance(provider, AnthropicProvider)
    assert provider.headers(provider._api_key)["x-api-key"] == KEY
    assert provider.url() == "https://api.anthropic.com/v1/messages"
    assert provider.model == "claude-sonnet-4-5"


@pytest.mark.anyio
async def test_the_key_never_leaks(server):
    """The API key is in no repr and in no error message, whatever the failure."""
    chat = claude(server)
    assert KEY not in repr(chat)
    assert KEY not in repr(chat.provider)
    for kind in ("400", "401", "404", "429", "500", "529", "malformed", "incomplete", "drop"):
        server.fail(kind)
        with pytest.raises(ve.ProviderError) as caught:
            await chat.chat_async("Hello")
        error = caught.value
        for text in (str(error), repr(error), repr(error.args), str(error.body)):
            assert KEY not in text


# -- the mock server's side ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"max_tokens": 10, "messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"model": "m", "max_tokens": 10}, "messages"),
        (
            {"model": "m", "max_tokens": 10, "messages": [{"role": "tool", "content": "x"}]},
            "role",
        ),
        (
            {
                "model": "m",
                "max_tokens": 10,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}],
                    }
                ],
            },
            "tool_result",
        ),
    ],
)
def test_the_mock_refuses_what_the_api_refuses(server, body, said):
    """Requests the real API refuses get a 400 in Anthropic's error shape."""
    response = httpx.post(f"{server.base_url('anthropic')}/messages", json=body)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert said in error["error"]["message"]


def test_the_mock_renders_a_real_messages_response(server):
    """A response has Anthropic's fields, and a string or block-list system both work."""
    server.cached_tokens = 1
    response = httpx.post(
        f"{server.base_url('anthropic')}/messages",
        json={
            "model": "claude-test",
            "max_tokens": 50,
            "system": [{"type": "text", "text": "Be"}, {"type": "text", "text": "brief."}],
            "messages": [{"role": "user", "content": "What's 2+2?"}],
        },
    )
    data = response.json()
    assert data["id"].startswith("msg_")
    assert (data["type"], data["role"], data["model"]) == ("message", "assistant", "claude-test")
    assert data["content"] == [{"type": "text", "text": "2 + 2 = 4"}]
    assert (data["stop_reason"], data["stop_sequence"]) == ("end_turn", None)
    assert data["usage"] == {
        "input_tokens": 3,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1,
        "output_tokens": 5,
    }
    assert server.log[-1].request.system == "Be\nbrief."


# -- a whole evaluation ------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_task_runs_against_the_server(server, tmp_path):
    """A Task with generate() over Anthropic scores, prices and logs every sample."""
    dataset = [
        {"input": "What's 2+2?", "target": "4"},
        {"input": "What's 3+4?", "target": "7"},
        {"input": "What's 10-3?", "target": "7"},
    ]
    chat = claude(server, system_prompt="Answer with the sum.")
    task = ve.Task(dataset, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    assert task.metrics == {"accuracy": 1.0}
    frame = task.get_samples()
    assert frame["result"].to_list() == ["2 + 2 = 4", "3 + 4 = 7", "10 - 3 = 7"]
    assert server.requests_by_model["claude-test"] == 3
    costs = task.get_cost()
    assert costs["provider"].to_list() == ["Anthropic"]
    assert costs["model"].to_list() == ["claude-test"]
    assert costs["requests"].to_list() == [3]
    (row,) = costs.iter_rows(named=True)
    assert row["input_tokens"] == 3 * 6  # four system words + two prompt words
    assert row["cost"] == pytest.approx(cost(row["input_tokens"], row["output_tokens"]))
    full = assert_inspect_reads(task.log_path, task)
    assert full.status == "success"
    usage = full.stats.model_usage["anthropic/claude-test"]
    assert usage.input_tokens == row["input_tokens"]
    assert usage.output_tokens == row["output_tokens"]
    assert usage.total_cost == pytest.approx(row["cost"])


# -- streaming -------------------------------------------------------------------------


def ask(prompt: str) -> ChatRequest:
    """One request of a single user prompt, for the provider itself."""
    return ChatRequest([Turn.user(prompt)])


def sse_client(*events):
    """An httpx client answering every request with these (name, data) events."""
    body = "".join(
        f"event: {name}\ndata: {msgspec.json.encode(data).decode()}\n\n" for name, data in events
    ).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def streamed(client):
    return chat_anthropic(
        "claude-test", base_url="https://api.test/v1", api_key=KEY, client=client, stream=True
    )


def start(**usage):
    shell = {**message([], stop_reason=None), "usage": {"input_tokens": 3, "output_tokens": 1}}
    shell["usage"].update(usage)
    return ("message_start", {"type": "message_start", "message": shell})


def block(index, content, *deltas):
    events = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": content},
        ),
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def end(stop_reason="end_turn", **usage):
    return [
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


@pytest.mark.anyio
async def test_streamed_usage_takes_the_last_counts_of_message_delta():
    """Counts in message_delta are cumulative and win over message_start's, input and cache
    counts included (as the API now sends them)."""
    client = sse_client(
        start(cache_read_input_tokens=0),
        *block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "ok"}),
        *end(output_tokens=7, input_tokens=10, cache_read_input_tokens=4),
    )
    chat = streamed(client)
    assert await chat.chat_async("hi") == "ok"
    assert chat.last_turn().tokens == ve.TokenUsage(input=10, output=7, cached_input=4)
    await client.aclose()


@pytest.mark.anyio
async def test_streamed_redacted_thinking_pings_and_new_event_types():
    """A redacted_thinking block comes whole in its start event and is kept; pings and
    event types this version does not know are passed over."""
    client = sse_client(
        start(),
        ("ping", {"type": "ping"}),
        *block(0, {"type": "redacted_thinking", "data": "EncRypted=="}),
        ("future_event", {"type": "future_event", "what": 1}),
        *block(1, {"type": "text", "text": ""}, {"type": "text_delta", "text": "4"}),
        *end(output_tokens=2),
    )
    chat = streamed(client)
    assert await chat.chat_async("hi") == "4"
    assert chat.last_turn().contents[0] == ve.ContentThinking("EncRypted==", redacted=True)
    await client.aclose()


@pytest.mark.anyio
async def test_a_streamed_tool_input_with_no_fragments_is_empty():
    """A tool_use whose input streams no fragment at all has the input {}."""
    tool = {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}
    client = sse_client(start(), *block(0, tool), *end("tool_use", output_tokens=3))
    turn = await streamed(client).provider.generate(ask("What time is it?"))
    assert [(c.id, c.name, c.arguments) for c in turn.tool_requests] == [("toolu_1", "now", {})]
    await client.aclose()


@pytest.mark.anyio
async def test_a_stream_without_message_start_is_malformed(no_retries):
    """A stream that ends properly but never started a message is MalformedResponse."""
    client = sse_client(("message_stop", {"type": "message_stop"}))
    with pytest.raises(ve.MalformedResponse, match="message_start"):
        await streamed(client).chat_async("hi")
    await client.aclose()


@pytest.mark.anyio
async def test_streamed_structured_output_comes_from_input_json_deltas(server):
    """extract_data over a stream: the forced tool's input arrives as input_json_delta
    fragments and is the reply, as when answered whole."""
    chat = claude(server, stream=True)
    assert await chat.extract_data_async("Name a city", type=City) == City("mock", 1)
    assert server.log[-1].request.stream
    assert chat.last_turn().finish_reason == "stop"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("overloaded_error", ve.ProviderUnavailable),
        ("api_error", ve.ProviderUnavailable),
        ("rate_limit_error", ve.RateLimitError),
        ("authentication_error", ve.AuthenticationError),
        ("invalid_request_error", ve.ProviderError),
        ("some_new_error", ve.ProviderUnavailable),
    ],
)
async def test_an_error_event_is_the_error_of_its_type(kind, error):
    """`event: error` is classified by its type as the HTTP status it stands for; a type
    this version does not know counts as a server error."""
    failure = {"type": "error", "error": {"type": kind, "message": "no"}}
    client = sse_client(start(), ("error", failure))
    with pytest.raises(ve.ProviderError) as info:
        await streamed(client).chat_async("hi")
    assert type(info.value) is error
    assert kind in info.value.message
    await client.aclose()
