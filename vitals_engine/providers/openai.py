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

from typing import Any

import msgspec

from ..transport.sse import ServerSentEvent
from ..vocab.model_calls import ChatRequest
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
from .http import StreamErrorEvent, StreamReader
from .openai_base import OpenAIBase, error_status, openai_hosted, service_tier

__all__ = [
    "CompatibleProvider",
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


def _part(content: Content) -> dict[str, Any] | None:
    if isinstance(content, ContentText):
        return {"type": "text", "text": content.text}
    if isinstance(content, ContentImage):
        return {
            "type": "image_url",
            "image_url": {"url": content.data_uri, "detail": content.detail},
        }
    if isinstance(content, ContentDocument):
        if content.media_type != "application/pdf":  # the API takes no other file here
            raise content.refused(
                "Chat Completions", "PDF only (OpenAI's Responses API takes text files too)"
            )
        file = {"filename": content.name, "file_data": content.data_uri}
        return {"type": "file", "file": file}
    return None


def _system_role(model: str) -> str:
    """Whose words a reasoning model takes the system prompt as: the developer's on the
    o-series; o1-mini and o1-preview take neither, so it opens the conversation."""
    if model.startswith(("o1-mini", "o1-preview")):
        return "user"
    return "developer" if model[:1] == "o" else "system"


def _messages(request: ChatRequest, system_role: str = "system") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system_prompt:
        out.append({"role": system_role, "content": request.system_prompt})
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
    details = usage.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    reasoning = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return TokenUsage(
        input=prompt - cached - written,
        output=int(usage.get("completion_tokens") or 0),
        cached_input=cached,
        reasoning=reasoning,
        cache_write=written,
    )


def _chunk(event: ServerSentEvent) -> dict[str, Any]:
    """A `chat.completion.chunk` event's JSON object; an error event raises."""
    chunk = msgspec.json.decode(event.data)
    if not isinstance(chunk, dict):
        raise TypeError(f"a chunk is a JSON object, not {type(chunk).__name__}")
    if chunk.get("error"):
        raise StreamErrorEvent(error_status(chunk["error"]), event.data)
    return chunk


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
        chunk = _chunk(event)
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model = chunk["model"]
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        text: list[str] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == 0:  # n > 1: the first choice is the reply, as in parse()
                self._choice(choice, text)
        return "".join(text) or None

    def _choice(self, choice: dict[str, Any], text: list[str]) -> None:
        """Take in one choice's delta; its text and refusal pieces also go to `text`."""
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


class OpenAIProvider(OpenAIBase):
    """OpenAI Chat Completions (`POST {base_url}/chat/completions`)."""

    def __init__(self, model: str, **kw: Any) -> None:
        super().__init__(model, **kw)
        self._hosted = openai_hosted(self.base_url)

    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def body(self, request: ChatRequest) -> dict[str, Any]:
        reasoning = self.is_reasoning
        system_role = _system_role(self.model) if reasoning else "system"
        body: dict[str, Any] = {"model": self.model, "messages": _messages(request, system_role)}
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
        effort = self.effort()
        if effort is not None:
            body["reasoning_effort"] = effort
        body.update(self.params)
        body.update(request.params)
        if reasoning or self._hosted:
            self.output_limit(body, "max_completion_tokens")
        self.check_request(body, body.get("reasoning_effort"))
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
            service_tier=service_tier(data),
        )


class CompatibleProvider(OpenAIProvider):
    """Another service's OpenAI-compatible endpoint: its own models (OpenAI's rules for
    reasoning models do not apply), its own base URL (`OPENAI_BASE_URL` is OpenAI's)."""

    env_base_url = None
    reasoning_rules = False
    billing_hint = "the service's billing page"


class OllamaProvider(CompatibleProvider):
    """A local Ollama server through its OpenAI-compatible endpoint."""

    name = "Ollama"
    id_prefix = "ollama"
    env_key = None
    key_required = False
    default_base_url = "http://localhost:11434/v1"
    start_hint = "is Ollama running? Start it (`ollama serve`), or check base_url"


class VLLMProvider(CompatibleProvider):
    """A vLLM server (`vllm serve ...`) through its OpenAI-compatible endpoint."""

    name = "vLLM"
    id_prefix = "vllm"
    env_key = "VLLM_API_KEY"
    key_required = False
    default_base_url = "http://localhost:8000/v1"
    start_hint = "is the vLLM server running (`vllm serve MODEL`)? Or check base_url"


class OpenRouterProvider(CompatibleProvider):
    name = "OpenRouter"
    id_prefix = "openrouter"
    env_key = "OPENROUTER_API_KEY"
    default_base_url = "https://openrouter.ai/api/v1"


class GroqProvider(CompatibleProvider):
    name = "Groq"
    id_prefix = "groq"
    env_key = "GROQ_API_KEY"
    default_base_url = "https://api.groq.com/openai/v1"


class DeepSeekProvider(CompatibleProvider):
    name = "DeepSeek"
    id_prefix = "deepseek"
    env_key = "DEEPSEEK_API_KEY"
    default_base_url = "https://api.deepseek.com"
