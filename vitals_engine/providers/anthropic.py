"""Anthropic's Messages API (`POST {base_url}/messages`), spoken directly (no SDK).

Structured output is done the Anthropic way: the schema becomes the input
schema of a tool the model is forced to call (`_structured_output`), and
that call's input comes back as the reply's text, as JSON. A schema whose
top level is not an object (the API wants an object there) is wrapped in
`{"value": ...}` under the tool `_structured_output_value` and unwrapped
again on the way back.

Thinking blocks keep their signatures and are sent back with the assistant
turns that made them, as the API requires when extended thinking meets
tools. Redacted thinking keeps its opaque `data` in `thinking` (with
`redacted=True`), as Inspect does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from ..vocab.calls import ChatRequest
from ..vocab.turns import (
    Content,
    ContentImage,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)
from .http import HttpProvider

__all__ = ["AnthropicProvider"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
STRUCTURED_TOOL = "_structured_output"
_WRAPPED_TOOL = "_structured_output_value"
_STRUCTURED_DESCRIPTION = (
    "Give your final answer by calling this tool: its input is the answer, "
    "in exactly the shape of this schema."
)

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _image(content: ContentImage) -> dict[str, Any]:
    if content.data is not None:
        source = {"type": "base64", "media_type": content.media_type, "data": content.data}
    else:
        source = {"type": "url", "url": content.url or ""}
    return {"type": "image", "source": source}


def _assistant_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for c in turn.contents:
        if isinstance(c, ContentThinking):
            if c.redacted:
                blocks.append({"type": "redacted_thinking", "data": c.thinking})
            elif c.signature:
                # Without a signature (another provider's reasoning) the API refuses it.
                blocks.append(
                    {"type": "thinking", "thinking": c.thinking, "signature": c.signature}
                )
        elif isinstance(c, ContentText):
            if c.text:  # the API refuses empty text blocks
                blocks.append({"type": "text", "text": c.text})
        elif isinstance(c, ContentToolRequest):
            blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
    return blocks


def _user_blocks(turn: Turn) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for c in turn.contents:
        if isinstance(c, ContentToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": c.id,
                "content": c.error if c.error is not None else c.text,
            }
            if c.error is not None:
                block["is_error"] = True
            results.append(block)
        elif isinstance(c, ContentText):
            if c.text:
                rest.append({"type": "text", "text": c.text})
        elif isinstance(c, ContentImage):
            rest.append(_image(c))
    # Tool results must open the user message that answers the tool calls.
    return results + rest


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in request.turns:
        if turn.role == "assistant":
            blocks = _assistant_blocks(turn)
        else:
            blocks = _user_blocks(turn)
        if not blocks:
            continue  # the API refuses empty messages
        if turn.role == "user" and len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": "user", "content": blocks[0]["text"]})
        else:
            out.append({"role": turn.role, "content": blocks})
    return out


def _structured_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """The forced tool carrying `schema`; a non-object schema is wrapped in `value`."""
    if schema.get("type") == "object":
        return {
            "name": STRUCTURED_TOOL,
            "description": _STRUCTURED_DESCRIPTION,
            "input_schema": schema,
        }
    inner = dict(schema)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
    }
    if "$defs" in inner:  # references stay `#/$defs/...`, so the defs move to the root
        wrapper["$defs"] = inner.pop("$defs")
    return {"name": _WRAPPED_TOOL, "description": _STRUCTURED_DESCRIPTION, "input_schema": wrapper}


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _usage(data: dict[str, Any]) -> TokenUsage:
    usage = data.get("usage") or {}
    written = int(usage.get("cache_creation_input_tokens") or 0)
    return TokenUsage(
        input=int(usage.get("input_tokens") or 0) + written,
        output=int(usage.get("output_tokens") or 0),
        cached_input=int(usage.get("cache_read_input_tokens") or 0),
    )


class AnthropicProvider(HttpProvider):
    """Anthropic Messages (`POST {base_url}/messages`)."""

    name = "Anthropic"
    id_prefix = "anthropic"
    env_key: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com/v1"

    def url(self) -> str:
        return f"{self.base_url}/messages"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": API_VERSION}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": _messages(request)}
        if request.system_prompt:
            body["system"] = request.system_prompt
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        body.update(self.params)
        body.update(request.params)
        if "max_tokens" not in body:
            thinking = body.get("thinking")
            budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
            # max_tokens includes the thinking budget, and must exceed it.
            body["max_tokens"] = DEFAULT_MAX_TOKENS + (budget if isinstance(budget, int) else 0)
        if request.output_schema is not None:
            forced = _structured_tool(request.output_schema)
            tools.append(forced)
            # Extended thinking refuses forced tool use; the description asks for it instead.
            body["tool_choice"] = (
                {"type": "auto"}
                if _thinking_enabled(body)
                else {"type": "tool", "name": forced["name"]}
            )
        if tools:
            body["tools"] = tools
        return body

    def parse(self, data: Any) -> Turn:
        contents: list[Content] = []
        answer: ContentText | None = None  # the structured-output tool's input, as JSON
        for block in data["content"]:
            kind = block["type"]
            if kind == "text":
                contents.append(ContentText(block["text"]))
            elif kind == "thinking":
                contents.append(ContentThinking(block["thinking"], block.get("signature")))
            elif kind == "redacted_thinking":
                contents.append(ContentThinking(block["data"], redacted=True))
            elif kind == "tool_use" and block["name"] in (STRUCTURED_TOOL, _WRAPPED_TOOL):
                value = block["input"]
                if block["name"] == _WRAPPED_TOOL:
                    value = value["value"]
                answer = ContentText(msgspec.json.encode(value).decode())
                contents.append(answer)
            elif kind == "tool_use":
                contents.append(ContentToolRequest(block["id"], block["name"], block["input"]))
        stop = data.get("stop_reason") or ""
        finish = _FINISH.get(stop, "unknown")
        calls = any(isinstance(c, ContentToolRequest) for c in contents)
        if answer is not None:
            # The JSON is the whole reply: text the model wrote around the call would
            # spoil it for extract_data.
            contents = [c for c in contents if not isinstance(c, ContentText) or c is answer]
            if not calls and finish == "tool_calls":
                finish = "stop"  # the structured answer is the reply, not a call to run
        elif finish == "unknown" and calls:
            finish = "tool_calls"
        return Turn(
            "assistant",
            contents,
            tokens=_usage(data),
            finish_reason=finish,  # type: ignore[arg-type]
            model=data.get("model") or self.model,
        )

    def error_message(self, data: Any) -> str | None:
        """Anthropic's `{"type": "error", "error": {"type", "message"}}`, type included."""
        said = super().error_message(data)
        error = data.get("error") if isinstance(data, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        if said is not None and isinstance(kind, str) and kind and kind not in said:
            return f"{kind}: {said}"
        return said
