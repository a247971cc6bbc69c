"""OpenAI's Responses API (`POST /v1/responses`), as the mock server speaks it.

A request is `model` and `input` (a string, or a list of items: messages of role
user, system, developer or assistant whose `content` is a string or parts
`input_text`, `input_image` (`image_url` a data URI or URL, or `file_id`; `detail`),
`input_file`, `output_text`, `refusal`; `function_call` items {`call_id`, `name`,
`arguments` (a JSON string)}; `function_call_output` items {`call_id`, `output`};
`reasoning` items {`id`, `summary`, `encrypted_content`}; `web_search_call` items),
with `instructions`, `tools`, `tool_choice`, `parallel_tool_calls`, `text.format`,
`max_output_tokens`, `reasoning` {`effort`, `summary`}, `include`, `store`,
`stream`, `service_tier`, `metadata`, `temperature`, `top_p` and the API's other
parameters. It refuses, with the API's error body (`{"error": {"message", "type":
"invalid_request_error", "param", "code"}}`):

- a parameter the API does not know (`unknown_parameter`, "Unknown parameter: 'x'."),
  and Chat Completions' names for what moved (`unsupported_parameter`, "Unsupported
  parameter: 'max_tokens'. In the Responses API, this parameter has moved to
  'max_output_tokens'.": `messages`, `max_tokens`, `max_completion_tokens`,
  `response_format`, `reasoning_effort`);
- a tool without a flat `name` (a Chat Completions tool, `{"type": "function",
  "function": {...}}`, is "Missing required parameter: 'tools[0].name'."); a function
  tool is strict unless it says `"strict": false`, and a strict tool's schema must set
  `additionalProperties: false` and require every property (`invalid_function_parameters`),
  as must a `text.format` json_schema that says `"strict": true` (`invalid_json_schema`);
- a `function_call_output` answering no `function_call` of the input ("No tool call found
  for function call output with call_id ..."), and a `function_call` left without its
  output ("No tool output found for function call ...");
- a `reasoning` item without `encrypted_content` while `store` is false: 404, "Item with
  id 'rs_...' not found. Items are not persisted when `store` is set to false. ...", as
  the API answers; one whose `encrypted_content` is not the mock's, 400;
- `max_output_tokens` under 16, `text.format` json_object without the word "json" in the
  input, an unknown `include`, `reasoning.effort` or `service_tier`, a
  `previous_response_id` (the mock stores no responses: 404), `background`;
- what reasoning models refuse (`openai_rules.py`).

A reply is a `response`: `id` "resp_...", `object`, `created_at`, `status`
("completed", or "incomplete" with `incomplete_details.reason` "max_output_tokens" when
the brain stops at max tokens, "content_filter"), `error: null`, `model`, the request's
parameters echoed (`instructions`, `max_output_tokens`, `parallel_tool_calls`, `reasoning`,
`service_tier` ("default" for none or "auto"), `store`, `temperature`, `text`,
`tool_choice`, `tools` (strict filled in), `top_p`, `truncation`, `metadata` ...; not
`include`), `output` items in order: a `reasoning` item when the brain reasons (`id`
"rs_...", `summary` `[{"type": "summary_text", "text"}]` when the request asks for one
with `reasoning.summary`, else `[]`; `encrypted_content` when `include` has
`reasoning.encrypted_content`: base64 of a marker and the reasoning, which the mock
reads back from a later request's input), a `web_search_call` per search, a `message`
(`id` "msg_...", `status`, `role`, `content: [{"type": "output_text", "text",
"annotations": []}]`) when there is text, a `function_call` per tool call (`id` "fc_...",
`call_id`, `name`, `arguments`, `status`); and `usage` {`input_tokens`,
`input_tokens_details.cached_tokens`, `output_tokens`,
`output_tokens_details.reasoning_tokens`, `total_tokens`}.

With `"stream": true` the same response comes as named events, each `data` holding its
`type` and a `sequence_number` from 0: `response.created`, `response.in_progress`, then
per output item `response.output_item.added`, its events (reasoning:
`response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta` a word
each, `.done`, `response.reasoning_summary_part.done`; message:
`response.content_part.added`, `response.output_text.delta` a word each,
`response.output_text.done`, `response.content_part.done`; function call:
`response.function_call_arguments.delta` fragments, `.done`; web search:
`response.web_search_call.in_progress`, `.searching`, `.completed`) and
`response.output_item.done` with the whole item, then `response.completed` (or
`response.incomplete`) with the whole response and its usage. No `[DONE]`. A
mid-stream failure is `response.failed` (the response with `status: "failed"` and
`error: {"code": "server_error", "message"}`) for a server error (the default), or an
`error` event (`{"type": "error", "code", "message", "param": null,
"sequence_number"}`; `rate_limit_exceeded` for a 429) for another status.
"""

from __future__ import annotations

import base64
import binascii
import time
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from ..brain import MockMessage, MockReply, MockRequest, MockToolCall
from . import Refused, StreamEvent, WireFormat, fragments, pieces
from .openai_rules import OpenAIErrors, check_responses_model, check_strict_schema

__all__ = ["ResponsesFormat", "seal", "unseal"]

_KNOWN = frozenset(
    {
        "model",
        "input",
        "instructions",
        "max_output_tokens",
        "max_tool_calls",
        "temperature",
        "top_p",
        "top_logprobs",
        "presence_penalty",
        "frequency_penalty",
        "stream",
        "stream_options",
        "text",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "include",
        "store",
        "background",
        "previous_response_id",
        "conversation",
        "prompt",
        "truncation",
        "metadata",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "service_tier",
        # Sent by the Codex CLI (0.169.0: tests/recordings/agent_clis/), which the API takes.
        "client_metadata",
    }
)
#: Chat Completions' names of parameters that have moved, and where to.
_MOVED = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "response_format": "text.format",
    "reasoning_effort": "reasoning.effort",
}
_INCLUDES = (
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "web_search_call.action.sources",
    "web_search_call.results",
)
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_SUMMARIES = ("auto", "concise", "detailed")
_TIERS = ("auto", "default", "flex", "scale", "priority")
_ROLES = ("assistant", "system", "developer", "user")
_USER_PARTS = ("input_text", "input_image", "input_file")
_ASSISTANT_PARTS = ("output_text", "refusal")
_INCOMPLETE = {"max_tokens": "max_output_tokens", "content_filter": "content_filter"}
_ENCRYPTED = "reasoning.encrypted_content"
_MARK = b"vitals-mock-reasoning\x00"
_MIN_OUTPUT = 16


def seal(reasoning: str) -> str:
    """The `encrypted_content` the mock gives a reasoning item (base64 of a marker and the
    reasoning), which `unseal()` reads back.

    Example:
        >>> unseal(seal("add them"))
        'add them'
    """
    return base64.b64encode(_MARK + reasoning.encode()).decode("ascii")


def unseal(content: Any) -> str | None:
    """The reasoning in an `encrypted_content` the mock gave, or None if it gave no such."""
    if not isinstance(content, str):
        return None
    try:
        raw = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(_MARK):
        return None
    return raw[len(_MARK) :].decode("utf-8", "replace")


def _listing(values: tuple[str, ...]) -> str:
    """`'a', 'b', and 'c'`, or `'a' and 'b'`, as the API lists supported values."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _kind_of(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a decimal number", str: "a string"}
    names.update({list: "an array", dict: "an object", type(None): "null"})
    return names.get(type(value), "a value")


def _missing(param: str) -> Refused:
    return Refused(
        f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
    )


def _invalid(value: Any, supported: tuple[str, ...], param: str) -> Refused:
    return Refused(
        f"Invalid value: '{value}'. Supported values are: {_listing(supported)}.",
        param=param,
        code="invalid_value",
    )


def _unknown(param: str) -> Refused:
    return Refused(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")


def _wrong_type(param: str, expected: str, value: Any) -> Refused:
    return Refused(
        f"Invalid type for '{param}': expected {expected}, but got {_kind_of(value)} instead.",
        param=param,
        code="invalid_type",
    )


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}{uuid.uuid4().hex[:16]}"


def _check_names(body: Mapping[str, Any]) -> None:
    """Refuse parameters the API does not know or that have moved, and a missing one."""
    for key in body:
        if key in _MOVED:
            raise Refused(
                f"Unsupported parameter: '{key}'. In the Responses API, this parameter has "
                f"moved to '{_MOVED[key]}'.",
                param=None if key == "messages" else key,
                code="unsupported_parameter",
            )
        if key not in _KNOWN:
            raise _unknown(key)
    if not isinstance(body.get("model"), str):
        raise _missing("model")
    if body.get("input") is None:
        raise _missing("input")
    for key in body.get("stream_options") or {}:
        if key != "include_obfuscation":
            raise _unknown(f"stream_options.{key}")


def _check_values(body: Mapping[str, Any]) -> None:
    """Refuse values the API does not take, or that this mock cannot answer."""
    _check_output_limit(body.get("max_output_tokens"))
    for name in ("stream", "store", "parallel_tool_calls", "background"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise _wrong_type(name, "a boolean", body[name])
    if body.get("background"):
        raise ValueError("this mock does not serve background responses")
    previous = body.get("previous_response_id")
    if previous is not None:
        raise Refused(
            f"Previous response with id '{previous}' not found.",
            status=404,
            param="previous_response_id",
            code="previous_response_not_found",
        )
    for include in body.get("include") or []:
        if include not in _INCLUDES:
            raise _invalid(include, _INCLUDES, "include")
    tier = body.get("service_tier")
    if tier is not None and tier not in _TIERS:
        raise _invalid(tier, _TIERS, "service_tier")
    _check_reasoning(body.get("reasoning"))
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _wrong_type("metadata", "an object", metadata)


def _check_output_limit(limit: Any) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < _MIN_OUTPUT):
        raise Refused(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{_MIN_OUTPUT}, but got {limit} instead.",
            param="max_output_tokens",
            code="integer_below_min_value",
        )


def _check_reasoning(reasoning: Any) -> None:
    """Refuse a `reasoning` that is not an object, or an effort or summary it does not know."""
    if reasoning is None:
        return
    if not isinstance(reasoning, dict):
        raise _wrong_type("reasoning", "an object", reasoning)
    effort, summary = reasoning.get("effort"), reasoning.get("summary")
    if effort is not None and effort not in _EFFORTS:
        raise _invalid(effort, _EFFORTS, "reasoning.effort")
    if summary is not None and summary not in _SUMMARIES:
        raise _invalid(summary, _SUMMARIES, "reasoning.summary")


def _content(content: Any, role: str, where: str) -> tuple[str, int]:
    """A message's text (parts joined by newlines) and how many images it holds."""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise _wrong_type(f"{where}.content", "one of a string or an array", content)
    allowed = _ASSISTANT_PARTS if role == "assistant" else _USER_PARTS
    texts: list[str] = []
    images = 0
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = _part_kind(part, allowed, at)
        if kind in ("input_text", "output_text", "refusal"):
            texts.append(_part_text(part, kind, at))
        elif kind == "input_image":
            _check_image(part, at)
            images += 1
        elif not (part.get("file_id") or part.get("file_data") or part.get("file_url")):
            raise _missing(f"{at}.file_id")
    return "\n".join(texts), images


def _part_kind(part: Any, allowed: tuple[str, ...], at: str) -> str:
    """The type of a content part, refused unless the message's role may send it."""
    if not isinstance(part, dict):
        raise _wrong_type(at, "an object", part)
    kind = part.get("type")
    if kind not in allowed:  # another role's part names the part, an unknown one its type
        known = kind in _USER_PARTS or kind in _ASSISTANT_PARTS
        raise _invalid(kind, allowed, at if known else f"{at}.type")
    return kind


def _part_text(part: dict[str, Any], kind: str, at: str) -> str:
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if not isinstance(part.get("text"), str):
        raise _missing(f"{at}.text")
    return part["text"]


def _check_image(part: dict[str, Any], at: str) -> None:
    """Refuse an `input_image` part without an image, or with a detail the API lacks."""
    url = part.get("image_url")
    if url is not None and not isinstance(url, str):
        raise _wrong_type(f"{at}.image_url", "a string", url)
    if not url and not part.get("file_id"):
        raise Refused(
            "You must provide either 'image_url' or 'file_id'.",
            param=f"{at}.image_url",
            code="missing_required_parameter",
        )
    detail = part.get("detail")
    if detail is not None and detail not in ("low", "high", "auto"):
        raise _invalid(detail, ("low", "high", "auto"), f"{at}.detail")


class _Input:
    """`input`'s items as the brain's messages: a run of assistant-side items (reasoning,
    assistant messages, function calls, web searches) makes one assistant message."""

    def __init__(self, request: MockRequest, store: bool) -> None:
        self.request = request
        self.store = store
        self.turn: MockMessage | None = None
        self.calls: list[str] = []
        self.answered: set[str] = set()

    def assistant(self) -> MockMessage:
        if self.turn is None:
            self.turn = MockMessage("assistant")
            self.request.messages.append(self.turn)
        return self.turn

    def read(self, items: Any) -> None:
        if isinstance(items, str):
            self.request.messages.append(MockMessage("user", items))
            return
        if not isinstance(items, list):
            raise _wrong_type("input", "one of a string or an array", items)
        for index, item in enumerate(items):
            where = f"input[{index}]"
            if not isinstance(item, dict):
                raise _wrong_type(where, "an input item", item)
            self.item(item, where)
        unanswered = [call for call in self.calls if call not in self.answered]
        if unanswered:
            raise Refused(f"No tool output found for function call {unanswered[0]}.", param="input")

    def item(self, item: dict[str, Any], where: str) -> None:
        kind = item.get("type", "message")
        if kind == "message":
            self.message(item, where)
        elif kind == "function_call":
            for name in ("call_id", "name", "arguments"):
                if not isinstance(item.get(name), str):
                    raise _missing(f"{where}.{name}")
            try:
                arguments = msgspec.json.decode(item["arguments"] or "{}")
            except msgspec.DecodeError:
                arguments = {}
            call = MockToolCall(item["call_id"], item["name"], arguments)
            self.assistant().tool_calls.append(call)
            self.calls.append(call.id)
        elif kind == "function_call_output":
            self.output(item, where)
        elif kind == "reasoning":
            self.reasoning(item, where)
        elif kind == "web_search_call":
            self.assistant()
        elif kind == "item_reference":
            raise self.not_found(item.get("id"))
        else:
            kinds = ("message", "function_call", "function_call_output", "reasoning")
            raise _invalid(kind, (*kinds, "web_search_call", "item_reference"), where)

    def message(self, item: dict[str, Any], where: str) -> None:
        role = item.get("role")
        if role not in _ROLES:
            raise _invalid(role or "", _ROLES, where)
        if "content" not in item:
            raise _missing(f"{where}.content")
        text, images = _content(item["content"], role, where)
        request = self.request
        if role in ("system", "developer"):
            request.system = f"{request.system}\n{text}" if request.system else text
            self.turn = None
        elif role == "user":
            request.messages.append(MockMessage("user", text, images=images))
            self.turn = None
        else:
            turn = self.assistant()
            turn.text = f"{turn.text}\n{text}" if turn.text else text

    def output(self, item: dict[str, Any], where: str) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            raise _missing(f"{where}.call_id")
        if call_id not in self.calls:
            raise Refused(
                f"No tool call found for function call output with call_id {call_id}.",
                param="input",
            )
        self.answered.add(call_id)
        output = item.get("output")
        if isinstance(output, list):
            text = "\n".join(p.get("text", "") for p in output if isinstance(p, dict))
        elif isinstance(output, str):
            text = output
        else:
            raise _missing(f"{where}.output")
        error = text.startswith("Error:")
        self.request.messages.append(
            MockMessage("tool", text, tool_call_id=call_id, tool_error=error)
        )
        self.turn = None

    def reasoning(self, item: dict[str, Any], where: str) -> None:
        item_id = item.get("id")
        if not isinstance(item_id, str):
            raise _missing(f"{where}.id")
        encrypted = item.get("encrypted_content")
        if encrypted is None:
            if not self.store:
                raise self.not_found(item_id)
            summary = item.get("summary") or []
            said = "".join(p.get("text", "") for p in summary if isinstance(p, dict))
            self.assistant().reasoning = said or None
            return
        reasoning = unseal(encrypted)
        if reasoning is None:
            raise Refused(
                f"The encrypted content for item {item_id} could not be verified.",
                param=None,
                code="invalid_encrypted_content",
            )
        self.assistant().reasoning = reasoning

    def not_found(self, item_id: Any) -> Refused:
        message = f"Item with id '{item_id}' not found."
        if not self.store:
            message += (
                " Items are not persisted when `store` is set to false. Try again with `store` "
                "set to true, or remove this item from your input."
            )
        return Refused(message, status=404, param="input")


def _tools(request: MockRequest, tools: Any) -> list[dict[str, Any]]:
    """The function tools for the brain, checked; returns the tools as the API echoes them."""
    if not isinstance(tools, list):
        raise _wrong_type("tools", "an array", tools)
    echoed: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise _wrong_type(where, "an object", tool)
        if "type" not in tool:
            raise _missing(f"{where}.type")
        if tool["type"] != "function":
            echoed.append(tool)  # a built-in tool: offered, never called by the mock
            continue
        name = tool.get("name")
        if not isinstance(name, str):
            raise _missing(f"{where}.name")
        for key in tool:
            if key not in ("type", "name", "description", "parameters", "strict"):
                param = f"{where}.{key}"
                raise Refused(
                    f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter"
                )
        parameters = tool.get("parameters")
        strict = tool.get("strict") is not False
        if strict and parameters:
            check_strict_schema(
                parameters,
                f"function '{name}'",
                param=f"{where}.parameters",
                code="invalid_function_parameters",
            )
        request.tools.append(
            {
                "name": name,
                "description": tool.get("description") or "",
                "parameters": parameters or {},
            }
        )
        echoed.append(
            {
                "type": "function",
                "name": name,
                "description": tool.get("description"),
                "parameters": parameters,
                "strict": strict,
            }
        )
    return echoed


def _text_format(request: MockRequest, text: Any) -> dict[str, Any]:
    """Structured output asked for in `text.format`; returns `text` as the API echoes it."""
    if text is None:
        return {"format": {"type": "text"}, "verbosity": "medium"}
    if not isinstance(text, dict):
        raise _wrong_type("text", "an object", text)
    fmt: dict[str, Any] = text.get("format") or {"type": "text"}
    if not isinstance(fmt, dict):
        raise _wrong_type("text.format", "an object", fmt)
    kind = fmt.get("type")
    if kind == "json_schema":
        name, schema = fmt.get("name"), fmt.get("schema")
        if not isinstance(name, str):
            raise _missing("text.format.name")
        if not isinstance(schema, dict):
            raise _missing("text.format.schema")
        if fmt.get("strict") is True:
            check_strict_schema(
                schema,
                f"response_format '{name}'",
                param="text.format.schema",
                code="invalid_json_schema",
            )
        request.schema = schema
    elif kind == "json_object":
        if "json" not in request.all_text.lower():
            raise Refused(
                "Response input messages must contain the word 'json' in some form to use "
                "'text.format' of type 'json_object'.",
                param="input",
            )
        request.schema = {"type": "object"}
    elif kind != "text":
        raise _invalid(kind, ("json_object", "text", "json_schema"), "text.format.type")
    return {"format": fmt, "verbosity": text.get("verbosity") or "medium"}


def _usage(reply: MockReply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": min(reply.cached_tokens, reply.input_tokens)},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


class ResponsesFormat(OpenAIErrors, WireFormat):
    name = "openai_responses"
    route = "/v1/responses"

    stream_error_status = 500

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        if not isinstance(body, dict):
            raise _wrong_type("body", "an object", body)
        _check_names(body)
        _check_values(body)
        model = body["model"]
        check_responses_model(body, model)
        request = MockRequest(format=self.name, model=model)
        request.stream = body.get("stream") is True
        request.max_tokens = body.get("max_output_tokens")
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise _wrong_type("instructions", "a string", instructions)
        request.system = instructions or None
        store = body.get("store") is not False
        _Input(request, store).read(body["input"])
        tools = _tools(request, body["tools"]) if body.get("tools") is not None else []
        text = _text_format(request, body.get("text"))
        reasoning = body.get("reasoning") or {}
        tier = body.get("service_tier")
        request.options = {
            "id": _id("resp"),
            "instructions": instructions,
            "max_output_tokens": request.max_tokens,
            "max_tool_calls": body.get("max_tool_calls"),
            "parallel_tool_calls": body.get("parallel_tool_calls") is not False,
            "prompt_cache_key": body.get("prompt_cache_key"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "safety_identifier": body.get("safety_identifier"),
            "service_tier": "default" if tier in (None, "auto") else tier,
            "store": store,
            "temperature": 1.0 if body.get("temperature") is None else body["temperature"],
            "text": text,
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": tools,
            "top_logprobs": body.get("top_logprobs") or 0,
            "top_p": 1.0 if body.get("top_p") is None else body["top_p"],
            "truncation": body.get("truncation") or "disabled",
            "user": body.get("user"),
            "metadata": body.get("metadata") or {},
            "include": list(body.get("include") or []),
        }
        return request

    # -- the response -------------------------------------------------------------------------

    def _output(self, request: MockRequest, reply: MockReply) -> list[dict[str, Any]]:
        """The response's output items, in the order the API gives them."""
        items: list[dict[str, Any]] = []
        if reply.reasoning:
            summarised = request.options.get("reasoning", {}).get("summary") is not None
            summary = [{"type": "summary_text", "text": reply.reasoning}] if summarised else []
            item: dict[str, Any] = {"id": _id("rs"), "type": "reasoning", "summary": summary}
            if _ENCRYPTED in request.options.get("include", []):
                item["encrypted_content"] = seal(reply.reasoning)
            items.append(item)
        for query in reply.web_searches:
            action = {"type": "search", "query": query}
            items.append(
                {
                    "id": _id("ws"),
                    "type": "web_search_call",
                    "status": "completed",
                    "action": action,
                }
            )
        if reply.text:
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            status = "incomplete" if reply.finish in _INCOMPLETE else "completed"
            items.append(
                {
                    "id": _id("msg"),
                    "type": "message",
                    "status": status,
                    "role": "assistant",
                    "content": [part],
                }
            )
        for call in reply.tool_calls:
            items.append(
                {
                    "id": _id("fc"),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": msgspec.json.encode(call.arguments).decode(),
                    "call_id": call.id,
                    "name": call.name,
                }
            )
        return items

    def _response(
        self,
        request: MockRequest,
        status: str,
        output: list[dict[str, Any]],
        reply: MockReply | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The response object: the request's echoed parameters around `output`."""
        echoed = {k: v for k, v in request.options.items() if k not in ("id", "include")}
        reason = _INCOMPLETE.get(reply.finish) if reply is not None else None
        return {
            "id": request.options.get("id") or _id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": reason} if status == "incomplete" else None,
            **echoed,
            "model": request.model,
            "output": output,
            "previous_response_id": None,
            "usage": _usage(reply) if reply is not None and status != "in_progress" else None,
        }

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        status = "incomplete" if reply.finish in _INCOMPLETE else "completed"
        return self._response(request, status, self._output(request, reply), reply)

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        whole = self.render(request, reply)
        events: list[StreamEvent] = []

        def emit(kind: str, said: bool = False, **fields: Any) -> None:
            """Add event `kind` with `fields` (`said`: it carries a piece of the reply's text)."""
            data = {"type": kind, "sequence_number": len(events), **fields}
            events.append(StreamEvent(data, kind, text=said))

        opening = self._response(request, "in_progress", [], reply)
        opening["id"] = whole["id"]
        emit("response.created", response=opening)
        emit("response.in_progress", response=opening)
        for index, item in enumerate(whole["output"]):
            _item_events(emit, index, item)
        final = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
        emit(final, response=whole)
        return events

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        if status >= 500 and request is not None:
            error = {"code": "server_error", "message": message}
            failed = self._response(request, "failed", [], error=error)
            data = {"type": "response.failed", "sequence_number": sequence, "response": failed}
            return StreamEvent(data, "response.failed")
        codes = {429: "rate_limit_exceeded", 401: "invalid_api_key", 400: "invalid_request_error"}
        data = {
            "type": "error",
            "code": codes.get(status, "server_error"),
            "message": message,
            "param": None,
            "sequence_number": sequence,
        }
        return StreamEvent(data, "error")

    def malformed_event(self) -> StreamEvent:
        return StreamEvent(
            '{"type": "response.output_text.delta", oops', "response.output_text.delta"
        )

    def incomplete_body(self) -> dict[str, Any]:
        return {"id": "resp_incomplete", "object": "response", "model": "x"}


def _item_events(emit: Any, index: int, item: dict[str, Any]) -> None:
    """The events that stream output item `index`: added, its deltas, done."""
    kind, item_id = item["type"], item["id"]
    at = {"item_id": item_id, "output_index": index}
    if kind == "reasoning":
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        for s, part in enumerate(item["summary"]):
            empty = {**part, "text": ""}
            emit("response.reasoning_summary_part.added", **at, summary_index=s, part=empty)
            for piece in pieces(part["text"]):
                emit("response.reasoning_summary_text.delta", **at, summary_index=s, delta=piece)
            text = part["text"]
            emit("response.reasoning_summary_text.done", **at, summary_index=s, text=text)
            emit("response.reasoning_summary_part.done", **at, summary_index=s, part=part)
    elif kind == "message":
        added = {**item, "status": "in_progress", "content": []}
        emit("response.output_item.added", output_index=index, item=added)
        for c, part in enumerate(item["content"]):
            where = {**at, "content_index": c}
            emit("response.content_part.added", **where, part={**part, "text": ""})
            for piece in pieces(part["text"]):
                emit("response.output_text.delta", True, **where, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, text=part["text"], logprobs=[])
            emit("response.content_part.done", **where, part=part)
    elif kind == "function_call":
        added = {**item, "status": "in_progress", "arguments": ""}
        emit("response.output_item.added", output_index=index, item=added)
        for fragment in fragments(item["arguments"]):
            emit("response.function_call_arguments.delta", **at, delta=fragment)
        arguments = item["arguments"]
        emit("response.function_call_arguments.done", **at, name=item["name"], arguments=arguments)
    else:  # web_search_call
        emit(
            "response.output_item.added", output_index=index, item={**item, "status": "in_progress"}
        )
        for step in ("in_progress", "searching", "completed"):
            emit(f"response.web_search_call.{step}", **at)
    emit("response.output_item.done", output_index=index, item=item)
