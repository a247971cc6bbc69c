"""OpenAI Chat Completions, as the mock server speaks it.

With `"stream": true` the reply comes as `chat.completion.chunk` events: the
role, the reasoning and the text in pieces, each tool call opened by its
`index`, `id` and name with its arguments in fragments, the finish reason,
then (with `stream_options.include_usage`) a chunk with no choices and the
usage, then `data: [DONE]`. Like the API it refuses `stream_options` without
`stream`, and holds reasoning models to their rules (`openai_rules.py`): no
`max_tokens`, no sampling parameters unless `reasoning_effort` is `"none"`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec

from ..brain import MockMessage, MockReply, MockRequest, MockToolCall
from . import StreamEvent, WireFormat, fragments, pieces
from .openai_rules import OpenAIErrors, check_chat_model

__all__ = ["OpenAIFormat"]

_FINISH = {
    "stop": "stop",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
}


def _finish(reply: MockReply) -> str:
    return _FINISH.get(reply.finish, "stop")


def _text_and_images(content: Any) -> tuple[str, int]:
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts, images = [], 0
    for part in content:
        if part.get("type") == "text":
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            if not part.get("image_url", {}).get("url"):
                raise ValueError("image_url part without a url")
            images += 1
        elif part.get("type") == "file":  # counted with the images: what a message attaches
            file = part.get("file") or {}
            if not (file.get("file_data") or file.get("file_id")):
                raise ValueError("file part without file_data or file_id")
            images += 1
    return "\n".join(texts), images


def _usage(reply: MockReply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
    }


def _read_message(request: MockRequest, message: dict[str, Any]) -> None:
    """Add one of the request's messages to `request`: a system or developer message to
    its system prompt, any other to its messages."""
    role = message["role"]
    text, images = _text_and_images(message.get("content"))
    if role in ("system", "developer"):
        request.system = (request.system + "\n" if request.system else "") + text
    elif role == "tool":
        failed = text.startswith("Error:")
        said = MockMessage("tool", text, tool_call_id=message["tool_call_id"], tool_error=failed)
        request.messages.append(said)
    elif role == "assistant":
        calls = [_tool_call(c) for c in message.get("tool_calls") or []]
        request.messages.append(MockMessage("assistant", text, tool_calls=calls))
    elif role == "user":
        request.messages.append(MockMessage("user", text, images=images))
    else:
        raise ValueError(f"unknown role {role!r}")


def _tool_call(call: dict[str, Any]) -> MockToolCall:
    call_id, name = call["id"], call["function"]["name"]
    return MockToolCall(call_id, name, msgspec.json.decode(call["function"]["arguments"] or "{}"))


def _tool(function: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": function.get("parameters") or {},
    }


def _schema(response_format: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a `response_format` asks the reply to follow (None: plain text)."""
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    return None


class OpenAIFormat(OpenAIErrors, WireFormat):
    name = "openai"
    route = "/v1/chat/completions"

    stream_error_status = 500

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        if not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
            raise ValueError("'model' and 'messages' are required")
        check_chat_model(body, body["model"])
        request = MockRequest(format=self.name, model=body["model"])
        request.stream = body.get("stream") is True
        options = body.get("stream_options")
        if options is not None and not request.stream:
            raise ValueError(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled."
            )
        request.stream_usage = bool((options or {}).get("include_usage"))
        for message in body["messages"]:
            _read_message(request, message)
        request.tools = [_tool(t["function"]) for t in body.get("tools") or []]
        request.schema = _schema(body.get("response_format") or {})
        request.max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        return request

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": msgspec.json.encode(call.arguments).decode(),
                    },
                }
                for call in reply.tool_calls
            ]
        return {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
            "usage": _usage(reply),
        }

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        base: dict[str, Any] = {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.model,
            "system_fingerprint": None,
        }
        if request.stream_usage:
            base["usage"] = None

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**base, "choices": [choice]}

        events = [StreamEvent(chunk({"role": "assistant", "content": "", "refusal": None}))]
        events += [StreamEvent(chunk({"reasoning_content": p})) for p in pieces(reply.reasoning)]
        events += [StreamEvent(chunk({"content": p}), text=True) for p in pieces(reply.text)]
        for index, call in enumerate(reply.tool_calls):
            opening = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(StreamEvent(chunk({"tool_calls": [opening]})))
            arguments = msgspec.json.encode(call.arguments).decode()
            for fragment in fragments(arguments):
                more = {"index": index, "function": {"arguments": fragment}}
                events.append(StreamEvent(chunk({"tool_calls": [more]})))
        events.append(StreamEvent(chunk({}, _finish(reply))))
        if request.stream_usage:
            events.append(StreamEvent({**base, "choices": [], "usage": _usage(reply)}))
        events.append(StreamEvent("[DONE]"))
        return events

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        if status == 429:
            error = {"message": message, "type": "requests", "code": "rate_limit_exceeded"}
        elif status >= 500:
            error = {"message": message, "type": "server_error", "code": None}
        else:
            error = dict(self.error_body(status, message)["error"])
        return StreamEvent({"error": {**error, "param": None}})

    def incomplete_body(self) -> dict[str, Any]:
        return {"id": "chatcmpl-mock", "object": "chat.completion", "model": "x"}
