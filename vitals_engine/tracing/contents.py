"""Message contents on spans: only when the application asks for them.

Prompts and replies may hold what must not leave the process, so they are recorded
only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true` (read once per
run), as the GenAI conventions' `gen_ai.system_instructions`, `gen_ai.input.messages`
and `gen_ai.output.messages` (JSON text: span attributes hold no nested values), and a
tool call's arguments and result. A message is its role and its parts (text, a tool
call, a tool's response, reasoning); an image is named, never copied.

Example:
    >>> input_messages(ChatRequest([Turn.user("What's 2+2?")]))[INPUT]
    '[{"role":"user","parts":[{"type":"text","content":"What\\'s 2+2?"}]}]'
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from ..vocab.model_calls import ChatRequest
from ..vocab.turns import (
    Content,
    ContentCompaction,
    ContentDocument,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    Turn,
)

__all__ = [
    "CAPTURE",
    "INPUT",
    "OUTPUT",
    "TOOL_ARGUMENTS",
    "TOOL_RESULT",
    "captures_contents",
    "input_messages",
    "output_messages",
    "tool_contents",
]

#: The variable that lets message contents onto spans.
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SYSTEM = "gen_ai.system_instructions"
INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"

_encoder = msgspec.json.Encoder(enc_hook=repr)  # a value JSON cannot hold: its repr


def captures_contents() -> bool:
    """Whether the application asked for message contents on spans."""
    return os.environ.get(CAPTURE, "").strip().lower() == "true"


def _json(value: Any) -> str:
    return _encoder.encode(value).decode()


def _part(content: Content) -> dict[str, Any]:
    if isinstance(content, ContentText):
        return {"type": "text", "content": content.text}
    if isinstance(content, ContentToolRequest):
        return {
            "type": "tool_call",
            "id": content.id,
            "name": content.name,
            "arguments": content.arguments,
        }
    if isinstance(content, ContentToolResult):
        response = content.value if content.error is None else content.error
        return {"type": "tool_call_response", "id": content.id, "response": response}
    if isinstance(content, ContentThinking):
        return {"type": "reasoning", "content": content.thinking}
    if isinstance(content, ContentCompaction):  # a generic part: the conventions name none
        return {"type": "compaction", "content": content.content or ""}
    if isinstance(content, ContentDocument):
        return {"type": "blob", "modality": "document", "mime_type": content.media_type}
    assert isinstance(content, ContentImage)
    return {"type": "blob", "modality": "image", "mime_type": content.media_type}


def _message(turn: Turn) -> dict[str, Any]:
    return {"role": turn.role, "parts": [_part(c) for c in turn.contents]}


def input_messages(request: ChatRequest) -> dict[str, str]:
    """A request's system prompt and messages, as span attributes."""
    attributes = {INPUT: _json([_message(turn) for turn in request.turns])}
    if request.system_prompt:
        attributes[SYSTEM] = _json([{"type": "text", "content": request.system_prompt}])
    return attributes


def output_messages(turn: Turn) -> dict[str, str]:
    """A reply, as a span attribute.

    Example:
        >>> output_messages(Turn("assistant", [ContentText("4")], finish_reason="stop"))[OUTPUT]
        '[{"role":"assistant","parts":[{"type":"text","content":"4"}],"finish_reason":"stop"}]'
    """
    message = _message(turn)
    if turn.finish_reason is not None:
        message["finish_reason"] = turn.finish_reason
    return {OUTPUT: _json([message])}


def tool_contents(arguments: Any, result: ContentToolResult) -> dict[str, str]:
    """A tool call's arguments and result (or error), as span attributes.

    Example:
        >>> tool_contents({"a": 3, "b": 4}, ContentToolResult("call_1", "add", value=7))
        {'gen_ai.tool.call.arguments': '{"a":3,"b":4}', 'gen_ai.tool.call.result': '7'}
    """
    value = result.value if result.error is None else result.error
    return {TOOL_ARGUMENTS: _json(arguments), TOOL_RESULT: _json(value)}
