"""What OpenAI's API holds requests to, shared by its two wire formats (Chat Completions
and Responses): its error bodies, its quota error, the rules of its reasoning models,
and strict mode's rules for a JSON schema.

Reasoning models are, by name, the o-series (`o1`, `o3`, `o4-mini` ...) and the gpt-5
family and later (`gpt-5`, `gpt-5.4-mini`, `gpt-6` ...), but not their `-chat` models
(`gpt-5-chat-latest`). Unless their reasoning effort is `"none"` they refuse the
sampling parameters, each surface in its own words:

- Chat Completions: `temperature` other than 1 is an `unsupported_value` ("Only the
  default (1) value is supported."); `top_p` other than 1, `presence_penalty` or
  `frequency_penalty` other than 0, `logprobs`, `top_logprobs` and `logit_bias` are
  `unsupported_parameter`s; `max_tokens` is refused whatever the effort ("Use
  'max_completion_tokens' instead."), and `o1-mini` / `o1-preview` refuse the `system`
  role (`unsupported_value` on `messages[i].role`; `developer` is taken).
- Responses: `temperature` other than 1, and `top_p`, `presence_penalty`,
  `frequency_penalty`, `top_logprobs` at any value, are refused as "Unsupported
  parameter: '...' is not supported with this model." with `code: null`, as the API
  answers there; `include` of `message.output_text.logprobs` is refused. A model that
  does not reason refuses `reasoning.effort` and `reasoning.summary`.

Every refusal is a 400 `invalid_request_error` whose body names the `param`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from . import Refused

__all__ = [
    "OpenAIErrors",
    "check_chat_model",
    "check_responses_model",
    "check_strict_schema",
    "is_reasoning_model",
]

_REASONING = re.compile(r"^(o\d|gpt-(5|[6-9]|\d\d))")
_CHAT_MODEL = re.compile(r"-chat(-|$)")
_NO_SYSTEM = re.compile(r"^o1-(mini|preview)")
_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
_ERROR_CODES = {429: "rate_limit_exceeded", 401: "invalid_api_key", 404: "model_not_found"}


def is_reasoning_model(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models, by its name.

    Example:
        >>> [is_reasoning_model(m) for m in ("o3", "gpt-5-mini", "gpt-5-chat-latest", "gpt-4.1")]
        [True, True, False, False]
    """
    return bool(_REASONING.match(model)) and not _CHAT_MODEL.search(model)


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _unsupported(name: str, code: str | None = "unsupported_parameter") -> Refused:
    return Refused(
        f"Unsupported parameter: '{name}' is not supported with this model.", param=name, code=code
    )


def check_chat_model(body: Mapping[str, Any], model: str) -> None:
    """Refuse what a chat completion request may not send to `model`."""
    if not is_reasoning_model(model):
        return
    if body.get("max_tokens") is not None:
        raise Refused(
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    if _NO_SYSTEM.match(model):
        for index, message in enumerate(body.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "system":
                raise Refused(
                    f"Unsupported value: 'messages[{index}].role' does not support 'system' "
                    "with this model.",
                    param=f"messages[{index}].role",
                    code="unsupported_value",
                )
    if body.get("reasoning_effort") == "none":
        return
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise Refused(
            f"Unsupported value: 'temperature' does not support {_json(temperature)} with this "
            "model. Only the default (1) value is supported.",
            param="temperature",
            code="unsupported_value",
        )
    for name, default in (("top_p", 1), ("presence_penalty", 0), ("frequency_penalty", 0)):
        value = body.get(name)
        if value is not None and value != default:
            raise _unsupported(name)
    if body.get("logprobs"):
        raise _unsupported("logprobs")
    if body.get("top_logprobs") is not None:
        raise _unsupported("top_logprobs")
    if body.get("logit_bias"):
        raise _unsupported("logit_bias")


def check_responses_model(body: Mapping[str, Any], model: str) -> None:
    """Refuse what a Responses request may not send to `model`."""
    reasoning = body.get("reasoning") or {}
    if not is_reasoning_model(model):
        for key in ("effort", "summary"):
            if reasoning.get(key) is not None:
                raise _unsupported(f"reasoning.{key}")
        return
    if "message.output_text.logprobs" in (body.get("include") or []):
        raise Refused(
            "logprobs are not supported with reasoning models.",
            param="include",
            code="unsupported_parameter",
        )
    if reasoning.get("effort") == "none":
        return
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise _unsupported("temperature", None)
    for name in ("top_p", "presence_penalty", "frequency_penalty"):
        if body.get(name) is not None:
            raise _unsupported(name, None)
    if body.get("top_logprobs"):
        raise _unsupported("top_logprobs", None)


def _strict_problem(schema: Any, context: tuple[str, ...]) -> str | None:
    """What keeps `schema` from strict mode, in the API's words, or None."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object" or "properties" in schema:
        problem = _object_problem(schema, context)
        if problem:
            return problem
    for path, sub in _subschemas(schema):
        problem = _strict_problem(sub, (*context, *path))
        if problem:
            return problem
    return None


def _object_problem(schema: dict[str, Any], context: tuple[str, ...]) -> str | None:
    """What keeps an object schema from strict mode (additional properties allowed, a
    property not required, or a property's own problem), or None."""
    where = f"In context={context!r}"
    if schema.get("additionalProperties") is not False:
        return f"{where}, 'additionalProperties' is required to be supplied and to be false."
    properties = schema.get("properties") or {}
    required = schema.get("required") or []
    missing = [name for name in properties if name not in required]
    if missing:
        return (
            f"{where}, 'required' is required to be supplied and to be an array including "
            f"every key in properties. Missing '{missing[0]}'."
        )
    for name, sub in properties.items():
        problem = _strict_problem(sub, (*context, "properties", name))
        if problem:
            return problem
    return None


def _subschemas(schema: dict[str, Any]) -> list[tuple[tuple[str, ...], Any]]:
    """The schemas inside `schema` other than its properties', each with its path."""
    subs: list[tuple[tuple[str, ...], Any]] = []
    if "items" in schema:
        subs.append((("items",), schema["items"]))
    for key in ("anyOf", "allOf"):
        subs += [((key, str(i)), sub) for i, sub in enumerate(schema.get(key) or [])]
    for key in ("$defs", "definitions"):
        subs += [((key, name), sub) for name, sub in (schema.get(key) or {}).items()]
    return subs


def check_strict_schema(schema: Any, owner: str, *, param: str, code: str) -> None:
    """Refuse `schema` if strict mode cannot take it: every object must say
    `additionalProperties: false` and require all its properties.

    Example:
        >>> check_strict_schema({"type": "object", "properties": {"a": {}}}, "function 'f'",
        ...                     param="tools[0].parameters", code="invalid_function_parameters")
        Traceback (most recent call last):
        Refused: Invalid schema for function 'f': In context=(), 'additionalProperties' ...
    """
    problem = _strict_problem(schema, ())
    if problem:
        raise Refused(f"Invalid schema for {owner}: {problem}", param=param, code=code)


class OpenAIErrors:
    """OpenAI's error bodies, rate-limit headers and quota error (a mixin of its formats)."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "error", "code": _ERROR_CODES.get(status)}}

    def refusal_body(self, refused: Refused) -> dict[str, Any]:
        error = {
            "message": refused.message,
            "type": refused.kind,
            "param": refused.param,
            "code": refused.code,
        }
        return {"error": error}

    def quota_error(
        self, model: str, retry_after: float | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        error = {
            "message": _QUOTA,
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
        headers: dict[str, str] = {}
        if retry_after is not None:
            headers["retry-after"] = f"{retry_after:g}"
        return 429, {"error": error}, headers

    def rate_limit_headers(self, retry_after: float) -> dict[str, str]:
        return {"x-ratelimit-reset-requests": f"{retry_after:g}s", "x-ratelimit-reset-tokens": "0s"}
