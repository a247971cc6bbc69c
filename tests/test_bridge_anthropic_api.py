"""The bridge's Anthropic Messages API (`vitals_engine/bridging/anthropic_api.py`), checked
against our own client of the same API (`providers/anthropic.py`) both ways, and against
request bodies real clients sent (`tests/recordings/anthropic`, and Claude Code's own in
`tests/recordings/agent_clis` once recorded)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.recordings.cassettes import HERE, load
from vitals_engine.bridging.anthropic_api import COUNT_TOKENS_PATH, AnthropicApi, count_tokens_body
from vitals_engine.bridging.wire import WireError, seal_thinking, unseal_thinking
from vitals_engine.providers.anthropic import ERROR_STATUS, AnthropicProvider
from vitals_engine.transport.sse import EventStreamParser
from vitals_engine.vocab.model_calls import ChatRequest, ToolDef
from vitals_engine.vocab.turns import (
    Content,
    ContentCompaction,
    ContentDocument,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)

API = AnthropicApi()
MODEL = "claude-bridge-test"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode("ascii")
WEATHER = ToolDef(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolDef("now", "The time.", {"type": "object", "properties": {}})


def provider() -> AnthropicProvider:
    return AnthropicProvider(MODEL, api_key="sk-ant-test")


def unsealed(contents: list[Content]) -> list[Content]:
    """Contents as the bridge's client got them, the thinking it sealed opened again: a
    thinking block's signature, a redacted one's data."""
    out: list[Content] = []
    for c in contents:
        if isinstance(c, ContentThinking):
            sealed = unseal_thinking(c.thinking if c.redacted else c.signature)
            assert sealed is not None, c
            c = sealed
        out.append(c)
    return out


def streamed(events: list[bytes]) -> Any:
    """The message our provider's stream reader puts together from the events."""
    reader = provider().stream_reader()
    text = "".join(chunk.decode() for chunk in events)
    parsed = EventStreamParser().feed(text)
    assert len(parsed) == len(events)
    for event in parsed:
        reader.feed(event)
    assert reader.complete
    return reader.body()


def body(**fields: Any) -> dict[str, Any]:
    """A minimal valid request body, with `fields` changed."""
    out: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hi"}],
    }
    out.update(fields)
    return out


# -- our replies, read back by our own provider ------------------------------------------

THOUGHT = ContentThinking("Two and two make four.", signature="sig-from-anthropic")
REPLIES = [
    pytest.param(
        Turn(
            "assistant",
            [ContentText("Paris is the capital of France. 日本語も。")],
            tokens=TokenUsage(input=12, output=9),
            finish_reason="stop",
        ),
        id="text",
    ),
    pytest.param(
        Turn(
            "assistant",
            [
                ContentText("Let me look both up."),
                ContentToolRequest("toolu_1", "get_weather", {"city": "Zürich", "days": [1, 2]}),
                ContentToolRequest("call_2", "now", {}),
            ],
            tokens=TokenUsage(input=40, output=31),
            finish_reason="tool_calls",
        ),
        id="tool-calls",
    ),
    pytest.param(
        Turn(
            "assistant",
            [THOUGHT, ContentText("4")],
            tokens=TokenUsage(input=20, output=50, reasoning=40),
            finish_reason="stop",
        ),
        id="thinking-and-text",
    ),
    pytest.param(
        Turn(
            "assistant",
            [
                ContentThinking("opaque-redacted-data", redacted=True),
                ContentThinking("", signature="gAAAA-encrypted", id="rs_123"),  # Responses'
                ContentThinking("deepseek's reasoning, unsigned"),
                ContentToolRequest("toolu_9", "get_weather", {"city": "Oslo"}),
            ],
            tokens=TokenUsage(input=5, output=7),
            finish_reason="tool_calls",
        ),
        id="redacted-and-foreign-thinking",
    ),
    pytest.param(
        Turn(
            "assistant",
            [ContentText("cached")],
            tokens=TokenUsage(
                input=3,
                output=2,
                cached_input=1200,
                cache_write=800,
                cache_write_1h=300,
                web_searches=2,
            ),
            finish_reason="stop",
            service_tier="priority",
        ),
        id="cache-read-and-write",
    ),
    pytest.param(
        Turn(
            "assistant",
            [ContentText("It was the best of")],
            tokens=TokenUsage(input=3, output=5),
            finish_reason="max_tokens",
        ),
        id="max-tokens",
    ),
    pytest.param(
        Turn("assistant", [], tokens=TokenUsage(input=3), finish_reason="content_filter"),
        id="refusal",
    ),
    pytest.param(Turn("assistant", [ContentText("no usage")]), id="no-usage"),
    pytest.param(
        Turn(
            "assistant",
            [
                ContentCompaction("The user asked about the weather; it is sunny."),
                ContentText("Hi"),
            ],
            tokens=TokenUsage(input=30, output=12),
            finish_reason="stop",
        ),
        id="compaction-and-text",
    ),
]


def check_same(turn: Turn, back: Turn) -> None:
    assert unsealed(back.contents) == turn.contents
    assert back.finish_reason == (turn.finish_reason or "stop")
    assert back.tokens == (turn.tokens or TokenUsage())
    assert back.service_tier == turn.service_tier
    assert back.model == MODEL


@pytest.mark.parametrize("turn", REPLIES)
def test_a_reply_reads_back_through_our_provider(turn):
    """Our provider parsing the reply gets the turn back: contents (thinking sealed in its
    signature), finish reason, every token count, service tier and model."""
    reply = API.reply(turn, model=MODEL)
    assert (reply["type"], reply["role"], reply["stop_sequence"]) == ("message", "assistant", None)
    assert reply["id"].startswith("msg_")
    check_same(turn, provider().parse(msgspec.json.decode(msgspec.json.encode(reply))))


@pytest.mark.parametrize("turn", REPLIES)
def test_a_streamed_reply_reads_back_through_our_provider(turn):
    """The same through the provider's stream reader, fed the events our bytes parse to."""
    check_same(turn, provider().parse(streamed(API.stream(turn, model=MODEL))))


def test_stop_reasons_are_anthropics():
    def stop(**kwargs: Any) -> str:
        return API.reply(Turn("assistant", [ContentText("x")], **kwargs), model=MODEL)[
            "stop_reason"
        ]

    assert stop(finish_reason="stop") == "end_turn"
    assert stop(finish_reason="max_tokens") == "max_tokens"
    assert stop(finish_reason="tool_calls") == "tool_use"
    assert stop(finish_reason="content_filter") == "refusal"  # the provider reads it back
    assert stop(finish_reason="unknown") == "end_turn"
    assert stop() == "end_turn"
    call = ContentToolRequest("toolu_1", "now", {})
    turn = Turn("assistant", [call], finish_reason="stop")
    assert API.reply(turn, model=MODEL)["stop_reason"] == "tool_use"


def test_usage_is_split_as_anthropic_splits_it():
    tokens = TokenUsage(input=3, output=2, cached_input=100, cache_write=50, cache_write_1h=20)
    usage = API.reply(Turn("assistant", [], tokens=tokens), model=MODEL)["usage"]
    assert usage == {
        "input_tokens": 3,
        "cache_creation_input_tokens": 50,
        "cache_read_input_tokens": 100,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 20},
        "output_tokens": 2,
        "service_tier": "standard",
    }


def stream_data() -> list[dict[str, Any]]:
    """The data of each event streaming a reply of thinking, text and a tool call, each
    checked to be named as its data's type."""
    turn = Turn(
        "assistant",
        [THOUGHT, ContentText("Checking the weather now."), REPLIES[1].values[0].contents[1]],
        tokens=TokenUsage(input=10, output=30, cached_input=5),
    )
    events = EventStreamParser().feed(b"".join(API.stream(turn, model=MODEL)).decode())
    data = [json.loads(e.data) for e in events]
    assert [e.event for e in events] == [d["type"] for d in data]
    return data


def test_the_stream_is_anthropics_sequence_of_events():
    """message_start (the input counts, no content yet), ping, the blocks, message_delta
    (stop reason, output tokens), message_stop."""
    data = stream_data()
    names = [d["type"] for d in data]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    start = data[0]["message"]
    assert (start["content"], start["stop_reason"]) == ([], None)
    assert (start["usage"]["input_tokens"], start["usage"]["cache_read_input_tokens"]) == (10, 5)
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
    assert data[-2]["usage"]["output_tokens"] == 30


def test_each_block_streams_as_its_start_deltas_and_stop():
    """Text in pieces, tool input as JSON fragments after an empty input, thinking in
    pieces then its signature."""
    data = stream_data()
    blocks = [d for d in data if d["type"].startswith("content_block")]
    assert [d["type"] for d in blocks if d["type"] != "content_block_delta"] == [
        "content_block_start",
        "content_block_stop",
    ] * 3
    deltas = [d["delta"] for d in blocks if d["type"] == "content_block_delta"]
    kinds = [d["type"] for d in deltas]
    assert (
        kinds
        == ["thinking_delta"] * 3
        + ["signature_delta"]
        + ["text_delta"] * 3
        + ["input_json_delta"] * 3
    )
    opened = [d["content_block"] for d in blocks if d["type"] == "content_block_start"]
    assert opened[0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert opened[2]["input"] == {}
    arguments = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(arguments) == {"city": "Zürich", "days": [1, 2]}


def test_each_event_is_encoded_as_event_and_data_lines():
    for chunk in API.stream(Turn("assistant", [ContentText("hi")]), model=MODEL):
        name, data, end = chunk.split(b"\n", 2)
        assert name.startswith(b"event: ")
        assert data.startswith(b"data: ")
        assert end == b"\n"
        assert json.loads(data.removeprefix(b"data: "))["type"] == name.decode()[7:]


def test_a_call_without_an_id_gets_one():
    """The agent answers a call by its id: a provider's call without one is given one."""
    turn = Turn("assistant", [ContentToolRequest("", "now", {})])
    block = API.reply(turn, model=MODEL)["content"][0]
    assert block["id"].startswith("toolu_")
    assert len(block["id"]) > len("toolu_")


# -- the agent's conversation sent back: what a reply gave it reads back the same ---------


@pytest.mark.parametrize("turn", REPLIES)
def test_a_reply_sent_back_by_the_agent_reads_as_the_turn_it_was(turn):
    """The agent keeps our reply's content and sends it back as the assistant's message:
    read, it is the turn's contents again, thinking unsealed to the provider's own."""
    content = API.reply(turn, model=MODEL)["content"]
    if not content:
        return
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": content}]
    read = API.read(body(messages=messages)).request.turns[1]
    assert read == Turn("assistant", turn.contents)


# -- requests our provider writes, read back ---------------------------------------------


def conversation() -> ChatRequest:
    return ChatRequest(
        turns=[
            Turn.user("What's the weather in Zürich and Oslo?"),
            Turn(
                "assistant",
                [
                    THOUGHT,
                    ContentText("Let me check."),
                    ContentToolRequest("toolu_1", "get_weather", {"city": "Zürich"}),
                    ContentToolRequest("toolu_2", "get_weather", {"city": "Oslo"}),
                ],
            ),
            Turn(
                "user",
                [
                    ContentToolResult("toolu_1", "get_weather", value="Sunny, 21°C"),
                    ContentToolResult("toolu_2", "get_weather", error="Service down"),
                    ContentText("And here is a photo:"),
                    ContentImage(data=PNG, media_type="image/png"),
                    ContentImage(url="https://example.com/sky.jpg"),
                ],
            ),
            Turn(
                "assistant",
                [ContentThinking("c2VjcmV0", redacted=True), ContentText("Zürich is sunny.")],
            ),
            Turn.user("Thanks. What time is it?"),
        ],
        system_prompt="You are a weather bot.\n\nBe brief.",
        tools=[WEATHER, CLOCK],
    )


def marked(sent: dict[str, Any]) -> dict[str, Any]:
    """`sent` with prompt-cache breakpoints, as Claude Code marks its requests: the system
    prompt as blocks, `cache_control` on a tool and on the last message's last block."""
    control = {"type": "ephemeral", "ttl": "1h"}
    out = json.loads(json.dumps(sent))
    out["system"] = [
        {"type": "text", "text": "You are a weather bot."},
        {"type": "text", "text": "Be brief.", "cache_control": control},
    ]
    out["tools"][-1]["cache_control"] = control
    last = out["messages"][-1]
    last["content"] = [{"type": "text", "text": last["content"], "cache_control": control}]
    return out


@pytest.mark.parametrize("cached", [False, True], ids=["plain", "cache-control"])
def test_a_request_our_provider_writes_reads_back_the_same(cached):
    """System prompt (a string, or blocks with cache_control), tools, tool calls and their
    results (named after their calls), images, thinking with its signature, redacted
    thinking: all as they were."""
    sent = provider().body(conversation())
    if cached:
        sent = marked(sent)
    asked = API.read(json.loads(json.dumps(sent)))
    assert asked.request == conversation()
    assert asked.model == MODEL
    assert asked.max_tokens == sent["max_tokens"]
    assert asked.stream is False


def test_model_stream_and_max_tokens_are_carried():
    asked = API.read(body(stream=True, max_tokens=32000, model="claude-opus-4-1"))
    assert (asked.model, asked.stream, asked.max_tokens) == ("claude-opus-4-1", True, 32000)
    assert asked.request.params == {}


# -- blocks read ---------------------------------------------------------------------------


def test_tool_results_name_their_call_and_keep_images_and_errors():
    """A list of text and image blocks in a tool_result: the text the result (is_error:
    its error), the images after it in the same turn; a result answering no earlier
    tool_use has the name ""."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG}}
    messages = [
        {"role": "user", "content": "Look"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": [{"type": "text", "text": "line 1"}, image],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_x",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no such file"}],
                },
                {"type": "tool_result", "tool_use_id": "toolu_y"},
            ],
        },
    ]
    turn = API.read(body(messages=messages)).request.turns[2]
    assert turn.contents == [
        ContentToolResult("toolu_a", "Read", value="line 1"),
        ContentImage(data=PNG, media_type="image/jpeg"),
        ContentToolResult("toolu_x", "", error="no such file"),
        ContentToolResult("toolu_y", "", value=""),
    ]


def test_consecutive_messages_of_a_role_stay_separate_turns():
    messages = [
        {"role": "user", "content": "one"},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "content": "three"},
        {"role": "assistant", "content": [{"type": "text", "text": "four", "citations": None}]},
    ]
    turns = API.read(body(messages=messages)).request.turns
    assert [(t.role, t.text) for t in turns] == [
        ("user", "one"),
        ("user", "two"),
        ("assistant", "three"),
        ("assistant", "four"),
    ]


def test_documents_are_text_or_inline_and_remote_ones_are_refused():
    text_doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The notes."},
        "title": "notes",
    }
    content_doc = {
        "type": "document",
        "source": {
            "type": "content",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        },
    }
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
        "title": "report.pdf",
    }
    remote = {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}
    turn = API.read(body(messages=[{"role": "user", "content": [text_doc, content_doc, pdf]}]))
    assert turn.request.turns[0].contents == [
        ContentText("The notes."),
        ContentText("a\n\nb"),
        ContentDocument("JVBERi0=", "application/pdf", "report.pdf"),
    ]
    with pytest.raises(WireError, match="not supported by the bridge") as refused:
        API.read(body(messages=[{"role": "user", "content": [remote]}]))
    assert refused.value.status == 400
    assert "messages.0.content.0" in refused.value.message


def test_a_foreign_signature_is_kept_and_ours_is_unsealed():
    ours = ContentThinking("", signature="encrypted", id="rs_1")
    content = [
        {"type": "thinking", "thinking": "a", "signature": "EuYDCmMIDBgC"},
        {"type": "thinking", "thinking": "shown", "signature": seal_thinking(ours)},
        {"type": "thinking", "thinking": "unsigned"},
        {"type": "redacted_thinking", "data": "EmwKAhgB"},
    ]
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
    assert API.read(body(messages=messages)).request.turns[1].contents == [
        ContentThinking("a", signature="EuYDCmMIDBgC"),
        ours,
        ContentThinking("unsigned"),
        ContentThinking("EmwKAhgB", redacted=True),
    ]


def test_system_blocks_are_joined_and_their_cache_control_ignored():
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.0"},
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    ]
    asked = API.read(body(system=system))
    assert asked.request.system_prompt == (
        "x-anthropic-billing-header: cc_version=2.0\n\nYou are Claude Code."
    )
    assert API.read(body(system="")).request.system_prompt is None


def test_custom_tools_are_read_and_typed_tools_refused_by_name():
    tools = [
        {
            "name": "Bash",
            "description": "Run a command.",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "custom", "name": "Read", "input_schema": {"type": "object"}},
    ]
    assert API.read(body(tools=tools)).request.tools == [
        ToolDef("Bash", "Run a command.", {"type": "object"}),
        ToolDef("Read", "", {"type": "object"}),
    ]
    typed = [
        *tools,
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 8},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
    ]
    with pytest.raises(WireError) as refused:
        API.read(body(tools=typed))
    assert refused.value.status == 400
    assert "web_search (web_search_20250305)" in refused.value.message
    assert "str_replace_based_edit_tool (text_editor_20250728)" in refused.value.message


def test_fields_the_bridge_does_not_use_are_accepted():
    asked = API.read(
        body(
            temperature=1,
            top_p=0.9,
            tool_choice={"type": "auto"},
            metadata={"user_id": "user_abc"},
            thinking={"type": "enabled", "budget_tokens": 2000},
            context_management={"edits": [{"type": "clear_thinking_20251015"}]},
            betas=["interleaved-thinking-2025-05-14"],
            output_config={"effort": "high"},
            a_field_from_the_future={"x": 1},
        )
    )
    assert asked.request.turns == [Turn.user("Hi")]


def test_system_messages_join_the_system_prompt():
    """Claude Code sends its environment as a message of role "system" after the first
    user message: no turn, its text added to the system prompt after `system`."""
    messages = [
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "system", "content": "# Environment\nLinux"},
        {"role": "assistant", "content": "Let me look."},
        {"role": "system", "content": [{"type": "text", "text": "Today is Monday.",
                                        "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "Go on."},
    ]  # fmt: skip
    asked = API.read(body(system="You are Claude Code.", messages=messages))
    assert [t.role for t in asked.request.turns] == ["user", "assistant", "user"]
    assert asked.request.system_prompt == (
        "You are Claude Code.\n\n# Environment\nLinux\n\nToday is Monday."
    )
    only = API.read(body(messages=[messages[1], messages[0]])).request
    assert only.system_prompt == "# Environment\nLinux"


def tool(name: str, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    return {"name": name, "description": f"The {name} tool.", "input_schema": schema, **extra}


def test_a_deferred_tool_is_offered_once_a_tool_reference_loads_it():
    """Tool search as Claude Code does it: `defer_loading` tools stay hidden until the
    result of its search tool names them in `tool_reference` blocks; the result reads as
    their definitions."""
    tools = [
        tool("ToolSearch"),
        tool("WebSearch", defer_loading=True),
        tool("WebFetch", defer_loading=True),
        tool("DeferredToolPlaceholder", defer_loading=True),
    ]
    search = {
        "type": "tool_use",
        "id": "toolu_s",
        "name": "ToolSearch",
        "input": {"query": "select:WebSearch"},
    }
    found = {"type": "tool_result", "tool_use_id": "toolu_s", "content": [
        {"type": "tool_reference", "tool_name": "WebSearch"},
        {"type": "tool_reference", "tool_name": "Gone"},
    ]}  # fmt: skip
    first = API.read(body(tools=tools)).request
    assert [t.name for t in first.tools] == ["ToolSearch"]
    messages = [
        {"role": "user", "content": "Search the web"},
        {"role": "assistant", "content": [search]},
        {"role": "user", "content": [found, {"type": "text", "text": "Tool loaded."}]},
    ]
    later = API.read(body(tools=tools, messages=messages)).request
    assert [t.name for t in later.tools] == ["ToolSearch", "WebSearch"]
    result, text = later.turns[2].contents
    assert text == ContentText("Tool loaded.")
    assert isinstance(result, ContentToolResult)
    assert result.name == "ToolSearch"
    definition = {
        "description": "The WebSearch tool.",
        "name": "WebSearch",
        "parameters": tools[1]["input_schema"],
    }
    assert result.value == (
        f"<functions>\n<function>{json.dumps(definition, separators=(',', ':'))}</function>\n"
        '<function>{"name":"Gone"}</function>\n</functions>'
    )


# -- refusals ------------------------------------------------------------------------------

REFUSALS = [
    pytest.param([], "body: Input should be a valid dictionary", id="not-an-object"),
    pytest.param({**body(), "max_tokens": None}, "max_tokens: Field required", id="no-max"),
    pytest.param(body(max_tokens="10"), "max_tokens: Input should be a valid integer", id="str"),
    pytest.param(body(max_tokens=True), "max_tokens: Input should be a valid integer", id="bool"),
    pytest.param(body(max_tokens=0), "max_tokens: Input should be greater", id="zero"),
    pytest.param({**body(), "model": None}, "model: Field required", id="no-model"),
    pytest.param(body(model=3), "model: Input should be a valid string", id="model-int"),
    pytest.param(body(messages=None), "messages: Field required", id="no-messages"),
    pytest.param(
        body(messages={"role": "user"}),
        "messages: Input should be a valid list",
        id="messages-not-list",
    ),
    pytest.param(body(messages=[]), "messages: List should have at least 1 item", id="empty"),
    pytest.param(
        body(messages=["hi"]),
        "messages.0: Input should be a valid dictionary",
        id="message-not-object",
    ),
    pytest.param(
        body(messages=[{"role": "developer", "content": "x"}]),
        "messages.0.role: Input should be 'user', 'assistant' or 'system'",
        id="role",
    ),
    pytest.param(
        body(messages=[{"role": "user"}]), "messages.0.content: Field required", id="no-content"
    ),
    pytest.param(
        body(messages=[{"role": "user", "content": 5}]),
        "messages.0.content: Input",
        id="content-int",
    ),
    pytest.param(
        body(messages=[{"role": "user", "content": [{"type": "text"}]}]),
        "messages.0.content.0.text: Field required",
        id="text-missing",
    ),
    pytest.param(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
                }
            ]
        ),
        "'tool_use' blocks in a user message",
        id="tool-use-from-user",
    ),
    pytest.param(
        body(
            messages=[
                {
                    "role": "assistant",
                    "content": [
                        {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
                    ],
                }
            ]
        ),
        "'server_tool_use' blocks in an assistant message",
        id="server-tool-use",
    ),
    pytest.param(
        body(
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}],
                }
            ]
        ),
        "not 'file' sources",
        id="image-file",
    ),
    pytest.param(body(stream="yes"), "stream: Input should be a valid boolean", id="stream"),
    pytest.param(body(system=5), "system: Input should be", id="system-int"),
    pytest.param(
        body(system=[{"type": "image"}]), "system.0.type: Input should be 'text'", id="system-image"
    ),
    pytest.param(body(tools={"name": "x"}), "tools: Input should be a valid list", id="tools"),
    pytest.param(
        body(tools=[{"name": "x"}]), "tools.0.input_schema: Field required", id="tool-schema"
    ),
]


@pytest.mark.parametrize(("sent", "said"), REFUSALS)
def test_a_body_the_api_would_refuse_is_a_400(sent, said):
    with pytest.raises(WireError) as refused:
        API.read(sent)
    assert refused.value.status == 400
    assert said in refused.value.message


# -- errors and token counting -------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 413, 429, 500, 504, 529, 418, 503])
def test_error_bodies_read_with_our_provider(status):
    """Our provider reads the message and the type; the type maps back to the status
    (an unknown 4xx is an invalid request, an unknown 5xx an API error)."""
    error = API.error(status, "Something went wrong.")
    kind = error["error"]["type"]
    assert provider().error_message(error) == f"{kind}: Something went wrong."
    expected = status if status not in (418, 503) else {418: 400, 503: 500}[status]
    assert ERROR_STATUS[kind] == expected


def test_error_types_by_status():
    statuses = (400, 401, 403, 404, 413, 429, 500, 529)
    assert [API.error(s, "m")["error"]["type"] for s in statuses] == [
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
    ]


def test_count_tokens_estimates_the_whole_request():
    """No max_tokens needed; the text at about 4 characters a token, tool definitions, calls
    and results counted too; typed tools are counted out, not refused."""
    assert COUNT_TOKENS_PATH == "/v1/messages/count_tokens"
    short = {"model": "m", "messages": [{"role": "user", "content": "x" * 40}]}
    assert count_tokens_body(short) == {"input_tokens": 10}
    sent = provider().body(conversation())
    sent.pop("max_tokens")
    sent["tools"].append({"type": "web_search_20250305", "name": "web_search"})
    counted = count_tokens_body(sent)["input_tokens"]
    texts = sum(len(t.text) for t in conversation().turns) + len(conversation().system_prompt or "")
    assert counted > texts // 4 + 20  # the tools and tool calls count
    with pytest.raises(WireError):
        count_tokens_body({"model": "m"})


# -- recorded requests of real clients -----------------------------------------------------

RECORDED = sorted(str(p.relative_to(HERE)) for p in (HERE / "anthropic").glob("*.y*ml"))


def recorded_requests() -> list[Any]:
    out = []
    for name in RECORDED:
        for n, interaction in enumerate(load(name)):
            if isinstance(interaction.request_body, dict):
                out.append(pytest.param(interaction.request_body, id=f"{Path(name).stem}-{n}"))
    return out


#: What Anthropic's own server tools leave in a conversation: blocks the bridge never
#: writes, refused when an agent sends them (a compaction summary is read: it goes back).
SERVER_BLOCKS = {"server_tool_use", "web_search_tool_result"}


def refused_parts(sent: dict[str, Any]) -> list[str]:
    """The typed tools and server blocks of a request body: what the bridge refuses."""
    tools = [t["name"] for t in sent.get("tools") or [] if t.get("type") not in (None, "custom")]
    blocks = [
        repr(block.get("type"))
        for message in sent["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") in SERVER_BLOCKS
    ]
    return tools or blocks[:1]


@pytest.mark.parametrize("sent", recorded_requests())
def test_recorded_request_bodies_are_read(sent):
    """Every request a real client sent Anthropic reads, its messages, system and tools all
    understood; one with Anthropic's server tools is refused naming them (or, after the
    tools, the server tool's blocks it holds); a compaction summary is read as one."""
    refused = refused_parts(sent)
    if refused:
        with pytest.raises(WireError, match=refused[0]) as error:
            API.read(sent)
        assert error.value.status == 400
        return
    asked = API.read(sent)
    assert len(asked.request.turns) == len(sent["messages"])
    assert [t.role for t in asked.request.turns] == [m["role"] for m in sent["messages"]]
    assert [t.name for t in asked.request.tools] == [t["name"] for t in sent.get("tools") or []]
    assert (asked.model, asked.max_tokens) == (sent["model"], sent["max_tokens"])
    assert asked.stream is bool(sent.get("stream"))
    if sent.get("system"):
        assert asked.request.system_prompt
    compacted = [
        block
        for message in sent["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "compaction"
    ]
    read = [c for t in asked.request.turns for c in t.contents if isinstance(c, ContentCompaction)]
    assert [c.content for c in read] == [block.get("content") for block in compacted]


def recorded_replies() -> list[Any]:
    out = []
    for name in RECORDED:
        for n, interaction in enumerate(load(name)):
            if interaction.status == 200 and not interaction.streamed:
                data = interaction.json()
                kinds = {block["type"] for block in data.get("content", [])}
                if kinds <= {"text", "thinking", "redacted_thinking", "tool_use"}:
                    out.append(pytest.param(data, id=f"{Path(name).stem}-{n}"))
    return out


@pytest.mark.parametrize("real", recorded_replies())
def test_a_real_reply_parsed_and_served_again_is_the_same_turn(real):
    """A real Anthropic reply, parsed by our provider and served by the bridge, parses to
    the same turn, and has every top-level field the real one had."""
    client = provider()
    turn = client.parse(real)
    ours = API.reply(turn, model=real["model"])
    assert set(real) - set(ours) <= {"container", "context_management", "stop_details"}
    back = client.parse(ours)
    assert unsealed(back.contents) == turn.contents
    assert (back.tokens, back.finish_reason) == (turn.tokens, turn.finish_reason)
    streamed_back = client.parse(streamed(API.stream(turn, model=real["model"])))
    assert (streamed_back.tokens, streamed_back.finish_reason) == (turn.tokens, turn.finish_reason)


AGENT_CLIS = HERE / "agent_clis"


def claude_code_requests() -> list[Any]:
    """The Messages requests Claude Code sent, as the recorder kept them (`record.py`:
    `{method, path, query, headers, body}` a file)."""
    out = []
    for path in sorted(AGENT_CLIS.rglob("*.json")) if AGENT_CLIS.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("body"), dict):
            continue
        pairs = entry.get("headers") or []
        pairs = pairs.items() if isinstance(pairs, dict) else pairs
        headers = {str(k).lower(): str(v) for k, v in pairs}
        agent = headers.get("user-agent", "")
        claude_code = "claude-cli" in agent or headers.get("x-app") == "cli"
        if entry.get("method") == "POST" and claude_code and "/messages" in entry["path"]:
            out.append(pytest.param(entry["path"], entry["body"], id=str(path.relative_to(HERE))))
    return out or [pytest.param(None, None, marks=pytest.mark.skip(reason="none recorded yet"))]


def referenced(messages: list[dict[str, Any]]) -> set[str]:
    """The tools the `tool_reference` blocks of the messages' tool results name."""
    names: set[str] = set()
    for message in messages:
        content = message["content"]
        results = (
            [b for b in content if b["type"] == "tool_result"] if isinstance(content, list) else []
        )
        for result in results:
            parts = result.get("content")
            if isinstance(parts, list):
                names |= {p["tool_name"] for p in parts if p["type"] == "tool_reference"}
    return names


def check_claude_code_request(sent: dict[str, Any]) -> None:
    asked = API.read(sent)
    messages = [m for m in sent["messages"] if m["role"] != "system"]
    assert [t.role for t in asked.request.turns] == [m["role"] for m in messages]
    system = asked.request.system_prompt or ""
    for message in sent["messages"]:
        if message["role"] == "system":
            assert API.read({**sent, "messages": [message]}).request.system_prompt in system
    loaded = referenced(messages)
    offered = [
        t["name"] for t in sent["tools"] if not t.get("defer_loading") or t["name"] in loaded
    ]
    assert [t.name for t in asked.request.tools] == offered
    carried = (asked.model, asked.max_tokens, asked.stream)
    assert carried == (sent["model"], sent["max_tokens"], bool(sent.get("stream")))
    calls = {c.id for t in asked.request.turns for c in t.tool_requests}
    results = [
        c for t in asked.request.turns for c in t.contents if isinstance(c, ContentToolResult)
    ]
    assert all(r.id in calls and r.name for r in results)  # named after their calls


@pytest.mark.parametrize(("where", "sent"), claude_code_requests())
def test_claude_code_requests_are_read(where, sent):
    """Each request Claude Code sent: a count_tokens body is counted; a Messages body is
    read, every message and tool understood: a turn for each user and assistant message,
    its system messages in the system prompt, every tool offered but the deferred ones no
    tool_reference loaded, tool results named after their calls (a server tool, as its
    WebSearch sends, is refused naming it)."""
    if where.rstrip("/").endswith("/count_tokens"):
        assert count_tokens_body(sent)["input_tokens"] >= 0
        return
    refused = refused_parts(sent)
    if refused:
        with pytest.raises(WireError, match=refused[0]):
            API.read(sent)
        return
    check_claude_code_request(sent)
    assert count_tokens_body(sent)["input_tokens"] > 0
