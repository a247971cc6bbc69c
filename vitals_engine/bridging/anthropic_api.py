"""Anthropic's Messages API (`POST /v1/messages`) as the bridge serves it: the API Claude
Code speaks.

Reading a request (`AnthropicApi.read`):

- `messages`: one `Turn` per user or assistant message, in order; consecutive messages of
  the same role stay separate turns (never merged). Content is a string or a list of
  blocks: `text`; `image` (a base64 or url source); `document` with a plain-text source
  (`text`, or `content` of text blocks) read as text, a base64 one (a PDF) as a
  `ContentDocument` named by its `title`, a url or file one refused; `tool_use`;
  `tool_result` (its content a string or a list of text and image blocks: the text
  becomes the `ContentToolResult`, `is_error` makes it the result's error, and its
  images follow it in the same turn as `ContentImage`s, since our tool results hold no
  images); `thinking` (a signature the bridge sealed gives back the
  `ContentThinking` it sealed, any other is kept as the thinking's signature) and
  `redacted_thinking` (likewise by its `data`).
- Messages of role "system" (Claude Code sends one after the first user message: its
  environment, deferred tools, agents and skills) hold no turn: their text is added to the
  system prompt, after `system`, in their order.
- A `tool_result` does not name its tool on the wire: the name is the one of the
  `tool_use` of the same id earlier in the conversation ("" when none is).
- Tool search, as Claude Code does it: a tool marked `defer_loading` is offered to the
  model only once a `tool_reference` block (in the content of the `tool_result` of the
  agent's own search tool) has named it, as the API does; the reference reads as the
  tool's definition, `<functions><function>{"description", "name", "parameters"}</function>
  </functions>`, in the result's text.
- `system`: a string or a list of text blocks, joined with a blank line.
- `tools`: custom tools only (no `type`, or `"custom"`) as `ToolDef`s. Anthropic's typed
  tools (server tools such as `web_search_20250305`, client tools such as `bash_*` or
  `text_editor_*`) are refused with their names: the bridge serves every call through the
  engine's own models, which run none of them. (Claude Code's main loop offers custom
  tools only; its WebSearch tool is served by a request of its own that offers
  `web_search_20250305`, which is refused.)
- `model`, `stream` and `max_tokens` are carried in the `AgentRequest`; `cache_control`
  markers, `citations`, `tool_choice`, `temperature`, `metadata`, `thinking`,
  `output_config`, `context_management`, `betas` and any field unknown here are accepted
  and ignored.

Writing a reply (`AnthropicApi.reply`, `AnthropicApi.stream`) is the inverse of what
`providers/anthropic.py` reads: our own provider parsing the reply gets back the turn's
contents (thinking sealed, see below), finish reason and token usage. Thinking goes out
as a `thinking` block whose `signature` is the whole `ContentThinking` sealed
(`seal_thinking`), and redacted thinking as a `redacted_thinking` block whose `data` is;
so whichever provider served the call gets its own signature back on the next one.

`count_tokens_body` answers `POST /v1/messages/count_tokens` with an estimate.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from typing import Any

import msgspec

from ..chats.layers.call import guess_tokens
from ..vocab.model_calls import ChatRequest, ToolDef
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
from .wire import AgentRequest, ApiFormat, WireError, seal_thinking, unseal_thinking

__all__ = ["COUNT_TOKENS_PATH", "AnthropicApi", "count_tokens_body"]

#: Where Anthropic's token counting is served, under the bridge's base URL.
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"

#: Anthropic's error type for an HTTP status (its "Errors" page).
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

#: Our finish reasons as Anthropic's stop reasons (the inverse of the provider's `_FINISH`);
#: any other is `end_turn`.
_STOP = {
    "stop": "end_turn",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}

#: Tool types that are custom tools (a tool with no `type` is one too).
_CUSTOM = ("custom",)
#: How many pieces a streamed text, thinking or tool input is cut into.
_PIECES = 3

Block = dict[str, Any]
#: Reads one content block (at `where`, as the request's reading went so far) into contents.
_Reader = Callable[[Block, str, "_Reading"], list[Content]]


# -- reading: fields ---------------------------------------------------------------------


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{where}: Input should be a valid dictionary")
    return value


def _at(where: str, key: str) -> str:
    """A field's place as Anthropic names it: `messages.0.content.1.text` (`where` ""
    for the body itself)."""
    return f"{where}.{key}" if where else key


def _string(block: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    """`block[key]`, a string ("" when it is missing and not `required`)."""
    value = block.get(key)
    if value is None and not required:
        return ""
    if value is None:
        raise WireError(f"{_at(where, key)}: Field required")
    if not isinstance(value, str):
        raise WireError(f"{_at(where, key)}: Input should be a valid string")
    return value


def _model(body: dict[str, Any]) -> str:
    model = _string(body, "model", "")
    if not model:
        raise WireError("model: String should have at least 1 character")
    return model


def _max_tokens(body: dict[str, Any]) -> int:
    value = body.get("max_tokens")
    if value is None:
        raise WireError("max_tokens: Field required")
    if not isinstance(value, int) or isinstance(value, bool):
        raise WireError("max_tokens: Input should be a valid integer")
    if value < 1:
        raise WireError("max_tokens: Input should be greater than or equal to 1")
    return value


def _stream(body: dict[str, Any]) -> bool:
    value = body.get("stream")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise WireError("stream: Input should be a valid boolean")
    return value


def _system(value: Any, where: str = "system") -> str | None:
    """A system prompt (`system`, or a system message's content at `where`): a string, or
    the text of a list of text blocks."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if not isinstance(value, list):
        raise WireError(f"{where}: Input should be a valid string or a list of text blocks")
    texts: list[str] = []
    for i, block in enumerate(value):
        block = _object(block, f"{where}.{i}")
        if block.get("type") != "text":
            raise WireError(f"{where}.{i}.type: Input should be 'text'")
        texts.append(_string(block, "text", f"{where}.{i}"))
    return "\n\n".join(texts) or None


def _tools(value: Any, *, typed: bool) -> list[tuple[ToolDef, bool]]:
    """The custom tools, each with whether its loading is deferred (`defer_loading`); a
    typed tool is refused (or, with `typed`, left out)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError("tools: Input should be a valid list")
    tools: list[tuple[ToolDef, bool]] = []
    refused: list[str] = []
    for i, tool in enumerate(value):
        tool = _object(tool, f"tools.{i}")
        kind = tool.get("type")
        if kind is None or kind in _CUSTOM:
            tools.append((_tool(tool, f"tools.{i}"), tool.get("defer_loading") is True))
        else:
            refused.append(f"{tool.get('name')!s} ({kind!s})")
    if refused and not typed:
        raise WireError(
            "tools: the bridge serves custom tools only (a name, description and "
            f"input_schema), not Anthropic's typed tools: {', '.join(refused)}"
        )
    return tools


def _tool(tool: dict[str, Any], where: str) -> ToolDef:
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        raise WireError(f"{where}.input_schema: Field required (a JSON schema object)")
    return ToolDef(
        name=_string(tool, "name", where),
        description=_string(tool, "description", where, required=False),
        parameters=schema,
    )


class _Reading:
    """What reading one request keeps as it goes: the tools offered (by name), the tool
    each tool_use called (by its id), the deferred tools a `tool_reference` loaded, and the
    text of the messages of role "system"."""

    __slots__ = ("called", "loaded", "offered", "system")

    def __init__(self, offered: list[tuple[ToolDef, bool]]) -> None:
        self.offered = {tool.name: tool for tool, _ in offered}
        self.called: dict[str, str] = {}
        self.loaded: set[str] = set()
        self.system: list[str] = []


# -- reading: content blocks -------------------------------------------------------------


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise WireError(f"{where}: Input should be a valid string or a list of blocks")
    return [_object(block, f"{where}.{i}") for i, block in enumerate(content)]


def _text_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    return [ContentText(_string(block, "text", where))]


def _image_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    source = _object(block.get("source"), f"{where}.source")
    kind = source.get("type")
    if kind == "base64":
        data = _string(source, "data", f"{where}.source")
        media_type = _string(source, "media_type", f"{where}.source")
        return [ContentImage(data=data, media_type=media_type)]
    if kind == "url":
        return [ContentImage(url=_string(source, "url", f"{where}.source"))]
    raise WireError(
        f"{where}.source.type: the bridge reads base64 and url images, not {kind!r} sources"
    )


def _document_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    """A plain-text document as its text, a base64 one (a PDF) as itself; a url or file
    source is refused (the bridge fetches nothing)."""
    source = _object(block.get("source"), f"{where}.source")
    kind = source.get("type")
    if kind == "text":
        return [ContentText(_string(source, "data", f"{where}.source"))]
    if kind == "content":
        inner = _blocks(source.get("content"), f"{where}.source.content")
        texts = [_string(b, "text", f"{where}.source.content") for b in inner if _is_text(b)]
        return [ContentText("\n\n".join(texts))]
    if kind == "base64":
        data = _string(source, "data", f"{where}.source")
        media_type = _string(source, "media_type", f"{where}.source")
        title = block.get("title")
        return [ContentDocument(data, media_type, title if isinstance(title, str) else None)]
    raise WireError(
        f"{where}: document blocks with a {kind!r} source are not supported by the bridge; "
        "base64 (a PDF) and plain-text documents are"
    )


def _is_text(block: Block) -> bool:
    return block.get("type") == "text"


def _tool_use_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    call_id = _string(block, "id", where)
    name = _string(block, "name", where)
    arguments = block.get("input", {})
    if not isinstance(arguments, dict):
        raise WireError(f"{where}.input: Input should be a valid dictionary")
    reading.called[call_id] = name
    return [ContentToolRequest(call_id, name, arguments)]


def _loaded(block: Block, where: str, reading: _Reading) -> str:
    """A `tool_reference` (a deferred tool that the agent's own tool search loaded): the
    tool is offered from now on, and the result shows its definition, as the API does."""
    name = _string(block, "tool_name", where)
    reading.loaded.add(name)
    tool = reading.offered.get(name)
    definition: dict[str, Any] = {"name": name}
    if tool is not None:
        definition = {"description": tool.description, "name": name, "parameters": tool.parameters}
    return f"<function>{msgspec.json.encode(definition).decode()}</function>"


def _tool_result_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    """The result (its text; the definitions of the tools it loaded), then its images."""
    call_id = _string(block, "tool_use_id", where)
    content = block.get("content")
    parts: list[Content] = []
    functions: list[str] = []
    for i, part in enumerate(_blocks(content, f"{where}.content") if content is not None else []):
        at = f"{where}.content.{i}"
        if part.get("type") == "tool_reference":
            functions.append(_loaded(part, at, reading))
        else:
            parts += _read_block(part, at, reading, _RESULT_PARTS, "a tool_result")
    texts = [p.text for p in parts if isinstance(p, ContentText)]
    if functions:
        texts.append("<functions>\n" + "\n".join(functions) + "\n</functions>")
    text = "\n\n".join(texts)
    images = [p for p in parts if isinstance(p, ContentImage)]
    name = reading.called.get(call_id, "")
    if block.get("is_error") is True:
        result = ContentToolResult(call_id, name, error=text)
    else:
        result = ContentToolResult(call_id, name, value=text)
    return [result, *images]


def _thinking_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    thinking = _string(block, "thinking", where)
    signature = _string(block, "signature", where, required=False) or None
    sealed = unseal_thinking(signature)
    return [sealed if sealed is not None else ContentThinking(thinking, signature=signature)]


def _redacted_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    data = _string(block, "data", where)
    sealed = unseal_thinking(data)
    return [sealed if sealed is not None else ContentThinking(data, redacted=True)]


def _compaction_block(block: Block, where: str, reading: _Reading) -> list[Content]:
    content, encrypted = block.get("content"), block.get("encrypted_content")
    if not isinstance(content, str | None) or not isinstance(encrypted, str | None):
        raise WireError(f"{where}: a compaction block's content is text")
    return [ContentCompaction(content, encrypted)]


#: What a tool_result's content list may hold, and how each block is read.
_RESULT_PARTS: dict[str, _Reader] = {
    "text": _text_block,
    "image": _image_block,
    "document": _document_block,
}

#: The blocks each role's messages may hold, and how each is read.
_READERS: dict[str, dict[str, _Reader]] = {
    "user": {
        "text": _text_block,
        "image": _image_block,
        "document": _document_block,
        "tool_result": _tool_result_block,
    },
    "assistant": {
        "text": _text_block,
        "tool_use": _tool_use_block,
        "thinking": _thinking_block,
        "redacted_thinking": _redacted_block,
        "compaction": _compaction_block,
    },
}


_HOLDERS = {"user": "a user message", "assistant": "an assistant message"}


def _read_block(
    block: Block,
    where: str,
    reading: _Reading,
    readers: dict[str, _Reader],
    holder: str,
) -> list[Content]:
    kind = block.get("type")
    reader = readers.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise WireError(f"{where}.type: the bridge does not read {kind!r} blocks in {holder}")
    return reader(block, where, reading)


def _turns(messages: Any, reading: _Reading) -> list[Turn]:
    """The user and assistant messages as turns, one each (tool results named after their
    tool_use); the text of system messages goes to `reading.system`."""
    if messages is None:
        raise WireError("messages: Field required")
    if not isinstance(messages, list):
        raise WireError("messages: Input should be a valid list")
    if not messages:
        raise WireError("messages: List should have at least 1 item")
    turns: list[Turn] = []
    for m, message in enumerate(messages):
        where = f"messages.{m}"
        message = _object(message, where)
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise WireError(f"{where}.role: Input should be 'user', 'assistant' or 'system'")
        if "content" not in message:
            raise WireError(f"{where}.content: Field required")
        if role == "system":
            reading.system.append(_system(message["content"], f"{where}.content") or "")
            continue
        contents: list[Content] = []
        for b, block in enumerate(_blocks(message["content"], f"{where}.content")):
            at = f"{where}.content.{b}"
            contents += _read_block(block, at, reading, _READERS[role], _HOLDERS[role])
        turns.append(Turn(role, contents))
    return turns


def _chat_request(body: dict[str, Any], *, typed_tools: bool = False) -> ChatRequest:
    """The conversation: system prompt (`system`, then the text of any system messages),
    turns, and the tools offered (a deferred one once a tool_reference loaded it)."""
    offered = _tools(body.get("tools"), typed=typed_tools)  # first: a server tool is news
    reading = _Reading(offered)
    turns = _turns(body.get("messages"), reading)
    system = [_system(body.get("system")), *reading.system]
    return ChatRequest(
        turns=turns,
        system_prompt="\n\n".join(part for part in system if part) or None,
        tools=[tool for tool, deferred in offered if not deferred or tool.name in reading.loaded],
    )


# -- writing -----------------------------------------------------------------------------


def _tool_id(content: ContentToolRequest) -> str:
    """The call's id; one made up for a provider that gave none (the agent needs one to
    answer the call)."""
    return content.id or f"toolu_{secrets.token_hex(12)}"


def _reply_block(content: Content) -> Block | None:
    """A content of the reply as a block (None: nothing the API could carry)."""
    if isinstance(content, ContentText):
        return {"type": "text", "text": content.text} if content.text else None
    if isinstance(content, ContentToolRequest):
        return {
            "type": "tool_use",
            "id": _tool_id(content),
            "name": content.name,
            "input": content.arguments,
        }
    if isinstance(content, ContentThinking):
        sealed = seal_thinking(content)
        if content.redacted:
            return {"type": "redacted_thinking", "data": sealed}
        return {"type": "thinking", "thinking": content.thinking, "signature": sealed}
    if isinstance(content, ContentCompaction):
        block: Block = {"type": "compaction", "content": content.content}
        if content.encrypted_content is not None:
            block["encrypted_content"] = content.encrypted_content
        return block
    return None  # an image or a tool result: no assistant message of the API holds one


def _stop_reason(turn: Turn) -> str:
    if turn.tool_requests:
        return "tool_use"
    return _STOP.get(turn.finish_reason or "", "end_turn")


def _usage(turn: Turn) -> dict[str, Any]:
    """The usage block our provider's `_usage` reads back as `turn.tokens`: the prompt
    split as Anthropic splits it (uncached, read from the cache, written to it; our
    `input` excludes the last two alike)."""
    tokens = turn.tokens or TokenUsage()
    usage: dict[str, Any] = {
        "input_tokens": tokens.input,
        "cache_creation_input_tokens": tokens.cache_write,
        "cache_read_input_tokens": tokens.cached_input,
        "cache_creation": {
            "ephemeral_5m_input_tokens": max(0, tokens.cache_write - tokens.cache_write_1h),
            "ephemeral_1h_input_tokens": tokens.cache_write_1h,
        },
        "output_tokens": tokens.output,
    }
    if tokens.reasoning:
        usage["output_tokens_details"] = {"thinking_tokens": tokens.reasoning}
    if tokens.web_searches:
        usage["server_tool_use"] = {"web_search_requests": tokens.web_searches}
    usage["service_tier"] = turn.service_tier or "standard"
    return usage


def _pieces(text: str) -> list[str]:
    """`text` cut into a few pieces, as a stream carries it (none for "")."""
    size = max(1, math.ceil(len(text) / _PIECES))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _block_events(index: int, block: Block) -> list[tuple[str, dict[str, Any]]]:
    """The events streaming one content block: its start, its deltas, its stop."""
    kind = block["type"]
    deltas: list[dict[str, Any]] = []
    opening = block
    if kind == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "compaction":
        opening = {"type": "compaction", "content": None}
        deltas = [{**block, "type": "compaction_delta"}]
    elif kind == "tool_use":
        opening = {**block, "input": {}}
        arguments = msgspec.json.encode(block["input"]).decode()
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments)]
    events = [("content_block_start", {"index": index, "content_block": opening})]
    events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
    events.append(("content_block_stop", {"index": index}))
    return events


def _message_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The stream of a whole reply `message`: start (usage with the input counts), a ping,
    the blocks, the delta (stop reason, final counts) and the stop."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": min(1, usage["output_tokens"])},
    }
    start["usage"].pop("output_tokens_details", None)
    start["usage"].pop("server_tool_use", None)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    events.append(("ping", {}))
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
    final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    counts = {key: usage[key] for key in final}
    counts["output_tokens"] = usage["output_tokens"]
    for key in ("output_tokens_details", "server_tool_use"):
        if key in usage:
            counts[key] = usage[key]
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"delta": delta, "usage": counts}))
    events.append(("message_stop", {}))
    return events


def _event(name: str, data: dict[str, Any]) -> bytes:
    payload = msgspec.json.encode({"type": name, **data})
    return b"event: " + name.encode() + b"\ndata: " + payload + b"\n\n"


# -- the API -----------------------------------------------------------------------------


class AnthropicApi(ApiFormat):
    """Anthropic's Messages API, served.

    Example:
        >>> api = AnthropicApi()
        >>> asked = api.read({"model": "claude-x", "max_tokens": 100,
        ...                   "messages": [{"role": "user", "content": "Hi"}]})
        >>> asked.request.turns[0].text, asked.model, asked.max_tokens
        ('Hi', 'claude-x', 100)
        >>> api.reply(Turn("assistant", [ContentText("Hello")]), model="claude-x")["content"]
        [{'type': 'text', 'text': 'Hello'}]
    """

    name = "anthropic"
    path = "/v1/messages"

    def read(self, body: Any) -> AgentRequest:
        """The request body as an `AgentRequest`; `WireError` (400) for a body the API
        would refuse.

        Example:
            >>> AnthropicApi().read({"model": "m", "messages": []})
            Traceback (most recent call last):
            ...
            vitals_engine.bridging.wire.WireError: max_tokens: Field required
        """
        body = _object(body, "body")
        model = _model(body)
        max_tokens = _max_tokens(body)
        stream = _stream(body)
        return AgentRequest(_chat_request(body), model, stream, max_tokens)

    def reply(
        self, turn: Turn, *, model: str, request: AgentRequest | None = None
    ) -> dict[str, Any]:
        """The Message object answering with `turn` (`request` unused: Anthropic's
        reply needs nothing of the request but the model).

        Example:
            >>> turn = Turn("assistant", [ContentText("4")], tokens=TokenUsage(10, 1),
            ...             finish_reason="stop")
            >>> body = AnthropicApi().reply(turn, model="claude-x")
            >>> body["stop_reason"], body["usage"]["input_tokens"]
            ('end_turn', 10)
        """
        blocks = [_reply_block(c) for c in turn.contents]
        return {
            "id": f"msg_{secrets.token_hex(12)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [b for b in blocks if b is not None],
            "stop_reason": _stop_reason(turn),
            "stop_sequence": None,
            "usage": _usage(turn),
        }

    def stream(self, turn: Turn, *, model: str, request: AgentRequest | None = None) -> list[bytes]:
        """The reply as Anthropic streams it, each event encoded, up to `message_stop`.

        Example:
            >>> events = AnthropicApi().stream(Turn("assistant", [ContentText("4")]), model="m")
            >>> events[0].split(b"\\n")[0], events[-1]
            (b'event: message_start', b'event: message_stop\\ndata: {"type":"message_stop"}\\n\\n')
        """
        message = self.reply(turn, model=model)
        return [_event(name, data) for name, data in _message_events(message)]

    def error(self, status: int, message: str) -> dict[str, Any]:
        """Anthropic's error body, its type the one of `status`.

        Example:
            >>> AnthropicApi().error(429, "Slow down")
            {'type': 'error', 'error': {'type': 'rate_limit_error', 'message': 'Slow down'}}
        """
        kind = _ERROR_TYPES.get(status)
        if kind is None:
            kind = "api_error" if status >= 500 else "invalid_request_error"
        return {"type": "error", "error": {"type": kind, "message": message}}


def _unseen_chars(request: ChatRequest) -> int:
    """The characters of the request that `guess_tokens` leaves out: tool definitions,
    tool calls, tool results and thinking."""
    chars = sum(len(msgspec.json.encode(tool)) for tool in request.tools)
    for turn in request.turns:
        for c in turn.contents:
            if isinstance(c, ContentToolRequest):
                chars += len(c.name) + len(msgspec.json.encode(c.arguments))
            elif isinstance(c, ContentToolResult):
                chars += len(c.text)
            elif isinstance(c, ContentThinking) and not c.redacted:
                chars += len(c.thinking)
    return chars


def count_tokens_body(body: Any) -> dict[str, Any]:
    """The answer to `POST /v1/messages/count_tokens`: the request's input tokens,
    estimated (`guess_tokens`, about 4 characters a token, plus what it leaves out: tool
    definitions, calls, results and thinking, at the same rate). The body is a Messages
    request without `max_tokens`; typed tools are left out of the count, not refused.

    Example:
        >>> count_tokens_body({"model": "m", "messages": [{"role": "user", "content": "Hi there"}]})
        {'input_tokens': 2}
    """
    body = _object(body, "body")
    _model(body)
    request = _chat_request(body, typed_tools=True)
    return {"input_tokens": guess_tokens(request).prompt + _unseen_chars(request) // 4}
