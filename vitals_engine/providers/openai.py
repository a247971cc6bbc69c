"""OpenAI's Chat Completions API, and every server that speaks it.

`base_url` points it at any OpenAI-compatible server: vLLM, Ollama, LM
Studio, OpenRouter, Groq, DeepSeek ... The named subclasses below only set
their service's base URL, key variable and display name.

Streamed (`stream=True`), the request says `"stream": true` and asks for a
last chunk with the usage (`stream_options.include_usage`); the chunks'
deltas (content, reasoning, refusal, tool calls by `index` with their
arguments in fragments) are put together into the message the whole answer
would hold, up to `data: [DONE]`. An `{"error": ...}` chunk is the error its
`code` or `type` stands for (a mid-stream failure of unknown kind counts as a
server error, so it is retried).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from ..transport.sse import ServerSentEvent
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
from .http import HttpProvider, StreamErrorEvent, StreamReader

__all__ = [
    "DeepSeekProvider",
    "GroqProvider",
    "OllamaProvider",
    "OpenAIProvider",
    "OpenRouterProvider",
    "VLLMProvider",
]

_FINISH = {
    "stop": "stop",
    "length": "max_tokens",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


#: The HTTP status an error chunk's `code` or `type` stands for (OpenAI's and compatible
#: servers' names); a mid-stream failure of another kind counts as a 500.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "rate_limit_exceeded": 429,
    "rate_limit_error": 429,
    "requests": 429,
    "tokens": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "internal_error": 500,
    "api_error": 500,
    "service_unavailable": 503,
    "overloaded": 503,
    "overloaded_error": 503,
    "timeout": 504,
}


def _part(content: Content) -> dict[str, Any] | None:
    if isinstance(content, ContentText):
        return {"type": "text", "text": content.text}
    if isinstance(content, ContentImage):
        return {
            "type": "image_url",
            "image_url": {"url": content.data_uri, "detail": content.detail},
        }
    return None


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    for turn in request.turns:
        if turn.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": msgspec.json.encode(c.arguments).decode(),
                    },
                }
                for c in turn.contents
                if isinstance(c, ContentToolRequest)
            ]
            if calls:
                message["tool_calls"] = calls
            out.append(message)
            continue
        for c in turn.contents:
            if isinstance(c, ContentToolResult):
                out.append({"role": "tool", "tool_call_id": c.id, "content": c.text})
        parts = [p for p in (_part(c) for c in turn.contents) if p is not None]
        if parts:
            only_text = len(parts) == 1 and parts[0]["type"] == "text"
            out.append({"role": "user", "content": parts[0]["text"] if only_text else parts})
    return out


def _usage(data: dict[str, Any]) -> TokenUsage:
    usage = data.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return TokenUsage(
        input=prompt - cached,
        output=int(usage.get("completion_tokens") or 0),
        cached_input=cached,
        reasoning=reasoning,
    )


def _error_status(error: Any) -> int:
    """The HTTP status an error chunk's `error` stands for."""
    if isinstance(error, dict):
        for key in ("code", "status", "status_code"):
            value = error.get(key)
            if isinstance(value, str) and value.isdecimal():
                value = int(value)
            if isinstance(value, int) and 400 <= value < 600:
                return value
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value in _ERROR_STATUS:
                return _ERROR_STATUS[value]
    return 500


class _ToolCall:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _OpenAIStream(StreamReader):
    """Chat completion chunks put together into the `chat.completion` they stand for."""

    marker = "data: [DONE]"

    def __init__(self) -> None:
        super().__init__()
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: dict[str, list[str]] = {}  # reasoning_content or reasoning
        self._calls: dict[int, _ToolCall] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None

    def feed(self, event: ServerSentEvent) -> str | None:
        if event.data == "[DONE]":
            self.complete = True
            return None
        chunk = msgspec.json.decode(event.data)
        if not isinstance(chunk, dict):
            raise TypeError(f"a chunk is a JSON object, not {type(chunk).__name__}")
        if chunk.get("error"):
            raise StreamErrorEvent(_error_status(chunk["error"]), event.data)
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        text: list[str] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n > 1: the first choice is the reply, as in parse()
            delta = choice.get("delta") or {}
            for key, pieces in (("content", self._content), ("refusal", self._refusal)):
                piece = delta.get(key)
                if isinstance(piece, str) and piece:
                    pieces.append(piece)
                    text.append(piece)
            for key in ("reasoning_content", "reasoning"):
                piece = delta.get(key)
                if isinstance(piece, str) and piece:
                    self._reasoning.setdefault(key, []).append(piece)
            for call in delta.get("tool_calls") or []:
                self._tool_call(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return "".join(text) or None

    def _tool_call(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        if not isinstance(index, int):  # servers that leave it out send each call whole
            index = len(self._calls)
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _ToolCall()
        if delta.get("id") and not call.id:
            call.id = delta["id"]
        function = delta.get("function") or {}
        if function.get("name") and not call.name:
            call.name = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments.append(arguments)
        elif isinstance(arguments, dict):
            call.arguments.append(msgspec.json.encode(arguments).decode())

    def body(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        for key, pieces in self._reasoning.items():
            message[key] = "".join(pieces)
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for index, call in sorted(self._calls.items())
            ]
        choice = {"index": 0, "message": message, "finish_reason": self._finish}
        return {"model": self._model, "choices": [choice], "usage": self._usage}


class OpenAIProvider(HttpProvider):
    """OpenAI Chat Completions (`POST {base_url}/chat/completions`)."""

    name = "OpenAI"
    id_prefix = "openai"
    env_key: ClassVar[str | None] = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    #: As the OpenAI SDK reads it: a gateway, proxy or compatible server for every chat.
    env_base_url: ClassVar[str | None] = "OPENAI_BASE_URL"

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def headers(self, api_key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": _messages(request)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        body.update(self.params)
        body.update(request.params)
        return body

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        options = {**(body.get("stream_options") or {}), "include_usage": True}
        return {**body, "stream": True, "stream_options": options}

    def stream_reader(self) -> StreamReader:
        return _OpenAIStream()

    def parse(self, data: Any) -> Turn:
        choice = data["choices"][0]
        message = choice["message"]
        contents: list[Content] = []
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            contents.append(ContentThinking(reasoning))
        if message.get("content"):
            contents.append(ContentText(message["content"]))
        if message.get("refusal"):
            contents.append(ContentText(message["refusal"]))
        for call in message.get("tool_calls") or []:
            function = call["function"]
            raw = function.get("arguments") or "{}"
            try:
                arguments = msgspec.json.decode(raw) if isinstance(raw, str) else dict(raw)
            except msgspec.DecodeError:
                arguments = {"_unparsed": raw}
            contents.append(ContentToolRequest(call["id"], function["name"], arguments))
        finish = _FINISH.get(choice.get("finish_reason") or "", "unknown")
        if finish == "unknown" and any(isinstance(c, ContentToolRequest) for c in contents):
            finish = "tool_calls"
        return Turn(
            "assistant",
            contents,
            tokens=_usage(data),
            finish_reason=finish,  # type: ignore[arg-type]
            model=data.get("model") or self.model,
        )


class OllamaProvider(OpenAIProvider):
    """A local Ollama server through its OpenAI-compatible endpoint."""

    name = "Ollama"
    id_prefix = "ollama"
    env_key = None
    key_required = False
    default_base_url = "http://localhost:11434/v1"
    start_hint = "is Ollama running? Start it (`ollama serve`), or check base_url"
    env_base_url = None


class VLLMProvider(OpenAIProvider):
    """A vLLM server (`vllm serve ...`) through its OpenAI-compatible endpoint."""

    name = "vLLM"
    id_prefix = "vllm"
    env_key = "VLLM_API_KEY"
    key_required = False
    default_base_url = "http://localhost:8000/v1"
    start_hint = "is the vLLM server running (`vllm serve MODEL`)? Or check base_url"
    env_base_url = None


class OpenRouterProvider(OpenAIProvider):
    name = "OpenRouter"
    id_prefix = "openrouter"
    env_key = "OPENROUTER_API_KEY"
    default_base_url = "https://openrouter.ai/api/v1"
    env_base_url = None


class GroqProvider(OpenAIProvider):
    name = "Groq"
    id_prefix = "groq"
    env_key = "GROQ_API_KEY"
    default_base_url = "https://api.groq.com/openai/v1"
    env_base_url = None


class DeepSeekProvider(OpenAIProvider):
    name = "DeepSeek"
    id_prefix = "deepseek"
    env_key = "DEEPSEEK_API_KEY"
    default_base_url = "https://api.deepseek.com"
    env_base_url = None
