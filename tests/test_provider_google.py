"""Google Gemini (`generateContent`) over real HTTP against the mock server, both sides."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest

import vitals_engine as ve
from tests.inspect_check import assert_inspect_reads
from vitals_engine import chat_google_gemini
from vitals_engine.providers.google import GeminiProvider, gemini_schema
from vitals_engine.testing import MockToolCall, reply
from vitals_engine.transport.base import Timeouts
from vitals_engine.vocab.model_calls import ChatRequest
from vitals_engine.vocab.turns import (
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    Turn,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_retries")]

SECRET = "test-key-s3cr3t-0042"


def gemini(server, model="gemini-test", **kw):
    kw.setdefault("api_key", "test-key")
    return chat_google_gemini(model, base_url=server.base_url("google"), **kw)


def scripted(responses):
    """A MockTransport client answering with `responses` in order; it records the bodies sent."""
    sent: list[dict] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        status, body = queue.pop(0)
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), sent


def mock_transport_chat(responses, **kw):
    client, sent = scripted(responses)
    chat = chat_google_gemini(
        "gemini-test",
        base_url="https://gemini.test/v1beta",
        api_key="test-key",
        client=client,
        **kw,
    )
    return chat, sent


def answer(text="ok", finish="STOP", **extra):
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish}
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 3}, **extra}


# -- talking ----------------------------------------------------------------------------------


async def test_plain_chat_text_tokens_finish_and_model(server):
    """A plain prompt returns the text, its token counts, finish reason and model version."""
    chat = gemini(server)
    assert await chat.chat_async("What's 2+2?") == "2 + 2 = 4"
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=2, output=5)
    assert turn.finish_reason == "stop"
    assert turn.model == "gemini-test"
    record = server.log[-1]
    assert record.format == "google"
    assert record.model == "gemini-test"
    assert record.headers["x-goog-api-key"] == "test-key"
    assert record.body == {"contents": [{"role": "user", "parts": [{"text": "What's 2+2?"}]}]}


def test_key_travels_in_a_header_and_never_in_the_url():
    """The API key is sent as x-goog-api-key; the URL is the model's generateContent method."""
    provider = GeminiProvider("gemini-2.5-flash", api_key=SECRET)
    assert provider.headers(SECRET) == {"x-goog-api-key": SECRET}
    assert provider.url() == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    tuned = GeminiProvider("tunedModels/mine", api_key=SECRET, base_url="http://h/v1beta/")
    assert tuned.url() == "http://h/v1beta/tunedModels/mine:generateContent"
    assert provider.model_id == "google/gemini-2.5-flash"


async def test_system_prompt_becomes_system_instruction(server):
    """The system prompt is sent as systemInstruction, not as a turn."""
    chat = gemini(server, system_prompt="Be terse.")
    await chat.chat_async("What's 2+3?")
    body = server.log[-1].body
    assert body["systemInstruction"] == {"parts": [{"text": "Be terse."}]}
    assert [c["role"] for c in body["contents"]] == ["user"]
    assert server.log[-1].request.system == "Be terse."


async def test_multi_turn_sends_the_history_as_user_and_model(server):
    """A second prompt carries the first exchange, with the assistant's turn as role model."""
    chat = gemini(server)
    await chat.chat_async("What's 2+2?")
    assert await chat.chat_async("What's 3+3?") == "3 + 3 = 6"
    contents = server.log[-1].body["contents"]
    assert contents == [
        {"role": "user", "parts": [{"text": "What's 2+2?"}]},
        {"role": "model", "parts": [{"text": "2 + 2 = 4"}]},
        {"role": "user", "parts": [{"text": "What's 3+3?"}]},
    ]
    assert [m.role for m in server.log[-1].request.messages] == ["user", "assistant", "user"]


async def test_images_inline_data_uri_and_file_uri(server):
    """Inline images (bytes or data: URIs) become inlineData; remote ones become fileData."""
    chat = gemini(server)
    await chat.chat_async(
        "Describe these",
        ContentImage.from_bytes(b"\x89PNG", "image/png"),
        ContentImage(url="data:image/gif;base64,R0lGOD"),
        ContentImage(url="gs://bucket/cat.jpg", media_type="image/jpeg"),
    )
    parts = server.log[-1].body["contents"][0]["parts"]
    assert parts == [
        {"text": "Describe these"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw=="}},
        {"inlineData": {"mimeType": "image/gif", "data": "R0lGOD"}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/cat.jpg"}},
    ]
    assert server.log[-1].request.messages[-1].images == 3


async def test_params_map_into_generation_config(server):
    """max_tokens/top_p/stop get Gemini's names, native keys pass through, safety goes on top."""
    chat = gemini(
        server,
        params={"max_tokens": 50, "temperature": 0, "topK": 3, "safety_settings": []},
    )
    await chat.chat_async("What's 2+2?", top_p=0.5, stop="END", temperature=0.7)
    body = server.log[-1].body
    assert body["generationConfig"] == {
        "maxOutputTokens": 50,
        "temperature": 0.7,
        "topK": 3,
        "topP": 0.5,
        "stopSequences": ["END"],
    }
    assert body["safetySettings"] == []
    assert server.log[-1].request.max_tokens == 50


async def test_unknown_generation_config_key_is_refused_like_the_api(server):
    """An unknown parameter passes through as given, and the API's 400 says which one."""
    chat = gemini(server, params={"bogus_knob": 1})
    with pytest.raises(ve.ProviderError, match='Unknown name "bogus_knob"') as info:
        await chat.chat_async("hi")
    assert info.value.status == 400
    assert not info.value.retryable


# -- tools ------------------------------------------------------------------------------------


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


async def test_tool_call_and_function_response_round_trip(server):
    """A function call runs the tool and its result goes back as a functionResponse part."""
    chat = gemini(server)
    chat.register_tool(add)
    assert await chat.chat_async("Use add on 3 and 4") == "The tool returned 7."
    first, second = server.log
    declaration = first.body["tools"][0]["functionDeclarations"][0]
    assert declaration == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
    model_turn, user_turn = second.body["contents"][1:]
    assert model_turn == {
        "role": "model",
        "parts": [{"functionCall": {"name": "add", "args": {"a": 3, "b": 4}}}],
    }
    assert user_turn == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "add", "response": {"result": 7}}}],
    }
    request = chat.turns[1].contents[0]
    assert request == ContentToolRequest("call_0_add", "add", {"a": 3, "b": 4})
    assert chat.turns[1].finish_reason == "tool_calls"
    assert second.request.messages[-1].tool_call_id == "add"


async def test_failing_tool_sends_an_error_response(server):
    """A tool that raises goes back as functionResponse.response.error, and the model sees it."""
    chat = gemini(server)
    chat.register_tool(divide)
    reply_text = await chat.chat_async("Use divide on 1 and 0")
    assert reply_text == "The tool failed with ZeroDivisionError: division by zero."
    part = server.log[-1].body["contents"][-1]["parts"][0]
    assert part == {
        "functionResponse": {
            "name": "divide",
            "response": {"error": "ZeroDivisionError: division by zero"},
        }
    }
    assert server.log[-1].request.messages[-1].tool_error is True


async def test_call_ids_from_the_api_are_echoed_and_missing_ones_are_made_up(server):
    """An API call id is echoed on the call and its response; a missing one is call_<n>_<name>."""
    calls = iter(
        [
            [MockToolCall("fc-7", "add", {"a": 1, "b": 2})],
            [MockToolCall("", "add", {"a": 2, "b": 2})],
        ]
    )

    def script(request):
        if request.messages[-1].role == "user":
            return reply(tool_calls=next(calls))
        return None

    server.script(script)
    chat = gemini(server)
    chat.register_tool(add)
    assert await chat.chat_async("first") == "The tool returned 3."
    sent = server.log[-1].body["contents"]
    assert sent[1]["parts"][0]["functionCall"]["id"] == "fc-7"
    assert sent[2]["parts"][0]["functionResponse"]["id"] == "fc-7"
    assert server.log[-1].request.messages[-1].tool_call_id == "fc-7"
    assert await chat.chat_async("second") == "The tool returned 4."
    assert chat.turns[-3].tool_requests[0].id == "call_0_add"
    sent = server.log[-1].body["contents"]
    assert "id" not in sent[-2]["parts"][0]["functionCall"]
    assert "id" not in sent[-1]["parts"][0]["functionResponse"]


class Item(msgspec.Struct):
    name: str
    qty: int


class Order(msgspec.Struct):
    items: list[Item]
    note: str | None = None


def place(order: Order) -> str:
    """Place an order."""
    return f"{len(order.items)} item(s)"


def now() -> str:
    """The current time."""
    return "noon"


async def test_tool_schemas_are_inlined_and_stripped(server):
    """$defs/$ref are inlined and additionalProperties dropped, which Gemini would refuse."""
    chat = gemini(server)
    chat.register_tool(place)
    chat.register_tool(now)
    assert await chat.chat_async("Use place please") == "The tool returned 1 item(s)."
    raw = json.dumps(server.log[0].body)
    for refused in ("additionalProperties", "$defs", "$ref"):
        assert refused not in raw
    place_decl, now_decl = server.log[0].body["tools"][0]["functionDeclarations"]
    order = place_decl["parameters"]["properties"]["order"]
    assert order["properties"]["items"]["items"]["properties"]["qty"] == {"type": "integer"}
    assert order["properties"]["note"] == {"nullable": True, "type": "string", "default": None}
    assert now_decl == {"name": "now", "description": "The current time."}


def test_gemini_schema_rewrites_json_schema():
    """gemini_schema() turns type lists and const into Gemini's forms and survives recursion."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "kind": {"const": "node"},
            "size": {"type": ["number", "string", "null"]},
            "url": {"type": "string", "format": "uri"},
            "child": {"$ref": "#/$defs/Node"},
        },
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "additionalProperties": False,
    }
    assert gemini_schema(schema) == {
        "type": "object",
        "properties": {
            "kind": {"enum": ["node"], "type": "string"},
            "size": {"nullable": True, "anyOf": [{"type": "number"}, {"type": "string"}]},
            "url": {"type": "string"},
            "child": {"type": "object", "properties": {"next": {"type": "object"}}},
        },
    }


# -- structured output ------------------------------------------------------------------------


async def test_extract_data_with_a_struct(server):
    """A Struct becomes responseMimeType + responseSchema, nested types inlined, and validates."""
    chat = gemini(server)
    order = await chat.extract_data_async("An order, please", type=Order)
    assert order == Order(items=[Item("mock", 1)], note=None)
    config = server.log[-1].body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"]["properties"]["items"]["items"]["required"] == ["name", "qty"]
    assert "$defs" not in json.dumps(config)


async def test_extract_data_with_a_json_schema_dict(server):
    """A JSON-schema dict works too, and its additionalProperties never reaches the body."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "rank": {"type": "integer"}},
        "required": ["city", "rank"],
        "additionalProperties": False,
    }
    chat = gemini(server)
    assert await chat.extract_data_async("A city", type=schema) == {"city": "mock", "rank": 1}
    sent = server.log[-1].body["generationConfig"]["responseSchema"]
    assert "additionalProperties" not in sent
    assert sent["required"] == ["city", "rank"]


# -- usage and cost ---------------------------------------------------------------------------


async def test_cached_and_reasoning_tokens_and_cost(server):
    """Cached tokens come out of input, thoughts count as output, and the price applies to each."""
    ve.set_price("Google", "gemini-test", input=1, output=2, cached_input=0.25)
    server.cached_tokens = 2
    server.reasoning_tokens = 3
    chat = gemini(server)
    assert await chat.chat_async("one two three four five six") == "one two three four five six"
    turn = chat.last_turn()
    assert turn.tokens == ve.TokenUsage(input=4, output=9, cached_input=2, reasoning=3)
    assert turn.cost == pytest.approx((4 * 1 + 2 * 0.25 + 9 * 2) / 1_000_000)
    assert chat.get_cost() == pytest.approx(22.5e-6)
    assert chat.get_tokens()["cached_input"].to_list() == [2]


async def test_unpriced_model_costs_none(server):
    """A model without a price has an unknown (None) cost, never 0."""
    chat = gemini(server, model="gemini-unpriced")
    await chat.chat_async("hi")
    assert chat.last_turn().cost is None
    assert chat.get_cost() is None


# -- thinking ---------------------------------------------------------------------------------


async def test_thought_parts_and_signatures_round_trip(server):
    """A thought part becomes ContentThinking with its signature and is sent back as it came."""
    server.script(
        lambda r: reply("4", reasoning="Two and two make four.") if len(r.messages) == 1 else None
    )
    chat = gemini(server)
    assert await chat.chat_async("What's 2+2?") == "4"
    thinking, text = chat.last_turn().contents
    assert isinstance(thinking, ContentThinking)
    assert thinking.thinking == "Two and two make four."
    assert thinking.signature
    assert text == ContentText("4")
    await chat.chat_async("And 3+3?")
    model_parts = server.log[-1].body["contents"][1]["parts"]
    assert model_parts == [
        {"text": "Two and two make four.", "thought": True, "thoughtSignature": thinking.signature},
        {"text": "4"},
    ]
    assert server.log[-1].request.messages[1].text == "4"


async def test_signature_on_a_function_call_goes_back_on_that_call():
    """A thoughtSignature on a functionCall part returns on the same functionCall part."""
    call = {"functionCall": {"name": "add", "args": {"a": 1, "b": 1}}, "thoughtSignature": "c2ln"}
    first = {
        "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2},
    }
    chat, sent = mock_transport_chat([(200, first), (200, answer("2"))])
    chat.register_tool(add)
    assert await chat.chat_async("Use add") == "2"
    assert chat.turns[1].contents == [
        ContentThinking("", signature="c2ln"),
        ContentToolRequest("call_0_add", "add", {"a": 1, "b": 1}),
    ]
    assert sent[1]["contents"][1] == {"role": "model", "parts": [call]}


# -- finish reasons ---------------------------------------------------------------------------


async def test_max_tokens_and_safety_finish_from_the_server(server):
    """MAX_TOKENS maps to max_tokens, and a SAFETY stop without content to content_filter."""
    finishes = iter(["max_tokens", "content_filter"])
    server.script(lambda r: reply("cut" if (f := next(finishes)) == "max_tokens" else "", finish=f))
    chat = gemini(server)
    assert await chat.chat_async("long story") == "cut"
    assert chat.last_turn().finish_reason == "max_tokens"
    assert await chat.chat_async("something bad") == ""
    assert chat.last_turn().finish_reason == "content_filter"


@pytest.mark.parametrize(
    ("gemini_reason", "ours"),
    [
        ("RECITATION", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("OTHER", "unknown"),
    ],
)
async def test_other_finish_reasons(gemini_reason, ours):
    """Gemini's other finish reasons map onto ours; anything unlisted is unknown."""
    chat, _ = mock_transport_chat([(200, answer("x", finish=gemini_reason))])
    await chat.chat_async("hi")
    assert chat.last_turn().finish_reason == ours


async def test_blocked_prompt_is_a_content_filter_turn_not_an_error():
    """promptFeedback.blockReason without candidates gives a content_filter turn that says why."""
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 5},
    }
    chat, _ = mock_transport_chat([(200, blocked)])
    text = await chat.chat_async("something bad")
    assert "blocked the prompt (SAFETY)" in text
    turn = chat.last_turn()
    assert turn.finish_reason == "content_filter"
    assert turn.tokens == ve.TokenUsage(input=5)


# -- errors -----------------------------------------------------------------------------------


async def test_429_is_a_rate_limit_with_retry_after(server):
    """A 429 raises RateLimitError carrying the Retry-After wait."""
    server.fail("429", retry_after=7)
    with pytest.raises(ve.RateLimitError, match=r"retry after 7s") as info:
        await gemini(server).chat_async("hi")
    assert info.value.retry_after == 7
    assert info.value.retryable
    assert info.value.request_id == "req_1"
    assert "RESOURCE_EXHAUSTED" in info.value.message


async def test_429_retry_delay_from_the_error_details():
    """Without a header, the wait comes from the body's google.rpc.RetryInfo retryDelay."""
    body = {
        "error": {
            "code": 429,
            "message": "Quota exceeded",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    chat, _ = mock_transport_chat([(429, body)])
    with pytest.raises(ve.RateLimitError, match=r"Quota exceeded.*retry after 37s") as info:
        await chat.chat_async("hi")
    assert info.value.retry_after == 37


@pytest.mark.parametrize("kind", ["500", "503"])
async def test_server_errors_are_unavailable(server, kind):
    """500 and 503 raise ProviderUnavailable, which is retryable."""
    server.fail(kind)
    with pytest.raises(ve.ProviderUnavailable, match=r"HTTP 50") as info:
        await gemini(server).chat_async("hi")
    assert info.value.status == int(kind)
    assert info.value.retryable


async def test_401_is_an_authentication_error_naming_the_key_variable(server):
    """A 401 raises AuthenticationError that names GEMINI_API_KEY and is not retried."""
    server.fail("401")
    with pytest.raises(ve.AuthenticationError, match="GEMINI_API_KEY") as info:
        await gemini(server).chat_async("hi")
    assert not info.value.retryable
    assert info.value.status == 401


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (403, {"code": 403, "message": "Permission denied.", "status": "PERMISSION_DENIED"}),
        (
            400,
            {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
            },
        ),
    ],
    ids=["403", "400-bad-key"],
)
async def test_403_and_bad_key_400_are_authentication_errors(status, error):
    """A 403, and Gemini's 400 "API key not valid", raise AuthenticationError naming the key."""
    chat, _ = mock_transport_chat([(status, {"error": error})])
    with pytest.raises(ve.AuthenticationError, match=r"authentication failed: .*GEMINI_API_KEY"):
        await chat.chat_async("hi")


async def test_plain_400_is_not_retryable(server):
    """An ordinary 400 raises a plain, non-retryable ProviderError with Gemini's words."""
    server.fail("400")
    with pytest.raises(ve.ProviderError, match="INVALID_ARGUMENT: Invalid request") as info:
        await gemini(server).chat_async("hi")
    assert type(info.value) is ve.ProviderError
    assert not info.value.retryable


async def test_404_names_the_model(server):
    """A 404 raises a non-retryable ProviderError that names the model to check."""
    server.fail("404")
    with pytest.raises(ve.ProviderError, match="Check the model name 'gemini-test'") as info:
        await gemini(server).chat_async("hi")
    assert type(info.value) is ve.ProviderError
    assert not info.value.retryable


@pytest.mark.parametrize(
    ("kind", "excerpt"), [("malformed", '{"choices": [oops'), ("incomplete", '"responseId"')]
)
async def test_malformed_and_incomplete_bodies(server, kind, excerpt):
    """Invalid JSON or JSON without candidates raises MalformedResponse quoting the body."""
    server.fail(kind)
    with pytest.raises(ve.MalformedResponse, match="malformed response") as info:
        await gemini(server).chat_async("hi")
    assert excerpt in info.value.body
    assert excerpt in str(info.value)


async def test_dropped_connection_is_unavailable(server):
    """A connection the server drops raises ProviderUnavailable."""
    server.fail("drop")
    with pytest.raises(ve.ProviderUnavailable, match="gemini-test"):
        await gemini(server).chat_async("hi")


async def test_hanging_server_times_out(server):
    """A server that never answers raises ProviderTimeout after the read timeout."""
    server.fail("hang")
    chat = gemini(server, timeouts=Timeouts(connect=1, read=0.2))
    with pytest.raises(ve.ProviderTimeout, match="in time") as info:
        await chat.chat_async("hi")
    assert info.value.provider == "Google"


def test_missing_key_names_both_variables(monkeypatch):
    """Without api_key, GEMINI_API_KEY or GOOGLE_API_KEY, the first call says where a key
    goes."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    chat = chat_google_gemini()
    with pytest.raises(ve.AuthenticationError, match=r"GEMINI_API_KEY \(or GOOGLE_API_KEY\)"):
        chat.chat("hi")


def test_key_comes_from_gemini_then_google_variable(monkeypatch):
    """GEMINI_API_KEY wins; GOOGLE_API_KEY is used when it is unset."""
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    assert GeminiProvider("m")._api_key == "from-gemini"
    monkeypatch.delenv("GEMINI_API_KEY")
    assert GeminiProvider("m")._api_key == "from-google"


async def test_key_never_appears_in_repr_or_errors(server):
    """The API key is absent from reprs and from every error message and body."""
    chat = gemini(server, api_key=SECRET)
    assert SECRET not in repr(chat)
    assert SECRET not in repr(chat.provider)
    for kind in ("401", "404", "500", "malformed"):
        server.fail(kind)
        with pytest.raises(ve.ProviderError) as info:
            await chat.clone().chat_async("hi")
        assert SECRET not in str(info.value)
        assert SECRET not in repr(info.value.body)
    assert server.log[-1].headers["x-goog-api-key"] == SECRET


# -- the mock server's side -------------------------------------------------------------------


def test_mock_refuses_other_methods_and_missing_contents(server):
    """The mock answers 400, Gemini-shaped, for another method, no contents or a refused schema."""
    base = server.base_url("google")
    other = httpx.post(f"{base}/models/gemini-test:countTokens", json={"contents": []})
    assert other.status_code == 400
    assert other.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "countTokens" in other.json()["error"]["message"]
    missing = httpx.post(
        f"{base}/models/gemini-test:generateContent", json={"generationConfig": {}}
    )
    assert missing.status_code == 400
    assert "contents is not specified" in missing.json()["error"]["message"]
    refused = httpx.post(
        f"{base}/models/gemini-test:generateContent",
        json={
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generationConfig": {
                "responseMimeType": "application/json",
                "responseSchema": {"type": "object", "additionalProperties": False},
            },
        },
    )
    assert refused.status_code == 400
    assert 'Unknown name "additionalProperties"' in refused.json()["error"]["message"]
    assert server.requests == 0


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"contents": [{"role": "user", "parts": ["hi"]}]},
        {"contents": [{"parts": [{"inlineData": "x"}]}]},
        {"contents": [{"parts": [{"text": "x"}]}], "tools": ["x"]},
        {"contents": [{"parts": [{"text": "x"}]}], "systemInstruction": "be brief"},
        {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]},
    ],
    ids=["array", "string-part", "string-blob", "string-tool", "string-system", "bad-role"],
)
def test_mock_answers_wrong_shapes_with_400(server, body):
    """JSON of the wrong shape gets a Gemini-shaped 400 from the mock, never a server crash."""
    url = f"{server.base_url('google')}/models/gemini-test:generateContent"
    response = httpx.post(url, json=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == 400


# -- a whole evaluation -----------------------------------------------------------------------


async def test_task_eval_with_gemini(server, tmp_path):
    """A Task solved by a Gemini chat scores, prices and logs like any other model."""
    ve.set_price("Google", "gemini-eval", input=1, output=2, cached_input=0.25)
    chat = gemini(server, model="gemini-eval", system_prompt="Answer briefly.")
    data = [{"input": "What's 2+2?", "target": "4"}, {"input": "What's 2+3?", "target": "5"}]
    task = ve.Task(data, solver=ve.generate(chat), scorer=ve.detect_includes(), dir=tmp_path)
    await task.eval_async()
    assert task.get_samples()["result"].to_list() == ["2 + 2 = 4", "2 + 3 = 5"]
    assert task.metrics == {"accuracy": 1.0}
    cost = task.get_cost()
    assert cost["provider"].to_list() == ["Google"]
    assert cost["model"].to_list() == ["gemini-eval"]
    assert cost["requests"].to_list() == [2]
    # Each call: 4 input words ("Answer briefly." + the question), 5 output words.
    assert cost["input_tokens"].to_list() == [8]
    assert cost["output_tokens"].to_list() == [10]
    assert cost["cost"].to_list() == [pytest.approx((8 + 10 * 2) / 1_000_000)]
    assert server.requests_by_model["gemini-eval"] == 2
    full = assert_inspect_reads(task.log_path, task)
    sample = full.samples[0]
    assert sample.output.model == "google/gemini-eval"
    assert [m.role for m in sample.messages] == ["system", "user", "assistant"]
    assert full.stats.model_usage["google/gemini-eval"].total_tokens == 18


# -- streaming --------------------------------------------------------------------------------


def ask(prompt: str) -> ChatRequest:
    """One request of a single user prompt, for the provider itself."""
    return ChatRequest([Turn.user(prompt)])


def sse_client(*chunks):
    """An httpx client answering every request with these chunks as server-sent events."""
    body = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()
    urls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), urls


def streamed(client):
    return chat_google_gemini(
        "gemini-test",
        base_url="https://gemini.test/v1beta",
        api_key="test-key",
        client=client,
        stream=True,
    )


def chunk(*parts, finish=None, **top):
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **top}


async def test_a_signature_on_the_last_text_chunk_goes_on_the_joined_text():
    """Gemini sends a text part's signature on its last piece (sometimes an empty one): the
    pieces join into one text part that carries it, as the whole answer has it."""
    client, urls = sse_client(
        chunk({"text": "Hello "}),
        chunk({"text": "there"}),
        chunk(
            {"text": "", "thoughtSignature": "c2ln"},
            finish="STOP",
            usageMetadata={"promptTokenCount": 3, "candidatesTokenCount": 2},
        ),
    )
    chat = streamed(client)
    assert await chat.chat_async("hi") == "Hello there"
    assert chat.last_turn().contents == [
        ContentThinking("", signature="c2ln"),
        ContentText("Hello there"),
    ]
    assert urls == ["https://gemini.test/v1beta/models/gemini-test:streamGenerateContent?alt=sse"]
    await client.aclose()


async def test_thoughts_and_text_stay_apart_and_function_calls_come_whole():
    """Thought pieces join into one thought, text into one text, and a functionCall part
    (with its signature) stays as it came."""
    call = {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}, "thoughtSignature": "c2ln"}
    client, _ = sse_client(
        chunk({"text": "Let me ", "thought": True}),
        chunk({"text": "add.", "thought": True, "thoughtSignature": "dGhv"}),
        chunk({"text": "Adding."}),
        chunk(call, finish="STOP"),
    )
    turn = await streamed(client).provider.generate(ask("Use add"))
    assert turn.contents == [
        ContentThinking("Let me add.", signature="dGhv"),
        ContentText("Adding."),
        ContentThinking("", signature="c2ln"),
        ContentToolRequest("call_0_add", "add", {"a": 1, "b": 2}),
    ]
    assert turn.finish_reason == "tool_calls"
    await client.aclose()


async def test_a_blocked_prompt_in_a_stream_is_a_content_filter_turn():
    """A stream whose only chunk says the prompt was blocked is whole: a content_filter turn."""
    client, _ = sse_client({"promptFeedback": {"blockReason": "SAFETY"}})
    turn = await streamed(client).provider.generate(ask("something bad"))
    assert turn.finish_reason == "content_filter"
    assert "SAFETY" in turn.text
    await client.aclose()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}, ve.ProviderUnavailable),
        ({"message": "quota", "status": "RESOURCE_EXHAUSTED"}, ve.RateLimitError),
        (
            {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"},
            ve.AuthenticationError,
        ),
    ],
    ids=["code", "status-name", "bad-key"],
)
async def test_an_error_chunk_is_classified_like_an_error_answer(error, expected):
    """A `{"error": ...}` chunk is classified by its code (or status name) the way an error
    answer is, Gemini's bad-key 400 included."""
    client, _ = sse_client(chunk({"text": "Hel"}), {"error": error})
    with pytest.raises(ve.ProviderError) as info:
        await streamed(client).chat_async("hi")
    assert type(info.value) is expected
    await client.aclose()


async def test_a_stream_without_a_finish_reason_is_cut():
    """Chunks that end without a finishReason are not a whole reply: ProviderUnavailable."""
    client, _ = sse_client(chunk({"text": "Hello "}), chunk({"text": "there"}))
    with pytest.raises(ve.ProviderUnavailable, match="cut after 2 events, before a last chunk"):
        await streamed(client).chat_async("hi")
    await client.aclose()
