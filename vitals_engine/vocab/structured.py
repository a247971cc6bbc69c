"""Structured output: a JSON schema for a type, and validation of the reply."""

from __future__ import annotations

from typing import Any

import msgspec

from .._errors import ConfigError, ExtractionError

__all__ = ["example_value", "parse_structured", "schema_for"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def schema_for(kind: Any) -> dict[str, Any]:
    """The JSON schema of `kind`: a msgspec-known type, or a JSON schema dict as is."""
    if isinstance(kind, dict):
        if "type" not in kind and "$ref" not in kind and "anyOf" not in kind:
            raise ConfigError("A JSON schema passed as type= needs a 'type' key.")
        return kind
    try:
        schema = msgspec.json.schema(kind)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"Cannot make a JSON schema of {kind!r}: use a msgspec Struct or a JSON schema dict."
        ) from exc
    ref = schema.get("$ref")
    if ref and "$defs" in schema:
        # Providers want the object at the top, not a reference to it.
        name = ref.rsplit("/", 1)[-1]
        defs = dict(schema["$defs"])
        top = dict(defs.pop(name))
        if defs:
            top["$defs"] = defs
        return top
    return schema


def _violations(value: Any, schema: dict[str, Any], defs: dict[str, Any], path: str) -> list[str]:
    if "$ref" in schema:
        return _violations(value, defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs, path)
    if "anyOf" in schema:
        options = [_violations(value, s, defs, path) for s in schema["anyOf"]]
        return [] if any(not o for o in options) else options[0]
    problems: list[str] = []
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if kinds:
        ok = any(
            isinstance(value, _JSON_TYPES.get(k, object))
            and not (k in ("integer", "number") and isinstance(value, bool))
            for k in kinds
        )
        if not ok:
            return [f"{path or 'value'} should be {' or '.join(kinds)}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path or 'value'} should be one of {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}.{key} is missing" if path else f"'{key}' is missing")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problems += _violations(value[key], sub, defs, f"{path}.{key}" if path else key)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += _violations(item, schema["items"], defs, f"{path}[{i}]")
    return problems


def parse_structured(text: str, kind: Any, schema: dict[str, Any]) -> Any:
    """Decode and validate a structured reply; `ExtractionError` if it does not fit."""
    raw = text.strip()
    if raw.startswith("```"):
        raw = raw.strip("`").removeprefix("json").strip()
    if isinstance(kind, dict):
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError as exc:
            raise ExtractionError(f"The reply is not valid JSON: {exc}", raw=text) from exc
        problems = _violations(value, schema, schema.get("$defs", {}), "")
        if problems:
            raise ExtractionError(
                "The reply does not match the schema: " + "; ".join(problems[:5]), raw=text
            )
        return value
    try:
        return msgspec.json.decode(raw, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ExtractionError(f"The reply does not validate as {kind!r}: {exc}", raw=text) from exc


def example_value(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value of the shape `schema` asks for (what the mock models answer).

    Example:
        >>> example_value({"type": "object", "properties": {"n": {"type": "integer"}}})
        {'n': 1}
    """
    known: dict[str, Any] = defs if defs is not None else (schema.get("$defs") or {})
    if "$ref" in schema:
        return example_value(known[schema["$ref"].rsplit("/", 1)[-1]], known)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return example_value(schema[key][0], known)
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example_value(sub, known) for name, sub in props.items()}
    if kind == "array":
        return [example_value(schema.get("items", {}), known)]
    return {"string": "mock", "integer": 1, "number": 1.0, "boolean": True, "null": None}.get(
        str(kind), "mock"
    )
