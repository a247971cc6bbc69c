"""Anthropic Messages, as the mock server speaks it.

It checks requests the way the API does where a provider bug would show:
`model`, `max_tokens` and `messages` are required, roles are user or
assistant (or system: a system message among them, as Claude Code 2.1 sends with its
environment, is read as more of the system prompt; `tests/recordings/agent_clis/`),
images and documents carry a source, every `tool_result` answers a `tool_use`
of the assistant message before it, and a thinking block sent back must
keep the signature the server gave it.

A forced `tool_choice` (`{"type": "tool", "name": ...}`) is structured
output: the brain answers in that tool's input schema and the reply is
rendered as a `tool_use` of that tool, as Claude answers.

With `"stream": true` the same message comes as the API streams it:
`message_start` (usage with the input tokens), a `ping`, then per content
block `content_block_start`, its deltas (`thinking_delta` pieces then one
`signature_delta`, `text_delta` pieces, `input_json_delta` fragments of a
tool's input) and `content_block_stop`, then `message_delta` (stop reason and
output tokens) and `message_stop`. A mid-stream failure is an `event: error`
(`overloaded_error` unless told otherwise).

Prompt caching: `cache_control` breakpoints (`{"type": "ephemeral"}`, with `"ttl"` "5m"
or "1h") on tools, system blocks and message content blocks, at most 4 (more is the
API's 400, as is a 1h breakpoint after a 5m one, or one on an empty text block), make
the request's `CachePlan`: the prompt in the order the API caches it (tools, system,
messages), a block at a time, counted in the brain's tokens (whitespace words of the
text; a tool definition is the words of its JSON, and counts in `input_tokens` then).
The server's `PromptCache` says what was read and written; the usage block carries
`cache_creation_input_tokens`, `cache_read_input_tokens`, `input_tokens` (the rest), and
`cache_creation: {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}` when the
request had breakpoints or the reply wrote to the cache.

Server tools: a reply's `web_searches` are `server_tool_use` blocks (`web_search`, the
query as input) each followed by its `web_search_tool_result`, and
`usage.server_tool_use.web_search_requests`; a `pause_turn` finish is the API's
`stop_reason: "pause_turn"`, and the next request, ending with that assistant content,
goes on (`MockRequest.continuing`).

A spent credit balance (`fail("quota")`) is the API's 400 `invalid_request_error`
"Your credit balance is too low to access the Anthropic API. ...": the API answers so,
though its documentation also lists a 402 `billing_error`.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from ...providers.mock import count_tokens
from ..brain import CachePlan, MockMessage, MockReply, MockRequest, MockToolCall, cache_plan
from . import Refused, StreamEvent, WireFormat, fragments, pieces

__all__ = ["AnthropicFormat", "signature_of"]

_STOP = {
    "stop": "end_turn",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "pause_turn": "pause_turn",
}
_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits."
)
_MAX_BREAKPOINTS = 4
#: A block of the prompt as the cache sees it: tokens, content, breakpoint ttl (or None).
_Block = tuple[int, Any, str | None]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def signature_of(thinking: str) -> str:
    """The signature the mock gives a thinking block (and checks when it comes back)."""
    digest = hashlib.sha256(b"vitals-mock-thinking:" + thinking.encode()).digest()
    return base64.b64encode(digest).decode("ascii")


def _text_of(content: Any) -> str:
    """A `system` or `tool_result` content: a string or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError("content must be a string or a list of blocks")
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _check_image(block: Mapping[str, Any]) -> None:
    source = block.get("source") or {}
    kind = source.get("type")
    if kind == "base64":
        if not source.get("media_type") or not source.get("data"):
            raise ValueError("a base64 image source needs 'media_type' and 'data'")
    elif kind == "url":
        if not source.get("url"):
            raise ValueError("a url image source needs 'url'")
    else:
        raise ValueError(f"unknown image source type {kind!r}")


#: A document's source types, and the media type each must have (None: any, or none).
_DOCUMENT_SOURCES = {"base64": "application/pdf", "text": "text/plain", "url": None}


def _check_document(block: Mapping[str, Any]) -> None:
    """Refuse a document the API would: a PDF's base64, a plain text's text, or a URL."""
    source = block.get("source") or {}
    kind = source.get("type")
    if kind not in _DOCUMENT_SOURCES:
        raise ValueError(f"unknown document source type {kind!r}")
    wanted = _DOCUMENT_SOURCES[kind]
    if wanted is not None and source.get("media_type") != wanted:
        raise ValueError(f"a {kind} document source needs media_type {wanted!r}")
    if not source.get("url" if kind == "url" else "data"):
        raise ValueError(f"a {kind} document source needs {'url' if kind == 'url' else 'data'}")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise ValueError("a message's content must be a string or a non-empty list of blocks")
    return content


def _user(message: Mapping[str, Any], pending: set[str]) -> list[MockMessage]:
    out: list[MockMessage] = []
    texts: list[str] = []
    images = 0
    for block in _blocks(message["content"]):
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "image":
            _check_image(block)
            images += 1
        elif kind == "document":  # counted with the images: what a message attaches
            _check_document(block)
            images += 1
        elif kind == "tool_result":
            call_id = block["tool_use_id"]
            if call_id not in pending:
                raise ValueError(
                    f"tool_result block {call_id!r} answers no tool_use of the previous message"
                )
            pending.discard(call_id)
            out.append(
                MockMessage(
                    "tool",
                    _text_of(block.get("content")),
                    tool_call_id=call_id,
                    tool_error=bool(block.get("is_error")),
                )
            )
        else:
            raise ValueError(f"unexpected block type {kind!r} in a user message")
    if pending:
        raise ValueError(f"tool_use ids without a tool_result: {sorted(pending)}")
    if texts or images:
        out.append(MockMessage("user", "\n".join(texts), images=images))
    return out


def _assistant(message: Mapping[str, Any]) -> MockMessage:
    texts: list[str] = []
    calls: list[MockToolCall] = []
    thoughts: list[str] = []
    searches: set[str] = set()
    for block in _blocks(message["content"]):
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind in ("tool_use", "server_tool_use"):
            if not isinstance(block.get("input"), dict):
                raise ValueError(f"a {kind} block needs an 'input' object")
            if kind == "server_tool_use":
                searches.add(block["id"])
            else:
                calls.append(MockToolCall(block["id"], block["name"], block["input"]))
        elif kind == "web_search_tool_result":
            if block.get("tool_use_id") not in searches:
                raise ValueError("a web_search_tool_result answers no server_tool_use before it")
        elif kind == "thinking":
            if block.get("signature") != signature_of(block["thinking"]):
                raise ValueError("a thinking block's signature does not match its thinking")
            thoughts.append(block["thinking"])
        elif kind == "redacted_thinking":
            if not block.get("data"):
                raise ValueError("a redacted_thinking block needs 'data'")
        else:
            raise ValueError(f"unexpected block type {kind!r} in an assistant message")
    reasoning = "".join(thoughts) or None
    return MockMessage("assistant", "".join(texts), tool_calls=calls, reasoning=reasoning)


def _ttl(block: Mapping[str, Any], where: str) -> str | None:
    """The ttl of a block's `cache_control` breakpoint ("5m" or "1h"), or None."""
    control = block.get("cache_control")
    if control is None:
        return None
    if not isinstance(control, dict) or control.get("type") != "ephemeral":
        raise Refused(f"{where}.cache_control.type: Input should be 'ephemeral'")
    for key in control:
        if key not in ("type", "ttl"):
            raise Refused(f"{where}.cache_control.ephemeral.{key}: Extra inputs are not permitted")
    ttl = control.get("ttl", "5m")
    if ttl not in ("5m", "1h"):
        raise Refused(f"{where}.cache_control.ephemeral.ttl: Input should be '5m' or '1h'")
    if block.get("type") == "text" and not block.get("text"):
        raise Refused(f"{where}: cache_control cannot be set for empty text blocks")
    return ttl


def _block_tokens(block: Mapping[str, Any]) -> int:
    """A content block's tokens as the brain counts them: its text's words."""
    kind = block.get("type")
    if kind == "text":
        return count_tokens(str(block.get("text") or ""))
    if kind == "tool_result":
        return count_tokens(_text_of(block.get("content")))
    return 0


def _has_breakpoints(body: Mapping[str, Any]) -> bool:
    """Whether any tool, system block or message block carries `cache_control`."""
    system = body.get("system")
    groups = [body.get("tools") or [], system if isinstance(system, list) else []]
    groups += [m.get("content") for m in body["messages"] if isinstance(m.get("content"), list)]
    return any(isinstance(b, dict) and "cache_control" in b for group in groups for b in group)


def _plan(body: Mapping[str, Any], model: str) -> CachePlan | None:
    """The request's `CachePlan` (its blocks in cache order, and its breakpoints), or None."""
    if not _has_breakpoints(body):
        return None
    tools, unseen = _tool_blocks(body.get("tools") or [])
    blocks = [*tools, *_system_blocks(body.get("system")), *_message_blocks(body["messages"])]
    _check_breakpoints([ttl for _, _, ttl in blocks if ttl is not None])
    return cache_plan(model, blocks, extra_tokens=unseen)


def _without_breakpoint(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _tool_blocks(tools: list[dict[str, Any]]) -> tuple[list[_Block], int]:
    """The tools' definitions as cache blocks, and their tokens (which the brain does
    not see, so they count apart)."""
    blocks: list[_Block] = []
    unseen = 0
    for i, tool in enumerate(tools):
        definition = _without_breakpoint(tool)
        tokens = count_tokens(msgspec.json.encode(definition).decode())
        unseen += tokens
        blocks.append((tokens, {"tool": definition}, _ttl(tool, f"tools.{i}")))
    return blocks, unseen


def _system_blocks(system: Any) -> list[_Block]:
    """The system prompt as cache blocks: a string, or its blocks (breakpoints allowed)."""
    if isinstance(system, str):
        return [(count_tokens(system), {"system": system}, None)]
    if not isinstance(system, list):
        return []
    return [
        (_block_tokens(block), {"system": _without_breakpoint(block)}, _ttl(block, f"system.{i}"))
        for i, block in enumerate(system)
    ]


def _message_blocks(messages: list[dict[str, Any]]) -> list[_Block]:
    """The messages' content blocks as cache blocks, under their role."""
    blocks: list[_Block] = []
    for m, message in enumerate(messages):
        role = message.get("role")
        for b, block in enumerate(_blocks(message.get("content"))):
            content = _without_breakpoint(block)
            ttl = _ttl(block, f"messages.{m}.content.{b}")
            blocks.append((_block_tokens(block), {role: content}, ttl))
    return blocks


def _check_breakpoints(ttls: list[str]) -> None:
    """Refuse more breakpoints than the API takes, or a 1h one after a 5m one."""
    if len(ttls) > _MAX_BREAKPOINTS:
        raise Refused(
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(ttls)}."
        )
    for before, after in itertools.pairwise(ttls):
        if before == "5m" and after == "1h":
            raise Refused(
                "a cache_control block with ttl='1h' must not come after one with ttl='5m'"
            )


def _search_blocks(reply: MockReply) -> list[dict[str, Any]]:
    """A `server_tool_use` block and its `web_search_tool_result` for each search."""
    blocks: list[dict[str, Any]] = []
    for n, query in enumerate(reply.web_searches):
        call_id = f"srvtoolu_{uuid.uuid4().hex[:24]}"
        slug = "-".join(query.lower().split()) or "search"
        found = {
            "type": "web_search_result",
            "url": f"https://example.com/{slug}",
            "title": f"Result {n + 1} for {query}",
            "encrypted_content": base64.b64encode(query.encode()).decode("ascii"),
            "page_age": None,
        }
        blocks.append(
            {
                "type": "server_tool_use",
                "id": call_id,
                "name": "web_search",
                "input": {"query": query},
            }
        )
        blocks.append(
            {"type": "web_search_tool_result", "tool_use_id": call_id, "content": [found]}
        )
    return blocks


def _block_events(index: int, block: dict[str, Any]) -> list[StreamEvent]:
    """The events that stream one content block: start, deltas, stop."""
    kind = block["type"]
    deltas: list[dict[str, Any]] = []
    if kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
    elif kind in ("tool_use", "server_tool_use"):
        opening = {**block, "input": {}}
        arguments = msgspec.json.encode(block["input"]).decode()
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in fragments(arguments)]
    else:
        opening = block
    start = {"type": "content_block_start", "index": index, "content_block": opening}
    events = [StreamEvent(start, "content_block_start")]
    for delta in deltas:
        data = {"type": "content_block_delta", "index": index, "delta": delta}
        events.append(StreamEvent(data, "content_block_delta", text=kind == "text"))
    stop = {"type": "content_block_stop", "index": index}
    events.append(StreamEvent(stop, "content_block_stop"))
    return events


def _usage(request: MockRequest, reply: MockReply) -> dict[str, Any]:
    """The usage block: the prompt split into the cache's reads, its writes, and the rest."""
    read = min(reply.cached_tokens, reply.input_tokens)
    five, hour = reply.cache_write_5m_tokens, reply.cache_write_1h_tokens
    usage: dict[str, Any] = {
        "input_tokens": max(0, reply.input_tokens - read - five - hour),
        "cache_creation_input_tokens": five + hour,
        "cache_read_input_tokens": read,
        "output_tokens": reply.output_tokens,
    }
    if request.cache is not None or five or hour:
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": five,
            "ephemeral_1h_input_tokens": hour,
        }
    if reply.web_searches:
        usage["server_tool_use"] = {"web_search_requests": len(reply.web_searches)}
    return usage


def _check_required(body: Any) -> None:
    """Refuse a body without a model, a positive `max_tokens` and some messages."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise ValueError("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError("max_tokens: Field required (a positive integer)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: Field required (a non-empty list)")


def _conversation(messages: list[dict[str, Any]]) -> list[MockMessage]:
    """The messages as the brain's, each `tool_use` answered by a `tool_result` in the
    user message after it."""
    said: list[MockMessage] = []
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "user":
            said.extend(_user(message, pending))
        elif role == "assistant":
            if pending:
                raise ValueError(f"tool_use ids without a tool_result: {sorted(pending)}")
            turn = _assistant(message)
            pending = {call.id for call in turn.tool_calls}
            said.append(turn)
        else:
            raise ValueError(f"messages: role must be 'user' or 'assistant', not {role!r}")
    return said


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(tool.get("input_schema"), dict):
        raise ValueError(f"tools: {tool.get('name')!r} needs an 'input_schema'")
    return {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": tool["input_schema"],
    }


def _forced_schema(choice: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The schema of the tool a `tool_choice` forces (None: none forced)."""
    if choice.get("type") != "tool":
        return None
    forced = next((t for t in tools if t["name"] == choice.get("name")), None)
    if forced is None:
        raise ValueError(f"tool_choice names an unknown tool {choice.get('name')!r}")
    return forced["parameters"]


class AnthropicFormat(WireFormat):
    name = "anthropic"
    route = "/v1/messages"

    stream_error_status = 529

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        _check_required(body)
        request = MockRequest(format=self.name, model=body["model"], max_tokens=body["max_tokens"])
        request.stream = body.get("stream") is True
        inline = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "system"]
        texts = [_text_of(body.get("system")), *(_text_of(m.get("content")) for m in inline)]
        request.system = "\n\n".join(text for text in texts if text) or None
        request.messages = _conversation([m for m in body["messages"] if m not in inline])
        request.tools = [_tool(tool) for tool in body.get("tools") or []]
        request.cache = _plan(body, request.model)
        request.schema = _forced_schema(body.get("tool_choice") or {}, request.tools)
        return request

    @staticmethod
    def _forced_tool(request: MockRequest) -> str | None:
        if request.schema is None:
            return None
        for tool in request.tools:
            if tool["parameters"] is request.schema:
                return tool["name"]
        return None

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply.reasoning,
                    "signature": signature_of(reply.reasoning),
                }
            )
        content += _search_blocks(reply)
        stop = _STOP.get(reply.finish, "end_turn")
        forced = self._forced_tool(request)
        value: Any = None
        if forced is not None and not reply.tool_calls and reply.text:
            try:
                value = msgspec.json.decode(reply.text)
            except msgspec.DecodeError:
                value = None
        if isinstance(value, dict):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": forced,
                    "input": value,
                }
            )
            stop = "tool_use"
        elif reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": _usage(request, reply),
        }

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        message = self.render(request, reply)
        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        }
        events = [
            StreamEvent({"type": "message_start", "message": start}, "message_start"),
            StreamEvent({"type": "ping"}, "ping"),
        ]
        for index, block in enumerate(message["content"]):
            events += _block_events(index, block)
        counts = {"output_tokens": usage["output_tokens"]}
        if "server_tool_use" in usage:
            counts["server_tool_use"] = usage["server_tool_use"]
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": counts,
        }
        events.append(StreamEvent(delta, "message_delta"))
        events.append(StreamEvent({"type": "message_stop"}, "message_stop"))
        return events

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        return StreamEvent(self.error_body(status, message), "error")

    def malformed_event(self) -> StreamEvent:
        return StreamEvent('{"type": "content_block_delta", oops', "content_block_delta")

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        body = self.error_body(400, _CREDIT)
        body["request_id"] = f"req_{uuid.uuid4().hex[:24]}"
        headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
        return 400, body, headers

    def rate_limit_headers(self, retry_after: float) -> dict[str, str]:
        reset = datetime.fromtimestamp(time.time() + retry_after, UTC)
        return {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset.isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"
            ),
        }

    def incomplete_body(self) -> dict[str, Any]:
        return {"id": "msg_incomplete", "type": "message", "role": "assistant", "model": "x"}
