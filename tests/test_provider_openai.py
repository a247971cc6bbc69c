"""chat_openai() and the OpenAI-compatible providers against the mock server over real HTTP."""

from __future__ import annotations

import anyio.lowlevel
import httpx
import msgspec
import polars as pl
import pytest

import vitals_engine as ve
from tests.addresses import refusing_port
from tests.helpers import openai
from tests.inspect_check import assert_inspect_reads
from vitals_engine.pricing import table as pricing
from vitals_engine.testing import MockReply, MockToolCall
from vitals_engine.transport.base import Timeouts
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import Turn

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries")]

KEY = "sk-test"


@pytest.fixture(autouse=True)
def no_user_prices(monkeypatch):
    """Each test starts with no user-set prices."""
    monkeypatch.setattr(pricing, "_user_prices", {})
    monkeypatch.setattr(pricing, "_found", {})


def lower(headers):
    return {k.lower(): v for k, v in headers.items()}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


async def lookup(city: str) -> str:
    """Look up the weather in a city.

    Args:
        city: The city's name.
    """
    await anyio.lowlevel.checkpoint()
    return f"Sunny in {city}"


class Person(msgspec.Struct):
    name: str
    age: int


class Team(msgspec.Struct):
    title: str
    members: list[Person]


# -- talking ---------------------------------------------------------------------------


async def test_plain_chat_answers_and_records_turns(server):
    """A chat over HTTP answers the prompt and keeps the user and assistant turns."""
    chat = openai(server)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert [t.role for t in chat.turns] == ["user", "assistant"]
    last = chat.last_turn()
    assert last.model == "gpt-test"
    assert last.finish_reason == "stop"
    assert last.started_at is not None
    assert last.duration is not None
    assert last.duration >= 0
    record = server.log[-1]
    assert record.format == "openai"
    assert record.model == "gpt-test"
    assert record.body["messages"] == [{"role": "user", "content": "What's 2+2?"}]
    assert lower(record.headers)["authorization"] == f"Bearer {KEY}"


async def test_openai_base_url_from_the_environment(server, monkeypatch):
    """OPENAI_BASE_URL (as the OpenAI SDK reads it) replaces the default server of
    chat_openai(); base_url= still wins; the other OpenAI-compatible providers keep
    their own default."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url() + "/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    chat = ve.chat_openai("gpt-test")
    assert chat.provider.base_url == server.base_url()
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert server.requests == 1
    explicit = ve.chat_openai("gpt-test", base_url="http://127.0.0.1:9/v1")
    assert explicit.provider.base_url == "http://127.0.0.1:9/v1"
    assert ve.chat_ollama("llama3.2").provider.base_url == "http://localhost:11434/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    assert ve.chat_openai("gpt-test").provider.base_url == "https://api.openai.com/v1"


async def test_system_prompt_is_the_first_message(server):
    """The system prompt goes first in the messages, with role "system"."""
    chat = openai(server, system_prompt="Be brief.")
    await chat.chat_async("hello")
    assert server.log[-1].body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert server.log[-1].body["messages"][1] == {"role": "user", "content": "hello"}


async def test_multi_turn_sends_the_whole_conversation(server):
    """A second prompt sends the earlier user and assistant turns along with it."""
    chat = openai(server)
    await chat.chat_async("What's 1+1?")
    assert await chat.chat_async("What's 2+3?") == "2 + 3 = 5"
    assert server.log[-1].body["messages"] == [
        {"role": "user", "content": "What's 1+1?"},
        {"role": "assistant", "content": "1 + 1 = 2"},
        {"role": "user", "content": "What's 2+3?"},
    ]
    assert len(chat.turns) == 4


async def test_images_are_sent_as_image_url_parts(server):
    """Inline images become data: URIs and remote images keep their URL, next to the text."""
    chat = openai(server)
    inline = ve.ContentImage.from_bytes(b"...", "image/png")
    remote = ve.ContentImage(url="https://example.com/cat.jpg")
    assert await chat.chat_async("Describe these", inline, remote) == "Describe these"
    (message,) = server.log[-1].body["messages"]
    assert message["role"] == "user"
    assert message["content"] == [
        {"type": "text", "text": "Describe these"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,Li4u", "detail": "auto"}},
        {
            "type": "image_url",
            "image_url": {"url": "https://example.com/cat.jpg", "detail": "auto"},
        },
    ]
    assert server.log[-1].request.messages[0].images == 2


# -- tools -------------------------------------------------------------------------------


async def test_tool_definition_carries_schema_and_descriptions(server):
    """A registered function is sent as a tool with its JSON schema and docstring descriptions."""
    chat = openai(server)
    chat.register_tool(add)
    await chat.chat_async("hello")
    assert server.log[-1].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "a": {"type": "integer", "description": "The first number."},
                        "b": {"type": "integer", "description": "The second number."},
                    },
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
            },
        }
    ]


async def test_tool_loop_ends_with_the_answer(server):
    """The model calls the tool, gets its result, and answers; the turns hold both steps."""
    chat = openai(server)
    chat.register_tool(add)
    assert await chat.chat_async("Use add on 2 and 3") == "The tool returned 5."
    roles = [t.role for t in chat.turns]
    assert roles == ["user", "assistant", "user", "assistant"]
    (request,) = chat.turns[1].tool_requests
    assert (request.name, request.arguments) == ("add", {"a": 2, "b": 3})
    assert chat.turns[1].finish_reason == "tool_calls"
    (result,) = chat.turns[2].contents
    assert isinstance(result, ve.ContentToolResult)
    assert (result.id, result.value, result.error) == (request.id, 5, None)
    assert server.requests == 2
    messages = server.log[-1].body["messages"]
    assert messages[-2]["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a":2,"b":3}',
    }
    assert messages[-1] == {"role": "tool", "tool_call_id": request.id, "content": "5"}


async def test_tool_error_goes_back_to_the_model(server):
    """A tool that raises sends "Error: ..." back to the model, and the chat still answers."""
    chat = openai(server)
    chat.register_tool(divide)
    reply = await chat.chat_async("Use divide on 1 and 0")
    assert reply == "The tool failed with Error: ZeroDivisionError: float division by zero."
    tool_message = server.log[-1].body["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == "Error: ZeroDivisionError: float division by zero"
    (result,) = chat.turns[2].contents
    assert result.error == "ZeroDivisionError: float division by zero"


class Opaque:
    """A value msgspec cannot turn into JSON."""


def make_opaque() -> Opaque:
    """Make an opaque object."""
    return Opaque()


async def test_tool_with_an_unserializable_result_becomes_a_tool_error(server):
    """A tool whose return value cannot be sent as JSON gives the model an error, not a crash."""
    chat = openai(server)
    chat.register_tool(make_opaque)
    reply = await chat.chat_async("Use make_opaque now")
    assert reply.startswith("The tool failed with Error: ")
    (result,) = chat.turns[2].contents
    assert result.error is not None


async def test_async_tools_are_awaited(server):
    """An async tool is awaited and its return value goes back to the model."""
    chat = openai(server)
    chat.register_tool(lookup)
    assert await chat.chat_async("Use lookup for the weather") == "The tool returned Sunny in mock."
    assert server.log[-1].body["messages"][-1]["content"] == "Sunny in mock"


async def test_too_many_tool_rounds_is_a_config_error(server):
    """A model that keeps calling tools past max_tool_rounds raises ConfigError."""
    server.script(lambda req: MockReply(tool_calls=[MockToolCall("c1", "add", {"a": 1, "b": 2})]))
    chat = openai(server)
    chat.register_tool(add)
    chat.max_tool_rounds = 2
    with pytest.raises(ve.ConfigError, match="kept calling tools for 2 rounds"):
        await chat.chat_async("go")
    assert server.requests == 3
    chat.max_tool_rounds = 1
    with pytest.raises(ve.ConfigError, match="kept calling tools for 1 round without"):
        await chat.chat_async("go")


# -- structured output ---------------------------------------------------------------------


async def test_extract_data_returns_a_validated_struct(server):
    """extract_data(type=Struct) sends the JSON schema and returns a validated Struct."""
    chat = openai(server)
    person = await chat.extract_data_async("Extract: Ann is 31.", type=Person)
    assert person == Person(name="mock", age=1)
    response_format = server.log[-1].body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert schema["type"] == "object"
    assert schema["properties"] == {"name": {"type": "string"}, "age": {"type": "integer"}}
    assert schema["required"] == ["name", "age"]


async def test_extract_data_with_nested_structs(server):
    """A Struct nesting other Structs keeps its $defs and validates the nested values."""
    chat = openai(server)
    team = await chat.extract_data_async("Extract the team.", type=Team)
    assert team == Team(title="mock", members=[Person(name="mock", age=1)])
    schema = server.log[-1].body["response_format"]["json_schema"]["schema"]
    assert "Person" in schema["$defs"]


async def test_extract_data_with_a_json_schema_dict(server):
    """A JSON-schema dict as type= is sent as is and returns the decoded value."""
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["score", "label"],
    }
    chat = openai(server)
    assert await chat.extract_data_async("Rate it.", type=schema) == {"score": 1, "label": "mock"}
    assert server.log[-1].body["response_format"]["json_schema"]["schema"] == schema


@pytest.mark.parametrize("raw", ["not json at all", '{"name": "Ann", "age": "old"}'])
async def test_reply_that_does_not_validate_raises_extraction_error(server, raw):
    """A structured reply that does not validate raises ExtractionError holding the raw reply."""
    server.script(lambda req: raw)
    chat = openai(server)
    with pytest.raises(ve.ExtractionError, match="does not validate") as info:
        await chat.extract_data_async("Extract: Ann.", type=Person)
    assert info.value.raw == raw


async def test_schema_dict_reply_that_does_not_fit_raises_extraction_error(server):
    """A reply missing a required key of a JSON-schema dict raises ExtractionError."""
    server.script(lambda req: '{"label": "x"}')
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    with pytest.raises(ve.ExtractionError, match=r"at \$: 'score' is a required property") as info:
        await openai(server).extract_data_async("Rate it.", type=schema)
    assert info.value.raw == '{"label": "x"}'


# -- tokens and cost --------------------------------------------------------------------------


async def test_token_usage_comes_from_the_usage_block(server):
    """prompt_tokens and completion_tokens become the turn's input and output tokens."""
    chat = openai(server)
    await chat.chat_async("one two three four five")
    assert chat.last_turn().tokens == ve.TokenUsage(input=5, output=5)


async def test_cached_and_reasoning_tokens(server):
    """Cached prompt tokens are split out of input; reasoning tokens are counted in output."""
    server.cached_tokens = 3
    server.reasoning_tokens = 2
    chat = openai(server)
    await chat.chat_async("one two three four five")
    assert chat.last_turn().tokens == ve.TokenUsage(input=2, cached_input=3, output=7, reasoning=2)


async def test_cost_uses_the_price_per_million_tokens(server):
    """With a set price, a call costs input, cached input and output tokens at their prices."""
    ve.set_price("OpenAI", "gpt-test", input=2, output=8, cached_input=0.5)
    server.cached_tokens = 3
    chat = openai(server)
    await chat.chat_async("one two three four five six")
    tokens = chat.last_turn().tokens
    assert tokens == ve.TokenUsage(input=3, cached_input=3, output=6)
    expected = (tokens.input * 2 + tokens.cached_input * 0.5 + tokens.output * 8) / 1_000_000
    assert chat.last_turn().cost == expected
    assert chat.get_cost() == expected


async def test_dated_model_names_find_the_base_price(server):
    """A dated snapshot such as gpt-test-2025-01-01 is priced as gpt-test."""
    ve.set_price("OpenAI", "gpt-test", input=2, output=8, cached_input=0.5)
    chat = openai(server, model="gpt-test-2025-01-01")
    await chat.chat_async("What's 2+2?")
    tokens = chat.last_turn().tokens
    assert chat.last_turn().model == "gpt-test-2025-01-01"
    assert chat.get_cost() == (tokens.input * 2 + tokens.output * 8) / 1_000_000


async def test_unknown_model_costs_none(server):
    """A model without a price has cost None, never 0."""
    chat = openai(server, model="no-such-model-xyz")
    await chat.chat_async("What's 2+2?")
    assert chat.last_turn().cost is None
    assert chat.get_cost() is None


async def test_get_tokens_is_a_frame_per_assistant_turn(server):
    """get_tokens() has one row per assistant turn with input, output, cached input and cost."""
    ve.set_price("OpenAI", "gpt-test", input=2, output=8)
    server.cached_tokens = 1
    chat = openai(server)
    await chat.chat_async("What's 2+2?")
    await chat.chat_async("one two three")
    frame = chat.get_tokens()
    assert frame.columns == ["turn", "input", "output", "cached_input", "cache_write", "cost"]
    assert frame["turn"].to_list() == [1, 2]
    assert frame["cached_input"].to_list() == [1, 1]
    assert frame["input"].to_list() == [t.tokens.input for t in chat.turns if t.tokens]
    assert frame["output"].to_list() == [5, 3]
    assert frame["cost"].dtype == pl.Float64
    assert frame["cost"].sum() == pytest.approx(chat.get_cost())


async def test_length_finish_becomes_max_tokens(server):
    """OpenAI's finish_reason "length" is recorded as "max_tokens"."""
    server.script(lambda req: MockReply(text="cut sho", finish="max_tokens"))
    chat = openai(server)
    assert await chat.chat_async("Write an essay") == "cut sho"
    assert chat.last_turn().finish_reason == "max_tokens"


async def test_params_are_merged_into_the_body(server):
    """params= of the constructor and of chat() both reach the request body."""
    chat = openai(server, params={"temperature": 0})
    await chat.chat_async("hi", max_tokens=7)
    body = server.log[-1].body
    assert body["temperature"] == 0
    assert body["max_tokens"] == 7
    assert server.log[-1].request.max_tokens == 7


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "wait"),
    [("retry-after", 2.0), ("retry-after-ms", 1.5), ("reset", 2.5)],
)
async def test_rate_limit_carries_the_wait(server, header, wait):
    """A 429 raises RateLimitError whose retry_after is the wait the headers gave."""
    server.fail("429", retry_after=wait, header=header)
    with pytest.raises(ve.RateLimitError, match=rf"retry after {wait:g}s") as info:
        await openai(server).chat_async("hi")
    error = info.value
    assert error.retry_after == wait
    assert error.status == 429
    assert error.retryable is True
    assert error.provider == "OpenAI"
    assert error.model == "gpt-test"
    assert error.request_id is not None
    assert error.request_id.startswith("req_")


@pytest.mark.parametrize("kind", ["500", "503", "529"])
async def test_server_errors_are_provider_unavailable(server, kind):
    """500, 503 and 529 raise ProviderUnavailable, which is retryable."""
    server.fail(kind)
    with pytest.raises(ve.ProviderUnavailable, match=rf"\(HTTP {kind}\)") as info:
        await openai(server).chat_async("hi")
    assert info.value.status == int(kind)
    assert info.value.retryable is True


async def test_bad_request_is_a_plain_provider_error(server):
    """A 400 raises ProviderError (no subclass) that is not retryable, in the provider's words."""
    server.fail("400")
    with pytest.raises(ve.ProviderError, match="Invalid request") as info:
        await openai(server).chat_async("hi")
    assert type(info.value) is ve.ProviderError
    assert info.value.retryable is False
    assert info.value.status == 400


async def test_not_found_names_the_model(server):
    """A 404 raises a non-retryable ProviderError that names the model to check."""
    server.fail("404")
    with pytest.raises(ve.ProviderError, match="Check the model name 'gpt-test'") as info:
        await openai(server).chat_async("hi")
    assert type(info.value) is ve.ProviderError
    assert info.value.retryable is False
    assert info.value.status == 404


async def test_unauthorized_names_the_key_variable(server):
    """A 401 raises AuthenticationError pointing at OPENAI_API_KEY."""
    server.fail("401")
    with pytest.raises(ve.AuthenticationError, match="OPENAI_API_KEY") as info:
        await openai(server).chat_async("hi")
    assert info.value.status == 401
    assert info.value.retryable is False


@pytest.mark.parametrize(
    ("kind", "excerpt"),
    [("malformed", '{"choices": [oops'), ("incomplete", "chatcmpl-mock")],
)
async def test_malformed_bodies_raise_malformed_response(server, kind, excerpt):
    """Invalid JSON or JSON without choices raises MalformedResponse with status and excerpt."""
    server.fail(kind)
    with pytest.raises(ve.MalformedResponse, match="malformed response") as info:
        await openai(server).chat_async("hi")
    assert info.value.status == 200
    assert excerpt in info.value.body
    assert excerpt in str(info.value)
    assert info.value.retryable is True


async def test_dropped_connection_is_provider_unavailable(server):
    """A connection closed without an answer raises ProviderUnavailable."""
    server.fail("drop")
    with pytest.raises(ve.ProviderUnavailable, match="gpt-test") as info:
        await openai(server).chat_async("hi")
    assert info.value.provider == "OpenAI"


async def test_hanging_server_is_a_timeout(server):
    """A server that never answers raises ProviderTimeout after the read timeout."""
    server.fail("hang")
    chat = openai(server, timeouts=Timeouts(connect=1, read=0.2))
    with pytest.raises(ve.ProviderTimeout, match="in time") as info:
        await chat.chat_async("hi")
    assert info.value.retryable is True
    assert info.value.model == "gpt-test"


async def test_refused_connection_is_provider_unavailable():
    """Nothing listening at base_url raises ProviderUnavailable naming the URL."""
    with refusing_port() as port:
        chat = ve.chat_openai("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
        with pytest.raises(ve.ProviderUnavailable, match=f"nothing is listening at .*:{port}/v1"):
            await chat.chat_async("hi")


def test_missing_key_fails_at_the_first_call_not_at_construction(server, monkeypatch):
    """Without api_key= or OPENAI_API_KEY, chat_openai() is built (a task file imports, and
    --model can swap it); its first call raises AuthenticationError naming the variable,
    before anything is sent."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url())
    with pytest.raises(ve.AuthenticationError, match="set the OPENAI_API_KEY environment"):
        chat.chat("hi")
    assert server.requests == 0
    with pytest.raises(ve.AuthenticationError, match="OPENAI_API_KEY"):
        chat.provider.check_key()


def test_a_key_set_after_the_chat_was_built_is_used(server, monkeypatch):
    """A chat built without a key reads OPENAI_API_KEY again at its first call."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    chat = ve.chat_openai("gpt-test", base_url=server.base_url())
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-later")
    assert chat.chat("hi") == "hi"
    assert lower(server.log[-1].headers)["authorization"] == "Bearer sk-set-later"


def test_key_from_the_environment(server, monkeypatch):
    """OPENAI_API_KEY is used when no api_key= is given."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    chat = ve.chat_openai("gpt-test", base_url=server.base_url())
    assert chat.chat("hi") == "hi"
    assert lower(server.log[-1].headers)["authorization"] == "Bearer sk-from-env"


async def test_api_key_never_shows(server):
    """The API key appears in no repr and in no error message."""
    secret = "sk-secret-0123456789abcdef"
    chat = openai(server, api_key=secret)
    await chat.chat_async("hi")
    errors: list[BaseException] = []
    for kind in ["400", "401", "404", "429", "500", "malformed", "incomplete", "drop"]:
        server.fail(kind)
        with pytest.raises(ve.ProviderError) as info:
            await chat.chat_async("hi")
        errors.append(info.value)
    with refusing_port() as port:
        refused = ve.chat_openai("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=secret)
        with pytest.raises(ve.ProviderUnavailable) as info:
            await refused.chat_async("hi")
    errors.append(info.value)
    assert lower(server.log[-1].headers)["authorization"] == f"Bearer {secret}"
    for text in [repr(chat), repr(chat.provider), repr(refused), repr(refused.provider)]:
        assert secret not in text
    for error in errors:
        assert secret not in str(error)
        assert secret not in repr(error)


# -- the compatible providers and chat("provider/model") --------------------------------------


@pytest.mark.parametrize(
    ("make", "name", "env"),
    [
        (ve.chat_ollama, "Ollama", None),
        (ve.chat_vllm, "vLLM", "VLLM_API_KEY"),
        (ve.chat_openrouter, "OpenRouter", "OPENROUTER_API_KEY"),
        (ve.chat_groq, "Groq", "GROQ_API_KEY"),
        (ve.chat_deepseek, "DeepSeek", "DEEPSEEK_API_KEY"),
    ],
)
async def test_compatible_providers_talk_to_the_server(server, monkeypatch, make, name, env):
    """The OpenAI-compatible helpers reach base_url, with their key variable when they need one."""
    keyless = name in ("Ollama", "vLLM")
    if env is not None:
        if keyless:
            monkeypatch.delenv(env, raising=False)
        else:
            monkeypatch.setenv(env, f"key-of-{name}")
    chat = make(model="m1", base_url=server.base_url())
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert chat.provider.name == name
    assert server.log[-1].model == "m1"
    headers = lower(server.log[-1].headers)
    if keyless:
        assert "authorization" not in headers
    else:
        assert headers["authorization"] == f"Bearer key-of-{name}"
        monkeypatch.delenv(env)
        unkeyed = make(model="m1", base_url=server.base_url())
        with pytest.raises(ve.AuthenticationError, match=env):
            await unkeyed.chat_async("What's 2+2?")


async def test_chat_from_a_provider_model_string(server):
    """chat("openai/model", base_url=, api_key=) makes an OpenAI chat that talks to the server."""
    chat = ve.chat("openai/gpt-x", base_url=server.base_url(), api_key=KEY)
    assert chat.provider.name == "OpenAI"
    assert chat.provider.model_id == "openai/gpt-x"
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    assert server.requests_by_model["gpt-x"] == 1


async def test_chat_mock_from_a_string():
    """chat("mock/m") makes the in-process mock model named m."""
    chat = ve.chat("mock/m")
    assert chat.model == "m"
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"


def test_unknown_provider_lists_known_ones():
    """An unknown provider in chat("p/m") raises ConfigError listing the known providers."""
    with pytest.raises(ve.ConfigError, match=r"Unknown provider 'nope'.*Known: .*openai"):
        ve.chat("nope/x")


def test_model_without_provider_shows_the_form():
    """chat("gpt-4") raises ConfigError showing the provider/model form."""
    with pytest.raises(ve.ConfigError, match="is not 'provider/model'"):
        ve.chat("gpt-4")


# -- the user's own client ---------------------------------------------------------------------


async def test_user_httpx_client_is_used_and_left_open(server):
    """A user-supplied httpx.AsyncClient carries the requests and is not closed by us."""
    seen: list[str] = []

    async def count(request: httpx.Request) -> None:
        seen.append(request.url.path)

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as client:
        chat = openai(server, client=client)
        assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
        assert await chat.chat_async("What's 1+1?") == "1 + 1 = 2"
        assert seen == ["/v1/chat/completions"] * 2
        assert server.requests == 2
        assert not client.is_closed
        response = await client.post(
            server.base_url() + "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "still open"}]},
        )
        assert response.json()["choices"][0]["message"]["content"] == "still open"


# -- a whole run -----------------------------------------------------------------------------


async def test_task_eval_over_http(server, tmp_path):
    """A 50-sample eval at concurrency 20 makes 50 requests; its cost ledger matches the chats."""
    ve.set_price("OpenAI", "gpt-test", input=2, output=8)
    dataset = [{"input": f"What's {i}+1?", "target": str(i + 1)} for i in range(50)]
    task = ve.Task(
        dataset, solver=ve.generate(openai(server)), scorer=ve.detect_includes(), dir=tmp_path
    )
    await task.eval_async(max_concurrency=20)
    frame = task.get_samples()
    assert frame["result"].to_list() == [f"{i} + 1 = {i + 1}" for i in range(50)]
    assert task.metrics == {"accuracy": 1.0}
    assert server.requests == 50
    assert server.requests_by_model == {"gpt-test": 50}
    chats = frame["solver_chat"].to_list()
    total = sum((t.tokens for c in chats for t in c.turns if t.tokens), ve.TokenUsage())
    (row,) = task.get_cost().filter(pl.col("role") == "solver").iter_rows(named=True)
    assert row["provider"] == "OpenAI"
    assert row["model"] == "gpt-test"
    assert row["requests"] == 50
    assert row["input_tokens"] == total.input
    assert row["output_tokens"] == total.output
    assert row["cached_input_tokens"] == total.cached_input
    assert row["cost"] == pytest.approx(sum(c.get_cost() for c in chats))
    assert_inspect_reads(task.log_path, task)


# -- sync ---------------------------------------------------------------------------------------


def test_sync_chat_in_a_plain_script(server):
    """chat.chat() and extract_data() work without an event loop."""
    chat = openai(server)
    assert chat.chat("What's 2+2?") == "2 + 2 = 4"
    assert chat.extract_data("Ann is 31", type=Person) == Person(name="mock", age=1)
    assert server.requests == 2


# -- streaming ----------------------------------------------------------------------------------


def ask(prompt: str) -> ChatRequest:
    """One request of a single user prompt, for the provider itself."""
    return ChatRequest([Turn.user(prompt)])


def sse_client(*chunks):
    """An httpx client answering every request with these chunks as server-sent events (a
    string is sent as it is), followed by [DONE]."""
    lines = [c if isinstance(c, str) else msgspec.json.encode(c).decode() for c in chunks]
    body = "".join(f"data: {line}\n\n" for line in [*lines, "[DONE]"]).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def streamed_chat(client):
    return ve.chat_openai(
        "gpt-test", base_url="https://api.test/v1", api_key=KEY, client=client, stream=True
    )


def delta(finish=None, **fields):
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


async def test_streamed_tool_calls_are_put_together_by_index():
    """Two tool calls whose deltas interleave are told apart by `index`: each keeps the id
    and name of its first delta and joins its argument fragments, in index order."""
    first = {"index": 0, "id": "c0", "type": "function", "function": {"name": "add"}}
    second = {"index": 1, "id": "c1", "type": "function", "function": {"name": "divide"}}
    client = sse_client(
        delta(tool_calls=[first]),
        delta(tool_calls=[second]),
        delta(tool_calls=[{"index": 1, "function": {"arguments": '{"a": 6, '}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a": 1, "b"'}}]),
        delta(tool_calls=[{"index": 1, "function": {"arguments": '"b": 3}'}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": ": 2}"}}]),
        delta("tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 9}},
    )
    chat = streamed_chat(client)
    turn = await chat.provider.generate(ask("Add and divide"))
    assert [(c.id, c.name, c.arguments) for c in turn.tool_requests] == [
        ("c0", "add", {"a": 1, "b": 2}),
        ("c1", "divide", {"a": 6, "b": 3}),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.tokens == ve.TokenUsage(input=4, output=9)
    await client.aclose()


async def test_streamed_tool_calls_without_an_index_are_each_whole():
    """Servers that leave out `index` send each tool call whole in one delta: each is a
    call of its own."""
    client = sse_client(
        delta(tool_calls=[{"id": "c0", "function": {"name": "add", "arguments": '{"a": 1}'}}]),
        delta(tool_calls=[{"id": "c1", "function": {"name": "add", "arguments": '{"a": 2}'}}]),
        delta("tool_calls"),
    )
    turn = await streamed_chat(client).provider.generate(ask("Add twice"))
    assert [(c.id, c.arguments) for c in turn.tool_requests] == [("c0", {"a": 1}), ("c1", {"a": 2})]
    await client.aclose()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}, "400"),
        ({"code": 502, "message": "Provider returned error"}, "502"),
        ({"message": "busy", "type": "server_error", "code": None}, "500"),
        ({"message": "slow down", "type": "tokens", "code": "rate_limit_exceeded"}, "429"),
        ({"message": "something new"}, "500"),
    ],
    ids=["vllm-code", "openrouter-code", "server-error", "rate-limit", "unknown-kind"],
)
async def test_an_error_chunk_stands_for_its_code_or_type(error, expected):
    """An error chunk's status comes from an HTTP-like `code` (vLLM, OpenRouter), else from
    its code or type name; a mid-stream failure of unknown kind counts as a server error
    (retryable)."""
    client = sse_client(delta(content="Hel"), {"error": error})
    with pytest.raises(ve.ProviderError) as info:
        await streamed_chat(client).chat_async("hi")
    assert info.value.status == int(expected)
    assert info.value.retryable is (expected != "400")
    assert error["message"] in info.value.message
    await client.aclose()


async def test_a_refusal_streams_as_the_reply_text():
    """A refusal streamed in `refusal` deltas is the reply's text, as when answered whole."""
    client = sse_client(delta(refusal="I can't "), delta(refusal="help."), delta("stop"))
    assert await streamed_chat(client).chat_async("hi") == "I can't help."
    await client.aclose()


async def test_streamed_chunk_that_is_not_an_object_is_malformed():
    """A chunk that is JSON but not an object is MalformedResponse, not a crash."""
    client = sse_client("[1, 2]")
    with pytest.raises(ve.MalformedResponse, match="event 1 of the stream"):
        await streamed_chat(client).chat_async("hi")
    await client.aclose()


async def test_reading_stops_at_done():
    """The reply ends at `data: [DONE]`: whatever a server sends after it is not read."""
    trailing = b"data: [DONE]\n\ndata: {not json after the end\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        body = b"data: " + msgspec.json.encode(delta(content="4")) + b"\n\n" + trailing
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    assert await streamed_chat(client).chat_async("hi") == "4"
    await client.aclose()
