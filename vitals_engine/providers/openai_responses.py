"""OpenAI's Responses API (`POST {base_url}/responses`), spoken directly (no SDK).

The conversation goes as `input` items: user messages (`input_text`, `input_image`),
the assistant's earlier replies (its text, its `function_call` items, and its
`reasoning` items), and `function_call_output` items answering tool calls by
`call_id`. The system prompt is the request's `instructions`. Tools are flat function
definitions, not strict (a user's schema need not meet strict mode's rules).
Structured output is `text.format` with the schema.

Nothing is stored at OpenAI (`store: false`): a reasoning model's reasoning comes back
encrypted (`include: ["reasoning.encrypted_content"]`), is kept on the turn
(`ContentThinking`: the summary as its text, the encrypted content as its signature,
the item's id), and is sent back with the turn on the next call, so a tool loop keeps
the model's reasoning between its steps.

A reply with `status: "incomplete"` stopped at its output limit (or a content filter).
Usage: `input_tokens` (cached tokens included), `input_tokens_details.cached_tokens`,
`output_tokens` (reasoning included), `output_tokens_details.reasoning_tokens`.
`service_tier` says which tier served it.

Streamed, the reply comes as named events (`response.output_text.delta` ...) and ends
with `response.completed` (or `response.incomplete`) carrying the whole response; an
`error` event or `response.failed` is the error it names.

A server that answers 404 at `/responses` does not speak this API (vLLM, Ollama and the
other OpenAI-compatible servers speak Chat Completions): the first call stops the run
with a `ConfigError` saying to pass `api="chat_completions"`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from .._errors import ConfigError, ProviderError
from ..transport.base import HttpResponse
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
from .openai_base import OpenAIBase, error_status, service_tier

__all__ = ["OpenAIResponsesProvider"]

_ENCRYPTED = "reasoning.encrypted_content"
_INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


def _user_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for c in turn.contents:
        if isinstance(c, ContentToolResult):
            items.append({"type": "function_call_output", "call_id": c.id, "output": c.text})
        elif isinstance(c, ContentText):
            parts.append({"type": "input_text", "text": c.text})
        elif isinstance(c, ContentImage):
            parts.append({"type": "input_image", "image_url": c.data_uri, "detail": c.detail})
        elif isinstance(c, ContentDocument):
            parts.append({"type": "input_file", "filename": c.name, "file_data": c.data_uri})
    if parts:
        items.append({"role": "user", "content": parts})
    return items


def _assistant_items(turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for c in turn.contents:
        if isinstance(c, ContentThinking):
            # Only this API's own reasoning goes back: an item id and its encrypted content.
            if c.id and c.signature and not c.redacted:
                summary = [{"type": "summary_text", "text": c.thinking}] if c.thinking else []
                items.append(
                    {
                        "type": "reasoning",
                        "id": c.id,
                        "summary": summary,
                        "encrypted_content": c.signature,
                    }
                )
        elif isinstance(c, ContentText):
            if c.text:
                items.append({"role": "assistant", "content": c.text})
        elif isinstance(c, ContentToolRequest):
            items.append(
                {
                    "type": "function_call",
                    "call_id": c.id,
                    "name": c.name,
                    "arguments": msgspec.json.encode(c.arguments).decode(),
                }
            )
    return items


def _input(request: ChatRequest) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for turn in request.turns:
        items.extend(_assistant_items(turn) if turn.role == "assistant" else _user_items(turn))
    return items


def _usage(data: dict[str, Any], web_searches: int) -> TokenUsage:
    usage = data.get("usage") or {}
    details = usage.get("input_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    return TokenUsage(
        input=int(usage.get("input_tokens") or 0) - cached - written,
        output=int(usage.get("output_tokens") or 0),
        cached_input=cached,
        reasoning=int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
        cache_write=written,
        web_searches=web_searches,
    )


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = msgspec.json.decode(raw or "{}")
    except msgspec.DecodeError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_unparsed": raw}


def _read_output(output: list[dict[str, Any]]) -> tuple[list[Content], int]:
    """The turn's contents from a response's output items, and its web searches."""
    contents: list[Content] = []
    searches = 0
    for item in output:
        kind = item["type"]
        if kind == "reasoning":
            parts = item.get("summary") or []
            summary = "\n\n".join(part.get("text") or "" for part in parts)
            contents.append(ContentThinking(summary, item.get("encrypted_content"), id=item["id"]))
        elif kind == "message":
            for part in item["content"]:
                if part["type"] == "output_text":
                    contents.append(ContentText(part["text"]))
                elif part["type"] == "refusal":
                    contents.append(ContentText(part["refusal"]))
        elif kind == "function_call":
            arguments = _arguments(item.get("arguments"))
            contents.append(ContentToolRequest(item["call_id"], item["name"], arguments))
        elif kind == "web_search_call":
            searches += 1
    return contents, searches


class _ResponsesStream(StreamReader):
    """The events of a streamed response, down to the response they end with."""

    marker = "response.completed"

    def __init__(self) -> None:
        super().__init__()
        self._response: dict[str, Any] | None = None
        self._items: dict[int, dict[str, Any]] = {}

    def feed(self, event: ServerSentEvent) -> str | None:
        data = msgspec.json.decode(event.data)
        if not isinstance(data, dict):
            raise TypeError(f"an event is a JSON object, not {type(data).__name__}")
        kind = data.get("type") or event.event
        if kind == "response.output_text.delta":
            delta = data["delta"]
            return delta if isinstance(delta, str) and delta else None
        if kind == "response.output_item.done":
            self._items[int(data["output_index"])] = data["item"]
        elif kind in ("response.completed", "response.incomplete"):
            self._response = data["response"]
            self.complete = True
        elif kind == "error":  # the error's fields at the top, or under "error"
            nested = data.get("error")
            raise StreamErrorEvent(
                error_status(nested if isinstance(nested, dict) else data), event.data
            )
        elif kind == "response.failed":
            error = (data.get("response") or {}).get("error") or {}
            raise StreamErrorEvent(error_status(error), msgspec.json.encode(error).decode())
        return None

    def body(self) -> dict[str, Any]:
        if self._response is None:
            raise KeyError("response.completed")
        response = dict(self._response)
        if not response.get("output") and self._items:
            response["output"] = [self._items[i] for i in sorted(self._items)]
        return response


class OpenAIResponsesProvider(OpenAIBase):
    """OpenAI's Responses API (`POST {base_url}/responses`)."""

    batch_url: ClassVar[str] = "/v1/responses"

    def url(self) -> str:
        return f"{self.base_url}/responses"

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": _input(request), "store": False}
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.output_schema is not None:
            body["text"] = {
                "format": {"type": "json_schema", "name": "output", "schema": request.output_schema}
            }
        effort = self.effort()
        if effort is not None:
            body["reasoning"] = {"effort": effort}
        if self.is_reasoning:
            body["include"] = [_ENCRYPTED]
        body.update(self.params)
        body.update(request.params)
        self.output_limit(body, "max_output_tokens")
        reasoning = body.get("reasoning")
        self.check_request(body, reasoning.get("effort") if isinstance(reasoning, dict) else None)
        return body

    def stream_reader(self) -> StreamReader:
        return _ResponsesStream()

    def parse(self, data: Any) -> Turn:
        contents, searches = _read_output(data["output"])
        status = data.get("status")
        if status == "incomplete":
            reason = (data.get("incomplete_details") or {}).get("reason")
            finish = _INCOMPLETE.get(reason or "", "max_tokens")
        elif any(isinstance(c, ContentToolRequest) for c in contents):
            finish = "tool_calls"
        elif status == "completed":
            finish = "stop"
        else:
            finish = "unknown"
        return Turn(
            "assistant",
            contents,
            tokens=_usage(data, searches),
            finish_reason=finish,  # type: ignore[arg-type]
            model=data.get("model") or self.model,
            service_tier=service_tier(data),
        )

    def _error(self, response: HttpResponse) -> ProviderError:
        if response.status == 404 and not self._names_a_model(response):
            raise ConfigError(
                f"{self.base_url}/responses answered 404: the server at {self.base_url} does "
                'not speak OpenAI\'s Responses API. Pass api="chat_completions" to the chat '
                "(OpenAI-compatible servers such as vLLM and Ollama speak Chat Completions)."
            )
        return super()._error(response)

    @staticmethod
    def _names_a_model(response: HttpResponse) -> bool:
        """Whether a 404 is OpenAI's "no such model" (the endpoint exists)."""
        try:
            data = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            return False
        error = data.get("error") if isinstance(data, dict) else None
        return isinstance(error, dict) and (
            error.get("code") == "model_not_found" or error.get("param") == "model"
        )
