"""The mock server's model, independent of wire formats.

Each wire format turns its request body into a `MockRequest` and renders a
`MockReply` back. `answer()` decides the reply deterministically:

1. a scripted function, when the test set one and it returns something;
2. after a tool result: "The tool returned <result>." (or the tool's error);
3. when tools are offered and the prompt names one: a call to that tool,
   its number parameters filled with the numbers of the prompt in order;
4. when structured output is asked for: a JSON value of the schema's shape;
5. otherwise the in-process mock's answer (sums, grading, echo).

Token counts are whitespace words, so tests can predict them exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..providers.mock import count_tokens, mock_reply, tool_calls, tool_results_reply
from ..vocab.structured import example_value

__all__ = ["MockMessage", "MockReply", "MockRequest", "MockToolCall", "Script", "answer"]


@dataclass(slots=True)
class MockToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class MockMessage:
    """One message as the mock sees it: role, text, and tool traffic."""

    role: str  # "user" | "assistant" | "tool"
    text: str = ""
    tool_calls: list[MockToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_error: bool = False
    images: int = 0


@dataclass(slots=True)
class MockRequest:
    """A request in any wire format, reduced to what the mock needs."""

    format: str
    model: str
    system: str | None = None
    messages: list[MockMessage] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # {name, description, parameters}
    schema: dict[str, Any] | None = None
    max_tokens: int | None = None
    #: Whether the reply is to be streamed (server-sent events).
    stream: bool = False
    #: Whether a streamed reply ends with a usage chunk (OpenAI's `include_usage`).
    stream_usage: bool = False

    @property
    def prompt(self) -> str:
        """The text of the last user message."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message.text
        return ""

    @property
    def all_text(self) -> str:
        return " ".join([self.system or ""] + [m.text for m in self.messages])


@dataclass(slots=True)
class MockReply:
    """What the mock answers, before a wire format renders it."""

    text: str = ""
    tool_calls: list[MockToolCall] = field(default_factory=list)
    reasoning: str | None = None
    finish: str = "stop"  # stop | max_tokens | tool_calls | content_filter
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


Script = Callable[[MockRequest], "str | MockReply | None"]


def _default(request: MockRequest) -> MockReply:
    last = request.messages[-1] if request.messages else MockMessage("user")
    if last.role == "tool":
        trailing: list[MockMessage] = []
        for message in reversed(request.messages):
            if message.role != "tool":
                break
            trailing.insert(0, message)
        return MockReply(text=tool_results_reply((m.text, m.tool_error) for m in trailing))
    prompt = request.prompt
    named = tool_calls(prompt, ((t["name"], t.get("parameters") or {}) for t in request.tools))
    if named:
        calls = [
            MockToolCall(id=f"call_{i}_{name}", name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(named)
        ]
        return MockReply(tool_calls=calls, finish="tool_calls")
    if request.schema is not None:
        return MockReply(text=msgspec.json.encode(example_value(request.schema)).decode())
    return MockReply(text=mock_reply(prompt))


def answer(request: MockRequest, script: Script | None = None) -> MockReply:
    """The mock's reply to `request`, with token counts filled in."""
    reply: MockReply | None = None
    if script is not None:
        scripted = script(request)
        if isinstance(scripted, str):
            reply = MockReply(text=scripted)
        elif isinstance(scripted, MockReply):
            reply = scripted
    if reply is None:
        reply = _default(request)
    if reply.tool_calls and reply.finish == "stop":
        reply.finish = "tool_calls"
    if not reply.input_tokens:
        reply.input_tokens = max(1, count_tokens(request.all_text))
    if not reply.output_tokens:
        spoken = reply.text + " ".join(
            msgspec.json.encode(c.arguments).decode() for c in reply.tool_calls
        )
        reply.output_tokens = max(1, count_tokens(spoken)) + reply.reasoning_tokens
    return reply
