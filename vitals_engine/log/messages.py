"""Chat turns -> Inspect chat messages, and back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..vocab.turns import (
    Content,
    ContentDocument,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)
from . import schema as s

__all__ = ["chat_messages", "log_content", "model_usage", "turn_message"]

_STOP_REASONS = {
    "stop": "stop",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def log_content(content: Content) -> s.LogContent | None:
    """One content block as Inspect writes it (tool parts become messages, not blocks)."""
    if isinstance(content, ContentText):
        return s.ContentText(content.text)
    if isinstance(content, ContentImage):
        return s.ContentImage(content.data_uri, content.detail)
    if isinstance(content, ContentDocument):
        return s.ContentDocument(content.data_uri, content.name, content.media_type)
    if isinstance(content, ContentThinking):
        return s.ContentReasoning(content.thinking, content.signature, content.redacted)
    return None


def _user_content(contents: Sequence[Content]) -> str | list[s.LogContent]:
    blocks = [b for b in (log_content(c) for c in contents) if b is not None]
    if len(blocks) == 1 and isinstance(blocks[0], s.ContentText):
        return blocks[0].text
    return blocks


def turn_message(turn: Turn, message_id: str, model_id: str | None = None) -> list[s.ChatMessage]:
    """The Inspect messages of one turn (a user turn of tool results is one message each)."""
    contents = turn.contents
    if len(contents) == 1 and type(contents[0]) is ContentText:  # the common case, made cheap
        text = contents[0].text
        if turn.role == "assistant":
            return [
                s.ChatMessageAssistant(
                    [s.ContentText(text)],
                    id=message_id,
                    source="generate",
                    metadata=turn.metadata,
                    model=model_id,
                )
            ]
        return [s.ChatMessageUser(text, id=message_id, source="input")]
    if turn.role == "assistant":
        blocks = [b for b in (log_content(c) for c in turn.contents) if b is not None]
        calls = [
            s.ToolCall(c.id, c.name, dict(c.arguments))
            for c in turn.contents
            if isinstance(c, ContentToolRequest)
        ]
        return [
            s.ChatMessageAssistant(
                content=blocks,
                id=message_id,
                source="generate",
                metadata=turn.metadata,
                tool_calls=calls or None,
                model=model_id,
            )
        ]
    messages: list[s.ChatMessage] = []
    results = [c for c in turn.contents if isinstance(c, ContentToolResult)]
    for i, result in enumerate(results):
        messages.append(
            s.ChatMessageTool(
                content=result.text if result.error is None else "",
                id=f"{message_id}t{i}",
                tool_call_id=result.id,
                function=result.name,
                error=None if result.error is None else s.ToolCallError("unknown", result.error),
            )
        )
    others = [c for c in turn.contents if not isinstance(c, ContentToolResult)]
    if others or not results:
        messages.append(
            s.ChatMessageUser(content=_user_content(others), id=message_id, source="input")
        )
    return messages


def chat_messages(
    system_prompt: str | None, turns: list[Turn], id_prefix: str, model_id: str | None = None
) -> list[s.ChatMessage]:
    """A whole conversation as Inspect messages, system prompt first."""
    messages: list[s.ChatMessage] = []
    if system_prompt:
        messages.append(s.ChatMessageSystem(system_prompt, id=f"{id_prefix}-s"))
    for i, turn in enumerate(turns):
        messages.extend(turn_message(turn, f"{id_prefix}-{i}", model_id))
    return messages


def model_usage(tokens: TokenUsage, cost: float | None = None) -> s.ModelUsage:
    """Our token counts in Inspect's shape (input excludes cached input)."""
    return s.ModelUsage(
        input_tokens=tokens.input,
        output_tokens=tokens.output,
        total_tokens=tokens.total,
        input_tokens_cache_write=tokens.cache_write or None,
        input_tokens_cache_read=tokens.cached_input or None,
        reasoning_tokens=tokens.reasoning or None,
        total_cost=cost,
    )


def stop_reason(turn: Turn) -> str:
    return _STOP_REASONS.get(turn.finish_reason or "", "unknown")


def to_builtins(value: Any) -> Any:
    """Metadata made JSON-safe (anything unknown becomes its repr)."""
    return msgspec.json.decode(s.encoder.encode(value))
