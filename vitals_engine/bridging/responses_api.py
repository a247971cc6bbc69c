"""OpenAI's Responses API (`POST /v1/responses`), as the bridge serves it (Codex CLI's API).

A request's `instructions` and its `input` become the conversation. `input` is a string
(one user message) or items: messages (role `user`, `system`, `developer` or `assistant`;
content a string or `input_text` / `output_text` / `refusal` / `input_image` parts),
`function_call`s and `function_call_output`s (by `call_id`; an output a string or
`input_text` / `input_image` parts, its images following the result in the user turn),
`custom_tool_call`s and their outputs (a freeform tool's `input`), `local_shell_call`s,
client-run `tool_search_call`s and their outputs (whose tools join the offered ones),
`additional_tools`, and `reasoning` items: one the bridge sealed (`encrypted_content`,
`seal_thinking`) is the model's `ContentThinking` again; another is its summary's text.
System and developer messages join the system prompt, after `instructions`. Items on the
same side in a row are one turn. Items that carry no conversation (`web_search_call`,
`configuration_update`, `ghost_snapshot`, types this module does not know that hold no
content) are skipped; an item whose content the bridge cannot pass on (an `item_reference`
or OpenAI's encrypted `compaction`, an `input_file` by `file_id` or `file_url`) is refused;
an `input_file`'s `file_data` is a `ContentDocument`.

Tools: `function` tools as they are; `custom` (freeform) tools as a tool taking one string
`input` (its grammar in that parameter's description); the function tools of a `namespace`
as `<namespace>__<name>` (no `__` after a namespace ending in `_`); `local_shell` as a
tool taking the exec action's fields; a client-run `tool_search` as its function. Hosted
tools (`web_search`, `image_generation`, `file_search` ...) are not offered: the bridge
cannot run them. Which tool names were custom, namespaced or built in is kept in the
`AgentRequest`'s `extra`, so that `reply(turn, model=, request=)` writes their calls back
as `custom_tool_call`, namespaced `function_call`, `local_shell_call` or
`tool_search_call` items.

`max_output_tokens` is the output limit; `text.format` with a JSON schema the output
schema; `previous_response_id` is refused (the bridge keeps no responses: send the whole
input, with `store: false`); every other field (`include`, `store`, `reasoning`,
`prompt_cache_key`, `client_metadata`, `service_tier`, `parallel_tool_calls` ...) is
accepted and ignored.

The reply is a `response` (status `completed`, or `incomplete` with its reason when the
model stopped at its limit or a content filter) with `reasoning`, `message` and call items
and the usage `providers/openai_responses.py` reads back as the same `TokenUsage`;
streamed, it is the API's named events with their `sequence_number`, ending with
`response.completed` (or `response.incomplete`).

Example:
    >>> asked = ResponsesApi().read({"model": "gpt-5", "instructions": "Be brief.", "input": "Hi"})
    >>> asked.request.system_prompt, asked.request.turns[0].text
    ('Be brief.', 'Hi')
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from ..vocab.model_calls import ChatRequest, ToolDef
from ..vocab.turns import (
    Content,
    ContentText,
    ContentThinking,
    ContentToolRequest,
    ContentToolResult,
    TokenUsage,
    Turn,
)
from .chat_completions_api import (
    EMPTY_PARAMETERS,
    Conversation,
    bool_field,
    decode_arguments,
    document_from_data,
    encode_arguments,
    fragments,
    image_from_url,
    int_field,
    model_field,
    openai_error,
    text_pieces,
)
from .wire import AgentRequest, ApiFormat, WireError, seal_thinking, unseal_thinking

__all__ = ["ResponsesApi"]

_LOCAL_SHELL = "local_shell"
_TOOL_SEARCH = "tool_search"
_LOCAL_SHELL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}},
        "timeout_ms": {"type": "integer"},
        "working_directory": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "user": {"type": "string"},
    },
    "required": ["command"],
}
#: Input items that carry no conversation the bridge can pass on, and lose none: skipped.
_SKIPPED = frozenset(
    ("web_search_call", "configuration_update", "compaction_trigger", "ghost_snapshot")
)
#: Input items whose content no provider but OpenAI could read: refused, with why.
_REFUSED = {
    "item_reference": "refers to a stored item, and the bridge stores none",
    "compaction": "is OpenAI's encrypted summary of the conversation",
    "compaction_summary": "is OpenAI's encrypted summary of the conversation",
    "context_compaction": "is OpenAI's encrypted summary of the conversation",
    "image_generation_call": "holds an image OpenAI's hosted tool made",
    "file_search_call": "holds results of OpenAI's hosted file search",
    "code_interpreter_call": "holds a run of OpenAI's hosted code interpreter",
    "computer_call": "is a call of OpenAI's hosted computer-use tool",
    "computer_call_output": "answers a call of OpenAI's hosted computer-use tool",
}
#: Keys that hold conversation in an item this module does not know: such an item is
#: refused rather than dropped.
_CONTENT_KEYS = (
    "content",
    "output",
    "input",
    "arguments",
    "text",
    "summary",
    "result",
    "action",
    "encrypted_content",
)
_INCOMPLETE = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _flat_name(namespace: str, name: str) -> str:
    """A namespaced tool's name for the model: `ns__name` (`ns_name` after a trailing `_`)."""
    return f"{namespace}{name}" if namespace.endswith("_") else f"{namespace}__{name}"


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise WireError(f"Missing required parameter: '{where}.{key}'.")
    return value


# -- tools ----------------------------------------------------------------------------------


class _Tools:
    """The tools a request offers, for the model (`defs`), and how each non-function tool's
    calls are written back (`kinds`: custom, local_shell, tool_search; `namespaced`: the
    namespace and name behind a flattened name)."""

    def __init__(self) -> None:
        self.defs: dict[str, ToolDef] = {}
        self.kinds: dict[str, str] = {}
        self.namespaced: dict[str, list[str]] = {}

    def read(self, tools: Any, where: str = "tools") -> None:
        if tools is None:
            return
        if not isinstance(tools, list):
            raise WireError(f"'{where}' must be an array.")
        for i, tool in enumerate(tools):
            self.add(tool, f"{where}[{i}]")

    def add(self, tool: Any, where: str) -> None:
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise WireError(f"{where} must be an object with a 'type'.")
        kind = tool["type"]
        if kind == "function":
            self._function(tool, where)
        elif kind == "custom":
            self._custom(tool, where)
        elif kind == "namespace":
            self._namespace(tool, where)
        elif kind == _LOCAL_SHELL:
            description = "Runs a command on the user's machine and returns its output."
            self._offer(_LOCAL_SHELL, description, _LOCAL_SHELL_PARAMETERS, _LOCAL_SHELL)
        elif kind == _TOOL_SEARCH and tool.get("execution", "client") == "client":
            parameters = tool.get("parameters")
            description = tool.get("description")
            self._offer(
                _TOOL_SEARCH,
                description if isinstance(description, str) else "Finds more tools.",
                parameters if isinstance(parameters, dict) else dict(EMPTY_PARAMETERS),
                _TOOL_SEARCH,
            )
        # Hosted tools (web_search, image_generation, file_search ...) and types unknown
        # here are not offered: the bridge cannot run them, and leaving a tool out loses
        # no conversation.

    def _offer(self, name: str, description: str, parameters: dict[str, Any], kind: str) -> None:
        self.defs[name] = ToolDef(name, description, parameters)
        if kind != "function":
            self.kinds[name] = kind

    def _function(self, tool: dict[str, Any], where: str, namespace: str | None = None) -> None:
        name = _string(tool, "name", where)
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise WireError(f"{where}.parameters must be an object.")
        description = tool.get("description")
        description = description if isinstance(description, str) else ""
        if namespace is not None:
            flat = _flat_name(namespace, name)
            self.namespaced[flat] = [namespace, name]
            name = flat
        self._offer(name, description, parameters or dict(EMPTY_PARAMETERS), "function")

    def _custom(self, tool: dict[str, Any], where: str) -> None:
        name = _string(tool, "name", where)
        about = "The tool's input, as free text."
        fmt = tool.get("format")
        if isinstance(fmt, dict) and fmt.get("type") == "grammar":
            about = (
                f"The tool's input, as free text that must match this "
                f"{fmt.get('syntax') or ''} grammar:\n{fmt.get('definition') or ''}"
            )
        parameters = {
            "type": "object",
            "properties": {"input": {"type": "string", "description": about}},
            "required": ["input"],
        }
        description = tool.get("description")
        self._offer(name, description if isinstance(description, str) else "", parameters, "custom")

    def _namespace(self, tool: dict[str, Any], where: str) -> None:
        namespace = _string(tool, "name", where)
        inner = tool.get("tools")
        if not isinstance(inner, list):
            raise WireError(f"{where}.tools must be an array.")
        for j, function in enumerate(inner):
            at = f"{where}.tools[{j}]"
            if not isinstance(function, dict) or function.get("type", "function") != "function":
                raise WireError(f"{at}: a namespace holds function tools.")
            self._function(function, at, namespace)

    def extra(self) -> dict[str, Any]:
        """What `reply()` needs of them, for the `AgentRequest`'s `extra`."""
        extra: dict[str, Any] = {}
        if self.kinds:
            extra["tool_kinds"] = dict(self.kinds)
        if self.namespaced:
            extra["namespaced_tools"] = dict(self.namespaced)
        return extra


# -- input ----------------------------------------------------------------------------------


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    if not isinstance(content, list):
        raise WireError(f"{where} must be a string or an array of parts.")
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise WireError(f"{where}[{j}] must be an object with a 'type'.")
    return content


def _contents(content: Any, where: str, *, images: bool) -> list[Content]:
    """The text (and, where `images`, image) contents of a message's or output's parts."""
    contents: list[Content] = []
    for j, part in enumerate(_parts(content, where)):
        at, kind = f"{where}[{j}]", part["type"]
        if kind in ("input_text", "output_text", "text", "refusal"):
            text = part.get("refusal" if kind == "refusal" else "text")
            if not isinstance(text, str):
                raise WireError(f"{at}: a {kind} part needs its text.")
            if text:
                contents.append(ContentText(text))
        elif kind == "input_image" and images:
            if not part.get("image_url") and part.get("file_id"):
                raise WireError(f"{at}: the bridge cannot fetch an uploaded file (file_id).")
            contents.append(image_from_url(part.get("image_url"), part.get("detail"), where=at))
        elif kind == "input_file" and images:
            data, name = part.get("file_data"), part.get("filename")
            contents.append(document_from_data(data, name, where=at))
        else:
            raise WireError(f"{at}: the bridge cannot pass on a {kind!r} part here.")
    return contents


def _thinking(item: dict[str, Any]) -> ContentThinking | None:
    """A reasoning item as the model's thinking: the one the bridge sealed, or its text."""
    sealed = unseal_thinking(item.get("encrypted_content"))
    if sealed is not None:
        return sealed
    texts: list[str] = []
    for key in ("summary", "content"):
        for part in item.get(key) or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]:
                texts.append(part["text"])
        if texts:
            break
    item_id = item.get("id")
    return ContentThinking("\n\n".join(texts), id=item_id if isinstance(item_id, str) else None)


class _Input:
    """A request's `input` items read into a conversation; the tools they add (tool search
    outputs, `additional_tools`) join `tools`."""

    def __init__(self, tools: _Tools) -> None:
        self.convo = Conversation()
        self.tools = tools

    def read(self, value: Any) -> None:
        if isinstance(value, str):
            self.convo.add("user", [ContentText(value)] if value else [])
            return
        if not isinstance(value, list):
            raise WireError("Missing required parameter: 'input' (a string or an array).")
        for i, item in enumerate(value):
            where = f"input[{i}]"
            if not isinstance(item, dict):
                raise WireError(f"{where} must be an object.")
            self.item(item, where)

    def item(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type", "message" if "role" in item else None)
        reader = _ITEM_READERS.get(kind)  # type: ignore[arg-type]
        if reader is not None:
            reader(self, item, where)
        elif kind in _REFUSED:
            raise WireError(
                f"{where}: a {kind} item {_REFUSED[kind]}: the bridge cannot pass it on."
            )
        elif kind in _SKIPPED or not any(item.get(key) for key in _CONTENT_KEYS):
            return
        else:
            raise WireError(f"{where}: the bridge cannot read a {kind!r} item.")

    def message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        at = f"{where}.content"
        if role in ("system", "developer"):
            for part in _contents(item.get("content"), at, images=False):
                if isinstance(part, ContentText):
                    self.convo.system.append(part.text)
        elif role == "user":
            self.convo.add("user", _contents(item.get("content"), at, images=True))
        elif role == "assistant":
            self.convo.add("assistant", _contents(item.get("content"), at, images=False))
        else:
            raise WireError(f"{where}.role: {role!r} is not user, assistant, system or developer.")

    def reasoning(self, item: dict[str, Any], where: str) -> None:
        thinking = _thinking(item)
        if thinking is not None and (thinking.thinking or thinking.signature):
            self.convo.add("assistant", [thinking])

    def call(self, item: dict[str, Any], where: str) -> None:
        """A `function_call` (its name flattened when it names a namespace)."""
        name = _string(item, "name", where)
        namespace = item.get("namespace")
        if isinstance(namespace, str) and namespace:
            name = _flat_name(namespace, name)
        arguments = decode_arguments(item.get("arguments"), f"{where}.arguments")
        request = ContentToolRequest(_string(item, "call_id", where), name, arguments)
        self.convo.add("assistant", [self.convo.call(request)])

    def custom_call(self, item: dict[str, Any], where: str) -> None:
        text = item.get("input")
        if not isinstance(text, str):
            raise WireError(f"Missing required parameter: '{where}.input'.")
        call_id, name = _string(item, "call_id", where), _string(item, "name", where)
        request = ContentToolRequest(call_id, name, {"input": text})
        self.convo.add("assistant", [self.convo.call(request)])

    def shell_call(self, item: dict[str, Any], where: str) -> None:
        call_id = item.get("call_id") or item.get("id")
        action = item.get("action")
        if not isinstance(call_id, str) or not isinstance(action, dict):
            raise WireError(f"{where}: a local_shell_call needs a call_id and an action.")
        arguments = {k: v for k, v in action.items() if k != "type" and v is not None}
        request = ContentToolRequest(call_id, _LOCAL_SHELL, arguments)
        self.convo.add("assistant", [self.convo.call(request)])

    def search_call(self, item: dict[str, Any], where: str) -> None:
        if item.get("execution", "client") != "client":
            return  # OpenAI's own search, with its own output: nothing of the model's
        arguments = decode_arguments(item.get("arguments"), f"{where}.arguments")
        request = ContentToolRequest(_string(item, "call_id", where), _TOOL_SEARCH, arguments)
        self.convo.add("assistant", [self.convo.call(request)])

    def output(self, item: dict[str, Any], where: str) -> None:
        """A function's, custom tool's or local shell's output: the result, then the
        images it returned."""
        call_id = item.get("call_id")
        name = self.convo.name_of(call_id, where)
        value = item.get("output")
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            value = value["content"]  # an older client's {content, success}
        contents = (
            [] if isinstance(value, str) else _contents(value, f"{where}.output", images=True)
        )
        if not isinstance(value, str):
            value = "\n".join(c.text for c in contents if isinstance(c, ContentText))
        images = [c for c in contents if not isinstance(c, ContentText)]
        self.convo.add("user", [ContentToolResult(str(call_id), name, value=value), *images])

    def search_output(self, item: dict[str, Any], where: str) -> None:
        if item.get("execution", "client") != "client":
            return
        tools = item.get("tools") or []
        self.tools.read(tools, f"{where}.tools")
        call_id = item.get("call_id")
        name = self.convo.name_of(call_id, where)
        self.convo.add("user", [ContentToolResult(str(call_id), name, value=tools)])

    def additional_tools(self, item: dict[str, Any], where: str) -> None:
        self.tools.read(item.get("tools"), f"{where}.tools")


_ITEM_READERS: dict[str, Callable[[_Input, dict[str, Any], str], None]] = {
    "message": _Input.message,
    "reasoning": _Input.reasoning,
    "function_call": _Input.call,
    "custom_tool_call": _Input.custom_call,
    "local_shell_call": _Input.shell_call,
    "tool_search_call": _Input.search_call,
    "function_call_output": _Input.output,
    "custom_tool_call_output": _Input.output,
    "local_shell_call_output": _Input.output,
    "tool_search_output": _Input.search_output,
    "additional_tools": _Input.additional_tools,
}


def _output_schema(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    return None


# -- the reply ------------------------------------------------------------------------------


def _usage(tokens: TokenUsage | None) -> dict[str, Any]:
    """The Responses API's usage block for `tokens`: what `providers/openai_responses.py`
    reads back as the same `TokenUsage` (web searches aside: it counts them from output
    items, which the bridge does not make up)."""
    tokens = tokens or TokenUsage()
    prompt = tokens.input + tokens.cached_input + tokens.cache_write
    details: dict[str, Any] = {"cached_tokens": tokens.cached_input}
    if tokens.cache_write:
        details["cache_write_tokens"] = tokens.cache_write
    return {
        "input_tokens": prompt,
        "input_tokens_details": details,
        "output_tokens": tokens.output,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning},
        "total_tokens": prompt + tokens.output,
    }


def _reasoning_item(thinking: ContentThinking) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": thinking.thinking}] if thinking.thinking else []
    return {
        "id": thinking.id or _new_id("rs"),
        "type": "reasoning",
        "summary": summary,
        "encrypted_content": seal_thinking(thinking),
    }


def _message_item(texts: list[str], status: str) -> dict[str, Any]:
    return {
        "id": _new_id("msg"),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": t, "annotations": []} for t in texts],
    }


def _call_item(call: ContentToolRequest, extra: dict[str, Any]) -> dict[str, Any]:
    """A tool call as the item its tool's kind is called with."""
    kind = (extra.get("tool_kinds") or {}).get(call.name)
    head = {"call_id": call.id, "status": "completed"}
    if kind == "custom":
        text = call.arguments.get("input")
        text = text if isinstance(text, str) else encode_arguments(call.arguments)
        return {
            "id": _new_id("ctc"),
            "type": "custom_tool_call",
            **head,
            "name": call.name,
            "input": text,
        }
    if kind == _LOCAL_SHELL:
        action = {"type": "exec", **call.arguments}
        return {"id": _new_id("lsh"), "type": "local_shell_call", **head, "action": action}
    if kind == _TOOL_SEARCH:
        arguments = dict(call.arguments)
        return {
            "id": _new_id("tsc"),
            "type": "tool_search_call",
            **head,
            "execution": "client",
            "arguments": arguments,
        }
    item = {"id": _new_id("fc"), "type": "function_call", **head, "name": call.name}
    namespaced = (extra.get("namespaced_tools") or {}).get(call.name)
    if namespaced:
        item["namespace"], item["name"] = namespaced
    item["arguments"] = encode_arguments(call.arguments)
    return item


def _output(turn: Turn, extra: dict[str, Any], status: str) -> list[dict[str, Any]]:
    """The response's output items for `turn`'s contents, in order (texts in a row one
    message)."""
    items: list[dict[str, Any]] = []
    texts: list[str] = []
    for content in turn.contents:
        if isinstance(content, ContentText):
            if content.text:
                texts.append(content.text)
            continue
        if texts:
            items.append(_message_item(texts, status))
            texts = []
        if isinstance(content, ContentThinking):
            items.append(_reasoning_item(content))
        elif isinstance(content, ContentToolRequest):
            items.append(_call_item(content, extra))
    if texts:
        items.append(_message_item(texts, status))
    return items


class _Events:
    """The named events of one streamed response, numbered."""

    def __init__(self) -> None:
        self.encoded: list[bytes] = []

    def emit(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": len(self.encoded), **fields}
        self.encoded.append(
            b"event: " + kind.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"
        )


def _reasoning_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    at = {"item_id": item["id"], "output_index": index}
    events.emit("response.output_item.added", output_index=index, item={**item, "summary": []})
    for s, part in enumerate(item["summary"]):
        events.emit(
            "response.reasoning_summary_part.added",
            **at,
            summary_index=s,
            part={**part, "text": ""},
        )
        for piece in text_pieces(part["text"]):
            events.emit("response.reasoning_summary_text.delta", **at, summary_index=s, delta=piece)
        events.emit(
            "response.reasoning_summary_text.done", **at, summary_index=s, text=part["text"]
        )
        events.emit("response.reasoning_summary_part.done", **at, summary_index=s, part=part)


def _message_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    at = {"item_id": item["id"], "output_index": index}
    added = {**item, "status": "in_progress", "content": []}
    events.emit("response.output_item.added", output_index=index, item=added)
    for c, part in enumerate(item["content"]):
        where = {**at, "content_index": c}
        events.emit("response.content_part.added", **where, part={**part, "text": ""})
        for piece in text_pieces(part["text"]):
            events.emit("response.output_text.delta", **where, delta=piece, logprobs=[])
        events.emit("response.output_text.done", **where, text=part["text"], logprobs=[])
        events.emit("response.content_part.done", **where, part=part)


def _call_events(events: _Events, index: int, item: dict[str, Any]) -> None:
    at = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        events.emit("response.output_item.added", output_index=index, item=added)
        for fragment in fragments(item["arguments"]):
            events.emit("response.function_call_arguments.delta", **at, delta=fragment)
        events.emit(
            "response.function_call_arguments.done",
            **at,
            name=item["name"],
            arguments=item["arguments"],
        )
    elif kind == "custom_tool_call":
        added = {**item, "status": "in_progress", "input": ""}
        events.emit("response.output_item.added", output_index=index, item=added)
        for fragment in fragments(item["input"]):
            events.emit("response.custom_tool_call_input.delta", **at, delta=fragment)
        events.emit("response.custom_tool_call_input.done", **at, input=item["input"])
    else:
        added = {**item, "status": "in_progress"}
        events.emit("response.output_item.added", output_index=index, item=added)


_ITEM_EVENTS: dict[str, Callable[[_Events, int, dict[str, Any]], None]] = {
    "reasoning": _reasoning_events,
    "message": _message_events,
}


class ResponsesApi(ApiFormat):
    """OpenAI's Responses API, served.

    Example:
        >>> body = ResponsesApi().reply(Turn("assistant", [ContentText("4")]), model="m")
        >>> body["status"], body["output"][0]["content"][0]["text"]
        ('completed', '4')
    """

    name: ClassVar[str] = "responses"
    path: ClassVar[str] = "/v1/responses"

    def read(self, body: Any) -> AgentRequest:
        """The request as an `AgentRequest` (its `extra` says how to write the calls of
        custom, namespaced and built-in tools back); `WireError` for a malformed one or a
        `previous_response_id`.

        Example:
            >>> ResponsesApi().read({"model": "m", "input": []}).request.turns
            []
        """
        if not isinstance(body, dict):
            raise WireError("The request body must be a JSON object.")
        model = model_field(body)
        if body.get("previous_response_id") is not None:
            raise WireError(
                "The bridge keeps no responses, so it cannot continue one by "
                "'previous_response_id': send the whole conversation as 'input', with "
                "store=false."
            )
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise WireError("'instructions' must be a string.")
        tools = _Tools()
        tools.read(body.get("tools"))
        items = _Input(tools)
        items.read(body.get("input"))
        system = "\n\n".join(part for part in (instructions, items.convo.system_prompt()) if part)
        request = ChatRequest(
            items.convo.turns(),
            system_prompt=system or None,
            tools=list(tools.defs.values()),
            output_schema=_output_schema(body.get("text")),
        )
        stream = bool_field(body, "stream")
        limit = int_field(body, "max_output_tokens")
        return AgentRequest(request, model, stream, limit, extra=tools.extra())

    def reply(
        self, turn: Turn, *, model: str, request: AgentRequest | None = None
    ) -> dict[str, Any]:
        """The `response` for `turn`; `request` (as `read()` gave it) says which tools'
        calls are written as their own item types.

        Example:
            >>> ResponsesApi().reply(Turn("assistant", []), model="m")["object"]
            'response'
        """
        reason = _INCOMPLETE.get(turn.finish_reason or "")
        status = "incomplete" if reason else "completed"
        extra = request.extra if request is not None else {}
        body: dict[str, Any] = {
            "id": _new_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "error": None,
            "incomplete_details": {"reason": reason} if reason else None,
            "model": model,
            "output": _output(turn, extra, status),
            "usage": _usage(turn.tokens),
        }
        if turn.service_tier:
            body["service_tier"] = turn.service_tier
        return body

    def stream(self, turn: Turn, *, model: str, request: AgentRequest | None = None) -> list[bytes]:
        """The reply as the API's named events, `response.created` to `response.completed`.

        Example:
            >>> ResponsesApi().stream(Turn("assistant", []), model="m")[-1][:32]
            b'event: response.completed\\ndata: '
        """
        whole = self.reply(turn, model=model, request=request)
        opening = {**whole, "status": "in_progress", "incomplete_details": None}
        opening.update(output=[], usage=None)
        events = _Events()
        events.emit("response.created", response=opening)
        events.emit("response.in_progress", response=opening)
        for index, item in enumerate(whole["output"]):
            _ITEM_EVENTS.get(item["type"], _call_events)(events, index, item)
            events.emit("response.output_item.done", output_index=index, item=item)
        final = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
        events.emit(final, response=whole)
        return events.encoded

    def error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's error body (as Chat Completions writes it).

        Example:
            >>> ResponsesApi().error(404, "No such model.")["error"]["type"]
            'not_found_error'
        """
        return openai_error(status, message)
