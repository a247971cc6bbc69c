"""OpenAI's Chat Completions API (`POST /v1/chat/completions`), as the bridge serves it.

A request's `messages` become the conversation: `system` and `developer` messages the
system prompt (their parts joined by blank lines, wherever they stand), `user` messages (a
string, or `text` and `image_url` parts: a URL or a `data:` URI, and `file` parts: a
document's `file_data` as a `data:` URI) user turns, `assistant`
messages (their text, their `tool_calls`, arguments a JSON string, and the
`reasoning_content` some servers send back) assistant turns, and `tool` messages
(`tool_call_id`, the text it returned) tool results, named by the assistant's call they
answer. Messages that come in a row on the same side are one turn, as our providers write
them: tool results and the user text after them are one user turn. `tools` of type
`function` are the tools (tools of other types are not offered); `max_completion_tokens`
(or `max_tokens`) the output limit; a `response_format` with a JSON schema (or
`json_object`) the output schema. Every other field (`temperature`, `stream_options`,
`parallel_tool_calls`, `reasoning_effort`, `seed` ...) is accepted and ignored.

The reply is a `chat.completion` whose usage is the exact inverse of how
`providers/openai.py` reads it; streamed, it is `chat.completion.chunk` events: the role,
the reasoning and text in a few deltas, each tool call opened by its index, id and name
with its arguments in fragments, the finish reason, a chunk with the usage and no
choices, and `data: [DONE]`.

The helpers both OpenAI formats share (`openai_error`, `text_pieces`, `image_from_url`,
the arguments' JSON, `Conversation`) are public here, for `responses_api`.

Example:
    >>> api = ChatCompletionsApi()
    >>> asked = api.read({"model": "gpt-5", "messages": [{"role": "user", "content": "Hi"}]})
    >>> asked.request.turns[0].text, asked.model, asked.stream
    ('Hi', 'gpt-5', False)
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import msgspec

from ..vocab.model_calls import ChatRequest, ToolDef
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
from .wire import AgentRequest, ApiFormat, WireError

__all__ = [
    "EMPTY_PARAMETERS",
    "ChatCompletionsApi",
    "Conversation",
    "bool_field",
    "decode_arguments",
    "document_from_data",
    "encode_arguments",
    "fragments",
    "image_from_url",
    "int_field",
    "model_field",
    "openai_error",
    "text_pieces",
]

#: The parameters of a tool that declares none.
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
_FINISH = {
    "stop": "stop",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}
#: An error's `type` and `code` by HTTP status, as OpenAI names them.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("not_found_error", None),
    429: ("requests", "rate_limit_exceeded"),
}
_WORDS = re.compile(r"\S+\s*|\s+")
_DATA_URI = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)(?:;[^,;]*)*;base64,(?P<data>.*)\Z", re.S)
_DETAILS = ("auto", "low", "high")
_UNPARSED = "_unparsed"


# -- what both OpenAI formats share ---------------------------------------------------------


def openai_error(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error body for a failure of HTTP `status` (both of its APIs write it).

    Example:
        >>> openai_error(429, "Slow down.")["error"]["code"]
        'rate_limit_exceeded'
    """
    kind, code = _ERRORS.get(status) or (
        ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    )
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def text_pieces(text: str, most: int = 6) -> list[str]:
    """`text` cut at word boundaries into a few pieces (at most `most`), as a stream's
    deltas carry it; joined, they are `text`.

    Example:
        >>> text_pieces("two and two make four", most=3)
        ['two and ', 'two make ', 'four']
    """
    words = _WORDS.findall(text)
    if not words:
        return []
    size = -(-len(words) // most)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def fragments(text: str, count: int = 3) -> list[str]:
    """`text` (a tool call's JSON arguments) cut anywhere into `count` fragments.

    Example:
        >>> fragments('{"a": 1}', 2)
        ['{"a"', ': 1}']
    """
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def image_from_url(url: Any, detail: Any = None, *, where: str = "image_url") -> ContentImage:
    """The image an `image_url` names: inline for a base64 `data:` URI, else remote.

    Example:
        >>> image_from_url("data:image/png;base64,iVBO").data
        'iVBO'
    """
    if not isinstance(url, str) or not url:
        raise WireError(f"{where}: an image needs a URL or a data: URI.")
    level = detail if detail in _DETAILS else "auto"
    match = _DATA_URI.match(url)
    if match:
        return ContentImage(data=match["data"], media_type=match["type"], detail=level)
    return ContentImage(url=url, detail=level)


def document_from_data(
    file_data: Any, filename: Any = None, *, where: str = "file"
) -> ContentDocument:
    """The document a `file_data` holds (a base64 `data:` URI), with its file name.

    Example:
        >>> document_from_data("data:application/pdf;base64,JVBERi0=", "a.pdf").filename
        'a.pdf'
    """
    match = _DATA_URI.match(file_data) if isinstance(file_data, str) else None
    if match is None:
        raise WireError(
            f"{where}: the bridge takes a file as its file_data, a base64 data: URI "
            "(it cannot fetch an uploaded file_id or a file_url)."
        )
    name = filename if isinstance(filename, str) and filename else None
    return ContentDocument(match["data"], match["type"], name)


def decode_arguments(raw: Any, where: str = "arguments") -> dict[str, Any]:
    """A tool call's arguments, from the JSON string the API carries them as; a string
    that is not a JSON object is kept as `{"_unparsed": raw}`, as our providers read it.

    Example:
        >>> decode_arguments('{"a": 1}'), decode_arguments("oops")
        ({'a': 1}, {'_unparsed': 'oops'})
    """
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str):
        raise WireError(f"{where} must be a JSON string.")
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return {_UNPARSED: raw}
    return value if isinstance(value, dict) else {_UNPARSED: raw}


def encode_arguments(arguments: dict[str, Any]) -> str:
    """The JSON string of a tool call's arguments (the model's own text, for arguments
    it wrote that were not JSON).

    Example:
        >>> encode_arguments({"a": 1}), encode_arguments({"_unparsed": "oops"})
        ('{"a":1}', 'oops')
    """
    if len(arguments) == 1 and isinstance(arguments.get(_UNPARSED), str):
        return arguments[_UNPARSED]
    return msgspec.json.encode(arguments).decode()


def int_field(body: dict[str, Any], name: str) -> int | None:
    """The integer field `name` of `body` (None if absent); `WireError` if it is no integer.

    Example:
        >>> int_field({"max_tokens": 64}, "max_tokens")
        64
    """
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"'{name}' must be an integer, not {value!r}.")
    return value


def bool_field(body: dict[str, Any], name: str) -> bool:
    """The boolean field `name` of `body` (False if absent); `WireError` if it is no boolean.

    Example:
        >>> bool_field({"stream": True}, "stream")
        True
    """
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise WireError(f"'{name}' must be a boolean, not {value!r}.")
    return value


def model_field(body: dict[str, Any]) -> str:
    """The model a request names; `WireError` if it names none.

    Example:
        >>> model_field({"model": "gpt-5"})
        'gpt-5'
    """
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise WireError("Missing required parameter: 'model'.")
    return model


class Conversation:
    """Turns read from a request, in order: contents on the same side as the last turn's
    join it (a run of tool results and the user's text after them are one user turn); the
    system prompt's parts; the names of the tool calls read so far, by id, for the results
    that answer them.

    Example:
        >>> convo = Conversation()
        >>> convo.add("user", [ContentText("Hi")])
        >>> convo.add("user", [ContentText("there")])
        >>> [turn.text for turn in convo.turns()]
        ['Hithere']
    """

    def __init__(self) -> None:
        self._turns: list[tuple[str, list[Content]]] = []
        self.system: list[str] = []
        self.calls: dict[str, str] = {}

    def add(self, role: str, contents: Sequence[Content]) -> None:
        """Add `contents` on `role`'s side (nothing, for none)."""
        if not contents:
            return
        if self._turns and self._turns[-1][0] == role:
            self._turns[-1][1].extend(contents)
        else:
            self._turns.append((role, list(contents)))

    def call(self, request: ContentToolRequest) -> ContentToolRequest:
        """Note a tool call's name by its id; returns it."""
        self.calls[request.id] = request.name
        return request

    def name_of(self, call_id: Any, where: str) -> str:
        """The name of the tool call `call_id` answers; `WireError` if none was read."""
        if not isinstance(call_id, str) or not call_id:
            raise WireError(f"{where}: a tool result needs the id of the call it answers.")
        name = self.calls.get(call_id)
        if name is None:
            raise WireError(f"{where}: no tool call with id {call_id!r} precedes this result.")
        return name

    def turns(self) -> list[Turn]:
        """The turns read."""
        return [Turn(role, contents) for role, contents in self._turns]  # type: ignore[arg-type]

    def system_prompt(self) -> str | None:
        """The system prompt's parts joined by blank lines (None: none)."""
        return "\n\n".join(self.system) or None


def _usage(tokens: TokenUsage | None) -> dict[str, Any]:
    """Chat Completions' usage block for `tokens`: what `providers/openai.py` reads back
    as the same `TokenUsage`."""
    tokens = tokens or TokenUsage()
    prompt = tokens.input + tokens.cached_input + tokens.cache_write
    details: dict[str, Any] = {"cached_tokens": tokens.cached_input}
    if tokens.cache_write:
        details["cache_write_tokens"] = tokens.cache_write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": tokens.output,
        "total_tokens": prompt + tokens.output,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": tokens.reasoning},
    }


def _finish_reason(turn: Turn) -> str:
    if turn.tool_requests:
        return "tool_calls"
    return _FINISH.get(turn.finish_reason or "", "stop")


def _thinking(turn: Turn) -> str:
    return "\n\n".join(
        c.thinking for c in turn.contents if isinstance(c, ContentThinking) and c.thinking
    )


# -- reading a request ----------------------------------------------------------------------


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    """A message's content as parts: a string is one text part; None is none."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise WireError(f"{where}.content must be a string or an array of parts.")
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise WireError(f"{where}.content[{j}] must be an object with a 'type'.")
    return content


def _part_text(part: dict[str, Any], where: str) -> str:
    text = part.get("refusal") if part["type"] == "refusal" else part.get("text")
    if not isinstance(text, str):
        raise WireError(f"{where}: a {part['type']} part needs its text.")
    return text


def _texts(content: Any, where: str) -> list[str]:
    """The texts of content that may hold only text (system, developer and tool messages)."""
    texts: list[str] = []
    for j, part in enumerate(_parts(content, where)):
        if part["type"] != "text":
            raise WireError(f"{where}.content[{j}]: only text parts are allowed here.")
        texts.append(_part_text(part, f"{where}.content[{j}]"))
    return texts


def _user_contents(content: Any, where: str) -> list[Content]:
    contents: list[Content] = []
    for j, part in enumerate(_parts(content, where)):
        at = f"{where}.content[{j}]"
        if part["type"] == "text":
            text = _part_text(part, at)
            if text:
                contents.append(ContentText(text))
        elif part["type"] == "image_url":
            image = part.get("image_url")
            if isinstance(image, dict):
                contents.append(image_from_url(image.get("url"), image.get("detail"), where=at))
            else:
                contents.append(image_from_url(image, where=at))
        elif part["type"] == "file":
            file: dict[str, Any] = part["file"] if isinstance(part.get("file"), dict) else {}
            data, name = file.get("file_data"), file.get("filename")
            contents.append(document_from_data(data, name, where=at))
        else:
            raise WireError(f"{at}: the bridge cannot pass on a {part['type']!r} part.")
    return contents


def _tool_call(call: Any, where: str) -> ContentToolRequest:
    if not isinstance(call, dict):
        raise WireError(f"{where} must be an object.")
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise WireError(f"{where}.function needs a name.")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise WireError(f"{where} needs an id.")
    arguments = decode_arguments(function.get("arguments"), f"{where}.function.arguments")
    return ContentToolRequest(call_id, function["name"], arguments)


def _read_system(convo: Conversation, message: dict[str, Any], where: str) -> None:
    convo.system.extend(text for text in _texts(message.get("content"), where) if text)


def _read_user(convo: Conversation, message: dict[str, Any], where: str) -> None:
    convo.add("user", _user_contents(message.get("content"), where))


def _read_assistant(convo: Conversation, message: dict[str, Any], where: str) -> None:
    contents: list[Content] = []
    for key in ("reasoning_content", "reasoning"):
        reasoning = message.get(key)
        if isinstance(reasoning, str) and reasoning:
            contents.append(ContentThinking(reasoning))
            break
    for j, part in enumerate(_parts(message.get("content"), where)):
        if part["type"] not in ("text", "refusal"):
            raise WireError(f"{where}.content[{j}]: an assistant message holds only text.")
        text = _part_text(part, f"{where}.content[{j}]")
        if text:
            contents.append(ContentText(text))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        contents.append(ContentText(refusal))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise WireError(f"{where}.tool_calls must be an array.")
    for j, call in enumerate(calls):
        contents.append(convo.call(_tool_call(call, f"{where}.tool_calls[{j}]")))
    convo.add("assistant", contents)


def _read_tool(convo: Conversation, message: dict[str, Any], where: str) -> None:
    call_id = message.get("tool_call_id")
    name = convo.name_of(call_id, where)
    text = "".join(_texts(message.get("content"), where))
    convo.add("user", [ContentToolResult(str(call_id), name, value=text)])


_READERS: dict[str, Callable[[Conversation, dict[str, Any], str], None]] = {
    "system": _read_system,
    "developer": _read_system,
    "user": _read_user,
    "assistant": _read_assistant,
    "tool": _read_tool,
}


def _read_messages(messages: Any) -> Conversation:
    if not isinstance(messages, list):
        raise WireError("Missing required parameter: 'messages' (an array of messages).")
    convo = Conversation()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise WireError(f"{where} must be an object.")
        reader = _READERS.get(message.get("role"))  # type: ignore[arg-type]
        if reader is None:
            roles = ", ".join(_READERS)
            raise WireError(f"{where}.role: {message.get('role')!r} is not one of {roles}.")
        reader(convo, message, where)
    return convo


def _read_tools(tools: Any) -> list[ToolDef]:
    """The function tools; tools of other types are not offered to the model."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise WireError("'tools' must be an array.")
    defs: list[ToolDef] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise WireError(f"tools[{i}] must be an object.")
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise WireError(f"Missing required parameter: 'tools[{i}].function.name'.")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise WireError(f"tools[{i}].function.parameters must be an object.")
        description = function.get("description")
        defs.append(
            ToolDef(
                function["name"],
                description if isinstance(description, str) else "",
                parameters or dict(EMPTY_PARAMETERS),
            )
        )
    return defs


def _output_schema(response_format: Any) -> dict[str, Any] | None:
    """The schema a `response_format` asks the reply to follow (None: free text)."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        return schema if isinstance(schema, dict) else {"type": "object"}
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    return None


# -- writing the reply ----------------------------------------------------------------------


def _tool_calls(turn: Turn) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": encode_arguments(call.arguments)},
        }
        for call in turn.tool_requests
    ]


def _message(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    thinking = _thinking(turn)
    if thinking:
        message["reasoning_content"] = thinking
    calls = _tool_calls(turn)
    if calls:
        message["tool_calls"] = calls
    return message


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + msgspec.json.encode(data) + b"\n\n"


class _Chunks:
    """The `chat.completion.chunk` events of one reply."""

    def __init__(self, model: str) -> None:
        self.head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        self.events: list[bytes] = []

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        self.events.append(_sse({**self.head, "choices": [choice]}))

    def usage(self, usage: dict[str, Any]) -> None:
        self.events.append(_sse({**self.head, "choices": [], "usage": usage}))


class ChatCompletionsApi(ApiFormat):
    """OpenAI's Chat Completions API, served.

    Example:
        >>> body = ChatCompletionsApi().reply(Turn("assistant", [ContentText("4")]), model="m")
        >>> body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"]
        ('4', 'stop')
    """

    name: ClassVar[str] = "chat_completions"
    path: ClassVar[str] = "/v1/chat/completions"

    def read(self, body: Any) -> AgentRequest:
        """The request as an `AgentRequest`; `WireError` for a malformed one.

        Example:
            >>> ChatCompletionsApi().read({"model": "m", "messages": []}).request.turns
            []
        """
        if not isinstance(body, dict):
            raise WireError("The request body must be a JSON object.")
        model = model_field(body)
        convo = _read_messages(body.get("messages"))
        limit = int_field(body, "max_completion_tokens")
        if limit is None:
            limit = int_field(body, "max_tokens")
        request = ChatRequest(
            convo.turns(),
            system_prompt=convo.system_prompt(),
            tools=_read_tools(body.get("tools")),
            output_schema=_output_schema(body.get("response_format")),
        )
        return AgentRequest(request, model, bool_field(body, "stream"), limit)

    def reply(
        self, turn: Turn, *, model: str, request: AgentRequest | None = None
    ) -> dict[str, Any]:
        """The `chat.completion` for `turn`.

        Example:
            >>> ChatCompletionsApi().reply(Turn("assistant", []), model="m")["object"]
            'chat.completion'
        """
        choice = {
            "index": 0,
            "message": _message(turn),
            "logprobs": None,
            "finish_reason": _finish_reason(turn),
        }
        body: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _usage(turn.tokens),
        }
        if turn.service_tier:
            body["service_tier"] = turn.service_tier
        return body

    def stream(self, turn: Turn, *, model: str, request: AgentRequest | None = None) -> list[bytes]:
        """The reply as `chat.completion.chunk` events, ending with `data: [DONE]`.

        Example:
            >>> ChatCompletionsApi().stream(Turn("assistant", []), model="m")[-1]
            b'data: [DONE]\\n\\n'
        """
        chunks = _Chunks(model)
        chunks.delta({"role": "assistant", "content": ""})
        for piece in text_pieces(_thinking(turn)):
            chunks.delta({"reasoning_content": piece})
        for piece in text_pieces(turn.text):
            chunks.delta({"content": piece})
        for index, call in enumerate(_tool_calls(turn)):
            function = call["function"]
            opened = {**call, "index": index, "function": {**function, "arguments": ""}}
            chunks.delta({"tool_calls": [opened]})
            for fragment in fragments(function["arguments"]):
                chunks.delta(
                    {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
                )
        chunks.delta({}, _finish_reason(turn))
        chunks.usage(_usage(turn.tokens))
        return [*chunks.events, b"data: [DONE]\n\n"]

    def error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's error body.

        Example:
            >>> ChatCompletionsApi().error(400, "Bad.")["error"]["type"]
            'invalid_request_error'
        """
        return openai_error(status, message)
