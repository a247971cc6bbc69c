"""Google Gemini `generateContent`, as the mock server speaks it.

Like the real API it refuses (400) a request without `contents`, with an
unknown top-level or `generationConfig` field, with a part it cannot read,
or with a schema key outside Gemini's OpenAPI subset (`additionalProperties`,
`$defs`, `$ref` ...), so a provider that sends what Gemini would refuse
fails against the mock too.

`:streamGenerateContent?alt=sse` streams the same response as server-sent
events, one `GenerateContentResponse` each: thoughts and text a word per
chunk (a thought's signature on its last piece), function calls whole, and
the last chunk with the `finishReason` and the final `usageMetadata`. A
mid-stream failure is a chunk `{"error": {...}}` (503 UNAVAILABLE unless told
otherwise). Without `alt=sse` the API streams a JSON array, which this mock
does not serve (400).

`generationConfig.thinkingConfig` takes `includeThoughts`, `thinkingBudget` (an
integer) or `thinkingLevel` ("minimal", "low", "medium", "high"), not both of the last
two ("You can only set only one of thinking budget and thinking level.", 400).
`usageMetadata` counts the prompt (`promptTokenCount`, the cached part of it in
`cachedContentTokenCount`), the reply's text beside its thoughts (`candidatesTokenCount`,
`thoughtsTokenCount`), and tool results the server's tools added
(`toolUsePromptTokenCount`), all in `totalTokenCount`.

A spent quota (`fail("quota")`) is a 429 `RESOURCE_EXHAUSTED` with the API's details:
a `google.rpc.QuotaFailure` whose violation names a per-day quota
(`GenerateRequestsPerDayPerProjectPerModel-FreeTier`), a `google.rpc.Help` link and a
`google.rpc.RetryInfo` (`retryDelay` until the quota's day ends at midnight Pacific
time, unless `fail(..., retry_after=)` says otherwise).
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...providers.google import SCHEMA_KEYS as _SCHEMA_KEYS
from ..brain import MockMessage, MockReply, MockRequest, MockToolCall
from . import StreamEvent, WireFormat, pieces

__all__ = ["GoogleFormat"]

_FINISH = {
    "stop": "STOP",
    "max_tokens": "MAX_TOKENS",
    "tool_calls": "STOP",
    "content_filter": "SAFETY",
}
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_REQUEST_KEYS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "safetySettings",
        "generationConfig",
        "cachedContent",
        "labels",
    }
)
_CONFIG_KEYS = frozenset(
    {
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "thinkingConfig",
        "mediaResolution",
    }
)
_DATA_FIELDS = ("text", "inlineData", "fileData", "functionCall", "functionResponse")
_THINKING_KEYS = frozenset({"includeThoughts", "thinkingBudget", "thinkingLevel"})
_THINKING_LEVELS = ("minimal", "low", "medium", "high")
_RPC = "type.googleapis.com/google.rpc."
_QUOTA_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
_QUOTA_LIMIT = 20
_PACIFIC = -8 * 3600  # Pacific standard time, when Gemini's daily quotas reset


def _check_thinking(config: Any) -> None:
    """Refuse a `thinkingConfig` Gemini would: unknown fields, a budget and a level both."""
    _check_fields(config, _THINKING_KEYS, "generation_config.thinking_config")
    config = {_camel(k): v for k, v in config.items()}
    if "thinkingBudget" in config and "thinkingLevel" in config:
        raise ValueError("You can only set only one of thinking budget and thinking level.")
    budget = config.get("thinkingBudget")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
        raise ValueError(
            "Invalid value at 'generation_config.thinking_config.thinking_budget': "
            "an integer is required."
        )
    level = config.get("thinkingLevel")
    if level is not None and str(level).lower() not in _THINKING_LEVELS:
        raise ValueError(
            "Invalid value at 'generation_config.thinking_config.thinking_level' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingLevel), "{level}"'
        )


def _camel(name: str) -> str:
    """Proto JSON accepts snake_case field names too: `max_output_tokens` -> `maxOutputTokens`."""
    return re.sub(r"_([a-z])", lambda m: m[1].upper(), name)


def _check_fields(obj: Any, known: frozenset[str], where: str) -> None:
    if not isinstance(obj, dict):
        raise ValueError(f"Invalid JSON payload received. '{where}' must be an object.")
    for key in obj:
        if _camel(key) not in known:
            raise ValueError(
                f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': "
                "Cannot find field."
            )


def _check_schema(schema: Any, where: str) -> None:
    """Refuse what Gemini's `Schema` (an OpenAPI subset) has no field for."""
    _check_fields(schema, _SCHEMA_KEYS, where)
    if "type" in schema and not isinstance(schema["type"], str):
        raise ValueError(f"Invalid value at '{where}.type': a schema type is one string.")
    for name, sub in (schema.get("properties") or {}).items():
        _check_schema(sub, f"{where}.properties[{name}]")
    if "items" in schema:
        _check_schema(schema["items"], f"{where}.items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        _check_schema(sub, f"{where}.anyOf[{i}]")


def _check_signature(part: dict[str, Any], where: str) -> None:
    signature = part.get("thoughtSignature")
    if signature is None:
        return
    try:
        base64.b64decode(signature, validate=True)
    except (binascii.Error, TypeError) as exc:
        raise ValueError(f"Invalid value at '{where}.thought_signature': not base64.") from exc


def _result_text(response: dict[str, Any]) -> tuple[str, bool]:
    """A functionResponse's `response` as the tool text the brain sees, and if it is an error."""
    failed = "error" in response
    value = response["error"] if failed else response.get("result", response)
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return text, failed


def _signature(text: str) -> str:
    return base64.b64encode(f"mock-thought:{len(text)}".encode()).decode()


def _declared_functions(tool: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool's `functionDeclarations` as the brain's tools, their schemas checked."""
    declared: list[dict[str, Any]] = []
    for j, fn in enumerate(tool.get("functionDeclarations") or []):
        if not isinstance(fn.get("name"), str):
            raise ValueError(f"function declaration {j} has no name")
        if "parameters" in fn:
            _check_schema(fn["parameters"], f"tools.function_declarations[{j}].parameters")
        declared.append(
            {
                "name": fn["name"],
                "description": fn.get("description", ""),
                "parameters": fn.get("parameters") or {},
            }
        )
    return declared


def _read_config(request: MockRequest, config: Any) -> None:
    """Check `generationConfig` and take from it the reply's schema and token limit."""
    _check_fields(config, _CONFIG_KEYS, "generation_config")
    config = {_camel(k): v for k, v in config.items()}
    if "responseSchema" in config:
        _check_schema(config["responseSchema"], "generation_config.response_schema")
        request.schema = config["responseSchema"]
    elif "responseJsonSchema" in config:
        request.schema = config["responseJsonSchema"]
    elif config.get("responseMimeType") == "application/json":
        request.schema = {"type": "object"}
    if "thinkingConfig" in config:
        _check_thinking(config["thinkingConfig"])
    request.max_tokens = config.get("maxOutputTokens")


@dataclass(slots=True)
class _Turn:
    """One of the request's contents as its parts are read: the text, function calls and
    images of its own message (function responses are messages of their own)."""

    request: MockRequest
    role: str
    texts: list[str] = field(default_factory=list)
    calls: list[MockToolCall] = field(default_factory=list)
    images: int = 0


def _read_content(request: MockRequest, content: Any, where: str) -> None:
    """Add a content (a turn of `contents`) to the request's messages."""
    if not isinstance(content, dict):
        raise ValueError(f"* {where}: a content must be an object")
    role = content.get("role") or "user"
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise ValueError(f"* {where}.parts: contents.parts must not be empty")
    if role not in ("user", "model", "function"):
        raise ValueError(f"Please use a valid role: user, model. Got {role!r} at {where}.")
    turn = _Turn(request, role)
    for k, part in enumerate(parts):
        _read_part(turn, part, f"{where}.parts[{k}]")
    if role == "model":
        request.messages.append(
            MockMessage("assistant", "".join(turn.texts), tool_calls=turn.calls)
        )
    elif turn.texts or turn.images:
        request.messages.append(MockMessage("user", "\n".join(turn.texts), images=turn.images))


def _read_part(turn: _Turn, part: Any, at: str) -> None:
    """Check a part (an object with exactly one of the data fields) and read it."""
    if not isinstance(part, dict):
        raise ValueError(f"* {at}: a part must be an object")
    present = [f for f in _DATA_FIELDS if f in part]
    if len(present) != 1:
        raise ValueError(f"* {at}: a part needs exactly one of {', '.join(_DATA_FIELDS)}")
    _check_signature(part, at)
    _PART_READERS[present[0]](turn, part, at)


def _text_part(turn: _Turn, part: dict[str, Any], at: str) -> None:
    if not part.get("thought"):
        turn.texts.append(part["text"])


def _inline_data_part(turn: _Turn, part: dict[str, Any], at: str) -> None:
    blob = part["inlineData"]
    if not blob.get("mimeType") or not blob.get("data"):
        raise ValueError(f"* {at}.inline_data: mimeType and data are required")
    turn.images += 1


def _file_data_part(turn: _Turn, part: dict[str, Any], at: str) -> None:
    if not part["fileData"].get("fileUri"):
        raise ValueError(f"* {at}.file_data: fileUri is required")
    turn.images += 1


def _function_call_part(turn: _Turn, part: dict[str, Any], at: str) -> None:
    if turn.role != "model":
        raise ValueError(f"* {at}: functionCall parts belong to model turns")
    call = part["functionCall"]
    turn.calls.append(
        MockToolCall(call.get("id") or call["name"], call["name"], call.get("args") or {})
    )


def _function_response_part(turn: _Turn, part: dict[str, Any], at: str) -> None:
    """A function's response: a tool message of its own, before the turn's message."""
    response = part["functionResponse"]
    if not isinstance(response.get("name"), str) or not isinstance(response.get("response"), dict):
        raise ValueError(f"* {at}.function_response: name and response are required")
    text, failed = _result_text(response["response"])
    call_id = response.get("id") or response["name"]
    turn.request.messages.append(MockMessage("tool", text, tool_call_id=call_id, tool_error=failed))


#: How each data field of a part is read (a part has exactly one).
_PART_READERS: dict[str, Callable[[_Turn, dict[str, Any], str], None]] = {
    "text": _text_part,
    "inlineData": _inline_data_part,
    "fileData": _file_data_part,
    "functionCall": _function_call_part,
    "functionResponse": _function_response_part,
}


class GoogleFormat(WireFormat):
    name = "google"
    route = "/v1beta/models/{model_action}"

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        model, _, action = path["model_action"].partition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            raise ValueError(
                f"unknown method '{action}': this mock serves generateContent and "
                "streamGenerateContent"
            )
        if action == "streamGenerateContent" and (query or {}).get("alt") != "sse":
            raise ValueError(
                "streamGenerateContent without alt=sse streams a JSON array, which this mock "
                "does not serve: add ?alt=sse"
            )
        try:
            request = self._parse(body, model)
        except AttributeError as exc:  # a list or a string where the API wants an object
            raise ValueError(f"Invalid JSON payload received: wrong shape ({exc})") from exc
        request.stream = action == "streamGenerateContent"
        return request

    def _parse(self, body: Any, model: str) -> MockRequest:
        _check_fields(body, _REQUEST_KEYS, "request")
        body = {_camel(k): v for k, v in body.items()}
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise ValueError("* GenerateContentRequest.contents: contents is not specified")
        request = MockRequest(format=self.name, model=model)
        system = body.get("systemInstruction")
        if system:
            request.system = "\n".join(p.get("text", "") for p in system.get("parts") or [])
        for i, content in enumerate(contents):
            _read_content(request, content, f"contents[{i}]")
        for tool in body.get("tools") or []:
            request.tools += _declared_functions(tool)
        _read_config(request, body.get("generationConfig") or {})
        return request

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reply.reasoning:
            parts.append(
                {
                    "text": reply.reasoning,
                    "thought": True,
                    "thoughtSignature": _signature(reply.reasoning),
                }
            )
        if reply.text:
            parts.append({"text": reply.text})
        for call in reply.tool_calls:
            fn: dict[str, Any] = {"name": call.name, "args": call.arguments}
            if call.id:
                fn["id"] = call.id
            parts.append({"functionCall": fn})
        candidate: dict[str, Any] = {"finishReason": _FINISH.get(reply.finish, "STOP"), "index": 0}
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        tool_use = reply.tool_use_prompt_tokens
        usage: dict[str, Any] = {
            "promptTokenCount": reply.input_tokens,
            "candidatesTokenCount": reply.output_tokens - reply.reasoning_tokens,
            "totalTokenCount": reply.input_tokens + reply.output_tokens + tool_use,
        }
        if reply.cached_tokens:
            usage["cachedContentTokenCount"] = min(reply.cached_tokens, reply.input_tokens)
        if tool_use:
            usage["toolUsePromptTokenCount"] = tool_use
        if reply.reasoning_tokens:
            usage["thoughtsTokenCount"] = reply.reasoning_tokens
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": request.model,
            "responseId": "mock-response",
        }

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        whole = self.render(request, reply)
        candidate = whole["candidates"][0]
        usage = whole["usageMetadata"]
        prompt = {"promptTokenCount": usage["promptTokenCount"]}
        prompt["totalTokenCount"] = usage["promptTokenCount"]
        top = {k: v for k, v in whole.items() if k not in ("candidates", "usageMetadata")}
        parts: list[tuple[dict[str, Any], bool]] = []  # (part, carries reply text)
        for part in (candidate.get("content") or {}).get("parts") or []:
            if "text" not in part:
                parts.append((part, False))
                continue
            words = pieces(part["text"]) or [""]
            for i, word in enumerate(words):
                piece = {**part, "text": word}
                if i < len(words) - 1:
                    piece.pop("thoughtSignature", None)  # it comes with the last piece
                parts.append((piece, not part.get("thought")))
        events: list[StreamEvent] = []
        for i, (part, text) in enumerate(parts):
            chunk: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
            last = i == len(parts) - 1
            if last:
                chunk["finishReason"] = candidate["finishReason"]
            data = {"candidates": [chunk], "usageMetadata": usage if last else prompt, **top}
            events.append(StreamEvent(data, text=text))
        if not parts:
            events.append(StreamEvent({"candidates": [candidate], "usageMetadata": usage, **top}))
        return events

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        return StreamEvent(self.error_body(status, message))

    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        if retry_after is None:
            retry_after = float(86400 - int(time.time() + _PACIFIC) % 86400)
        wait = f"{retry_after:g}s"
        message = (
            "You exceeded your current quota, please check your plan and billing details. For "
            "more information on this error, head to: "
            "https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, "
            "head to: https://ai.dev/usage?tab=rate-limit. \n"
            f"* Quota exceeded for metric: {_QUOTA_METRIC}, limit: {_QUOTA_LIMIT}, "
            f"model: {model}\nPlease retry in {wait}."
        )
        violation = {
            "quotaMetric": _QUOTA_METRIC,
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "quotaDimensions": {"location": "global", "model": model},
            "quotaValue": str(_QUOTA_LIMIT),
        }
        help_link = {
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
        }
        details = [
            {"@type": _RPC + "QuotaFailure", "violations": [violation]},
            {"@type": _RPC + "Help", "links": [help_link]},
            {"@type": _RPC + "RetryInfo", "retryDelay": wait},
        ]
        error = {
            "code": 429,
            "message": message,
            "status": "RESOURCE_EXHAUSTED",
            "details": details,
        }
        return 429, {"error": error}, {}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _STATUS.get(status, "UNAVAILABLE" if status >= 500 else "UNKNOWN"),
            }
        }

    def incomplete_body(self) -> dict[str, Any]:
        return {
            "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1},
            "modelVersion": "x",
            "responseId": "incomplete",
        }
