"""The mock server's OpenAI Responses API (`POST /v1/responses`) over real HTTP: the response
object, input items, tools, reasoning and its encrypted round trip, streamed events,
refusals in the API's words, OpenAI's reasoning-model rules on both OpenAI endpoints, and
batches over /v1/responses."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

from vitals_engine.testing import MockReply, MockServer, MockToolCall
from vitals_engine.transport.sse import EventStreamParser


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=10) as client:
        yield client


def respond(client: httpx.Client, server: MockServer, **body: Any) -> httpx.Response:
    """POST a Responses request (model "gpt-4.1" and a sum unless told otherwise)."""
    body = {"model": "gpt-4.1", "input": "What's 2+2?", **body}
    return client.post(server.base_url("openai") + "/responses", json=body)


def chat(client: httpx.Client, server: MockServer, model: str, **body: Any) -> httpx.Response:
    """POST a chat completion request with one user message to `model`."""
    messages = body.pop("messages", [{"role": "user", "content": "What's 2+2?"}])
    return client.post(
        server.base_url("openai") + "/chat/completions",
        json={"model": model, "messages": messages, **body},
    )


def refusal(response: httpx.Response, status: int = 400) -> dict[str, Any]:
    """The error of a refused request, after checking its status and shape."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return error


def events(response: httpx.Response) -> list[tuple[str | None, dict[str, Any]]]:
    """The named server-sent events of a whole streamed response: (name, data)."""
    assert response.headers["content-type"] == "text/event-stream"
    return [(e.event, msgspec.json.decode(e.data)) for e in EventStreamParser().feed(response.text)]


ADD = {
    "type": "function",
    "name": "add",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "strict": True,
}


# -- the response --------------------------------------------------------------------------------


def test_answers_with_a_response_object(client, server):
    """A request gets a `response`: id, status, one message item with output_text, usage with
    its details, and the request's parameters echoed as the API echoes them."""
    response = respond(client, server, instructions="Be brief.", metadata={"run": "r1"})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "req_1"
    data = response.json()
    assert data["id"].startswith("resp_")
    assert (data["object"], data["status"], data["model"]) == ("response", "completed", "gpt-4.1")
    assert (data["error"], data["incomplete_details"]) == (None, None)
    (message,) = data["output"]
    assert message["id"].startswith("msg_")
    assert (message["type"], message["role"], message["status"]) == (
        "message",
        "assistant",
        "completed",
    )
    assert message["content"] == [{"type": "output_text", "text": "2 + 2 = 4", "annotations": []}]
    assert data["usage"] == {
        "input_tokens": 4,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 9,
    }
    assert data["instructions"] == "Be brief."
    assert data["metadata"] == {"run": "r1"}
    assert data["service_tier"] == "default"
    assert (data["store"], data["parallel_tool_calls"], data["tool_choice"]) == (True, True, "auto")
    assert data["tools"] == []
    assert data["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    assert data["reasoning"] == {"effort": None, "summary": None}
    assert "include" not in data
    assert server.log[-1].format == "openai_responses"
    assert server.requests_by_model == {"gpt-4.1": 1}


def test_service_tier_is_the_one_that_served(client, server):
    """`service_tier` says the tier that served the request: as asked, "default" for auto."""
    assert respond(client, server, service_tier="flex").json()["service_tier"] == "flex"
    assert respond(client, server, service_tier="auto").json()["service_tier"] == "default"


def test_input_items_fill_the_brains_request(client, server):
    """Instructions and system/developer messages make the system prompt, user parts their
    text and images, assistant messages their text, in order."""
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}
    data = respond(
        client,
        server,
        instructions="Be brief.",
        input=[
            {"role": "developer", "content": "Answer in digits."},
            {"role": "user", "content": "Hello"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            },
            {"role": "user", "content": [{"type": "input_text", "text": "What's 3+4?"}, image]},
        ],
    ).json()
    assert data["output"][0]["content"][0]["text"] == "3 + 4 = 7"
    request = server.log[-1].request
    assert request.system == "Be brief.\nAnswer in digits."
    assert [(m.role, m.text, m.images) for m in request.messages] == [
        ("user", "Hello", 0),
        ("assistant", "Hi.", 0),
        ("user", "What's 3+4?", 1),
    ]


def test_a_named_tool_is_a_function_call_item_and_its_output_is_answered(client, server):
    """A flat function tool named in the prompt is called (a `function_call` item with its
    call_id and JSON arguments); sending the call and its output back gets the tool's
    result said back."""
    prompt = {"role": "user", "content": "Use add on 4 and 2.5"}
    data = respond(client, server, input=[prompt], tools=[ADD]).json()
    (call,) = data["output"]
    assert call["id"].startswith("fc_")
    assert (call["type"], call["status"], call["name"]) == ("function_call", "completed", "add")
    assert call["arguments"] == '{"a":4,"b":2.5}'
    assert data["tools"] == [ADD]
    back = {k: call[k] for k in ("type", "call_id", "name", "arguments")}
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "6.5"}
    answered = respond(client, server, input=[prompt, back, output], tools=[ADD]).json()
    assert answered["output"][0]["content"][0]["text"] == "The tool returned 6.5."
    request = server.log[-1].request
    assert [m.role for m in request.messages] == ["user", "assistant", "tool"]
    assert request.messages[1].tool_calls == [
        MockToolCall(call["call_id"], "add", {"a": 4, "b": 2.5})
    ]


def test_structured_output_from_text_format(client, server):
    """`text.format` json_schema gets a JSON value of the schema's shape as the output text."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    text = {"format": {"type": "json_schema", "name": "sum", "schema": schema, "strict": True}}
    data = respond(client, server, text=text).json()
    assert msgspec.json.decode(data["output"][0]["content"][0]["text"]) == {"answer": 1}
    assert data["text"]["format"] == text["format"]


def test_max_tokens_finish_is_an_incomplete_response(client, server):
    """A reply stopped at max tokens is `incomplete`, with the reason, its message too."""
    server.script(lambda req: MockReply(text="2 + 2", finish="max_tokens"))
    data = respond(client, server, max_output_tokens=16).json()
    assert (data["status"], data["incomplete_details"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
    )
    assert data["max_output_tokens"] == 16
    assert data["output"][0]["status"] == "incomplete"


# -- reasoning -----------------------------------------------------------------------------------


def test_reasoning_round_trip_with_encrypted_content(client, server):
    """A reasoning model's reasoning is a `reasoning` item before the message: its summary
    when asked for one, its encrypted content when `include` asks; sent back with store
    false, the mock reads the reasoning out of it for the brain."""
    seen: list[str | None] = []

    def script(request):
        seen.append(request.messages[-2].reasoning if len(request.messages) > 1 else None)
        return MockReply(text="2 + 2 = 4", reasoning="add them", reasoning_tokens=2)

    server.script(script)
    asked = {
        "model": "o4-mini",
        "store": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }
    first = respond(client, server, **asked).json()
    reasoning, message = first["output"]
    assert reasoning["id"].startswith("rs_")
    assert reasoning["type"] == "reasoning"
    assert reasoning["summary"] == [{"type": "summary_text", "text": "add them"}]
    assert isinstance(reasoning["encrypted_content"], str)
    assert "add them" not in reasoning["encrypted_content"]
    assert first["usage"]["output_tokens_details"] == {"reasoning_tokens": 2}
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    again = ["What's 2+2?", reasoning, message, {"role": "user", "content": "And 3+4?"}]
    again[0] = {"role": "user", "content": again[0]}
    second = respond(client, server, **asked, input=again)
    assert second.status_code == 200, second.text
    assert seen == [None, "add them"]


def test_reasoning_items_without_a_summary_or_encrypted_content_unless_asked(client, server):
    """Without `reasoning.summary` the item's summary is empty; without `include` it has no
    encrypted content."""
    server.script(lambda req: MockReply(text="2 + 2 = 4", reasoning="add them"))
    (reasoning, _) = respond(client, server, model="o3").json()["output"]
    assert reasoning["summary"] == []
    assert "encrypted_content" not in reasoning


def test_reasoning_items_that_cannot_come_back(client, server):
    """With store false, a reasoning item without encrypted content is not found (404, as the
    API answers), and encrypted content the mock did not give is refused."""
    item = {"type": "reasoning", "id": "rs_1", "summary": []}
    user = {"role": "user", "content": "What's 2+2?"}
    lost = refusal(respond(client, server, model="o3", store=False, input=[user, item, user]), 404)
    assert lost["message"] == (
        "Item with id 'rs_1' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input."
    )
    assert lost["param"] == "input"
    forged = {**item, "encrypted_content": "bm90IHRoZSBtb2Nr"}
    error = refusal(respond(client, server, model="o3", store=False, input=[user, forged, user]))
    assert error["message"] == "The encrypted content for item rs_1 could not be verified."
    kept = respond(client, server, model="o3", input=[user, item, user])  # store defaults to true
    assert kept.status_code == 200
    assert server.requests == 1


# -- streaming -----------------------------------------------------------------------------------


def test_streams_named_events_in_the_apis_order(client, server):
    """`"stream": true` gets the Responses events in order, each named as its type with a
    sequence number from 0; the deltas join to the summary and the text (a held stream
    waits at the first text delta), and the stream ends with `response.completed` carrying
    the whole response and usage, no [DONE]."""
    server.script(lambda req: MockReply(text="2 + 2 = 4", reasoning="add them"))
    hold = server.hold_stream()
    hold.release()
    response = respond(client, server, model="o3", stream=True, reasoning={"summary": "auto"})
    assert "[DONE]" not in response.text
    stream = events(response)
    assert all(name == data["type"] for name, data in stream)
    assert [data["sequence_number"] for _, data in stream] == list(range(len(stream)))
    assert [name for name, _ in stream] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        *["response.reasoning_summary_text.delta"] * 2,
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 5,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    data = [d for _, d in stream]
    created, completed = data[0]["response"], data[-1]["response"]
    assert (created["status"], created["output"], created["usage"]) == ("in_progress", [], None)
    assert completed["id"] == created["id"]
    assert completed["status"] == "completed"
    assert completed["usage"]["output_tokens"] == 5
    summary = [d["delta"] for d in data if d["type"] == "response.reasoning_summary_text.delta"]
    text = [d["delta"] for d in data if d["type"] == "response.output_text.delta"]
    assert ("".join(summary), "".join(text)) == ("add them", "2 + 2 = 4")
    done = next(d for d in data if d["type"] == "response.output_text.done")
    assert (done["text"], done["item_id"], done["output_index"]) == (
        "2 + 2 = 4",
        completed["output"][1]["id"],
        1,
    )
    assert [d["item"] for d in data if d["type"] == "response.output_item.done"] == completed[
        "output"
    ]
    assert server.log[-1].request.stream
    assert (hold.held, hold.timed_out) == (1, False)


def test_streams_a_function_call_in_fragments(client, server):
    """A function call opens with its call_id and name and empty arguments, whose fragments
    join to the whole; an incomplete reply ends with `response.incomplete`."""
    server.script(
        lambda req: MockReply(
            tool_calls=[MockToolCall("call_1", "add", {"a": 1, "b": 2})], finish="max_tokens"
        )
    )
    data = [d for _, d in events(respond(client, server, stream=True, tools=[ADD]))]
    added = next(d for d in data if d["type"] == "response.output_item.added")["item"]
    assert (added["call_id"], added["name"], added["arguments"]) == ("call_1", "add", "")
    deltas = [d["delta"] for d in data if d["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1
    assert "".join(deltas) == '{"a":1,"b":2}'
    done = next(d for d in data if d["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == '{"a":1,"b":2}'
    assert data[-1]["type"] == "response.incomplete"
    assert data[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_mid_stream_failure_is_response_failed_or_an_error_event(client, server):
    """A server error mid-stream is `response.failed` (status failed, error server_error);
    a rate limit is an `error` event; either continues the sequence and ends the stream."""
    server.fail("stream-error", after=3)
    stream = events(respond(client, server, stream=True))
    assert len(stream) == 4
    name, failed = stream[-1]
    assert (name, failed["sequence_number"]) == ("response.failed", 3)
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["id"] == stream[0][1]["response"]["id"]
    assert failed["response"]["error"] == {
        "code": "server_error",
        "message": "The server had an error while processing your request",
    }
    server.fail("stream-error", after=2, status=429)
    name, error = events(respond(client, server, stream=True))[-1]
    assert name == "error"
    assert error == {
        "type": "error",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached for requests",
        "param": None,
        "sequence_number": 2,
    }
    assert [r.outcome for r in server.log] == ["stream-error", "stream-error"]


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message", "param", "code"),
    [
        ({"seed": 1}, "Unknown parameter: 'seed'.", "seed", "unknown_parameter"),
        (
            {"max_tokens": 50},
            "Unsupported parameter: 'max_tokens'. In the Responses API, this parameter has "
            "moved to 'max_output_tokens'.",
            "max_tokens",
            "unsupported_parameter",
        ),
        (
            {"max_completion_tokens": 50},
            "Unsupported parameter: 'max_completion_tokens'. In the Responses API, this "
            "parameter has moved to 'max_output_tokens'.",
            "max_completion_tokens",
            "unsupported_parameter",
        ),
        (
            {"response_format": {"type": "json_object"}},
            "Unsupported parameter: 'response_format'. In the Responses API, this parameter "
            "has moved to 'text.format'.",
            "response_format",
            "unsupported_parameter",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            "Unsupported parameter: 'messages'. In the Responses API, this parameter has moved "
            "to 'input'.",
            None,
            "unsupported_parameter",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}]},
            "Missing required parameter: 'tools[0].name'.",
            "tools[0].name",
            "missing_required_parameter",
        ),
        (
            {"max_output_tokens": 10},
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
            "but got 10 instead.",
            "max_output_tokens",
            "integer_below_min_value",
        ),
        (
            {"stream": True, "stream_options": {"include_usage": True}},
            "Unknown parameter: 'stream_options.include_usage'.",
            "stream_options.include_usage",
            "unknown_parameter",
        ),
    ],
)
def test_parameters_the_api_refuses(client, server, extra, message, param, code):
    """What the Responses API does not take is a 400 in its words, not counted or logged."""
    error = refusal(respond(client, server, **extra))
    assert (error["message"], error["param"], error["code"]) == (message, param, code)
    assert server.requests == 0
    assert server.log == []


def test_content_parts_belong_to_their_role(client, server):
    """A user part in an assistant message (or a Chat Completions part anywhere) is refused;
    an image's `detail` may be null, as any omitted field."""
    assistant = {"role": "assistant", "content": [{"type": "input_text", "text": "Hi."}]}
    error = refusal(respond(client, server, input=[assistant]))
    assert (
        error["message"]
        == "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'."
    )
    assert (error["param"], error["code"]) == ("input[0].content[0]", "invalid_value")
    chat_part = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert (
        refusal(respond(client, server, input=[chat_part]))["param"] == "input[0].content[0].type"
    )
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": None}
    user = {"role": "user", "content": [{"type": "input_text", "text": "What's this?"}, image]}
    assert respond(client, server, input=[user]).status_code == 200


def test_tool_traffic_must_pair_up(client, server):
    """A function_call_output answering no function_call is refused, and so is a
    function_call left without its output."""
    user = {"role": "user", "content": "Use add on 1 and 2"}
    stray = {"type": "function_call_output", "call_id": "call_9", "output": "3"}
    error = refusal(respond(client, server, input=[user, stray]))
    assert error["message"] == "No tool call found for function call output with call_id call_9."
    assert (error["param"], error["code"]) == ("input", None)
    call = {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{}"}
    error = refusal(respond(client, server, input=[user, call, user]))
    assert error["message"] == "No tool output found for function call call_1."


def test_strict_tools_need_strict_schemas(client, server):
    """A function tool is strict unless it says otherwise, and a strict tool's schema must
    close its objects and require every property; `"strict": false` takes any schema."""
    loose = {"type": "object", "properties": {"a": {"type": "integer"}}}
    tool = {"type": "function", "name": "f", "parameters": loose}
    error = refusal(respond(client, server, tools=[tool]))
    assert error["message"] == (
        "Invalid schema for function 'f': In context=(), 'additionalProperties' is required "
        "to be supplied and to be false."
    )
    assert (error["param"], error["code"]) == ("tools[0].parameters", "invalid_function_parameters")
    unrequired = {**loose, "additionalProperties": False}
    error = refusal(respond(client, server, tools=[{**tool, "parameters": unrequired}]))
    assert error["message"].endswith(
        "'required' is required to be supplied and to be an array including every key in "
        "properties. Missing 'a'."
    )
    accepted = respond(client, server, tools=[{**tool, "strict": False}])
    assert accepted.status_code == 200
    assert accepted.json()["tools"][0]["strict"] is False


# -- OpenAI's reasoning models -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "extra", "param"),
    [
        ("o3", {"temperature": 0.2}, "temperature"),
        ("gpt-5", {"top_p": 1}, "top_p"),
        ("gpt-5.4-mini", {"presence_penalty": 0.5}, "presence_penalty"),
        ("o4-mini", {"frequency_penalty": 0.5}, "frequency_penalty"),
        ("gpt-4.1", {"reasoning": {"effort": "low"}}, "reasoning.effort"),
    ],
)
def test_responses_refuse_what_the_model_does_not_take(client, server, model, extra, param):
    """Reasoning models refuse sampling parameters on /v1/responses (with a null code, as the
    API answers there); a model that does not reason refuses `reasoning.effort`."""
    error = refusal(respond(client, server, model=model, **extra))
    assert error["message"] == f"Unsupported parameter: '{param}' is not supported with this model."
    assert error["param"] == param
    assert error["code"] == ("unsupported_parameter" if param.startswith("reasoning") else None)


def test_responses_take_sampling_where_the_model_allows_it(client, server):
    """A temperature of 1, any sampling with reasoning effort "none", and a `-chat` model's
    sampling are taken."""
    ok = [
        respond(client, server, model="o3", temperature=1),
        respond(client, server, model="gpt-5.4", temperature=0.2, reasoning={"effort": "none"}),
        respond(client, server, model="gpt-5-chat-latest", temperature=0.2, top_p=0.5),
        respond(client, server, model="gpt-4.1", temperature=0.2, top_p=0.5),
    ]
    assert [r.status_code for r in ok] == [200] * 4


@pytest.mark.parametrize(
    ("model", "extra", "message", "param", "code"),
    [
        (
            "gpt-5",
            {"max_tokens": 100},
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        ),
        (
            "o3",
            {"temperature": 0.5},
            "Unsupported value: 'temperature' does not support 0.5 with this model. Only the "
            "default (1) value is supported.",
            "temperature",
            "unsupported_value",
        ),
        (
            "o4-mini",
            {"top_p": 0.9},
            "Unsupported parameter: 'top_p' is not supported with this model.",
            "top_p",
            "unsupported_parameter",
        ),
        (
            "gpt-5-mini",
            {"logprobs": True},
            "Unsupported parameter: 'logprobs' is not supported with this model.",
            "logprobs",
            "unsupported_parameter",
        ),
        (
            "o1-mini",
            {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "hi"},
                ]
            },
            "Unsupported value: 'messages[0].role' does not support 'system' with this model.",
            "messages[0].role",
            "unsupported_value",
        ),
    ],
)
def test_chat_completions_refuse_what_reasoning_models_do_not_take(
    client, server, model, extra, message, param, code
):
    """On /v1/chat/completions reasoning models refuse `max_tokens`, sampling parameters
    other than their defaults, and (o1-mini, o1-preview) the system role."""
    error = refusal(chat(client, server, model, **extra))
    assert (error["message"], error["param"], error["code"]) == (message, param, code)


def test_chat_completions_take_what_reasoning_models_allow(client, server):
    """max_completion_tokens, temperature 1, sampling at effort "none", `developer` on
    o1-mini, `system` on o1, and anything on a model that does not reason are taken."""
    system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    developer = [{**system[0], "role": "developer"}, system[1]]
    ok = [
        chat(client, server, "gpt-5", max_completion_tokens=100, temperature=1),
        chat(client, server, "gpt-5.4", temperature=0.2, reasoning_effort="none"),
        chat(client, server, "o1-mini", messages=developer),
        chat(client, server, "o1", messages=system),
        chat(client, server, "gpt-4.1-mini", max_tokens=100, temperature=0.2, logprobs=True),
        chat(client, server, "gpt-5-chat-latest", max_tokens=100, temperature=0.2),
    ]
    assert [r.status_code for r in ok] == [200] * 6


# -- batches over /v1/responses ------------------------------------------------------------------


def test_a_batch_over_responses_end_to_end(client, server):
    """A batch of /v1/responses lines (upload, create, poll, download) answers each line
    with the very `response` a live request gets, and a line the API refuses lands in
    the error file with the live refusal's status and body."""
    server.batch_delay = 0
    base = server.base_url("openai")
    lines = [
        {"custom_id": "a", "body": {"model": "gpt-4.1", "input": "What's 2+2?"}},
        {"custom_id": "b", "body": {"model": "gpt-4.1", "input": "What's 3+4?", "seed": 1}},
    ]
    content = b"".join(
        msgspec.json.encode({**line, "method": "POST", "url": "/v1/responses"}) + b"\n"
        for line in lines
    )
    files = {"file": ("requests.jsonl", content, "application/jsonl")}
    upload = client.post(base + "/files", data={"purpose": "batch"}, files=files).json()
    created = client.post(
        base + "/batches",
        json={
            "input_file_id": upload["id"],
            "endpoint": "/v1/responses",
            "completion_window": "24h",
        },
    )
    assert created.status_code == 200, created.text
    assert (created.json()["status"], created.json()["endpoint"]) == ("validating", "/v1/responses")
    batch = client.get(f"{base}/batches/{created.json()['id']}").json()
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 2, "completed": 1, "failed": 1}
    listed = client.get(base + "/batches").json()["data"]
    assert [b["id"] for b in listed] == [batch["id"]]

    def download(file_id: str) -> dict[str, dict]:
        raw = client.get(f"{base}/files/{file_id}/content").content
        return {d["custom_id"]: d for d in map(msgspec.json.decode, raw.splitlines())}

    (out,) = download(batch["output_file_id"]).values()
    assert out["custom_id"] == "a"
    assert out["response"]["status_code"] == 200
    body = out["response"]["body"]
    assert (body["object"], body["status"]) == ("response", "completed")
    assert body["output"][0]["content"][0]["text"] == "2 + 2 = 4"
    assert body["usage"]["total_tokens"] == 7
    (failed,) = download(batch["error_file_id"]).values()
    assert failed["response"]["status_code"] == 400
    assert failed["response"]["body"] == {
        "error": {
            "message": "Unknown parameter: 'seed'.",
            "type": "invalid_request_error",
            "param": "seed",
            "code": "unknown_parameter",
        }
    }
    assert [(r.format, r.custom_id) for r in server.log] == [("openai_responses", "a")]


def test_a_batch_line_must_name_the_batchs_endpoint(client, server):
    """A /v1/responses batch whose line names /v1/chat/completions fails validation, and chat
    completion batches work as before."""
    server.batch_delay = 0
    base = server.base_url("openai")
    line = {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "What's 2+2?"}]},
    }
    files = {"file": ("r.jsonl", msgspec.json.encode(line) + b"\n", "application/jsonl")}
    upload = client.post(base + "/files", data={"purpose": "batch"}, files=files).json()
    made = {
        endpoint: client.post(
            base + "/batches",
            json={"input_file_id": upload["id"], "endpoint": endpoint, "completion_window": "24h"},
        ).json()
        for endpoint in ("/v1/responses", "/v1/chat/completions")
    }
    refused = client.get(f"{base}/batches/{made['/v1/responses']['id']}").json()
    assert refused["status"] == "failed"
    assert refused["errors"]["data"][0]["code"] == "url_mismatch"
    chat_batch = client.get(f"{base}/batches/{made['/v1/chat/completions']['id']}").json()
    assert chat_batch["status"] == "completed"
    unknown = client.post(
        base + "/batches",
        json={
            "input_file_id": upload["id"],
            "endpoint": "/v1/embeddings",
            "completion_window": "24h",
        },
    )
    assert unknown.status_code == 400
