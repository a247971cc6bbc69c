"""OpenAI's Chat Completions API, and every server that speaks it.

`base_url` points it at any OpenAI-compatible server: vLLM, Ollama, LM
Studio, OpenRouter, Groq, DeepSeek ... The named subclasses below only set
their service's base URL, key variable and display name.
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


class OpenAIProvider(HttpProvider):
    """OpenAI Chat Completions (`POST {base_url}/chat/completions`)."""

    name = "OpenAI"
    id_prefix = "openai"
    env_key: ClassVar[str | None] = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"

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


class VLLMProvider(OpenAIProvider):
    """A vLLM server (`vllm serve ...`) through its OpenAI-compatible endpoint."""

    name = "vLLM"
    id_prefix = "vllm"
    env_key = "VLLM_API_KEY"
    key_required = False
    default_base_url = "http://localhost:8000/v1"


class OpenRouterProvider(OpenAIProvider):
    name = "OpenRouter"
    id_prefix = "openrouter"
    env_key = "OPENROUTER_API_KEY"
    default_base_url = "https://openrouter.ai/api/v1"


class GroqProvider(OpenAIProvider):
    name = "Groq"
    id_prefix = "groq"
    env_key = "GROQ_API_KEY"
    default_base_url = "https://api.groq.com/openai/v1"


class DeepSeekProvider(OpenAIProvider):
    name = "DeepSeek"
    id_prefix = "deepseek"
    env_key = "DEEPSEEK_API_KEY"
    default_base_url = "https://api.deepseek.com"
