"""Amazon Bedrock's Converse format: turns to a Converse request body and a Converse
response body back to a turn (the round trip itself is `bedrock.py`'s).

A request: `system` blocks, `messages` of content blocks (`text`, `image` and `document` with base64
`bytes`, `toolUse`, `toolResult`, `reasoningContent`, `cachePoint`), `toolConfig`
(`toolSpec` with `inputSchema.json`, `toolChoice`), `inferenceConfig` (`maxTokens`,
`temperature`, `topP`, `stopSequences`) and `additionalModelRequestFields` (what one
model family takes beyond those: Claude's `thinking`). A response: `output.message`,
`stopReason` and `usage` (`inputTokens` without the cache's, `cacheReadInputTokens`,
`cacheWriteInputTokens`, `outputTokens`).

Example:
    >>> body = converse_body(request, inference={"maxTokens": 100})
    >>> turn = converse_turn(data, model="us.anthropic.claude-sonnet-4-5-20250929-v1:0")
"""

from __future__ import annotations

import base64
import re
from typing import Any

import msgspec

from .._errors import ConfigError
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
from .prompt_cache import CachePlan

__all__ = [
    "FINISH",
    "STRUCTURED_TOOL",
    "converse_body",
    "converse_turn",
    "document_name",
    "inference_config",
    "mark_cache",
]

STRUCTURED_TOOL = "_structured_output"
_WRAPPED_TOOL = "_structured_output_value"
_STRUCTURED_DESCRIPTION = (
    "Give your final answer by calling this tool: its input is the answer, "
    "in exactly the shape of this schema."
)

#: Converse's stop reasons, as ours.
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_calls",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}

#: Our parameter names (and OpenAI's / Anthropic's) -> `inferenceConfig`'s.
_INFERENCE = {
    "max_tokens": "maxTokens",
    "maxTokens": "maxTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "topP": "topP",
    "stop": "stopSequences",
    "stop_sequences": "stopSequences",
    "stopSequences": "stopSequences",
}
#: Top-level keys of a Converse request, passed as given from `params`.
_TOP_LEVEL = frozenset(
    (
        "inferenceConfig",
        "additionalModelRequestFields",
        "additionalModelResponseFieldPaths",
        "guardrailConfig",
        "performanceConfig",
        "promptVariables",
        "requestMetadata",
        "toolConfig",
    )
)
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif"}
_IMAGE_FORMATS["image/webp"] = "webp"


def _image(content: ContentImage) -> dict[str, Any]:
    if content.data is None:
        raise ConfigError(
            "Bedrock's Converse API takes images as bytes, not URLs: download the image "
            "and pass its bytes (ContentImage(data=<base64>, media_type=...))."
        )
    kind = _IMAGE_FORMATS.get(content.media_type, content.media_type.rpartition("/")[2])
    return {"image": {"format": kind, "source": {"bytes": content.data}}}


#: The media types of the documents Converse takes, as its `format`s.
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
_NAME_REFUSED = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")


def document_name(filename: str) -> str:
    """A file name as Converse takes a document's: letters, digits, single spaces,
    hyphens, parentheses and square brackets (anything else a space).

    Example:
        >>> document_name("Q3 report_final.v2.pdf")
        'Q3 report final v2'
    """
    stem = filename.rpartition(".")[0] or filename
    name = " ".join(_NAME_REFUSED.sub(" ", stem).split())
    return name or "document"


def _document(content: ContentDocument) -> dict[str, Any]:
    kind = _DOCUMENT_FORMATS.get(content.media_type)
    if kind is None:
        raise content.refused(
            "Bedrock's Converse API", "pdf, csv, doc, docx, xls, xlsx, html, txt and md"
        )
    source = {"bytes": content.data}
    return {"document": {"format": kind, "name": document_name(content.name), "source": source}}


def _tool_result(content: ContentToolResult) -> dict[str, Any]:
    result: dict[str, Any] = {"toolUseId": content.id}
    if content.error is not None:
        result["content"] = [{"text": content.error}]
        result["status"] = "error"
    elif isinstance(content.value, dict):
        result["content"] = [{"json": content.value}]
    else:
        result["content"] = [{"text": content.text}]
    return {"toolResult": result}


def _thinking(content: ContentThinking) -> dict[str, Any] | None:
    if content.id is not None:  # another API's reasoning item: Bedrock cannot read it
        return None
    if content.redacted:
        return {"reasoningContent": {"redactedContent": content.thinking}}
    if not content.signature:  # Claude refuses reasoning without its signature
        return None
    text = {"text": content.thinking, "signature": content.signature}
    return {"reasoningContent": {"reasoningText": text}}


def _block(content: Content, role: str) -> dict[str, Any] | None:
    if isinstance(content, ContentText):
        return {"text": content.text} if content.text else None  # empty text is refused
    if isinstance(content, ContentImage):
        return _image(content)
    if isinstance(content, ContentDocument):
        return _document(content)
    if isinstance(content, ContentToolRequest):
        return {
            "toolUse": {"toolUseId": content.id, "name": content.name, "input": content.arguments}
        }
    if isinstance(content, ContentToolResult):
        return _tool_result(content)
    if isinstance(content, ContentThinking) and role == "assistant":
        return _thinking(content)
    return None


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in request.turns:
        blocks = [b for c in turn.contents if (b := _block(c, turn.role)) is not None]
        if turn.role == "user":  # tool results open the message that answers the calls
            blocks.sort(key=lambda b: "toolResult" not in b)
        if blocks:
            out.append({"role": turn.role, "content": blocks})
    return out


def _structured_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """The forced tool carrying `schema`; a non-object schema is wrapped in `value`."""
    if schema.get("type") == "object":
        name, wrapped = STRUCTURED_TOOL, schema
    else:
        inner = dict(schema)
        wrapped = {"type": "object", "properties": {"value": inner}, "required": ["value"]}
        if "$defs" in inner:
            wrapped["$defs"] = inner.pop("$defs")
        name = _WRAPPED_TOOL
    spec = {"name": name, "description": _STRUCTURED_DESCRIPTION, "inputSchema": {"json": wrapped}}
    return {"toolSpec": spec}


def inference_config(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Converse top-level fields, `inferenceConfig`) from a chat's `params`: our names
    for the inference settings, Converse's own keys as given, and every other key into
    `additionalModelRequestFields` (what the model takes beyond Converse's: `top_k` ...)."""
    top: dict[str, Any] = {}
    inference: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in params.items():
        if key in _INFERENCE:
            if key in ("stop",) and isinstance(value, str):
                value = [value]
            inference[_INFERENCE[key]] = value
        elif key in _TOP_LEVEL:
            top[key] = value
        elif key != "stream":
            extra[key] = value
    if extra:
        top["additionalModelRequestFields"] = {
            **extra,
            **(top.get("additionalModelRequestFields") or {}),
        }
    inference.update(top.pop("inferenceConfig", None) or {})
    return top, inference


def converse_body(
    request: ChatRequest,
    *,
    params: dict[str, Any],
    fields: dict[str, Any] | None = None,
    forced_ok: bool = True,
) -> dict[str, Any]:
    """The Converse request body of `request`: `params` (the chat's, then the request's)
    mapped by `inference_config()`, `fields` into `additionalModelRequestFields` (the
    reasoning setting's), `forced_ok`: whether the model takes a forced tool (not while
    Claude thinks)."""
    body: dict[str, Any] = {"messages": _messages(request)}
    if request.system_prompt:
        body["system"] = [{"text": request.system_prompt}]
    top, inference = inference_config(params)
    if fields:
        top["additionalModelRequestFields"] = {
            **fields,
            **(top.get("additionalModelRequestFields") or {}),
        }
    body.update(top)
    if inference:
        body["inferenceConfig"] = inference
    tools: list[dict[str, Any]] = [
        {
            "toolSpec": {
                "name": t.name,
                "description": t.description or t.name,
                "inputSchema": {"json": t.parameters},
            }
        }
        for t in request.tools
    ]
    choice: dict[str, Any] | None = None
    if request.output_schema is not None:
        forced = _structured_tool(request.output_schema)
        tools.append(forced)
        name = forced["toolSpec"]["name"]
        choice = {"tool": {"name": name}} if forced_ok else {"auto": {}}
    if tools and "toolConfig" not in body:
        config: dict[str, Any] = {"tools": tools}
        if choice is not None:
            config["toolChoice"] = choice
        body["toolConfig"] = config
    return body


def _has_point(blocks: Any) -> bool:
    return isinstance(blocks, list) and any(
        isinstance(b, dict) and "cachePoint" in b for b in blocks
    )


def mark_cache(body: dict[str, Any], plan: CachePlan) -> None:
    """Put `plan`'s cache points into a Converse body (changed in place): after the system
    prompt (or the tools), and after the conversation so far. A body with cache points of
    its own (from `params`) is left as it is."""
    tools = (body.get("toolConfig") or {}).get("tools")
    if not plan.any or _has_point(body.get("system")) or _has_point(tools):
        return
    point: dict[str, Any] = {"type": "default"}
    if plan.ttl:
        point["ttl"] = plan.ttl
    if plan.shared:
        if body.get("system"):
            body["system"] = [*body["system"], {"cachePoint": point}]
        elif tools:
            body["toolConfig"]["tools"] = [*tools, {"cachePoint": point}]
    messages = body.get("messages")
    if plan.conversation and messages:
        last = messages[-1]
        messages[-1] = {**last, "content": [*last["content"], {"cachePoint": point}]}


def _count(block: Any, key: str) -> int:
    value = block.get(key) if isinstance(block, dict) else None
    return int(value) if isinstance(value, int | float) else 0


def usage_of(data: dict[str, Any]) -> TokenUsage:
    """The reply's `usage` as ours: input without the cache's reads and writes."""
    usage = data.get("usage") or {}
    return TokenUsage(
        input=_count(usage, "inputTokens"),
        output=_count(usage, "outputTokens"),
        cached_input=_count(usage, "cacheReadInputTokens"),
        cache_write=_count(usage, "cacheWriteInputTokens"),
    )


def _content(block: dict[str, Any]) -> Content | None:
    if "text" in block:
        return ContentText(block["text"])
    if "toolUse" in block:
        use = block["toolUse"]
        return ContentToolRequest(use["toolUseId"], use["name"], use.get("input") or {})
    if "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            redacted = reasoning["redactedContent"]
            if isinstance(redacted, bytes):
                redacted = base64.b64encode(redacted).decode("ascii")
            return ContentThinking(redacted, redacted=True)
        text = reasoning["reasoningText"]
        return ContentThinking(text.get("text", ""), text.get("signature"))
    return None  # images, documents, citations ... a reply may add later


def converse_turn(data: Any, *, model: str) -> Turn:
    """The assistant turn of a Converse response body (a stream put together, too)."""
    contents: list[Content] = []
    answer: ContentText | None = None
    for block in data["output"]["message"]["content"]:
        use = block.get("toolUse")
        if isinstance(use, dict) and use.get("name") in (STRUCTURED_TOOL, _WRAPPED_TOOL):
            value = use.get("input") or {}
            if use["name"] == _WRAPPED_TOOL:
                value = value["value"]
            answer = ContentText(msgspec.json.encode(value).decode())
            contents.append(answer)
        elif (content := _content(block)) is not None:
            contents.append(content)
    finish = FINISH.get(data.get("stopReason") or "", "unknown")
    calls = any(isinstance(c, ContentToolRequest) for c in contents)
    if answer is not None:
        contents = [c for c in contents if not isinstance(c, ContentText) or c is answer]
        if not calls and finish == "tool_calls":
            finish = "stop"
    elif finish == "unknown" and calls:
        finish = "tool_calls"
    return Turn(
        "assistant",
        contents,
        tokens=usage_of(data),
        finish_reason=finish,  # type: ignore[arg-type]
        model=model,
    )
