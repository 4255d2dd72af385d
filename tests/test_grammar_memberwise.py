"""Overlapping `oneOf` options subtracted member by member (`json_memberwise`) and `if`s
that only ask which members are present (`json_conditions.presence_if`): exact against
jsonschema on a pool of instances; with kor's closed objects the member-wise `oneOf`
accepts the same instances as the whole-object subtraction, the presence `if` no invalid
one and all the subtraction accepted.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_dependencies import accepted, assert_widened
from test_grammar_disjoint import _accepted, assert_exact, member

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_keywords, json_memberwise
from kor_cli.grammar.json_schema import SchemaCompiler

NAMES = ["kind", "x", "y"]


@st.composite
def option(draw: st.DrawFn) -> dict[str, Any]:
    """`properties` over some of the names, maybe `required`, maybe `type: object`."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))
    out: dict[str, Any] = {"properties": {n: draw(member) for n in names}}
    required = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    if required:
        out["required"] = required
    if draw(st.booleans()):
        out["type"] = "object"
    return out


BASES = st.sampled_from([
    {}, {"type": "object"}, {"properties": {n: {} for n in NAMES}},
    {"properties": {"kind": {"type": "string"}, "x": {}, "y": {}}, "additionalProperties": False},
])  # fmt: skip


@given(st.lists(option(), min_size=2, max_size=3), BASES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_member_wise_one_of_is_exact(options: list[Any], base: dict[str, Any]) -> None:
    assert_exact({**base, "oneOf": options})


@given(st.lists(option(), min_size=2, max_size=3), BASES)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_member_wise_one_of_keeps_the_closed_language(options: list[Any], base: Any) -> None:
    schema = {**base, "oneOf": options}
    mine = accepted(schema)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_memberwise, "cases", lambda *args: {})
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        theirs = accepted(schema)
    assert mine == theirs, schema


def test_overlapping_options_subtract_member_values_only() -> None:
    options = [{"properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "string"}},
                "required": ["kind", "x"]},
               {"properties": {"kind": {"enum": ["b", "c"]}, "y": {"type": "integer"}},
                "required": ["y"]}]  # fmt: skip
    schema = {"type": "object", "properties": {"kind": {}, "x": {}, "y": {}}, "oneOf": options}
    compiler = SchemaCompiler(schema)
    compiler.compile()
    assert ("oneOf", "") not in compiler.subtracted  # no whole-object subtraction
    assert all(keyword == "not" for keyword, _ in compiler.subtracted)


def test_failures_the_conjunction_rules_out_are_left_out() -> None:
    # grpc-api-gateway's Schema.Item: a closed object declaring two recursive members,
    # options requiring one each by the same `$ref`s: "b present and not a tree" cannot
    # happen there, so no product over the (recursive, unrolled) tree is built
    tree = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/item"}},
        },
    }
    item = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"$ref": "#/$defs/tree"}, "b": {"$ref": "#/$defs/tree"}},
        "oneOf": [
            {"properties": {"a": {"$ref": "#/$defs/tree"}}, "required": ["a"]},
            {"properties": {"b": {"$ref": "#/$defs/tree"}}, "required": ["b"]},
        ],
    }
    schema = {"$defs": {"tree": tree, "item": item}, "$ref": "#/$defs/item"}  # fmt: skip
    compiler = SchemaCompiler(schema)
    compiler.compile()
    assert compiler.subtracted == []
    validator = jsonschema.Draft202012Validator(schema)
    deep = {"a": {"kids": [{"b": {"v": 1, "kids": [{"a": {}}]}}]}}
    for instance in [{"a": {}}, {"b": {"v": 2}}, {"a": {}, "b": {}}, {}, {"a": 1}, deep,
                     {"a": {"kids": [{"a": {}, "b": {}}]}}, {"a": {"kids": [{}]}}]:  # fmt: skip
        assert _accepted(schema, instance) == validator.is_valid(instance), instance


@st.composite
def presence(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))
    out: dict[str, Any] = {"if": {"required": names}}
    sides = st.sampled_from(
        [
            {"required": ["y"]},
            {"not": {"required": ["x"]}},
            {"properties": {"x": {"type": "string"}}},
            {"type": "null"},
        ]
    )
    for side in ("then", "else"):
        if draw(st.booleans()):
            out[side] = draw(sides)
    return out


@given(presence(), BASES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_presence_if_is_exact(conditional: dict[str, Any], base: dict[str, Any]) -> None:
    assert_exact({**base, "allOf": [conditional]})


@given(presence(), BASES)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_presence_if_with_closed_objects(conditional: Any, base: Any) -> None:
    """The subtraction's `if` closed the object to its `required` names on the `then` side:
    the cases do not."""
    schema = {**base, "allOf": [conditional]}
    assert_widened(schema, json_keywords, "presence_if", lambda holder: None)
