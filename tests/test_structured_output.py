"""Structured output checked against the user's JSON schema: every keyword of JSON Schema
(draft 2020-12, by the jsonschema library), a schema that is not valid refused when it is
given, and a reply that breaks it refused with where and how."""

from __future__ import annotations

import msgspec
import pytest

import vitals_engine as ve
from tests.helpers import openai
from vitals_engine.structured.examples import example_value
from vitals_engine.structured.schemas import parse_structured, schema_for

pytestmark = pytest.mark.usefixtures("no_retries")


class Person(msgspec.Struct):
    name: str
    age: int


class Team(msgspec.Struct):
    title: str
    members: list[Person]


def _object(**properties):
    return {"type": "object", "properties": properties}


SHAPE = {
    "oneOf": [
        _object(kind={"const": "circle"}, r={"type": "number"}) | {"required": ["kind", "r"]},
        _object(kind={"const": "square"}, side={"type": "number"}) | {"required": ["kind", "side"]},
    ]
}

#: keyword, schema, a reply that satisfies it, one that breaks it, what the error says
KEYWORDS = [
    ("oneOf", SHAPE, '{"kind": "circle", "r": 1}', '{"kind": "circle", "side": 1}',
     "at $: {'kind': 'circle', 'side': 1} is not valid under any of the given schemas"),
    ("oneOf-two", {"oneOf": [{"type": "integer"}, {"minimum": 0}]}, "-1", "3",
     "at $: 3 is valid under each of"),
    ("allOf", {"allOf": [{"type": "integer"}, {"minimum": 5}]}, "5", "4",
     "at $: 4 is less than the minimum of 5"),
    ("anyOf", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, '"x"', "true",
     "at $: True is not valid under any of the given schemas"),
    ("not", _object(name={"not": {"const": "admin"}}), '{"name": "ann"}', '{"name": "admin"}',
     "at $.name: 'admin' should not be valid under {'const': 'admin'}"),
    ("const", _object(version={"const": 2}), '{"version": 2}', '{"version": 3}',
     "at $.version: 2 was expected"),
    ("enum", {"type": "string", "enum": ["yes", "no"]}, '"no"', '"maybe"',
     "at $: 'maybe' is not one of ['yes', 'no']"),
    ("minimum", {"type": "array", "items": {"minimum": 0}}, "[0, 1]", "[0, -1]",
     "at $[1]: -1 is less than the minimum of 0"),
    ("maximum", {"type": "array", "items": {"maximum": 5}}, "[1, 5]", "[1, 5, 7]",
     "at $[2]: 7 is greater than the maximum of 5"),
    ("exclusiveMinimum", {"type": "number", "exclusiveMinimum": 0}, "0.5", "0",
     "at $: 0 is less than or equal to the minimum of 0"),
    ("exclusiveMaximum", {"type": "number", "exclusiveMaximum": 1}, "0.5", "1",
     "at $: 1 is greater than or equal to the maximum of 1"),
    ("multipleOf", {"type": "integer", "multipleOf": 5}, "15", "7",
     "at $: 7 is not a multiple of 5"),
    ("minLength", _object(code={"type": "string", "minLength": 3}), '{"code": "abc"}',
     '{"code": "ab"}', "at $.code: 'ab' is too short"),
    ("maxLength", _object(code={"type": "string", "maxLength": 3}), '{"code": "abc"}',
     '{"code": "abcd"}', "at $.code: 'abcd' is too long"),
    ("pattern", _object(zip={"type": "string", "pattern": "^[0-9]{5}$"}), '{"zip": "75011"}',
     '{"zip": "7501"}', "at $.zip: '7501' does not match '^[0-9]{5}$'"),
    ("additionalProperties", _object(a={}) | {"additionalProperties": False}, '{"a": 1}',
     '{"a": 1, "b": 2}', "at $: Additional properties are not allowed ('b' was unexpected)"),
    ("required", _object(a={}) | {"required": ["a"]}, '{"a": null}', '{"b": 1}',
     "at $: 'a' is a required property"),
    ("minItems", {"type": "array", "minItems": 2}, "[1, 2]", "[1]", "at $: [1] is too short"),
    ("maxItems", {"type": "array", "maxItems": 2}, "[1, 2]", "[1, 2, 3]",
     "at $: [1, 2, 3] is too long"),
    ("uniqueItems", {"type": "array", "uniqueItems": True}, "[1, 2]", "[1, 2, 1]",
     "at $: [1, 2, 1] has non-unique elements"),
    ("$ref", {"$defs": {"Score": {"type": "integer", "maximum": 10}}, "type": "object",
              "properties": {"score": {"$ref": "#/$defs/Score"}}},
     '{"score": 10}', '{"score": 11}', "at $.score: 11 is greater than the maximum of 10"),
    ("type", {"type": "array", "items": {"type": "integer"}}, "[1, 2.0]", "[1, true]",
     "at $[1]: True is not of type 'integer'"),
    ("nested Structs", schema_for(Team), '{"title": "a", "members": [{"name": "b", "age": 3}]}',
     '{"title": "a", "members": [{"name": "b", "age": "3"}]}',
     "at $.members[0].age: '3' is not of type 'integer'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "good", "bad", "says"), [k[1:] for k in KEYWORDS], ids=[k[0] for k in KEYWORDS]
)
def test_each_keyword_is_checked(schema, good, bad, says):
    """A reply that satisfies the keyword is returned decoded; one that breaks it raises
    ExtractionError naming the path in the reply and the violation, holding the raw reply."""
    checked = schema_for(schema)
    assert parse_structured(good, checked, checked) == msgspec.json.decode(good)
    with pytest.raises(ve.ExtractionError) as info:
        parse_structured(bad, checked, checked)
    assert str(info.value).startswith("The reply does not match the schema: ")
    assert says in str(info.value)
    assert info.value.raw == bad


def test_the_first_five_violations_are_listed_and_the_rest_counted():
    """A reply with many violations lists the first five, in order, and says how many more."""
    schema = {"type": "array", "items": {"type": "integer", "maximum": 5}}
    with pytest.raises(ve.ExtractionError) as info:
        parse_structured(str(list(range(6, 14))), schema, schema)
    message = str(info.value)
    assert "at $[0]: 6 is greater than the maximum of 5; at $[1]: 7" in message
    assert "at $[4]: 10 " in message
    assert "$[5]" not in message
    assert message.endswith(" (and 3 more)")


def test_format_is_an_annotation():
    """`format` is not checked: a string that is no email passes a schema asking for one."""
    schema = schema_for({"type": "string", "format": "email"})
    assert parse_structured('"not an email"', schema, schema) == "not an email"


def test_an_earlier_draft_named_by_its_schema_is_honoured():
    """A schema whose `$schema` names draft 7 is checked by draft 7's rules (an `items`
    list is a tuple there; draft 2020-12 refuses it as a schema)."""
    pair = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **pair}
    assert parse_structured('["a", 1]', draft7, schema_for(draft7)) == ["a", 1]
    with pytest.raises(ve.ExtractionError, match=r"at \$\[1\]: 'b' is not of type 'integer'"):
        parse_structured('["a", "b"]', draft7, draft7)
    with pytest.raises(ve.ConfigError, match=r"\(draft 2020-12\): at \$\.items of the schema"):
        schema_for(pair)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "strin"}, r"not valid JSON Schema \(draft 2020-12\): at \$\.type of the "
         r"schema: 'strin' is not one of \['array', 'boolean'"),
        (_object(n={"type": "integer", "minimum": "5"}),
         r"at \$\.properties\.n\.minimum of the schema: '5' is not of type 'number'"),
        ({"type": "object", "required": "name"},
         r"at \$\.required of the schema: 'name' is not of type 'array'"),
        (_object(n={"$ref": "#/$defs/Missing"}),
         r"\$ref to '#/\$defs/Missing' \(at \$\.properties\.n of the schema\) that "
         "points to nothing in the schema"),
        (_object(n={"$ref": "https://example.com/n.json"}), "points to nothing in the schema"),
        (_object(default={"$ref": "#/$defs/Gone"}),
         r"'#/\$defs/Gone' \(at \$\.properties\.default of the schema\)"),
        ({"answer": "integer"}, r"says nothing of the reply's shape: none of its keys "
         r"\['answer'\] is a keyword"),
        ({"type": int}, "is not JSON"),
    ],
    ids=[
        "type", "minimum", "required", "missing $ref", "remote $ref", "$ref in a property "
        "named default", "no keyword", "not JSON",
    ],
)  # fmt: skip
def test_a_schema_that_is_not_valid_is_a_config_error(schema, says):
    """A JSON schema dict that is not valid JSON Schema, says nothing of the reply's shape,
    points outside itself or is not JSON is a ConfigError saying what is wrong."""
    with pytest.raises(ve.ConfigError, match=says):
        schema_for(schema)


def test_refs_are_followed_from_where_they_stand():
    """A `$ref` under a nested `$id` is looked up from that `$id`, and a `$ref` inside a
    `const` value is a value, not a reference: neither is refused."""
    schema = {
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {
            "point": {
                "$id": "https://example.com/point.json",
                "$defs": {"Coordinate": {"type": "number"}},
                "type": "array",
                "items": {"$ref": "#/$defs/Coordinate"},
            },
            "marker": {"const": {"$ref": "#/nowhere"}},
        },
    }
    checked = schema_for(schema)
    assert parse_structured('{"point": [1, 2.5]}', checked, checked) == {"point": [1, 2.5]}
    with pytest.raises(ve.ExtractionError, match=r"at \$\.point\[0\]: 'x' is not of type"):
        parse_structured('{"point": ["x"]}', checked, checked)


def test_a_bad_schema_fails_generate_structured_when_it_is_given():
    """generate_structured() refuses a schema that is not valid before any sample runs."""
    with pytest.raises(ve.ConfigError, match="'strin' is not one of"):
        ve.generate_structured(ve.chat_mock(), type={"type": "strin"})


@pytest.mark.anyio
async def test_a_bad_schema_fails_extract_data_before_the_model_is_asked(server):
    """extract_data() with a schema that is not valid raises ConfigError and sends nothing."""
    chat = openai(server)
    with pytest.raises(ve.ConfigError, match=r"at \$\.properties\.n\.maximum of the schema"):
        await chat.extract_data_async("Rate it.", type=_object(n={"maximum": "ten"}))
    assert server.requests == 0
    assert chat.turns == []


@pytest.mark.anyio
async def test_a_violating_reply_over_http_raises_extraction_error(server):
    """A reply from a server that breaks the schema's `maximum` and `additionalProperties`
    raises ExtractionError naming both, holding the raw reply; the schema was sent as is."""
    schema = _object(score={"type": "integer", "maximum": 5}) | {
        "required": ["score"],
        "additionalProperties": False,
    }
    raw = '{"score": 7, "why": "good"}'
    server.script(lambda req: raw)
    with pytest.raises(ve.ExtractionError) as info:
        await openai(server).extract_data_async("Rate it.", type=schema)
    assert str(info.value) == (
        "The reply does not match the schema: at $.score: 7 is greater than the maximum of 5; "
        "at $: Additional properties are not allowed ('why' was unexpected)"
    )
    assert info.value.raw == raw
    assert server.log[-1].body["response_format"]["json_schema"]["schema"] == schema


@pytest.mark.anyio
async def test_a_violating_reply_fails_its_sample_in_a_run(tmp_path):
    """In a run, a structured reply that breaks a JSON-schema dict fails its sample with an
    ExtractionError naming the path; a reply that fits is the sample's result."""
    schema = _object(answer={"type": "integer", "minimum": 0}) | {"required": ["answer"]}
    replies = {"one": '{"answer": 4}', "two": '{"answer": -4}'}
    task = ve.Task(
        [{"input": "one", "target": "4"}, {"input": "two", "target": "4"}],
        solver=ve.generate_structured(ve.chat_mock(lambda p: replies[p]), type=schema),
        scorer=ve.detect_includes(),
        dir=tmp_path,
    )
    await task.eval_async(fail_on_error=False)
    frame = task.get_samples().sort("input")
    assert frame["result"][0] == '{"answer":4}'
    assert frame["solver_metadata"][0] == {"answer": 4}
    assert frame["error"][1].startswith("ExtractionError while solving")
    assert "at $.answer: -4 is less than the minimum of 0" in frame["error"][1]


@pytest.mark.anyio
async def test_the_mock_fills_a_constrained_schema_with_a_value_that_fits():
    """chat_mock answers a schema of constants, bounds, lengths, allOf and $ref with a value
    the check accepts, so offline runs of such a schema pass."""
    schema = {
        "$defs": {"Kind": {"const": "square"}},
        "allOf": [
            _object(kind={"$ref": "#/$defs/Kind"}, side={"type": "integer", "minimum": 3}),
            _object(
                ratio={"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                step={"type": "integer", "minimum": 2, "multipleOf": 5},
                code={"type": "string", "minLength": 6, "maxLength": 6},
                tags={"type": "array", "items": {"enum": ["a"]}, "minItems": 2},
                id={"type": "string", "pattern": "^[0-9]+$", "examples": ["42"]},
            ),
        ],
        "required": ["kind", "side", "ratio", "step", "code", "tags", "id"],
    }
    value = await ve.chat_mock().extract_data_async("A shape.", type=schema)
    assert value == {
        "kind": "square",
        "side": 3,
        "ratio": 0.5,
        "step": 5,
        "code": "mockmo",
        "tags": ["a", "a"],
        "id": "42",
    }
    assert example_value({"type": "integer", "maximum": -3}) == -3
