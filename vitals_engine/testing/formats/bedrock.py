"""Amazon Bedrock's Converse and ConverseStream, as the mock server speaks them.

Routes: `POST /model/{modelId}/converse` and `/model/{modelId}/converse-stream` (the
model id quoted into the path), and `GET /aws/credentials`: a container credentials
endpoint (what `AWS_CONTAINER_CREDENTIALS_FULL_URI` points botocore at) issuing a new
temporary key pair each time, `{"AccessKeyId", "SecretAccessKey", "Token",
"Expiration"}`, valid `keys.lifetime` seconds on the server's clock (`keys.advance()`
moves it).

Every request's SigV4 signature is checked (`aws.py`): the test pair `TEST_ACCESS_KEY` /
`TEST_SECRET_KEY`, or a key the endpoint issued and that has not expired. A model in
`denied` answers 403 `AccessDeniedException` ("You don't have access to the model with
the specified model ID."); a model id starting `unknown.` answers 400
`ValidationException` ("The provided model identifier is invalid.").

A request: `messages` of content blocks (`text`, `image`, `document`, `toolUse`,
`toolResult`, `reasoningContent`, `cachePoint`), `system`, `toolConfig` (a `toolChoice`
of one tool is structured output), `inferenceConfig`. A reply: `output.message`,
`stopReason`, `usage` (`inputTokens` without the cache's, `cacheReadInputTokens`,
`cacheWriteInputTokens`, `outputTokens`, `totalTokens`), `metrics`. A `cachePoint`
marks the prefix before it for the server's prompt cache (5 minutes, or its `ttl`).
Reasoning comes as `reasoningContent.reasoningText` with a signature the server checks
when it is sent back.

The stream is event-stream frames (`messageStart`, `contentBlockStart` for a tool,
`contentBlockDelta` pieces, `contentBlockStop`, `messageStop`, `metadata` with the
usage); a mid-stream failure is an exception frame (`throttlingException`,
`serviceUnavailableException`, `modelStreamErrorException` ...). Errors are `{"message":
...}` with the `x-amzn-ErrorType` header naming the exception.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import msgspec
from aiohttp import web

from ...providers.mock import count_tokens
from ..brain import CachePlan, MockMessage, MockReply, MockRequest, MockToolCall, cache_plan
from . import Refused, StreamEvent, WireFormat, fragments, pieces
from .aws import AwsKeyStore, Frame

__all__ = ["BedrockFormat", "reasoning_signature"]

_STOP = {
    "stop": "end_turn",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "content_filtered",
}
#: The exception each status stands for, as Bedrock names it.
_EXCEPTIONS = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
    529: "ServiceUnavailableException",
}
_MESSAGES = {
    429: "Too many requests, please wait before trying again.",
    503: "Bedrock is unable to process your request.",
    529: "Bedrock is unable to process your request.",
    403: "You don't have access to the model with the specified model ID.",
    404: "The requested resource could not be found.",
}
_STREAM_EXCEPTIONS = {429: "throttlingException", 503: "serviceUnavailableException"}
_STREAM_EXCEPTIONS.update({400: "validationException", 529: "serviceUnavailableException"})
_ERROR_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"
_Block = tuple[int, Any, str | None]


def reasoning_signature(text: str) -> str:
    """The signature the mock gives reasoning text (and checks when it comes back)."""
    digest = hashlib.sha256(b"vitals-mock-bedrock-reasoning:" + text.encode()).digest()
    return base64.b64encode(digest).decode("ascii")


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list) or not content:
        raise Refused("A message's content must be a non-empty list.", kind="ValidationException")
    return content


def _tool_text(result: Mapping[str, Any]) -> str:
    parts = []
    for item in result.get("content") or []:
        if "text" in item:
            parts.append(item["text"])
        elif "json" in item:
            parts.append(msgspec.json.encode(item["json"]).decode())
    return "\n".join(parts)


def _user(message: Mapping[str, Any], pending: set[str]) -> list[MockMessage]:
    out: list[MockMessage] = []
    texts: list[str] = []
    images = 0
    for block in _blocks(message):
        if "text" in block:
            texts.append(block["text"])
        elif "image" in block or "document" in block:
            item = block.get("image") or block.get("document") or {}
            if not (item.get("source") or {}).get("bytes"):
                raise ValueError("an image or document needs source.bytes")
            images += 1
        elif "toolResult" in block:
            result = block["toolResult"]
            call_id = result["toolUseId"]
            if call_id not in pending:
                raise Refused(
                    f"toolResult {call_id} answers no toolUse of the previous turn.",
                    kind="ValidationException",
                )
            pending.discard(call_id)
            error = result.get("status") == "error"
            out.append(
                MockMessage("tool", _tool_text(result), tool_call_id=call_id, tool_error=error)
            )
        elif "cachePoint" not in block:
            raise ValueError(f"unexpected block {sorted(block)} in a user message")
    if pending:
        raise Refused("Expected toolResult blocks for every toolUse.", kind="ValidationException")
    if texts or images:
        out.append(MockMessage("user", "\n".join(texts), images=images))
    return out


def _assistant(message: Mapping[str, Any]) -> MockMessage:
    texts: list[str] = []
    calls: list[MockToolCall] = []
    thoughts: list[str] = []
    for block in _blocks(message):
        if "text" in block:
            texts.append(block["text"])
        elif "toolUse" in block:
            use = block["toolUse"]
            calls.append(MockToolCall(use["toolUseId"], use["name"], use.get("input") or {}))
        elif "reasoningContent" in block:
            text = block["reasoningContent"].get("reasoningText")
            if text is not None:
                if text.get("signature") != reasoning_signature(text.get("text", "")):
                    raise Refused(
                        "The reasoning content's signature does not match its text.",
                        kind="ValidationException",
                    )
                thoughts.append(text["text"])
        elif "cachePoint" not in block:
            raise ValueError(f"unexpected block {sorted(block)} in an assistant message")
    reasoning = "".join(thoughts) or None
    return MockMessage("assistant", "".join(texts), tool_calls=calls, reasoning=reasoning)


def _conversation(messages: Any) -> list[MockMessage]:
    if not isinstance(messages, list) or not messages:
        raise Refused("messages: a non-empty list is required.", kind="ValidationException")
    said: list[MockMessage] = []
    pending: set[str] = set()
    for message in messages:
        role = message.get("role")
        if role == "user":
            said.extend(_user(message, pending))
        elif role == "assistant":
            turn = _assistant(message)
            pending = {call.id for call in turn.tool_calls}
            said.append(turn)
        else:
            raise Refused(f"Unknown role {role!r}.", kind="ValidationException")
    return said


def _block_tokens(block: Mapping[str, Any]) -> int:
    if "text" in block:
        return count_tokens(str(block["text"]))
    if "toolResult" in block:
        return count_tokens(_tool_text(block["toolResult"]))
    return 0


def _with_points(blocks: list[Any], label: str, out: list[_Block]) -> None:
    """`blocks` as cache blocks, a `cachePoint` setting the ttl of the block before it."""
    for block in blocks:
        if "cachePoint" in block:
            if not out:
                raise Refused("A cachePoint cannot come first.", kind="ValidationException")
            tokens, content, _ = out[-1]
            out[-1] = (tokens, content, block["cachePoint"].get("ttl") or "5m")
        elif label == "tool":
            tokens = count_tokens(msgspec.json.encode(block).decode())
            out.append((tokens, {label: block}, None))
        else:
            out.append((_block_tokens(block), {label: block}, None))


def _plan(body: Mapping[str, Any], model: str) -> tuple[CachePlan | None, int]:
    """The request's cache plan (None without cache points), and the tools' tokens."""
    blocks: list[_Block] = []
    tools = (body.get("toolConfig") or {}).get("tools") or []
    _with_points(tools, "tool", blocks)
    unseen = sum(tokens for tokens, _, _ in blocks)
    _with_points(body.get("system") or [], "system", blocks)
    for message in body["messages"]:
        _with_points(message.get("content") or [], message.get("role", "user"), blocks)
    if not any(ttl for _, _, ttl in blocks):
        return None, unseen
    return cache_plan(model, blocks, extra_tokens=unseen), unseen


def _tools(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    config = body.get("toolConfig") or {}
    tools = []
    for tool in config.get("tools") or []:
        spec = tool.get("toolSpec")
        if spec is None:
            continue  # a cachePoint
        schema = (spec.get("inputSchema") or {}).get("json")
        if not isinstance(schema, dict):
            raise Refused(
                f"Tool {spec.get('name')!r} needs inputSchema.json.", kind="ValidationException"
            )
        tools.append(
            {"name": spec["name"], "description": spec.get("description", ""), "parameters": schema}
        )
    forced = (config.get("toolChoice") or {}).get("tool")
    schema = None
    if forced is not None:
        match = next((t for t in tools if t["name"] == forced.get("name")), None)
        if match is None:
            raise Refused("toolChoice names an unknown tool.", kind="ValidationException")
        schema = match["parameters"]
    return tools, schema


class BedrockFormat(WireFormat):
    name = "bedrock"
    route = "/model/{model:.+}/{action:converse(?:-stream)?}"
    stream_error_status = 503
    stream_content_type = "application/vnd.amazon.eventstream"

    def __init__(self) -> None:
        #: The keys the server takes, and its clock.
        self.keys = AwsKeyStore()
        #: Models the account has no access to (403 AccessDeniedException).
        self.denied: set[str] = set()

    # -- authentication -----------------------------------------------------------------

    def check_auth(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> None:
        self.keys.check(method, target, headers, body, "bedrock")

    def more_routes(self) -> list[tuple[str, str, Any]]:
        async def credentials(request: web.Request) -> web.Response:
            return web.json_response(self.keys.issue())

        return [("GET", "/aws/credentials", credentials)]

    # -- requests -------------------------------------------------------------------------

    def parse(
        self, body: Any, path: Mapping[str, str], query: Mapping[str, str] | None = None
    ) -> MockRequest:
        model = unquote(path["model"])
        if model.startswith("unknown."):
            raise Refused("The provided model identifier is invalid.", kind="ValidationException")
        if model in self.denied:
            raise Refused(_MESSAGES[403], status=403, kind="AccessDeniedException")
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        request = MockRequest(format=self.name, model=model)
        request.stream = path.get("action") == "converse-stream"
        request.max_tokens = (body.get("inferenceConfig") or {}).get("maxTokens")
        system = [b["text"] for b in body.get("system") or [] if "text" in b]
        request.system = "\n\n".join(system) or None
        request.messages = _conversation(body.get("messages"))
        request.tools, request.schema = _tools(body)
        request.cache, _ = _plan(body, model)
        return request

    # -- replies --------------------------------------------------------------------------

    def render(self, request: MockRequest, reply: MockReply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            text = {"text": reply.reasoning, "signature": reasoning_signature(reply.reasoning)}
            content.append({"reasoningContent": {"reasoningText": text}})
        stop = _STOP.get(reply.finish, "end_turn")
        value: Any = None
        if request.schema is not None and not reply.tool_calls and reply.text:
            try:
                value = msgspec.json.decode(reply.text)
            except msgspec.DecodeError:
                value = None
        if isinstance(value, dict):
            name = next(t["name"] for t in request.tools if t["parameters"] is request.schema)
            content.append(
                {"toolUse": {"toolUseId": "tooluse_forced", "name": name, "input": value}}
            )
            stop = "tool_use"
        elif reply.text:
            content.append({"text": reply.text})
        for call in reply.tool_calls:
            content.append(
                {"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.arguments}}
            )
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": _usage(reply),
            "metrics": {"latencyMs": 42},
        }

    def render_stream(self, request: MockRequest, reply: MockReply) -> list[StreamEvent]:
        whole = self.render(request, reply)
        events: list[StreamEvent] = [Frame({"role": "assistant", "p": "abc"}, "messageStart")]
        for index, block in enumerate(whole["output"]["message"]["content"]):
            events += _block_frames(index, block)
        events.append(Frame({"stopReason": whole["stopReason"], "p": "ab"}, "messageStop"))
        metadata = {"usage": whole["usage"], "metrics": whole["metrics"], "p": "abcdef"}
        events.append(Frame(metadata, "metadata"))
        return events

    def stream_error(
        self, status: int, message: str, *, sequence: int = 0, request: MockRequest | None = None
    ) -> StreamEvent:
        kind = _STREAM_EXCEPTIONS.get(status, "modelStreamErrorException")
        return Frame({"message": _MESSAGES.get(status, message)}, exception=kind)

    def malformed_event(self) -> StreamEvent:
        return Frame(
            {"contentBlockIndex": 0, "delta": {"text": "x"}}, "contentBlockDelta", corrupt=True
        )

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"message": _MESSAGES.get(status, message)}

    def refusal_body(self, refused: Refused) -> dict[str, Any]:
        return {"message": refused.message}

    def error_headers(self, status: int, kind: str | None = None) -> dict[str, str]:
        name = kind if kind and kind.endswith("Exception") else _EXCEPTIONS.get(status)
        name = name or "InternalServerException"
        return {"x-amzn-ErrorType": name + _ERROR_SUFFIX, "x-amzn-RequestId": "mock-request-id"}

    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        body = {"message": "Your request exceeds the service quota for your account."}
        return 400, body, self.error_headers(400, "ServiceQuotaExceededException")

    def incomplete_body(self) -> dict[str, Any]:
        return {"metrics": {"latencyMs": 1}}


def _usage(reply: MockReply) -> dict[str, Any]:
    read = min(reply.cached_tokens, reply.input_tokens)
    written = reply.cache_write_5m_tokens + reply.cache_write_1h_tokens
    rest = max(0, reply.input_tokens - read - written)
    usage = {"inputTokens": rest, "outputTokens": reply.output_tokens}
    usage["totalTokens"] = rest + read + written + reply.output_tokens
    if read or written:
        usage["cacheReadInputTokens"] = read
        usage["cacheWriteInputTokens"] = written
    return usage


def _block_frames(index: int, block: dict[str, Any]) -> list[StreamEvent]:
    frames: list[StreamEvent] = []
    at = {"contentBlockIndex": index}
    if "text" in block:
        for piece in pieces(block["text"]):
            frames.append(Frame({**at, "delta": {"text": piece}}, "contentBlockDelta", text=True))
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]["reasoningText"]
        for piece in pieces(reasoning["text"]):
            delta = {"reasoningContent": {"text": piece}}
            frames.append(Frame({**at, "delta": delta}, "contentBlockDelta"))
        signed = {"reasoningContent": {"signature": reasoning["signature"]}}
        frames.append(Frame({**at, "delta": signed}, "contentBlockDelta"))
    elif "toolUse" in block:
        use = block["toolUse"]
        start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
        frames.append(Frame({**at, "start": start}, "contentBlockStart"))
        for part in fragments(msgspec.json.encode(use["input"]).decode()):
            frames.append(Frame({**at, "delta": {"toolUse": {"input": part}}}, "contentBlockDelta"))
    frames.append(Frame({**at, "p": "abcd"}, "contentBlockStop"))
    return frames
