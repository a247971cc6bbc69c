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

Streaming: the request says `"stream": true`, and its events (`message_start`,
`content_block_start` / `_delta` / `_stop` with text, thinking and signature
deltas and tool input as `input_json_delta` fragments, `message_delta` with
the stop reason and usage) are put together into the message the whole answer
would be, up to `message_stop`. An `event: error` is the error of the HTTP
status its type stands for (`overloaded_error` 529, `rate_limit_error` 429 ...).
With `stream=None` a request streams by itself when its `max_tokens` is above
`NONSTREAMING_MAX_TOKENS`: the API refuses non-streaming requests it expects
to take over ten minutes.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError
from ..transport.pool import TransportPool
from ..transport.sse import ServerSentEvent
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
    TokenUsage,
    Turn,
)
from .http import HttpProvider, StreamErrorEvent, StreamReader
from .prompt_cache import PromptCache, cache_plan, mark
from .reasoning import EFFORT_BUDGETS, Reasoning

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_PAUSED_LEGS",
    "NONSTREAMING_MAX_TOKENS",
    "AnthropicProvider",
    "thinking_fields",
]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
#: The largest max_tokens sent without streaming when nobody chose: the API refuses a
#: non-streaming request it expects to take over 10 minutes, which Anthropic's SDK
#: estimates as 60 minutes x max_tokens / 128,000 (so above 21,333 tokens).
NONSTREAMING_MAX_TOKENS = 21_333
STRUCTURED_TOOL = "_structured_output"
_WRAPPED_TOOL = "_structured_output_value"
_STRUCTURED_DESCRIPTION = (
    "Give your final answer by calling this tool: its input is the answer, "
    "in exactly the shape of this schema."
)

#: Requests one call may make to continue a reply the API paused (`pause_turn`).
MAX_PAUSED_LEGS = 10
#: The least thinking budget the API takes.
_LEAST_BUDGET = 1024
#: Models that take adaptive thinking with an effort (Claude 4.6 and later) ...
_ADAPTIVE = re.compile(r"^claude-(opus|sonnet)-4-6|^claude-[a-z]+-(4-[7-9]|[5-9])")
#: ... and those that take nothing else (Claude Opus 4.7 and later, the 5 family).
_ADAPTIVE_ONLY = re.compile(r"^claude-[a-z]+-(4-[7-9]|[5-9])")
#: Our efforts in Anthropic's words (its `output_config.effort`).
_ANTHROPIC_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_ANTHROPIC_EFFORT["xhigh"] = "max"

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


#: The HTTP status an error event's type stands for (Anthropic's error types).
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _image(content: ContentImage) -> dict[str, Any]:
    if content.data is not None:
        source = {"type": "base64", "media_type": content.media_type, "data": content.data}
    else:
        source = {"type": "url", "url": content.url or ""}
    return {"type": "image", "source": source}


def _document(content: ContentDocument) -> dict[str, Any]:
    """A PDF as base64, a text document (any `text/...`) as its plain text."""
    if content.media_type == "application/pdf":
        source = {"type": "base64", "media_type": content.media_type, "data": content.data}
    elif content.is_text:
        text = content.decoded().decode("utf-8", errors="replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        raise content.refused("Anthropic's Messages API", "PDF (application/pdf) and text/...")
    return {"type": "document", "source": source, "title": content.name}


def _assistant_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for c in turn.contents:
        if isinstance(c, ContentThinking):
            if c.id is not None:  # another API's reasoning item: Anthropic cannot read it
                continue
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
        elif isinstance(c, ContentCompaction):
            blocks.append(_compaction_block(c))
    return blocks


def _compaction_block(content: ContentCompaction) -> dict[str, Any]:
    """A compaction summary as the API gave it, to go back with its turn."""
    block: dict[str, Any] = {"type": "compaction", "content": content.content}
    if content.encrypted_content is not None:
        block["encrypted_content"] = content.encrypted_content
    return block


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
        elif isinstance(c, ContentDocument):
            rest.append(_document(c))
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


def _parts(usage: dict[str, Any]) -> list[dict[str, Any]]:
    """The billed parts of a usage block: its `iterations` (a compaction, then the reply:
    the top-level counts are the last one's only), or the block itself."""
    iterations = usage.get("iterations")
    if isinstance(iterations, list) and iterations:
        return [part for part in iterations if isinstance(part, dict)]
    return [usage]


def _count(block: Any, key: str) -> int:
    value = block.get(key) if isinstance(block, dict) else None
    return int(value) if isinstance(value, int | float) else 0


def _usage(data: dict[str, Any]) -> TokenUsage:
    usage = data.get("usage") or {}
    tokens = TokenUsage()
    for part in _parts(usage):
        written = _count(part, "cache_creation_input_tokens")
        split = part.get("cache_creation")
        hour = _count(split, "ephemeral_1h_input_tokens")
        tokens = tokens + TokenUsage(
            input=_count(part, "input_tokens"),
            output=_count(part, "output_tokens"),
            cached_input=_count(part, "cache_read_input_tokens"),
            cache_write=max(written, hour + _count(split, "ephemeral_5m_input_tokens")),
            cache_write_1h=hour,
        )
    return msgspec.structs.replace(
        tokens,
        reasoning=_count(usage.get("output_tokens_details"), "thinking_tokens"),
        web_searches=_count(usage.get("server_tool_use"), "web_search_requests"),
    )


def _tier(data: dict[str, Any]) -> str | None:
    tier = (data.get("usage") or {}).get("service_tier")
    return tier if isinstance(tier, str) and tier not in ("standard", "batch") else None


def _added(a: Any, b: Any) -> dict[str, Any]:
    """Two blocks of counts added up, key by key."""
    out = dict(a) if isinstance(a, dict) else {}
    for key, value in (b or {}).items():
        if isinstance(value, int | float):
            out[key] = _count(out, key) + value
    return out


def _joined(first: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
    """A paused reply and its continuation as one reply: the content of both, the usage of
    both, the continuation's stop reason."""
    a, b = first.get("usage") or {}, rest.get("usage") or {}
    usage: dict[str, Any] = {"iterations": _parts(a) + _parts(b)}
    for key in ("output_tokens_details", "server_tool_use"):
        usage[key] = _added(a.get(key), b.get(key))
    if "service_tier" in b:
        usage["service_tier"] = b["service_tier"]
    return {**rest, "content": [*first["content"], *rest["content"]], "usage": usage}


def _block_content(block: dict[str, Any]) -> Content | None:
    """A reply's content block as ours (None: one of the API's we do not keep, such as a
    server tool's, whose results the reply's text already tells)."""
    kind = block["type"]
    if kind == "text":
        return ContentText(block["text"])
    if kind == "thinking":
        return ContentThinking(block["thinking"], block.get("signature"))
    if kind == "redacted_thinking":
        return ContentThinking(block["data"], redacted=True)
    if kind == "compaction":
        return ContentCompaction(block.get("content"), block.get("encrypted_content"))
    if kind == "tool_use":
        return ContentToolRequest(block["id"], block["name"], block["input"])
    return None


def thinking_fields(
    model: str, setting: Reasoning, model_id: str
) -> tuple[dict[str, Any] | None, str | None]:
    """The request's `thinking` and `output_config.effort` for a `reasoning` setting of the
    Claude model `model` (its Anthropic name): adaptive thinking with an effort on the
    models that take it, else a budget (an effort's from `EFFORT_BUDGETS`).

    Example:
        >>> thinking_fields("claude-sonnet-4-5", 8000, "anthropic/claude-sonnet-4-5")
        ({'type': 'enabled', 'budget_tokens': 8000}, None)
    """
    if setting is None or setting == "none" or setting == 0:
        return None, None
    adaptive = _ADAPTIVE.match(model) is not None
    if isinstance(setting, str) and adaptive:
        return {"type": "adaptive"}, _ANTHROPIC_EFFORT[setting]
    if _ADAPTIVE_ONLY.match(model):
        raise ConfigError(
            f"{model_id} thinks adaptively and takes an effort, not a budget of "
            f"{setting} thinking tokens: pass reasoning='high' (or 'low', 'medium' ...)."
        )
    budget = setting if isinstance(setting, int) else EFFORT_BUDGETS[setting]
    if budget < _LEAST_BUDGET:
        raise ConfigError(
            f"{model_id}: reasoning={setting} is below Anthropic's least thinking "
            f"budget of {_LEAST_BUDGET} tokens."
        )
    return {"type": "enabled", "budget_tokens": budget}, None


class _AnthropicStream(StreamReader):
    """Message stream events put together into the message they stand for."""

    marker = "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._inputs: dict[int, list[str]] = {}  # tool input JSON, by block index

    def feed(self, event: ServerSentEvent) -> str | None:
        data = msgspec.json.decode(event.data)
        if not isinstance(data, dict):
            raise TypeError(f"an event is a JSON object, not {type(data).__name__}")
        kind = data.get("type") or event.event
        if kind == "error":
            error = data.get("error")
            name = error.get("type") if isinstance(error, dict) else None
            raise StreamErrorEvent(ERROR_STATUS.get(name or "", 500), event.data)
        if kind == "message_start":
            self._message = dict(data["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
        elif kind == "content_block_start":
            index = data["index"]
            block = self._blocks[index] = dict(data["content_block"])
            if block["type"] in ("tool_use", "server_tool_use"):
                self._inputs[index] = []
        elif kind == "content_block_delta":
            return self._delta(self._blocks[data["index"]], data["index"], data["delta"])
        elif kind == "content_block_stop":
            index = data["index"]
            if index in self._inputs:
                raw = "".join(self._inputs.pop(index))
                self._blocks[index]["input"] = msgspec.json.decode(raw) if raw else {}
        elif kind == "message_delta":
            message = self._started()
            message.update(data.get("delta") or {})
            for key, value in (data.get("usage") or {}).items():
                if value is not None:  # counts are cumulative: the last one is the total
                    message["usage"][key] = value
        elif kind == "message_stop":
            self.complete = True
        return None  # ping, and event types added later

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> str | None:
        kind = delta["type"]
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return delta["text"]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        elif kind == "input_json_delta":
            self._inputs[index].append(delta["partial_json"])
        elif kind == "compaction_delta":
            for key in ("content", "encrypted_content"):
                if delta.get(key) is not None:
                    block[key] = (block.get(key) or "") + delta[key]
        return None

    def _started(self) -> dict[str, Any]:
        if self._message is None:
            raise KeyError("message_start")
        return self._message

    def body(self) -> dict[str, Any]:
        message = self._started()
        message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return message


class AnthropicProvider(HttpProvider):
    """Anthropic Messages (`POST {base_url}/messages`)."""

    name = "Anthropic"
    id_prefix = "anthropic"
    env_key: ClassVar[str | None] = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com/v1"
    billing_hint = "https://console.anthropic.com/settings/billing"

    #: Where requests mark their prefix for the prompt cache (`prompt_cache.py`).
    prompt_cache: PromptCache = "auto"

    def url(self) -> str:
        return f"{self.base_url}/messages"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": API_VERSION}

    def thinking_setting(self) -> tuple[dict[str, Any] | None, str | None]:
        """The request's `thinking` and `output_config.effort` for the chat's `reasoning`
        (`thinking_fields()`)."""
        return thinking_fields(self.model, self.reasoning, self.model_id)

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": _messages(request)}
        if request.system_prompt:
            body["system"] = request.system_prompt
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        thinking, effort = self.thinking_setting()
        if thinking is not None:
            body["thinking"] = thinking
        if effort is not None:
            body["output_config"] = {"effort": effort}
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
        mark(body, cache_plan(request, self.prompt_cache, self.model))
        return body

    def call_config(self, request: ChatRequest) -> dict[str, Any]:
        config = super().call_config(request)
        if self.prompt_cache is not None:
            plan = cache_plan(request, self.prompt_cache, self.model)
            config = {**config, "cache_prompt": plan.any}
        return config

    async def continue_reply(self, pool: TransportPool, payload: dict[str, Any], data: Any) -> Any:
        """A reply the API paused (`pause_turn`: a long turn of server tools) is sent
        back as the assistant's, for the model to go on, up to `MAX_PAUSED_LEGS` requests;
        the reply is all of them, their usage added up."""
        legs = 1
        while isinstance(data, dict) and data.get("stop_reason") == "pause_turn":
            if legs >= MAX_PAUSED_LEGS:
                break
            messages = [*payload["messages"], {"role": "assistant", "content": data["content"]}]
            rest, _ = await self.exchange(pool, {**payload, "messages": messages})
            data = _joined(data, rest)
            legs += 1
        return data

    def quota_exhausted(self, status: int, data: Any) -> bool:
        """Anthropic's billing error: the account's credit balance is spent."""
        error = data.get("error") if isinstance(data, dict) else None
        if not isinstance(error, dict):
            return False
        message = error.get("message")
        return error.get("type") == "billing_error" or (
            isinstance(message, str) and "credit balance" in message.lower()
        )

    def auto_stream(self, body: dict[str, Any]) -> bool:
        """Stream when the API would refuse the request whole: max_tokens above
        `NONSTREAMING_MAX_TOKENS`."""
        max_tokens = body.get("max_tokens")
        return isinstance(max_tokens, int) and max_tokens > NONSTREAMING_MAX_TOKENS

    def stream_reader(self) -> StreamReader:
        return _AnthropicStream()

    def parse(self, data: Any) -> Turn:
        contents: list[Content] = []
        answer: ContentText | None = None  # the structured-output tool's input, as JSON
        for block in data["content"]:
            if block["type"] == "tool_use" and block["name"] in (STRUCTURED_TOOL, _WRAPPED_TOOL):
                value = block["input"]
                if block["name"] == _WRAPPED_TOOL:
                    value = value["value"]
                answer = ContentText(msgspec.json.encode(value).decode())
                contents.append(answer)
            elif (content := _block_content(block)) is not None:
                contents.append(content)
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
            service_tier=_tier(data),
        )

    def error_message(self, data: Any) -> str | None:
        """Anthropic's `{"type": "error", "error": {"type", "message"}}`, type included."""
        said = super().error_message(data)
        error = data.get("error") if isinstance(data, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        if said is not None and isinstance(kind, str) and kind and kind not in said:
            return f"{kind}: {said}"
        return said
