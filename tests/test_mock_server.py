"""The mock model server itself: knobs, failures, counters, and the command line."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import msgspec
import pytest

import vitals_engine as ve
from tests.addresses import free_port
from tests.helpers import wait_until
from vitals_engine.testing import MockReply, MockServer, MockToolCall, mock_server, reply
from vitals_engine.testing.__main__ import agent_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client():
    with httpx.Client(timeout=10) as client:
        yield client


def ask(client, server, content="What's 2+2?", model="m", **extra) -> httpx.Response:
    """POST one OpenAI chat completion request to the server."""
    body = {"model": model, "messages": [{"role": "user", "content": content}], **extra}
    return client.post(server.base_url() + "/chat/completions", json=body)


def text_of(response: httpx.Response) -> str:
    return response.json()["choices"][0]["message"]["content"]


# -- answers ---------------------------------------------------------------------------------


def test_answers_in_the_openai_shape(client, server):
    """A request gets a chat.completion body: answer, finish reason, usage and request id."""
    response = ask(client, server, "What's 2+2?", model="gpt-x")
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["model"] == "gpt-x"
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "2 + 2 = 4"}
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["prompt_tokens"] == 2
    assert data["usage"]["completion_tokens"] == 5
    assert data["usage"]["total_tokens"] == 7
    assert response.headers["x-request-id"] == "req_1"


def test_cached_and_reasoning_tokens_in_the_usage_block(client, server):
    """cached_tokens and reasoning_tokens show up in the usage details (capped by the prompt)."""
    server.cached_tokens = 10
    server.reasoning_tokens = 2
    usage = ask(client, server, "one two three").json()["usage"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 3}
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}
    assert usage["completion_tokens"] == 3 + 2


def test_fixed_latency_still_answers(client, server):
    """A fixed latency is settable and the answer still comes."""
    server.latency = 0.01
    assert server.latency == 0.01
    response = ask(client, server)
    assert response.status_code == 200
    assert text_of(response) == "2 + 2 = 4"


def test_latency_range_still_answers(client, server):
    """A (low, high) latency range is settable and every answer still comes."""
    server.latency = (0.0, 0.02)
    assert server.latency == (0.0, 0.02)
    assert [ask(client, server).status_code for _ in range(3)] == [200, 200, 200]


def test_latency_from_the_constructor(client):
    """MockServer(latency=(low, high)) answers like any other server."""
    with MockServer(latency=(0.0, 0.01), seed=3) as slow:
        assert slow.latency == (0.0, 0.01)
        assert text_of(ask(client, slow)) == "2 + 2 = 4"


# -- planned failures ---------------------------------------------------------------------------


@pytest.mark.parametrize("times", [1, 3])
def test_fail_affects_exactly_the_next_n_requests_for_a_model(client, server, times):
    """fail(kind, times=N, model=M) fails the next N requests for M, not other models."""
    server.fail("500", times=times, model="a")
    assert ask(client, server, model="b").status_code == 200
    statuses = [ask(client, server, model="a").status_code for _ in range(times + 2)]
    assert statuses == [500] * times + [200, 200]
    assert ask(client, server, model="b").status_code == 200
    assert [r.outcome for r in server.log if r.model == "a"] == ["500"] * times + ["ok", "ok"]


def test_fail_without_a_model_affects_any_model(client, server):
    """fail(kind) without model= fails the next request whichever model it names."""
    server.fail("503", times=2)
    assert ask(client, server, model="x").status_code == 503
    assert ask(client, server, model="y").status_code == 503
    assert ask(client, server, model="z").status_code == 200


def test_fail_every_time(client, server):
    """fail(kind, times=None) fails every request until reset()."""
    server.fail("529", times=None)
    assert [ask(client, server).status_code for _ in range(4)] == [529] * 4
    server.reset()
    assert ask(client, server).status_code == 200


def test_fail_zero_times_fails_nothing(client, server):
    """fail(kind, times=0) plans no failure at all."""
    server.fail("500", times=0)
    assert ask(client, server).status_code == 200


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("429", 429, "rate_limit_exceeded"),
        ("401", 401, "invalid_api_key"),
        ("404", 404, "model_not_found"),
        ("400", 400, None),
        ("500", 500, None),
        ("503", 503, None),
        ("529", 529, None),
    ],
)
def test_status_failures_use_the_openai_error_shape(client, server, kind, status, code):
    """Each status failure answers with that status and OpenAI's error body."""
    server.fail(kind)
    response = ask(client, server)
    assert response.status_code == status
    error = response.json()["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert error["code"] == code


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("retry-after", {"retry-after": "2.5"}),
        ("retry-after-ms", {"retry-after-ms": "2500"}),
        ("reset", {"x-ratelimit-reset-requests": "2.5s", "x-ratelimit-reset-tokens": "0s"}),
    ],
)
def test_rate_limit_headers(client, server, header, expected):
    """A planned 429 says its wait in the header style asked for."""
    server.fail("429", retry_after=2.5, header=header)
    response = ask(client, server)
    assert response.status_code == 429
    for name, value in expected.items():
        assert response.headers[name] == value


def test_malformed_and_incomplete_bodies(client, server):
    """The malformed kind answers invalid JSON and incomplete answers JSON without choices."""
    server.fail("malformed")
    response = ask(client, server)
    assert response.status_code == 200
    with pytest.raises(ValueError, match="Expecting"):
        response.json()
    server.fail("incomplete")
    response = ask(client, server)
    assert response.status_code == 200
    assert "choices" not in response.json()


def test_drop_closes_the_connection(client, server):
    """The drop kind closes the connection without an answer."""
    server.fail("drop")
    with pytest.raises(httpx.RemoteProtocolError, match="disconnected"):
        ask(client, server)
    assert ask(client, server).status_code == 200


def test_unknown_failure_kind_is_a_value_error(server):
    """fail() and failure_rate() reject a kind they do not know."""
    with pytest.raises(ValueError, match="unknown failure kind 'teapot'"):
        server.fail("teapot")
    with pytest.raises(ValueError, match="unknown failure kind 'teapot'"):
        server.failure_rate(0.5, "teapot")


# -- random failures and rate limits ------------------------------------------------------------


def _outcomes_at_rate(client, seed: int) -> list[int]:
    with MockServer(seed=seed) as seeded:
        seeded.failure_rate(0.1)
        return [ask(client, seeded).status_code for _ in range(200)]


def test_failure_rate_fails_a_share_deterministically(client):
    """failure_rate(0.1) fails some share of requests with 429, the same ones for the same seed."""
    first = _outcomes_at_rate(client, seed=7)
    failed = first.count(429)
    assert 1 <= failed <= 40
    assert set(first) == {200, 429}
    assert _outcomes_at_rate(client, seed=7) == first


def test_failure_rate_zero_turns_it_off(client, server):
    """failure_rate(0) stops the random failures."""
    server.failure_rate(1.0, "503")
    assert ask(client, server).status_code == 503
    server.failure_rate(0)
    assert [ask(client, server).status_code for _ in range(5)] == [200] * 5


def test_rpm_limit_answers_429_with_a_wait(client, server):
    """rpm(2) answers the third request within a minute with 429 and a positive Retry-After."""
    server.rpm(2)
    responses = [ask(client, server) for _ in range(3)]
    assert [r.status_code for r in responses] == [200, 200, 429]
    wait = float(responses[2].headers["retry-after"])
    assert 0 < wait <= 60
    server.rpm(None)
    assert ask(client, server).status_code == 200


# -- counters, log, reset, script ----------------------------------------------------------------


def test_counters_and_log(client, server):
    """requests, requests_by_model and log record every request, failed ones included."""
    ask(client, server, "hello", model="a")
    server.fail("500")
    ask(client, server, "again", model="a")
    ask(client, server, "What's 1+1?", model="b")
    assert server.requests == 3
    assert server.requests_by_model == {"a": 2, "b": 1}
    assert [(r.model, r.outcome) for r in server.log] == [("a", "ok"), ("a", "500"), ("b", "ok")]
    first = server.log[0]
    assert first.format == "openai"
    assert first.request.prompt == "hello"
    assert first.body["messages"] == [{"role": "user", "content": "hello"}]
    assert first.at <= server.log[-1].at
    assert "content-type" in {k.lower() for k in first.headers}


def test_keep_log_false_counts_without_logging(client):
    """With keep_log=False the counters still count but the log stays empty."""
    with MockServer(keep_log=False) as quiet:
        ask(client, quiet)
        ask(client, quiet)
        assert quiet.requests == 2
        assert quiet.log == []


def test_reset_forgets_counters_failures_limits_and_scripts(client, server):
    """reset() clears counters, the log, planned and random failures, rpm and the script."""
    ask(client, server)
    server.fail("500", times=None)
    server.failure_rate(1.0)
    server.rpm(1)
    server.script(lambda req: "scripted")
    server.reset()
    assert server.requests == 0
    assert not server.requests_by_model
    assert server.log == []
    assert [text_of(ask(client, server)) for _ in range(3)] == ["2 + 2 = 4"] * 3


def test_script_answers_with_text_replies_and_falls_back(client, server):
    """script() answers with its string or MockReply, and the default answer when it gives None."""
    server.script(lambda req: "shouting" if req.prompt == "hey" else None)
    assert text_of(ask(client, server, "hey")) == "shouting"
    assert text_of(ask(client, server, "What's 2+2?")) == "2 + 2 = 4"
    server.script(lambda req: reply("thinking done", reasoning="hmm", output_tokens=9))
    data = ask(client, server, "x").json()
    assert data["choices"][0]["message"]["reasoning_content"] == "hmm"
    assert data["usage"]["completion_tokens"] == 9
    server.script(None)
    assert text_of(ask(client, server, "echo")) == "echo"


def test_scripted_tool_calls(client, server):
    """A scripted MockReply with tool calls renders OpenAI tool_calls with JSON arguments."""
    server.script(lambda req: MockReply(tool_calls=[MockToolCall("c1", "add", {"a": 1, "b": 2})]))
    choice = ask(client, server).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}
    ]


def test_tool_named_in_the_prompt_is_called_with_its_numbers(client, server):
    """Offered tools named in the prompt are called, number parameters filled in order."""
    tool = {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "number"}},
            },
        },
    }
    choice = ask(client, server, "Use add on 4 and 2.5", tools=[tool]).json()["choices"][0]
    (call,) = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "add", "arguments": '{"a":4,"b":2.5}'}
    assert text_of(ask(client, server, "Say hi", tools=[tool])) == "Say hi"


def bash_tool(parameter: str) -> dict:
    """An OpenAI function tool `bash` taking its command in `parameter`."""
    schema = {
        "type": "object",
        "properties": {parameter: {"type": "string"}},
        "required": [parameter],
        "additionalProperties": False,
    }
    return {"type": "function", "function": {"name": "bash", "parameters": schema}}


@pytest.mark.parametrize(
    ("tools", "argument"), [([], "cmd"), (["cmd"], "cmd"), (["command"], "command")]
)
def test_agent_steps_put_the_command_where_the_bash_tool_takes_it(client, server, tools, argument):
    """The `--agent-steps` model calls bash with its command in the argument the offered
    bash tool declares (`cmd` for ve.bash(), `command` for Inspect's bash(); `cmd` when no
    bash tool is offered), step after step, then submits "done"."""
    server.script(agent_script(2))
    offered = [bash_tool(parameter) for parameter in tools]
    messages = [{"role": "user", "content": "go"}]
    for step in (1, 2):
        body = {"model": "m", "messages": messages, "tools": offered}
        message = client.post(server.base_url() + "/chat/completions", json=body).json()
        (call,) = message["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "bash"
        assert msgspec.json.decode(call["function"]["arguments"]) == {argument: f"echo step {step}"}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"step {step}"},
        ]
    last = client.post(server.base_url() + "/chat/completions", json=body | {"messages": messages})
    (submit,) = last.json()["choices"][0]["message"]["tool_calls"]
    assert submit["function"] == {"name": "submit", "arguments": '{"answer":"done"}'}


# -- bad requests --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"model": "m"}',
        b'{"model": 1, "messages": []}',
        b'{"model": "m", "messages": [{"content": "no role"}]}',
        b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}',
        b'{"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
    ],
)
def test_malformed_request_is_a_400_in_the_error_shape(client, server, body):
    """A request the real API would refuse gets 400 with OpenAI's error body, and is not counted."""
    response = client.post(server.base_url() + "/chat/completions", content=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("invalid request: ")
    assert server.requests == 0


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"model": "m", "messages": [{"role": "user", "content": [1]}]}',
        b'{"model": "m", "messages": [], "response_format": "json"}',
    ],
)
def test_non_object_json_is_a_400_in_the_error_shape(client, server, body):
    """JSON of the wrong shape (an array body, a non-object part) gets 400, not a server crash."""
    response = client.post(server.base_url() + "/chat/completions", content=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("invalid request: ")


# -- lifecycle ------------------------------------------------------------------------------------


def test_start_stop_and_fixed_port(client):
    """A server on a given port answers while started and refuses connections once stopped."""
    port = free_port()
    started = MockServer(port).start()
    try:
        assert started.base_url() == f"http://127.0.0.1:{port}/v1"
        assert ask(client, started).status_code == 200
    finally:
        started.stop()
    with pytest.raises(httpx.ConnectError):
        ask(client, started)


def test_mock_server_helper_and_a_chat(server):
    """mock_server() is a context manager over MockServer, and chats use it like a provider."""
    with mock_server(latency=0.0) as other:
        assert other.port != server.port
        chat = ve.chat_openai("m", base_url=other.base_url("openai"), api_key="x")
        assert chat.chat("What's 3+4?") == "3 + 4 = 7"
        assert other.requests == 1
    assert server.requests == 0


def listening(port: int) -> bool:
    """Whether a server accepts connections on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_command_line_server_answers_and_stops():
    """`python -m vitals_engine.testing --port N` serves OpenAI requests and stops on terminate."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vitals_engine.testing", "--port", str(port), "--rpm", "2"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "What's 2+2?"}]}
    try:
        wait_until(lambda: listening(port) or proc.poll() is not None, "it to listen", limit=30)
        if proc.poll() is not None:
            pytest.fail(f"the server did not start: {proc.communicate()[1].decode()}")
        with httpx.Client(timeout=10) as client:
            first = client.post(url, json=body)
            assert first.status_code == 200
            assert text_of(first) == "2 + 2 = 4"
            assert client.post(url, json=body).status_code == 200
            limited = client.post(url, json=body)
            assert limited.status_code == 429
            assert float(limited.headers["retry-after"]) > 0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail("the server did not stop on terminate")
        proc.stderr.close()
    assert proc.returncode is not None
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# -- streaming ------------------------------------------------------------------------------------


def events_of(response: httpx.Response) -> list:
    """The server-sent events of a whole response body."""
    from vitals_engine.transport.sse import EventStreamParser

    assert response.headers["content-type"] == "text/event-stream"
    return EventStreamParser().feed(response.text)


def stream_openai(client, server, content="What's 2+2?", **extra) -> httpx.Response:
    return ask(client, server, content, stream=True, **extra)


def test_streams_in_the_openai_shape(client, server):
    """`"stream": true` gets chat.completion.chunk events: the role, the text a word per
    delta, the finish reason, the usage chunk (asked with include_usage), then [DONE]."""
    usage = {"include_usage": True}
    events = events_of(stream_openai(client, server, model="gpt-x", stream_options=usage))
    assert events[-1].data == "[DONE]"
    chunks = [msgspec.json.decode(e.data) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"gpt-x"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert deltas == ["2 ", "+ ", "2 ", "= ", "4"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 2
    assert chunks[-1]["usage"]["completion_tokens"] == 5
    assert server.log[-1].request.stream


def test_openai_streams_usage_only_when_asked(client, server):
    """Without stream_options.include_usage no chunk carries usage, as with the API; and
    stream_options without stream is refused with 400, as the API does."""
    chunks = [msgspec.json.decode(e.data) for e in events_of(stream_openai(client, server))[:-1]]
    assert all("usage" not in chunk for chunk in chunks)
    refused = ask(client, server, stream_options={"include_usage": True})
    assert refused.status_code == 400
    assert "only allowed when 'stream' is enabled" in refused.json()["error"]["message"]


def test_openai_streams_tool_calls_by_index_with_argument_fragments(client, server):
    """A tool call opens with its index, id and name, and its arguments follow in pieces."""
    server.script(lambda req: MockReply(tool_calls=[MockToolCall("c1", "add", {"a": 1, "b": 2})]))
    chunks = [msgspec.json.decode(e.data) for e in events_of(stream_openai(client, server))[:-1]]
    calls = [
        d["tool_calls"][0] for c in chunks if (d := c["choices"][0]["delta"]).get("tool_calls")
    ]
    assert calls[0] == {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": ""},
    }
    assert len(calls) > 2
    assert "".join(c["function"]["arguments"] for c in calls) == '{"a":1,"b":2}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def stream_anthropic(client, server, content="What's 2+2?", **extra) -> httpx.Response:
    body = {
        "model": "claude-x",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": content}],
        **extra,
    }
    return client.post(server.base_url("anthropic") + "/messages", json=body)


def test_streams_in_the_anthropic_shape(client, server):
    """`"stream": true` on /v1/messages gets the Messages events in order, each named as its
    type, with thinking and signature deltas, text deltas and usage at start and end."""
    server.script(lambda req: MockReply(text="2 + 2 = 4", reasoning="add them"))
    events = events_of(stream_anthropic(client, server))
    data = [msgspec.json.decode(e.data) for e in events]
    assert [e.event for e in events] == [d["type"] for d in data]
    assert [e.event for e in events] == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * 3,  # "add ", "them", the signature
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * 5,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert data[0]["message"]["usage"]["input_tokens"] == 2
    assert data[5]["delta"]["type"] == "signature_delta"
    assert [d["delta"]["text"] for d in data[8:13]] == ["2 ", "+ ", "2 ", "= ", "4"]
    assert data[-2]["delta"]["stop_reason"] == "end_turn"
    assert data[-2]["usage"]["output_tokens"] == 5


def gemini_stream(client, server, query="?alt=sse") -> httpx.Response:
    url = f"{server.base_url('google')}/models/gemini-x:streamGenerateContent{query}"
    return client.post(
        url, json={"contents": [{"role": "user", "parts": [{"text": "What's 2+2?"}]}]}
    )


def test_streams_in_the_gemini_shape(client, server):
    """`:streamGenerateContent?alt=sse` gets one GenerateContentResponse per event, a word
    each, a thought's signature on its last piece, and the finishReason and final usage on
    the last chunk only; without alt=sse it is a 400."""
    server.script(lambda req: MockReply(text="2 + 2 = 4", reasoning="add them"))
    chunks = [msgspec.json.decode(e.data) for e in events_of(gemini_stream(client, server))]
    parts = [c["candidates"][0]["content"]["parts"][0] for c in chunks]
    assert [p["text"] for p in parts] == ["add ", "them", "2 ", "+ ", "2 ", "= ", "4"]
    assert [bool(p.get("thought")) for p in parts] == [True, True] + [False] * 5
    assert ["thoughtSignature" in p for p in parts] == [False, True] + [False] * 5
    assert [c["candidates"][0].get("finishReason") for c in chunks] == [None] * 6 + ["STOP"]
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 5
    assert "candidatesTokenCount" not in chunks[0]["usageMetadata"]
    refused = gemini_stream(client, server, query="")
    assert refused.status_code == 400
    assert "alt=sse" in refused.json()["error"]["message"]


def test_stream_failures_pass_whole_requests_by(client, server):
    """ "cut" waits for a streamed request: a whole one before it is answered as usual, and
    the streamed one breaks off mid-body after half its events."""
    server.fail("cut")
    assert text_of(ask(client, server)) == "2 + 2 = 4"
    with client.stream(
        "POST",
        server.base_url() + "/chat/completions",
        json={"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    ) as response:
        received: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            received.extend(response.iter_lines())
    assert [line for line in received if line.startswith("data:")] != []
    assert not any("[DONE]" in line for line in received)
    assert [r.outcome for r in server.log] == ["ok", "cut"]


def test_a_stream_error_after_n_events_in_the_format_shape(client, server):
    """`fail("stream-error", after=2, status=429)` sends two events, then the format's
    error chunk for a rate limit, and ends without [DONE]."""
    server.fail("stream-error", after=2, status=429)
    events = events_of(stream_openai(client, server))
    assert len(events) == 3
    error = msgspec.json.decode(events[-1].data)["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["message"] == "Rate limit reached for requests"
    server.fail("stream-error")  # the format's overload by default
    events = events_of(stream_anthropic(client, server, "hi", model="c", max_tokens=10))
    assert events[-1].event == "error"
    assert msgspec.json.decode(events[-1].data)["error"]["type"] == "overloaded_error"


def test_malformed_on_a_stream_is_an_event_that_is_not_json(client, server):
    """On a streamed request "malformed" sends an event whose data is not JSON."""
    server.fail("malformed", after=1)
    events = events_of(stream_openai(client, server))
    assert len(events) == 2
    with pytest.raises(msgspec.DecodeError):
        msgspec.json.decode(events[-1].data)


def test_stream_delay_and_hold_are_knobs_that_reset_restores(client, server):
    """stream_delay is settable and reset() restores it; a hold released beforehand lets a
    stream through (counted as held), and after reset() streams are no longer held."""
    server.stream_delay = 0.01
    assert server.stream_delay == 0.01
    hold = server.hold_stream()
    hold.release()
    assert len(events_of(stream_openai(client, server))) == 8
    assert (hold.held, hold.timed_out) == (1, False)
    server.reset()
    assert server.stream_delay == 0.0
    events_of(stream_openai(client, server))
    assert hold.held == 1


def test_unknown_stream_failure_kinds_are_refused(server):
    """The stream kinds are known failure kinds; a misspelt one is a ValueError naming them."""
    with pytest.raises(ValueError, match="stream-error"):
        server.fail("stream_error")


def test_command_line_help_documents_streaming():
    """`--help` names the stream delay and how a request asks for a stream."""
    result = subprocess.run(
        [sys.executable, "-m", "vitals_engine.testing", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--stream-delay" in result.stdout
    assert "streamGenerateContent?alt=sse" in result.stdout.replace("\n", "")


def test_per_second_counts_every_request_in_its_second(client, server):
    """`per_second()` counts the logged requests by the second they arrived in, from the
    first request's second to the last's (empty seconds as 0): what a test of a rate
    limit compares with the limit."""
    assert server.per_second() == []
    for _ in range(3):
        ask(client, server)
    counts = server.per_second()
    assert sum(counts) == 3
    first, last = int(server.log[0].at), int(server.log[-1].at)
    assert len(counts) == last - first + 1
    assert counts[0] >= 1
    assert counts[-1] >= 1
