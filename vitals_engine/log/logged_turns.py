"""Inspect's chat messages back into turns: contents, tool results, the replies' usage.

Consecutive tool messages make one user turn (with the user message that
follows them when Inspect split one turn in two); content with no counterpart
in a `Turn` (audio, video, data, a document given by path or URL) is left out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..providers.replay import split_model_id
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

__all__ = [
    "Transcript",
    "message_contents",
    "message_text",
    "message_turns",
    "model_name",
    "usage_tokens",
]


_DATA_URI = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


def _image(block: s.ContentImage) -> ContentImage:
    detail: Any = block.detail if block.detail in ("auto", "low", "high") else "auto"
    match = _DATA_URI.match(block.image)
    if match:
        return ContentImage(data=match[2], media_type=match[1], detail=detail)
    return ContentImage(url=block.image, detail=detail)


def _document(block: s.ContentDocument) -> ContentDocument | None:
    """A document logged inline (a data URI); one Inspect gave by path or URL: None."""
    match = _DATA_URI.match(block.document)
    if not match:
        return None
    return ContentDocument(match[2], block.mime_type or match[1], block.filename or None)


def message_contents(content: str | list[s.LogContent]) -> list[Content]:
    """A message's content as a turn's: text, images, documents and reasoning."""
    if isinstance(content, str):
        return [ContentText(content)] if content else []
    out: list[Content] = []
    for block in content:
        if isinstance(block, s.ContentText):
            out.append(ContentText(block.text))
        elif isinstance(block, s.ContentImage):
            out.append(_image(block))
        elif isinstance(block, s.ContentDocument):
            if (document := _document(block)) is not None:
                out.append(document)
        elif isinstance(block, s.ContentReasoning):
            out.append(ContentThinking(block.reasoning, block.signature, block.redacted))
        # audio, video and data have no counterpart in a Turn: left out
    return out


def message_text(content: str | list[s.LogContent]) -> str:
    """A message's text blocks, joined."""
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, s.ContentText))


def _tool_result(message: s.ChatMessageTool) -> ContentToolResult:
    if message.error is not None:
        return ContentToolResult(
            message.tool_call_id or "", message.function or "", error=message.error.message
        )
    return ContentToolResult(
        message.tool_call_id or "", message.function or "", value=message_text(message.content)
    )


@functools.lru_cache(maxsize=256)
def model_name(model: str) -> str:
    """The model's name without its provider prefix."""
    return split_model_id(model)[1]


class Transcript(NamedTuple):
    """Turns rebuilt from messages, and what the messages say of them."""

    system: str | None
    turns: list[Turn]
    replies: list[Turn]  # the assistant turns
    model: str | None  # the first model an assistant message names
    has_ids: bool  # whether any message carries an id


def message_turns(messages: Sequence[s.ChatMessage]) -> Transcript:
    """Inspect messages -> turns; consecutive tool messages make one user turn."""
    system: list[str] = []
    turns: list[Turn] = []
    replies: list[Turn] = []
    results: list[ContentToolResult] = []
    first_tool_id: str | None = None
    model: str | None = None
    has_ids = False
    for message in messages:
        if message.id is not None:
            has_ids = True
        if type(message) is s.ChatMessageTool:
            if not results:
                first_tool_id = message.id
            results.append(_tool_result(message))
            continue
        if results:
            if type(message) is s.ChatMessageUser and first_tool_id == f"{message.id}t0":
                turns.append(Turn("user", [*results, *message_contents(message.content)]))
                results = []
                continue
            turns.append(Turn("user", list[Content](results)))
            results = []
        if type(message) is s.ChatMessageAssistant:
            contents = message_contents(message.content)
            calls = message.tool_calls
            if calls:
                contents += [ContentToolRequest(c.id, c.function, dict(c.arguments)) for c in calls]
            reply = Turn(
                "assistant",
                contents,
                finish_reason="tool_calls" if calls else None,
                model=model_name(message.model) if message.model else None,
            )
            if model is None and message.model:
                model = message.model
            turns.append(reply)
            replies.append(reply)
        elif type(message) is s.ChatMessageUser:
            turns.append(Turn("user", message_contents(message.content)))
        elif type(message) is s.ChatMessageSystem:
            system.append(message_text(message.content))
    if results:
        turns.append(Turn("user", list[Content](results)))
    return Transcript("\n\n".join(system) if system else None, turns, replies, model, has_ids)


def usage_tokens(usage: s.ModelUsage) -> TokenUsage:
    """A logged usage as a turn's tokens."""
    return TokenUsage(
        input=usage.input_tokens,
        output=usage.output_tokens,
        cached_input=usage.input_tokens_cache_read or 0,
        reasoning=usage.reasoning_tokens or 0,
        cache_write=usage.input_tokens_cache_write or 0,
    )
