"""Google's Gemini API (`models/{model}:generateContent`), spoken directly: no SDK.

Gemini's shapes differ from OpenAI's in a few ways this module absorbs:

- Turns are `contents` with roles "user" and "model"; each holds `parts`
  (text, `inlineData` / `fileData` images, `inlineData` documents, `functionCall`,
  `functionResponse`, thought summaries flagged `thought: true`).
- Tool results go back as `functionResponse` parts of a user turn, matched
  to their call by name (and by `id` when the API gave one).
- Schemas (tool parameters, `responseSchema`) are an OpenAPI subset: no
  `additionalProperties`, `$defs` or `$ref`. `gemini_schema()` rewrites a
  JSON schema into that subset.
- Thought signatures are opaque tokens the API wants back on the part they
  came with. A signature on a thought part stays on its `ContentThinking`;
  one on any other part is kept as an empty `ContentThinking` just before
  that part's content, and re-attached to it when the turn is sent back.
- Streaming is another method: `:streamGenerateContent?alt=sse`, whose
  events each carry a `GenerateContentResponse` with the next parts. They
  are put together into the response the whole answer would be: text pieces
  of the same kind (thought or not) join into one part, and a signature that
  comes with a later piece (Gemini sends it on the last) goes on the joined
  part; function calls come whole. The last chunk has the `finishReason` and
  the final `usageMetadata`; a stream without it, or cut after it, is not
  whole. A chunk `{"error": {...}}` is the error its `code` stands for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

import msgspec

from .._errors import AuthenticationError, ProviderError, RateLimitError
from ..transport.base import HttpResponse
from ..transport.sse import ServerSentEvent
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
from .http import HttpProvider, StreamErrorEvent, StreamReader
from .reasoning import EFFORT_BUDGETS

__all__ = ["GeminiProvider", "gemini_schema"]


_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}

#: The HTTP status of a `google.rpc.Code` name, for an error chunk without a number.
_STATUS_CODES = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500,
    "UNKNOWN": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}

#: Request parameters with a Gemini name of their own in `generationConfig`.
_RENAME = {
    "max_tokens": "maxOutputTokens",
    "max_output_tokens": "maxOutputTokens",
    "top_p": "topP",
    "top_k": "topK",
    "stop": "stopSequences",
    "stop_sequences": "stopSequences",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
}
#: Parameters that belong at the top of the request, not in `generationConfig`.
_TOP_LEVEL = {
    "safetySettings": "safetySettings",
    "safety_settings": "safetySettings",
    "toolConfig": "toolConfig",
    "tool_config": "toolConfig",
    "cachedContent": "cachedContent",
    "cached_content": "cachedContent",
    "labels": "labels",
    "tools": "tools",
}
#: Models that take a `thinkingLevel` (Gemini 3 and later), and our efforts in its words.
_LEVELS = re.compile(r"^(models/)?gemini-([3-9]|\d\d)")
_GEMINI_LEVEL = {
    "none": "minimal",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}
#: Parameters that go into `generationConfig.thinkingConfig`.
_THINKING = {"thinking_budget": "thinkingBudget", "include_thoughts": "includeThoughts"}

#: The keys of Gemini's `Schema` object (an OpenAPI 3.0 subset).
SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_FORMATS = frozenset({"enum", "date-time", "float", "double", "int32", "int64"})


# -- schemas ------------------------------------------------------------------------------


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (JSON schema) rewritten into the subset Gemini accepts.

    `$ref`s are inlined from `$defs` / `definitions` (a recursive reference
    becomes a plain object), `["string", "null"]` types and `anyOf` with
    null become `nullable`, `const` becomes a one-value `enum`, and keys
    Gemini rejects (`additionalProperties`, `$schema`, `examples` ...) are dropped.

    Example:
        >>> gemini_schema({"type": "object", "properties": {"a": {"type": ["integer", "null"]}},
        ...                "additionalProperties": False})
        {'type': 'object', 'properties': {'a': {'nullable': True, 'type': 'integer'}}}
    """
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _clean(schema, defs, ())


#: How one key of a schema is rewritten: (value, definitions, references being inlined)
#: -> its entries in Gemini's schema, or None when it is not this key's case.
_Rewrite = Callable[[Any, dict[str, Any], tuple[str, ...]], dict[str, Any] | None]


def _clean(schema: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """One (sub)schema in Gemini's subset: a `$ref` inlined, then key by key."""
    if not isinstance(schema, dict):
        return {}
    if isinstance(schema.get("$ref"), str):
        return _inlined(schema, defs, seen)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        out.update(_clean_entry(key, value, defs, seen))
    enum = out.get("enum")
    if isinstance(enum, list) and "type" not in out and all(isinstance(v, str) for v in enum):
        out["type"] = "string"  # Gemini's enums are string enums
    return out


def _inlined(schema: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    """A schema with a `$ref`: the definition it names, under the schema's other keys
    (a reference to a definition being inlined, or to none, becomes a plain object)."""
    name = schema["$ref"].rsplit("/", 1)[-1]
    if name in seen or not isinstance(defs.get(name), dict):
        return {"type": "object"}
    merged = {**defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
    return _clean(merged, defs, (*seen, name))


def _clean_entry(
    key: str, value: Any, defs: dict[str, Any], seen: tuple[str, ...]
) -> dict[str, Any]:
    """What one key of a schema becomes: rewritten when Gemini reads it another way, kept
    when Gemini knows it, else dropped."""
    rewrite = _REWRITES.get(key)
    if rewrite is not None:
        entries = rewrite(value, defs, seen)
        if entries is not None:
            return entries
    return {key: value} if key in SCHEMA_KEYS else {}


def _properties(value: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    return {"properties": {name: _clean(sub, defs, seen) for name, sub in value.items()}}


def _items(value: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    return {"items": _clean(value, defs, seen)} if isinstance(value, dict) else None


def _alternatives(value: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    """`anyOf` / `oneOf`: a null alternative becomes `nullable`, a single one is inlined."""
    if not isinstance(value, list):
        return None
    options = [_clean(option, defs, seen) for option in value]
    rest = [o for o in options if o.get("type") != "null"]
    entries: dict[str, Any] = {"nullable": True} if len(rest) < len(options) else {}
    if len(rest) == 1:
        entries.update(rest[0])
    elif rest:
        entries["anyOf"] = rest
    return entries


def _all_of(value: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    """`allOf` of one schema is that schema (of several: kept only if Gemini knows it)."""
    if not isinstance(value, list) or len(value) != 1:
        return None
    return _clean(value[0], defs, seen)


def _types(value: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any] | None:
    """A list of types: "null" becomes `nullable`, several others an `anyOf`."""
    if not isinstance(value, list):
        return None
    kinds = [k for k in value if k != "null"]
    entries: dict[str, Any] = {"nullable": True} if len(kinds) < len(value) else {}
    if len(kinds) == 1:
        entries["type"] = kinds[0]
    elif kinds:
        entries["anyOf"] = [{"type": k} for k in kinds]
    return entries


#: The keys Gemini reads another way, each rewritten by its function (None: not here, so
#: the key is kept as it is if Gemini knows it).
_REWRITES: dict[str, _Rewrite] = {
    "properties": _properties,
    "items": _items,
    "anyOf": _alternatives,
    "oneOf": _alternatives,
    "allOf": _all_of,
    "const": lambda value, defs, seen: {"enum": [value]},
    "type": _types,
    "format": lambda value, defs, seen: {"format": value} if value in _FORMATS else {},
}


# -- request ------------------------------------------------------------------------------


def _ours(call_id: str, name: str) -> bool:
    """Whether `call_id` is one we made up for a call the API gave no id."""
    return re.fullmatch(rf"call_\d+_{re.escape(name)}", call_id) is not None


def _image_part(image: ContentImage) -> dict[str, Any]:
    if image.data is not None:
        return {"inlineData": {"mimeType": image.media_type, "data": image.data}}
    url = image.url or ""
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        mime = header.removeprefix("data:").split(";")[0] or image.media_type
        return {"inlineData": {"mimeType": mime, "data": data}}
    return {"fileData": {"mimeType": image.media_type, "fileUri": url}}


#: The document types Gemini reads (PDFs with their pages seen; the rest as text), by ours.
_DOCUMENT_TYPES = {
    "application/pdf": "application/pdf",
    "text/plain": "text/plain",
    "text/csv": "text/csv",
    "text/html": "text/html",
    "text/markdown": "text/md",
    "text/md": "text/md",
    "text/xml": "text/xml",
    "text/rtf": "text/rtf",
}


def _document_part(document: ContentDocument) -> dict[str, Any]:
    mime = _DOCUMENT_TYPES.get(document.media_type)
    if mime is None:
        raise document.refused("Gemini", "PDF and text (plain, csv, html, markdown, xml, rtf)")
    return {"inlineData": {"mimeType": mime, "data": document.data}}


def _response_part(result: ContentToolResult) -> dict[str, Any]:
    response = {"error": result.error} if result.error is not None else {"result": result.value}
    part: dict[str, Any] = {"name": result.name, "response": response}
    if not _ours(result.id, result.name):
        part["id"] = result.id
    return {"functionResponse": part}


def _user_parts(contents: list[Content]) -> list[dict[str, Any]]:
    parts = [_response_part(c) for c in contents if isinstance(c, ContentToolResult)]
    for c in contents:
        if isinstance(c, ContentText) and c.text:
            parts.append({"text": c.text})
        elif isinstance(c, ContentImage):
            parts.append(_image_part(c))
        elif isinstance(c, ContentDocument):
            parts.append(_document_part(c))
    return parts


def _model_parts(contents: list[Content]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending: str | None = None  # a signature that rides on the next part
    for c in contents:
        part: dict[str, Any] | None = None
        if isinstance(c, ContentThinking):
            if c.id is not None:  # another API's reasoning item: Gemini cannot read it
                continue
            if not c.thinking and c.signature:
                pending = c.signature
                continue
            part = {"text": c.thinking, "thought": True}
            if c.signature:
                part["thoughtSignature"] = c.signature
        elif isinstance(c, ContentText) and c.text:
            part = {"text": c.text}
        elif isinstance(c, ContentToolRequest):
            call: dict[str, Any] = {"name": c.name, "args": c.arguments}
            if not _ours(c.id, c.name):
                call["id"] = c.id
            part = {"functionCall": call}
        elif isinstance(c, ContentImage):
            part = _image_part(c)
        if part is None:
            continue
        if pending is not None and "thoughtSignature" not in part:
            part["thoughtSignature"] = pending
            pending = None
        parts.append(part)
    if pending is not None:
        parts.append({"text": "", "thoughtSignature": pending})
    return parts


def _contents(turns: list[Turn]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "assistant":
            parts, role = _model_parts(turn.contents), "model"
        else:
            parts, role = _user_parts(turn.contents), "user"
        if parts:
            out.append({"role": role, "parts": parts})
    return out


def _declaration(tool: ToolDef) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "description": tool.description}
    parameters = gemini_schema(tool.parameters)
    if parameters.get("properties"):  # Gemini refuses an object schema without properties
        out["parameters"] = parameters
    return out


def _split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(top-level request fields, `generationConfig` fields) of the request parameters."""
    top: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for key, value in params.items():
        if key in _TOP_LEVEL:
            top[_TOP_LEVEL[key]] = value
        elif key == "generationConfig" and isinstance(value, dict):
            config.update(value)
        elif key in _THINKING:
            config.setdefault("thinkingConfig", {})[_THINKING[key]] = value
        elif key in _RENAME:
            if _RENAME[key] == "stopSequences" and isinstance(value, str):
                value = [value]
            config[_RENAME[key]] = value
        else:
            config[key] = value
    return top, config


# -- response -----------------------------------------------------------------------------


def _thinking(ours: dict[str, Any] | None, given: Any) -> dict[str, Any] | None:
    """The request's `thinkingConfig`: the chat's `reasoning` and what params give, which
    win; a budget or level in params replaces ours whole (the API refuses both at once)."""
    if not isinstance(given, dict):
        return ours
    if ours is None or "thinkingBudget" in given or "thinkingLevel" in given:
        return given
    return {**ours, **given}


def _searches(data: dict[str, Any], model: str) -> int:
    """What a grounded reply is billed for: Gemini 3 and later per search query it ran,
    earlier models per grounded prompt (one, however many queries)."""
    candidates = data.get("candidates") or []
    grounding = (candidates[0].get("groundingMetadata") or {}) if candidates else {}
    queries = grounding.get("webSearchQueries") or []
    if not queries:
        return 0
    return len(queries) if _LEVELS.match(model) else 1


def _usage(meta: dict[str, Any]) -> TokenUsage:
    prompt = int(meta.get("promptTokenCount") or 0) + int(meta.get("toolUsePromptTokenCount") or 0)
    cached = int(meta.get("cachedContentTokenCount") or 0)
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    return TokenUsage(
        input=max(0, prompt - cached),
        output=int(meta.get("candidatesTokenCount") or 0) + thoughts,
        cached_input=cached,
        reasoning=thoughts,
    )


def _error_object(data: Any) -> dict[str, Any]:
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def _retry_delay(error: dict[str, Any]) -> float | None:
    """The wait in a 429's `google.rpc.RetryInfo` detail (`"retryDelay": "37s"`)."""
    for detail in error.get("details") or []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str):
            try:
                return float(delay.strip().removesuffix("s"))
            except ValueError:
                continue
    return None


def _bad_key(error: dict[str, Any]) -> bool:
    """Whether a 400 is Gemini's way of saying the API key is wrong."""
    reasons = {d.get("reason") for d in error.get("details") or [] if isinstance(d, dict)}
    message = error.get("message")
    return "API_KEY_INVALID" in reasons or (
        isinstance(message, str) and "api key" in message.lower()
    )


_TEXT_PART = frozenset(("text", "thought", "thoughtSignature"))


def _joins(last: dict[str, Any], part: dict[str, Any]) -> bool:
    """Whether a streamed text `part` continues the text part `last` (same kind, at most
    one signature between them)."""
    if "text" not in last or "text" not in part or not _TEXT_PART.issuperset(last):
        return False
    if not _TEXT_PART.issuperset(part):
        return False
    if last.get("thoughtSignature") and part.get("thoughtSignature"):
        return False
    return bool(last.get("thought")) == bool(part.get("thought"))


def _blocked(data: dict[str, Any], tokens: TokenUsage, model: str) -> Turn:
    """The turn of a response without candidates: a prompt Gemini blocked (its
    `promptFeedback.blockReason`), or else a malformed response."""
    reason = (data.get("promptFeedback") or {}).get("blockReason")
    if not reason:
        raise KeyError("candidates")
    text = f"Gemini blocked the prompt ({reason}) and gave no answer."
    return Turn(
        "assistant",
        [ContentText(text)],
        tokens=tokens,
        finish_reason="content_filter",
        model=model,
    )


def _reply_contents(parts: list[dict[str, Any]]) -> tuple[list[Content], int]:
    """A candidate's parts as contents (a thought signature on its own part as thinking
    without text), and how many of them are function calls."""
    contents: list[Content] = []
    calls = 0
    for part in parts:
        signature = part.get("thoughtSignature")
        if part.get("thought"):
            contents.append(ContentThinking(part.get("text") or "", signature=signature))
            continue
        if signature:
            contents.append(ContentThinking("", signature=signature))
        if "functionCall" in part:
            call = part["functionCall"]
            name = call["name"]
            call_id = call.get("id") or f"call_{calls}_{name}"
            contents.append(ContentToolRequest(call_id, name, dict(call.get("args") or {})))
            calls += 1
        elif "inlineData" in part:
            blob = part["inlineData"]
            contents.append(ContentImage(data=blob["data"], media_type=blob["mimeType"]))
        elif part.get("text"):
            contents.append(ContentText(part["text"]))
    return contents, calls


class _GeminiStream(StreamReader):
    """`GenerateContentResponse` chunks put together into the response they stand for."""

    marker = "a last chunk with a finishReason and the end of the stream"
    stops_at_marker = False

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[dict[str, Any]] = []
        self._candidate: dict[str, Any] = {}
        self._top: dict[str, Any] = {}  # usageMetadata, modelVersion, promptFeedback ...

    def feed(self, event: ServerSentEvent) -> str | None:
        chunk = msgspec.json.decode(event.data)
        if not isinstance(chunk, dict):
            raise TypeError(f"a chunk is a JSON object, not {type(chunk).__name__}")
        error = chunk.get("error")
        if error:
            raise StreamErrorEvent(_error_status(error), event.data)
        self._top.update((k, v) for k, v in chunk.items() if k != "candidates")
        if (chunk.get("promptFeedback") or {}).get("blockReason"):
            self.complete = True  # a blocked prompt: no candidates will come
        candidates = chunk.get("candidates") or []
        if not candidates:
            return None
        candidate = candidates[0]
        text: list[str] = []
        for part in (candidate.get("content") or {}).get("parts") or []:
            self._add(part)
            if not part.get("thought") and isinstance(part.get("text"), str):
                text.append(part["text"])
        self._candidate.update((k, v) for k, v in candidate.items() if k != "content")
        if candidate.get("finishReason"):
            self.complete = True
        return "".join(text) or None

    def _add(self, part: dict[str, Any]) -> None:
        if self._parts and _joins(self._parts[-1], part):
            last = self._parts[-1]
            last["text"] += part["text"]
            if part.get("thoughtSignature"):
                last["thoughtSignature"] = part["thoughtSignature"]
        else:
            self._parts.append(dict(part))

    def body(self) -> dict[str, Any]:
        out = dict(self._top)
        if self._candidate or self._parts:
            candidate = dict(self._candidate)
            if self._parts:
                candidate["content"] = {"role": "model", "parts": self._parts}
            out["candidates"] = [candidate]
        return out


def _error_status(error: Any) -> int:
    """The HTTP status an error chunk's `error` stands for."""
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and 400 <= code < 600:
            return code
        status = error.get("status")
        if isinstance(status, str) and status in _STATUS_CODES:
            return _STATUS_CODES[status]
    return 500


class GeminiProvider(HttpProvider):
    """Google Gemini (`POST {base_url}/models/{model}:generateContent`).

    The key comes from `api_key=`, else `GEMINI_API_KEY`, else `GOOGLE_API_KEY`,
    and travels in the `x-goog-api-key` header (never in the URL).
    """

    name = "Google"
    id_prefix = "google"
    env_key: ClassVar[str | None] = "GEMINI_API_KEY"
    fallback_env_keys = ("GOOGLE_API_KEY",)
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    billing_hint = "https://aistudio.google.com (its usage and billing pages)"

    def _model_url(self) -> str:
        path = self.model if self.model.startswith(("models/", "tunedModels/")) else None
        return f"{self.base_url}/{path or 'models/' + self.model}"

    def url(self) -> str:
        return f"{self._model_url()}:generateContent"

    def stream_url(self) -> str:
        return f"{self._model_url()}:streamGenerateContent?alt=sse"

    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body  # the method says it, not the body

    def streams(self, body: dict[str, Any]) -> bool:
        return bool(self.stream)  # only when asked: Gemini has no `stream` field

    def stream_reader(self) -> StreamReader:
        return _GeminiStream()

    def headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": _contents(request.turns)}
        if request.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        config: dict[str, Any] = {}
        if request.output_schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = gemini_schema(request.output_schema)
        top, generation = _split_params({**self.params, **request.params})
        thinking = _thinking(self.thinking_config(), generation.pop("thinkingConfig", None))
        if thinking:
            config["thinkingConfig"] = thinking
        config.update(generation)
        if "tools" in top and "tools" in body:  # built-in tools (googleSearch ...) beside ours
            top["tools"] = [*body["tools"], *top["tools"]]
        body.update(top)
        if config:
            body["generationConfig"] = config
        return body

    def parse(self, data: Any) -> Turn:
        model = data.get("modelVersion") or self.model
        tokens = _usage(data.get("usageMetadata") or {})
        searches = _searches(data, model)
        if searches:
            tokens = msgspec.structs.replace(tokens, web_searches=searches)
        candidates = data.get("candidates")
        if not candidates:
            return _blocked(data, tokens, model)
        candidate = candidates[0]
        content = candidate.get("content")
        if content is None and "finishReason" not in candidate:
            raise KeyError("content")
        contents, calls = _reply_contents((content or {}).get("parts") or [])
        finish = _FINISH.get(candidate.get("finishReason") or "", "unknown")
        if calls and finish in ("stop", "unknown"):
            finish = "tool_calls"
        return Turn(
            "assistant",
            contents,
            tokens=tokens,
            finish_reason=finish,  # type: ignore[arg-type]
            model=model,
        )

    def thinking_config(self) -> dict[str, Any] | None:
        """`thinkingConfig` for the chat's `reasoning`: a budget as `thinkingBudget`, an
        effort as `thinkingLevel` on Gemini 3 and later, else as the effort's budget."""
        setting = self.reasoning
        if setting is None:
            return None
        if isinstance(setting, int):
            return {"thinkingBudget": setting}
        if _LEVELS.match(self.model):
            return {"thinkingLevel": _GEMINI_LEVEL[setting]}
        return {"thinkingBudget": EFFORT_BUDGETS[setting]}

    def quota_exhausted(self, status: int, data: Any) -> bool:
        """A 429 for a per-day quota (`google.rpc.QuotaFailure` naming a `PerDay` quota):
        no wait of seconds or minutes cures it."""
        if status != 429:
            return False
        for detail in _error_object(data).get("details") or []:
            for violation in (detail.get("violations") or []) if isinstance(detail, dict) else []:
                quota = f"{violation.get('quotaId', '')} {violation.get('quotaMetric', '')}"
                if "perday" in quota.lower().replace("_", "").replace("-", ""):
                    return True
        return False

    def error_message(self, data: Any) -> str | None:
        error = _error_object(data)
        message = error.get("message")
        if isinstance(message, str):
            status = error.get("status")
            return f"{status}: {message}" if isinstance(status, str) and status else message
        return super().error_message(data)

    def _error(self, response: HttpResponse) -> ProviderError:
        error = super()._error(response)
        try:
            data = msgspec.json.decode(response.body)
        except msgspec.DecodeError:
            data = None
        detail = _error_object(data)
        context: dict[str, Any] = {
            "provider": error.provider,
            "model": error.model,
            "status": error.status,
            "request_id": error.request_id,
            "body": error.body,
        }
        if isinstance(error, RateLimitError) and error.retry_after is None:
            wait = _retry_delay(detail)
            if wait is not None:
                message = f"{error.message} (retry after {wait:g}s)"
                return RateLimitError(message, retry_after=wait, **context)
        if isinstance(error, AuthenticationError) or (response.status == 400 and _bad_key(detail)):
            said = (self.error_message(data) or "no details").rstrip(".")
            return AuthenticationError(
                f"authentication failed: {said}. Check {self.key_variables} or api_key=.", **context
            )
        return error
