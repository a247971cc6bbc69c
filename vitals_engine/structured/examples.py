"""A value that fits a JSON schema: what a mock model (`chat_mock`, the mock server)
answers when asked for structured output.

It follows the schema's `const`, `examples`, `enum`, `allOf`, its number bounds and
`multipleOf`, its string lengths and `minItems`; it cannot make a string that fits a
`pattern` (give the field `examples`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["example_value"]


def example_value(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value of the shape `schema` asks for (what the mock models answer).

    It keeps the schema's `const`, `enum`, `default` and `examples`, and the
    bounds of numbers, strings and arrays; a `pattern` it cannot guess (give
    the schema `examples` for that).

    Example:
        >>> example_value({"type": "object", "properties": {"n": {"type": "integer"}}})
        {'n': 1}
        >>> numbers = {"type": "integer", "minimum": 3}
        >>> example_value({"type": "array", "items": numbers, "minItems": 2})
        [3, 3]
    """
    known: dict[str, Any] = defs if defs is not None else (schema.get("$defs") or {})
    if "$ref" in schema:
        return example_value(known[schema["$ref"].rsplit("/", 1)[-1]], known)
    if "allOf" in schema:
        return example_value(_merged(schema, known), known)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example_value(schema[key][0], known)
    for key in ("const", "enum", "default", "examples"):
        if key in schema:
            return schema[key] if key in ("const", "default") else schema[key][0]
    return _example_of_type(schema, known)


def _example_of_type(schema: dict[str, Any], known: dict[str, Any]) -> Any:
    """A value of the schema's `type` (its first but null, when it lists several)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example_value(sub, known) for name, sub in props.items()}
    if kind == "array":
        return [example_value(schema.get("items", {}), known)] * max(1, schema.get("minItems", 1))
    if kind in ("integer", "number"):
        return _example_number(schema, integer=kind == "integer")
    if kind == "string" or kind is None:
        return _example_string(schema)
    return {"boolean": True, "null": None}.get(str(kind), "mock")


def _example_string(schema: dict[str, Any]) -> str:
    """`mock`, repeated or cut to the string's `minLength` and `maxLength`."""
    shortest = schema.get("minLength", 0)
    return ("mock" * (shortest // 4 + 1))[: max(shortest, 4)][: schema.get("maxLength")]


def _merged(schema: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """`allOf`'s schemas as one, their properties and required keys together."""
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    properties = dict(merged.get("properties", {}))
    required = list(merged.get("required", []))
    for sub in schema["allOf"]:
        while "$ref" in sub:
            sub = known[sub["$ref"].rsplit("/", 1)[-1]]
        merged.update(sub)
        properties.update(sub.get("properties", {}))
        required += sub.get("required", [])
    if properties:
        merged["properties"] = properties
    if required:
        merged["required"] = required
    return merged


def _example_number(schema: dict[str, Any], *, integer: bool) -> int | float:
    """1, or the nearest a number's bounds and `multipleOf` allow."""
    step = 1 if integer else 0.5
    value: float = 1
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    if "exclusiveMinimum" in schema:
        value = max(value, schema["exclusiveMinimum"] + step)
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema:
        value = min(value, schema["exclusiveMaximum"] - step)
    if "multipleOf" in schema:
        value = math.ceil(value / schema["multipleOf"]) * schema["multipleOf"]
    return math.ceil(value) if integer else float(value)
