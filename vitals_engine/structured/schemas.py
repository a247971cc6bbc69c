"""Structured output: the JSON schema of a type, and the check of a reply against it.

Two kinds of `type=` ask for structured output, and each is checked by one
authority:

- a type msgspec knows (a Struct, a list of them ...): its schema is
  msgspec's, and a reply is decoded into that type by msgspec, which checks
  every field and constraint (`msgspec.Meta`) on the way;
- a JSON schema dict: it is checked once, when it is given (`schema_for`
  raises `ConfigError` naming what is wrong), and each reply is validated
  against it by the `jsonschema` library: the whole of JSON Schema, draft
  2020-12 unless the schema's `$schema` names an earlier draft. `format` is
  an annotation, not checked: whether it could be would depend on optional
  packages installed beside jsonschema.

jsonschema is imported when the first schema dict is given, so a process
that never gives one does not load it (about 45 ms in a process that has
the engine loaded, 120 ms cold). A checked schema is kept, by its JSON
text, for the next reply: checking a schema costs milliseconds, validating
a reply microseconds.

What a mock model answers to a schema is in `examples.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from .._errors import ConfigError, ExtractionError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["parse_structured", "schema_for"]

_SHOWN = 5  # violations a reply's error lists
_LONGEST = 200  # characters of one violation's message
_INSTANCE_KEYS = frozenset({"const", "enum", "default", "examples"})  # values, not schemas
_NAME_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def schema_for(kind: Any) -> dict[str, Any]:
    """The JSON schema of `kind`: a msgspec-known type, or a JSON schema dict as is.

    A dict is checked here, before any model is asked: it must be valid JSON
    Schema, say something of the reply's shape, and carry every definition
    its `$ref`s point to. Anything else is a `ConfigError` saying what is wrong.

    Example:
        >>> class Answer(msgspec.Struct):
        ...     answer: int
        >>> schema_for(Answer)["properties"]
        {'answer': {'type': 'integer'}}
        >>> try:
        ...     schema_for({"type": "strin"})
        ... except ConfigError as error:
        ...     print(str(error).split(": ", 1)[1])
        at $.type of the schema: 'strin' is not one of ['array', 'boolean', 'integer', ...
    """
    if isinstance(kind, dict):
        _validator(kind)
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


def parse_structured(text: str, kind: Any, schema: dict[str, Any]) -> Any:
    """Decode and validate a structured reply; `ExtractionError` if it does not fit.

    `kind` is what `type=` was: a msgspec type decodes the reply into it, a
    JSON schema dict (`schema`, as `schema_for` returned it) validates it.

    Example:
        >>> schema = {"type": "array", "items": {"type": "integer", "maximum": 5}}
        >>> parse_structured("[1, 2]", schema, schema)
        [1, 2]
        >>> try:
        ...     parse_structured("[1, 2, 7]", schema, schema)
        ... except ExtractionError as error:
        ...     print(error)
        The reply does not match the schema: at $[2]: 7 is greater than the maximum of 5
    """
    raw = text.strip()
    if raw.startswith("```"):
        raw = raw.strip("`").removeprefix("json").strip()
    if not isinstance(kind, dict):
        try:
            return msgspec.json.decode(raw, type=kind)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ExtractionError(
                f"The reply does not validate as {kind!r}: {exc}", raw=text
            ) from exc
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ExtractionError(f"The reply is not valid JSON: {exc}", raw=text) from exc
    problems = [
        f"at {_path(e.absolute_path)}: {_short(e.message)}"
        for e in _validator(schema).iter_errors(value)
    ]
    if problems:
        more = len(problems) - _SHOWN
        raise ExtractionError(
            "The reply does not match the schema: "
            + "; ".join(problems[:_SHOWN])
            + (f" (and {more} more)" if more > 0 else ""),
            raw=text,
        )
    return value


def _validator(schema: dict[str, Any]) -> Validator:
    try:
        text = msgspec.json.encode(schema)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"The JSON schema given as type= is not JSON ({exc}): it is sent to the model "
            "as JSON, so it holds only dicts, lists, strings, numbers, booleans and None."
        ) from exc
    return _checked(text)


@functools.lru_cache(maxsize=64)
def _checked(text: bytes) -> Validator:
    """The validator of the schema whose JSON is `text`, once the schema is checked."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError, best_match
    from jsonschema.validators import validator_for
    from referencing import Registry

    schema = msgspec.json.decode(text)
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        worst = best_match(exc.context) if exc.context else exc
        raise ConfigError(
            f"The JSON schema given as type= is not valid JSON Schema "
            f"({_draft(cls)}): at {_path(worst.absolute_path)} of the schema: "
            f"{_short(worst.message)}."
        ) from None
    if not set(schema) & set(cls.VALIDATORS):
        raise ConfigError(
            "The JSON schema given as type= says nothing of the reply's shape: none of its "
            f"keys {sorted(schema)} is a keyword of JSON Schema. Write, for example, "
            '{"type": "object", "properties": {"answer": {"type": "integer"}}}.'
        )
    _check_refs(schema, cls)
    return cls(schema, registry=Registry())  # an empty registry: no $ref goes to the network


def _check_refs(schema: dict[str, Any], cls: Any) -> None:
    """Every `$ref` of `schema` points inside it: the model and the check see nothing else."""
    from referencing import Registry, Resource
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import specification_with

    spec = specification_with(cls.META_SCHEMA["$schema"])
    root = Registry().resolver_with_root(Resource.from_contents(schema, spec))
    for where, ref, resolver in _refs(schema, (), root, spec):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise ConfigError(
                f"The JSON schema given as type= has a $ref to {ref!r} (at {_path(where)} of "
                "the schema) that points to nothing in the schema: a structured-output schema "
                "carries its own definitions, under $defs."
            ) from None


def _refs(
    node: Any, where: tuple[str | int, ...], resolver: Any, spec: Any, *, names: bool = False
) -> Iterator[tuple[tuple[str | int, ...], str, Any]]:
    """The `$ref`s under `node`, each with the schema holding it and the resolver it is
    looked up with (a nested `$id` moves the base); `names` when `node` maps names to
    schemas (`properties`, `$defs` ...), whose keys are no keywords."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            yield from _refs(item, (*where, i), resolver, spec)
        return
    if not isinstance(node, dict):
        return
    if not names and where and isinstance(node.get("$id"), str):
        resolver = resolver.in_subresource(spec.create_resource(node))
    if not names and isinstance(node.get("$ref"), str):
        yield where, node["$ref"], resolver
    for key, sub in node.items():
        if names or key not in _INSTANCE_KEYS:
            inner = not names and key in _NAME_MAPS
            yield from _refs(sub, (*where, key), resolver, spec, names=inner)


def _path(parts: Any) -> str:
    """`$.items[2].name`: where in a JSON value, as a JSONPath."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{part!r}]"
    return out


def _short(message: str) -> str:
    return message if len(message) <= _LONGEST else message[: _LONGEST - 1] + "…"


def _draft(cls: Any) -> str:
    """`draft 2020-12` for `Draft202012Validator`, `draft 7` for `Draft7Validator`."""
    number = cls.__name__.removeprefix("Draft").removesuffix("Validator")
    return f"draft {number[:4]}-{number[4:]}" if len(number) == 6 else f"draft {number}"
