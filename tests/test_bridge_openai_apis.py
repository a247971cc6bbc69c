"""The bridge's two OpenAI formats (`bridge/chat_completions_api.py`, `bridge/responses_api.py`)
against our own OpenAI clients: what the bridge writes, our providers read back as the same
turn (whole and streamed); what our providers write, the bridge reads back as the same
request; malformed bodies are refused and unknown fields are not; error bodies read as the
message they carry. Then Codex CLI's own shapes (freeform, namespaced, local-shell and
tool-search tools, and the items they call them with), and the Codex requests recorded in
`tests/recordings/agent_clis/`, when there are any.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import vitals_engine as ve
from vitals_engine.bridging.chat_completions_api import ChatCompletionsApi
from vitals_engine.bridging.responses_api import ResponsesApi
from vitals_engine.bridging.wire import ApiFormat, WireError, seal_thinking, unseal_thinking
from vitals_engine.providers.http import HttpProvider
from vitals_engine.providers.openai_base import error_status
from vitals_engine.transport.sse import EventStreamParser
from vitals_engine.vocab.model_calls import ChatRequest, ToolDef
from vitals_engine.vocab.turns import (
    Content,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)

RECORDINGS = Path(__file__).parent / "recordings" / "agent_clis"
PNG = ContentImage.from_bytes(b"\x89PNG\r\n\x1a\n fake", "image/png")


def chat_provider() -> HttpProvider:
    provider = ve.chat_openai("gpt-4.1-mini", api="chat_completions", api_key="x").provider
    assert isinstance(provider, HttpProvider)
    return provider


def responses_provider() -> HttpProvider:
    provider = ve.chat_openai("gpt-4.1-mini", api="responses", api_key="x").provider
    assert isinstance(provider, HttpProvider)
    return provider


def streamed(provider: HttpProvider, events: list[bytes]) -> Turn:
    """What the provider reads from the stream `events`, fed as the wire would carry them."""
    reader = provider.stream_reader()
    parser = EventStreamParser()
    wire = b"".join(events).decode()
    for cut in range(0, len(wire), 97):  # cut anywhere, as chunks arrive
        for event in parser.feed(wire[cut : cut + 97]):
            reader.feed(event)
    assert reader.complete
    return provider.parse(reader.body())


# -- 1. what the bridge writes, our clients read back ---------------------------------------

THOUGHT = ContentThinking("Two and two make four.", signature="sig-abc", id="rs_01")
TURNS = {
    "text": Turn("assistant", [ContentText("The answer is 4.")], finish_reason="stop"),
    "unicode": Turn("assistant", [ContentText("Grüße, 世界 — ✓\nline two")], finish_reason="stop"),
    "tool_calls": Turn(
        "assistant",
        [
            ContentText("Let me look."),
            ContentToolRequest("call_1", "read_file", {"path": "a.txt", "lines": [1, 2]}),
            ContentToolRequest("call_2", "list_dir", {}),
        ],
        finish_reason="tool_calls",
    ),
    "reasoning": Turn("assistant", [THOUGHT, ContentText("4")], finish_reason="stop"),
    "redacted_reasoning": Turn(
        "assistant",
        [ContentThinking("", signature="opaque", redacted=True), ContentText("4")],
        finish_reason="stop",
    ),
    "max_tokens": Turn("assistant", [ContentText("The answer is")], finish_reason="max_tokens"),
    "content_filter": Turn("assistant", [ContentText("I")], finish_reason="content_filter"),
    "unparsed_arguments": Turn(
        "assistant",
        [ContentToolRequest("call_9", "run", {"_unparsed": '{"cmd": "ls'})],
        finish_reason="tool_calls",
    ),
}
USAGES = {
    "plain": TokenUsage(input=120, output=30),
    "cached": TokenUsage(input=20, output=45, cached_input=1000, reasoning=12),
    "cache_write": TokenUsage(input=5, output=7, cached_input=64, cache_write=256),
    "none": None,
}


def expected_chat(turn: Turn) -> list[Content]:
    """Chat Completions carries the reasoning's text only (`reasoning_content`)."""
    out: list[Content] = []
    for content in turn.contents:
        if isinstance(content, ContentThinking):
            if content.thinking:
                out.append(ContentThinking(content.thinking))
        else:
            out.append(content)
    return out


def expected_responses(contents: list[Content]) -> list[Content]:
    """The Responses API's reasoning is sealed: the original comes back out of the seal."""
    return [
        unseal_thinking(c.signature) or c if isinstance(c, ContentThinking) else c for c in contents
    ]


def check_same(turn: Turn, back: Turn, tokens: TokenUsage | None) -> None:
    assert back.finish_reason == turn.finish_reason
    assert back.tokens == (tokens or TokenUsage())
    assert back.model == "gpt-bridge"


@pytest.mark.parametrize("usage", USAGES)
@pytest.mark.parametrize("kind", TURNS)
def test_chat_completions_reply_reads_back(kind: str, usage: str) -> None:
    turn = msgspec.structs.replace(TURNS[kind], tokens=USAGES[usage])
    provider, api = chat_provider(), ChatCompletionsApi()
    whole = provider.parse(api.reply(turn, model="gpt-bridge"))
    streamed_back = streamed(provider, api.stream(turn, model="gpt-bridge"))
    for back in (whole, streamed_back):
        assert back.contents == expected_chat(turn)
        check_same(turn, back, USAGES[usage])


@pytest.mark.parametrize("usage", USAGES)
@pytest.mark.parametrize("kind", TURNS)
def test_responses_reply_reads_back(kind: str, usage: str) -> None:
    turn = msgspec.structs.replace(TURNS[kind], tokens=USAGES[usage])
    provider, api = responses_provider(), ResponsesApi()
    whole = provider.parse(api.reply(turn, model="gpt-bridge"))
    streamed_back = streamed(provider, api.stream(turn, model="gpt-bridge"))
    for back in (whole, streamed_back):
        assert expected_responses(back.contents) == turn.contents
        check_same(turn, back, USAGES[usage])


def test_reasoning_item_keeps_the_models_item_id_and_seals_the_rest() -> None:
    body = ResponsesApi().reply(TURNS["reasoning"], model="m")
    item = body["output"][0]
    assert item["type"] == "reasoning"
    assert item["id"] == "rs_01"
    assert item["summary"] == [{"type": "summary_text", "text": THOUGHT.thinking}]
    assert unseal_thinking(item["encrypted_content"]) == THOUGHT


def test_service_tier_reads_back() -> None:
    turn = msgspec.structs.replace(TURNS["text"], service_tier="flex")
    assert chat_provider().parse(ChatCompletionsApi().reply(turn, model="m")).service_tier == "flex"
    assert responses_provider().parse(ResponsesApi().reply(turn, model="m")).service_tier == "flex"


def test_chat_stream_shape() -> None:
    events = ChatCompletionsApi().stream(TURNS["tool_calls"], model="m")
    assert events[-1] == b"data: [DONE]\n\n"
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
    assert all(e.startswith(b"data: ") and e.endswith(b"\n\n") for e in events)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] == 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    opened = [
        call
        for c in chunks[:-1]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
        if "id" in call
    ]
    assert [(c["index"], c["id"], c["function"]["name"]) for c in opened] == [
        (0, "call_1", "read_file"),
        (1, "call_2", "list_dir"),
    ]
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[1:-2]]
    assert len([t for t in texts if t]) > 1  # the text comes in more than one delta


def test_responses_stream_shape() -> None:
    events = ResponsesApi().stream(TURNS["reasoning"], model="m")
    parsed = EventStreamParser().feed(b"".join(events).decode())
    datas = [json.loads(e.data) for e in parsed]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert all(e.event == d["type"] for e, d in zip(parsed, datas, strict=True))
    names = [e.event for e in parsed]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    for name in (
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ):
        assert name in names
    assert datas[-1]["response"]["usage"] is not None
    assert datas[0]["response"]["status"] == "in_progress"


def test_responses_stream_of_a_cut_reply_ends_incomplete() -> None:
    events = ResponsesApi().stream(TURNS["max_tokens"], model="m")
    last = EventStreamParser().feed(b"".join(events).decode())[-1]
    assert last.event == "response.incomplete"
    response = json.loads(last.data)["response"]
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}


def test_function_call_items_stream_their_arguments() -> None:
    events = ResponsesApi().stream(TURNS["tool_calls"], model="m")
    parsed = EventStreamParser().feed(b"".join(events).decode())
    deltas = [json.loads(e.data)["delta"] for e in parsed if e.event.endswith("arguments.delta")]
    done = [json.loads(e.data) for e in parsed if e.event.endswith("arguments.done")]
    assert "".join(deltas) == '{"path":"a.txt","lines":[1,2]}{}'
    assert [d["arguments"] for d in done] == ['{"path":"a.txt","lines":[1,2]}', "{}"]


# -- 2. what our clients write, the bridge reads back ---------------------------------------

TOOLS = [
    ToolDef(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolDef("list_dir", "List the directory.", {"type": "object", "properties": {}}),
]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}}


def conversation(thinking: list[Content]) -> list[Turn]:
    return [
        Turn.user("What is in a.txt? Here is a picture:", PNG, ContentImage(url="https://x/a.png")),
        Turn(
            "assistant",
            [
                *thinking,
                ContentText("Let me look."),
                ContentToolRequest("call_1", "read_file", {"path": "a.txt"}),
                ContentToolRequest("call_2", "list_dir", {}),
            ],
        ),
        Turn(
            "user",
            [
                ContentToolResult("call_1", "read_file", value="flag{x}"),
                ContentToolResult("call_2", "list_dir", error="permission denied"),
                ContentText("Go on."),
            ],
        ),
        Turn("assistant", [ContentText("It says flag{x}.")]),
        Turn.user("Thanks!"),
    ]


def as_read(turns: list[Turn]) -> list[Turn]:
    """Tool results come back as the text the model was sent."""
    return [
        Turn(
            t.role,
            [
                ContentToolResult(c.id, c.name, value=c.text)
                if isinstance(c, ContentToolResult)
                else c
                for c in t.contents
            ],
        )
        for t in turns
    ]


def test_chat_completions_reads_what_our_provider_writes() -> None:
    request = ChatRequest(
        conversation([]),
        system_prompt="You are terse.",
        tools=TOOLS,
        output_schema=SCHEMA,
        params={"max_tokens": 77, "temperature": 0.2},
    )
    asked = ChatCompletionsApi().read(chat_provider().body(request))
    assert asked.request.turns == as_read(request.turns)
    assert asked.request.system_prompt == "You are terse."
    assert asked.request.tools == TOOLS
    assert asked.request.output_schema == SCHEMA
    assert asked.request.params == {}
    assert (asked.model, asked.stream, asked.max_tokens) == ("gpt-4.1-mini", False, 77)


def test_chat_completions_reads_streamed_requests_and_reasoning_content() -> None:
    body = chat_provider().stream_body(chat_provider().body(ChatRequest([Turn.user("Hi")])))
    assert ChatCompletionsApi().read(body).stream is True
    body = {
        "model": "deepseek-reasoner",
        "messages": [
            {"role": "developer", "content": "Rule one."},
            {"role": "system", "content": [{"type": "text", "text": "Rule two."}]},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello", "reasoning_content": "greet back"},
            {"role": "user", "content": "Bye"},
        ],
        "max_tokens": 5,
    }
    asked = ChatCompletionsApi().read(body)
    assert asked.request.system_prompt == "Rule one.\n\nRule two."
    assert asked.request.turns[1].contents == [ContentThinking("greet back"), ContentText("Hello")]
    assert asked.max_tokens == 5


def test_chat_completions_tool_results_in_a_row_are_one_user_turn() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "Do both."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "g", "arguments": ""}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "one"},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "two"}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    asked = ChatCompletionsApi().read(body)
    assert [t.role for t in asked.request.turns] == ["user", "assistant", "user"]
    assert asked.request.turns[2].contents == [
        ContentToolResult("a", "f", value="one"),
        ContentToolResult("b", "g", value="two"),
    ]
    assert asked.request.tools == [ToolDef("f", "", {"type": "object", "properties": {}})]


def test_responses_reads_what_our_provider_writes() -> None:
    sealed = ContentThinking(THOUGHT.thinking, signature=seal_thinking(THOUGHT), id="rs_01")
    foreign = ContentThinking("Looked at the file.", signature="gAAAAB-openai", id="rs_02")
    request = ChatRequest(
        conversation([sealed, foreign]),
        system_prompt="You are terse.",
        tools=TOOLS,
        output_schema=SCHEMA,
        params={"max_tokens": 77},
    )
    asked = ResponsesApi().read(responses_provider().body(request))
    expected = conversation([THOUGHT, ContentThinking("Looked at the file.", id="rs_02")])
    assert asked.request.turns == as_read(expected)
    assert asked.request.system_prompt == "You are terse."
    assert asked.request.tools == TOOLS
    assert asked.request.output_schema == SCHEMA
    assert (asked.model, asked.stream, asked.max_tokens) == ("gpt-4.1-mini", False, 77)
    assert asked.extra == {}


def item(kind: str, **fields: Any) -> dict[str, Any]:
    """An input item of type `kind`."""
    return {"type": kind, **fields}


def text_part(text: str, kind: str = "input_text") -> dict[str, Any]:
    return {"type": kind, "text": text}


def test_responses_reads_a_string_input_and_developer_messages() -> None:
    image = {"type": "input_image", "image_url": PNG.data_uri, "detail": "high"}
    items = [
        item("message", role="developer", content=[text_part("Sandbox."), text_part("Tools.")]),
        {"role": "user", "content": "Hi"},
        item("message", role="user", content=[text_part("<env/>"), image]),
    ]
    body = {"model": "m", "instructions": "Base.", "input": items, "stream": True}
    asked = ResponsesApi().read(body)
    assert asked.request.system_prompt == "Base.\n\nSandbox.\n\nTools."
    inline = ContentImage(data=PNG.data, media_type="image/png", detail="high")
    assert asked.request.turns == [Turn.user("Hi", "<env/>", inline)]
    assert asked.stream is True
    assert ResponsesApi().read({"model": "m", "input": "Hi"}).request.turns == [Turn.user("Hi")]


def test_function_call_output_with_images() -> None:
    image = {"type": "input_image", "image_url": "https://x/a.png"}
    items = [
        {"role": "user", "content": "Look."},
        item("function_call", call_id="c1", name="view_image", arguments='{"path": "a.png"}'),
        item("function_call_output", call_id="c1", output=[text_part("Here it is."), image]),
    ]
    asked = ResponsesApi().read({"model": "m", "input": items})
    assert asked.request.turns[-1].contents == [
        ContentToolResult("c1", "view_image", value="Here it is."),
        ContentImage(url="https://x/a.png"),
    ]


# -- 3. refusals, and what is not refused ---------------------------------------------------


def chat_body(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages), **fields}


def responses_body(*items: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": list(items), **fields}


HI = {"role": "user", "content": "Hi"}
CALL = {"function": {"name": "f", "arguments": "{}"}}
CHAT_REFUSED = {
    "not an object": ["model"],
    "no model": {"messages": []},
    "no messages": {"model": "m"},
    "messages not a list": {"model": "m", "messages": "Hi"},
    "message not an object": chat_body("Hi"),
    "unknown role": chat_body({"role": "robot", "content": "Hi"}),
    "content a number": chat_body({"role": "user", "content": 7}),
    "audio part": chat_body({"role": "user", "content": [{"type": "input_audio"}]}),
    "image without url": chat_body(
        {"role": "user", "content": [{"type": "image_url", "image_url": {}}]}
    ),
    "tool result answering nothing": chat_body(
        {"role": "tool", "tool_call_id": "zz", "content": "x"}
    ),
    "tool call without id": chat_body({"role": "assistant", "tool_calls": [CALL]}),
    "stream not a boolean": chat_body(HI, stream="yes"),
    "max_tokens not an integer": chat_body(HI, max_tokens="100"),
    "max_completion_tokens a boolean": chat_body(HI, max_completion_tokens=True),
    "tools not a list": chat_body(HI, tools={"type": "function"}),
    "tool without a name": chat_body(HI, tools=[{"type": "function", "function": {}}]),
}
RESPONSES_REFUSED = {
    "not an object": "Hi",
    "no model": {"input": "Hi"},
    "no input": {"model": "m"},
    "input a number": {"model": "m", "input": 3},
    "previous_response_id": responses_body(HI, previous_response_id="resp_1"),
    "instructions not a string": responses_body(HI, instructions=["x"]),
    "max_output_tokens not an integer": responses_body(HI, max_output_tokens="9"),
    "output answering nothing": responses_body(
        item("function_call_output", call_id="c", output="x")
    ),
    "function_call without call_id": responses_body(
        item("function_call", name="f", arguments="{}")
    ),
    "item_reference": responses_body(item("item_reference", id="msg_1")),
    "compaction": responses_body(item("compaction", encrypted_content="gA")),
    "input_file part": responses_body(
        {"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}
    ),
    "unknown item with content": responses_body(item("hologram", content=[text_part("x")])),
    "bad role": responses_body({"role": "robot", "content": "x"}),
    "tool without a name": responses_body(HI, tools=[{"type": "function"}]),
    "tool not an object": responses_body(HI, tools=["shell"]),
}


@pytest.mark.parametrize("case", CHAT_REFUSED)
def test_chat_completions_refuses(case: str) -> None:
    with pytest.raises(WireError) as caught:
        ChatCompletionsApi().read(CHAT_REFUSED[case])
    assert caught.value.status == 400


@pytest.mark.parametrize("case", RESPONSES_REFUSED)
def test_responses_refuses(case: str) -> None:
    with pytest.raises(WireError) as caught:
        ResponsesApi().read(RESPONSES_REFUSED[case])
    assert caught.value.status == 400


def test_previous_response_id_says_what_to_do() -> None:
    with pytest.raises(WireError, match="store=false"):
        ResponsesApi().read(RESPONSES_REFUSED["previous_response_id"])


def test_chat_completions_ignores_fields_it_has_no_use_for() -> None:
    body = chat_body(
        HI,
        temperature=0.1,
        top_p=0.9,
        stream=True,
        stream_options={"include_usage": True},
        parallel_tool_calls=False,
        response_format={"type": "text"},
        reasoning_effort="low",
        store=False,
        metadata={"a": "b"},
        service_tier="flex",
        logit_bias={"50256": -100},
        seed=1,
        n=1,
        user="u",
        tool_choice="auto",
        tools=[{"type": "custom", "custom": {"name": "freeform"}}],
        some_future_field={"x": 1},
    )
    asked = ChatCompletionsApi().read(body)
    assert asked.request.turns == [Turn.user("Hi")]
    assert asked.request.tools == []
    assert asked.request.output_schema is None


def test_responses_ignores_fields_and_items_it_has_no_use_for() -> None:
    search = {"type": "search", "query": "x"}
    shell = {"type": "function", "name": "shell", "description": "Run.", "strict": False}
    body = responses_body(
        item("message", role="user", content=[text_part("Hi")]),
        item("web_search_call", id="ws_1", status="completed", action=search),
        item("ghost_snapshot", ghost_commit={"id": "abc"}),
        item("some_future_marker", id="x1"),
        item("reasoning", id="rs_9", summary=[], encrypted_content=None),
        instructions="Base.",
        tools=[
            {"type": "web_search", "external_web_access": False},
            {"type": "image_generation", "output_format": "png"},
            {**shell, "parameters": {"type": "object", "properties": {}}},
        ],
        tool_choice="auto",
        parallel_tool_calls=False,
        reasoning={"effort": "medium", "summary": "auto"},
        store=False,
        stream=True,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="019a-…",
        client_metadata={"x-codex-installation-id": "abc"},
        text={"verbosity": "low", "format": {"type": "text"}},
        service_tier="priority",
        metadata={},
        truncation="auto",
        user="u",
        previous_response_id=None,
        some_future_field=1,
    )
    asked = ResponsesApi().read(body)
    assert asked.request.turns == [Turn.user("Hi")]
    assert [t.name for t in asked.request.tools] == ["shell"]
    assert asked.request.output_schema is None
    assert asked.stream is True


# -- 4. errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 503])
@pytest.mark.parametrize("api", [ChatCompletionsApi(), ResponsesApi()], ids=lambda a: a.name)
def test_error_bodies_read_by_our_providers(api: ApiFormat, status: int) -> None:
    body = api.error(status, "Something went wrong.")
    assert chat_provider().error_message(body) == "Something went wrong."
    assert responses_provider().error_message(body) == "Something went wrong."
    assert set(body["error"]) == {"message", "type", "param", "code"}
    expected = 500 if status == 503 else status
    assert error_status(body["error"]) == expected


def test_error_types() -> None:
    kinds = {s: ChatCompletionsApi().error(s, "m")["error"] for s in (400, 401, 404, 429, 500)}
    assert kinds[400]["type"] == "invalid_request_error"
    assert (kinds[401]["type"], kinds[401]["code"]) == ("authentication_error", "invalid_api_key")
    assert kinds[404]["type"] == "not_found_error"
    assert (kinds[429]["type"], kinds[429]["code"]) == ("requests", "rate_limit_exceeded")
    assert kinds[500]["type"] == "server_error"


# -- 5. Codex CLI's tools -------------------------------------------------------------------

EMPTY = {"type": "object", "properties": {}}
GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit.", "format": GRAMMAR}
SEARCH = {"type": "function", "name": "search", "description": "Search.", "parameters": EMPTY}
NAMESPACE = {"type": "namespace", "name": "mcp__docs__", "description": "Docs.", "tools": [SEARCH]}
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find tools."}
CODEX_TOOLS = [
    APPLY_PATCH,
    NAMESPACE,
    {"type": "local_shell"},
    {**TOOL_SEARCH, "parameters": QUERY},
]
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"


def codex_request(*items: dict[str, Any]) -> dict[str, Any]:
    return responses_body({"role": "user", "content": "Edit a.txt."}, *items, tools=CODEX_TOOLS)


def test_codex_tools_are_offered_as_functions() -> None:
    asked = ResponsesApi().read(codex_request())
    tools = {t.name: t for t in asked.request.tools}
    assert set(tools) == {"apply_patch", "mcp__docs__search", "local_shell", "tool_search"}
    patch = tools["apply_patch"].parameters
    assert patch["required"] == ["input"]
    assert 'start: "*** Begin Patch"' in patch["properties"]["input"]["description"]
    assert tools["local_shell"].parameters["required"] == ["command"]
    assert tools["tool_search"].parameters == QUERY
    kinds = {"apply_patch": "custom", "local_shell": "local_shell", "tool_search": "tool_search"}
    assert asked.extra == {
        "tool_kinds": kinds,
        "namespaced_tools": {"mcp__docs__search": ["mcp__docs__", "search"]},
    }


def test_codex_tool_calls_are_written_back_as_their_own_items() -> None:
    api = ResponsesApi()
    asked = api.read(codex_request())
    calls: list[Content] = [
        ContentToolRequest("c1", "apply_patch", {"input": PATCH}),
        ContentToolRequest("c2", "mcp__docs__search", {"q": "x"}),
        ContentToolRequest("c3", "local_shell", {"command": ["ls"], "timeout_ms": 1000}),
        ContentToolRequest("c4", "tool_search", {"query": "calendar"}),
    ]
    turn = Turn("assistant", calls, finish_reason="tool_calls")
    output = api.reply(turn, model="m", request=asked)["output"]
    kinds = ["custom_tool_call", "function_call", "local_shell_call", "tool_search_call"]
    assert [i["type"] for i in output] == kinds
    assert [output[0][k] for k in ("call_id", "name", "input")] == ["c1", "apply_patch", PATCH]
    assert (output[1]["namespace"], output[1]["name"]) == ("mcp__docs__", "search")
    assert output[2]["action"] == {"type": "exec", "command": ["ls"], "timeout_ms": 1000}
    assert (output[3]["arguments"], output[3]["execution"]) == ({"query": "calendar"}, "client")
    # Without the request, every call is a function call.
    assert {i["type"] for i in api.reply(turn, model="m")["output"]} == {"function_call"}

    events = EventStreamParser().feed(b"".join(api.stream(turn, model="m", request=asked)).decode())
    deltas = [json.loads(e.data)["delta"] for e in events if e.event.endswith("input.delta")]
    assert "".join(deltas) == PATCH
    done = [json.loads(e.data)["item"] for e in events if e.event == "response.output_item.done"]
    assert [(i["type"], i["call_id"]) for i in done] == [(i["type"], i["call_id"]) for i in output]


def test_codex_call_items_read_back() -> None:
    action = {"type": "exec", "command": ["ls"], "timeout_ms": None, "env": {}}
    found = {"type": "function", "name": "cal_create", "description": "New.", "parameters": EMPTY}
    late = {"type": "function", "name": "late_tool", "parameters": None}
    asked = ResponsesApi().read(
        codex_request(
            item(
                "custom_tool_call",
                status="completed",
                call_id="c1",
                name="apply_patch",
                input=PATCH,
            ),
            item("custom_tool_call_output", call_id="c1", output="Done!"),
            item(
                "function_call",
                call_id="c2",
                name="search",
                namespace="mcp__docs__",
                arguments='{"q": 1}',
            ),
            item("function_call_output", call_id="c2", output="found"),
            item("local_shell_call", call_id="c3", status="completed", action=action),
            item("function_call_output", call_id="c3", output="a.txt"),
            item("tool_search_call", call_id="c4", execution="client", arguments={"query": "cal"}),
            item("tool_search_output", call_id="c4", execution="client", tools=[found]),
            item("additional_tools", role="developer", tools=[late]),
        )
    )
    turns = asked.request.turns
    assert [t.role for t in turns] == ["user", *["assistant", "user"] * 4]
    assert [c for t in turns[1:] for c in t.contents][:7] == [
        ContentToolRequest("c1", "apply_patch", {"input": PATCH}),
        ContentToolResult("c1", "apply_patch", value="Done!"),
        ContentToolRequest("c2", "mcp__docs__search", {"q": 1}),
        ContentToolResult("c2", "mcp__docs__search", value="found"),
        ContentToolRequest("c3", "local_shell", {"command": ["ls"], "env": {}}),
        ContentToolResult("c3", "local_shell", value="a.txt"),
        ContentToolRequest("c4", "tool_search", {"query": "cal"}),
    ]
    assert isinstance(turns[8].contents[0], ContentToolResult)
    assert [t.name for t in asked.request.tools][-2:] == ["cal_create", "late_tool"]


def test_a_round_trip_through_codex_history() -> None:
    """A reply written for Codex, sent back by it as input items, reads as the same turn."""
    api = ResponsesApi()
    asked = api.read(codex_request())
    patch = ContentToolRequest("c1", "apply_patch", {"input": PATCH})
    turn = Turn("assistant", [THOUGHT, ContentText("Patching."), patch], finish_reason="tool_calls")
    output = api.reply(turn, model="m", request=asked)["output"]
    history = [{k: v for k, v in i.items() if k not in ("id", "status")} for i in output]
    history[0]["id"] = output[0]["id"]  # Codex sends a reasoning item's id back
    result = item("custom_tool_call_output", call_id="c1", output="ok")
    back = api.read(codex_request(*history, result))
    assert back.request.turns[1].contents == turn.contents


# -- 6. recorded Codex CLI requests ---------------------------------------------------------


def recorded_codex_requests() -> list[tuple[str, dict[str, Any]]]:
    """The Responses requests recorded under `agent_clis/` (`{method, path, body}` files)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(RECORDINGS.rglob("*.json")) if RECORDINGS.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if (
            isinstance(entry, dict)
            and entry.get("method") == "POST"
            and str(entry.get("path", "")).rstrip("/").endswith("/responses")
            and isinstance(entry.get("body"), dict)
        ):
            found.append((str(path.relative_to(RECORDINGS)), entry["body"]))
    return found


def ids_of(turns: list[Turn], kind: type[ContentToolRequest | ContentToolResult]) -> set[str]:
    return {c.id for t in turns for c in t.contents if isinstance(c, kind)}


def test_recorded_codex_requests_read() -> None:
    requests = recorded_codex_requests()
    if not requests:
        pytest.skip(f"no recorded Codex Responses requests under {RECORDINGS}")
    for name, body in requests:
        asked = ResponsesApi().read(body)
        offered = {t.name for t in asked.request.tools}
        for tool in body.get("tools") or []:
            if tool.get("type") in ("function", "custom"):
                assert tool["name"] in offered, (name, tool["name"])
            if tool.get("type") == "custom":
                assert asked.extra["tool_kinds"][tool["name"]] == "custom", name
        calls = ids_of(asked.request.turns, ContentToolRequest)
        results = ids_of(asked.request.turns, ContentToolResult)
        for entry in body.get("input") or []:
            kind = entry.get("type") or "message"
            if kind in ("function_call", "custom_tool_call", "local_shell_call"):
                assert entry.get("call_id") in calls, (name, entry)
            if kind.endswith("_output"):
                assert entry["call_id"] in results, (name, entry)
        assert any(t.text for t in asked.request.turns if t.role == "user"), name
        assert asked.request.system_prompt, name
        assert asked.model == body["model"]


def test_sealed_thinking_is_opaque_base64() -> None:
    sealed = seal_thinking(THOUGHT)
    assert sealed.startswith("vitals1:")
    base64.b64decode(sealed.removeprefix("vitals1:"), validate=True)
