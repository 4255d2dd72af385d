"""`oneOf` over options on one member, and the `else` of an `if` on one member, factored
into that member (`json_factor`).

Hypothesis builds such `oneOf`s (a member's schema per option, required or not, beside
other members, closed or open) and checks that the grammar accepts exactly the instances
of a pool that jsonschema finds valid (open objects, as the specification), and that with
kor's closed objects it accepts the same pool instances as the distributed `oneOf` (the
subtracted `if`) did.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_dependencies import assert_widened
from test_grammar_disjoint import POOL, assert_exact

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_factor import OneOfFactor, failed_if, one_key
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver

VALUES = st.sampled_from([
    {"type": "integer"}, {"type": "string"}, {}, True, False, {"const": 1},
    {"enum": ["a", None]}, {"type": ["integer", "string"]}, {"not": {"type": "string"}},
    {"type": "array", "items": {"type": "integer"}}, {"oneOf": [{"type": "integer"}, {}]},
])  # fmt: skip


@st.composite
def options(draw: st.DrawFn) -> list[dict[str, Any]]:
    """2-4 options, each `properties: {x: S}`, maybe `required: [x]` and a title."""
    out = []
    for _ in range(draw(st.integers(2, 4))):
        option: dict[str, Any] = {"properties": {"x": draw(VALUES)}}
        if draw(st.booleans()):
            option["required"] = ["x"]
        if draw(st.booleans()):
            option["title"] = "an option"
        out.append(option)
    return out


BASES = st.sampled_from([
    {}, {"type": "object"}, {"properties": {"kind": {"type": "string"}}},
    {"properties": {"x": {"type": ["integer", "string", "null"]}, "kind": {}},
     "additionalProperties": False},
    {"additionalProperties": {"type": "string"}},
])  # fmt: skip


def _accepted(schema: Any, open_objects: bool) -> list[bool]:
    try:
        grammar = compile_json_schema(schema, GrammarOptions(open_objects=open_objects))
    except GrammarError as error:
        assert "nothing is left" in error.message or "matches no" in error.message
        return [False] * len(POOL)
    loc = LocationSpace(Resolver(schema)).at([schema])
    return [grammar.accepts(serialize(reorder(i, loc)).encode()) for i in POOL]


@given(options(), BASES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_one_of_is_exact(opts: list[Any], base: dict[str, Any]) -> None:
    assert one_key(opts, list, lambda s: True) is not None
    assert_exact({**base, "oneOf": opts})


@given(options(), BASES)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_one_of_keeps_the_closed_language(opts: list[Any], base: dict[str, Any]) -> None:
    schema = {**base, "oneOf": opts}
    factored = _accepted(schema, open_objects=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OneOfFactor, "factored", lambda self, value: None)
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        distributed = _accepted(schema, open_objects=False)
    assert factored == distributed, schema


def test_hatch_like_root_is_one_member_product() -> None:
    version = [{"properties": {"version": False}}] + [
        {"required": ["version"], "properties": {"version": {
            "type": "object", "required": ["source"],
            "properties": {"source": {"const": s}, "path": {"type": "string"}}}}}
        for s in ("code", "regex")
    ]  # fmt: skip
    made = one_key(version, list, lambda s: True)
    assert made == {
        "type": "object",
        "properties": {
            "version": {
                "oneOf": [
                    False,
                    version[1]["properties"]["version"],
                    version[2]["properties"]["version"],
                ]
            }
        },
    }
    assert one_key(version[1:], list, lambda s: True)["required"] == ["version"]  # type: ignore[index]


@pytest.mark.parametrize(
    "opts",
    [
        [{"properties": {"a": {}}}, {"properties": {"b": {}}}],  # two members
        [{"properties": {"a": {}}}, {"properties": {"a": {}}, "type": "object"}],  # a keyword
        [{"properties": {"a": {}}}, {"required": ["a"]}],  # an option without properties
        [{"properties": {"a": {}}}],  # one option
        [{"properties": {"a": {}}}, True],
    ],
)
def test_other_one_ofs_are_not_factored(opts: list[Any]) -> None:
    assert one_key(opts, list, lambda s: True) is None


def test_a_member_schema_that_may_be_refused_is_not_factored() -> None:
    opts = [{"properties": {"a": {"uniqueItems": True}}}, {"properties": {"a": {}}}]
    assert one_key(opts, list, lambda s: s == {}) is None


@st.composite
def conditional(draw: st.DrawFn) -> dict[str, Any]:
    """An `if` on member x's value (maybe required), then/else beside a base declaring x."""
    cond: dict[str, Any] = {"properties": {"x": draw(VALUES)}}
    if draw(st.booleans()):
        cond["required"] = ["x"]
    out: dict[str, Any] = {"if": cond, "properties": {"x": {}, "kind": {}}}
    sides = st.sampled_from(
        [
            {"required": ["kind"]},
            {"properties": {"kind": {"type": "string"}}},
            {"type": "object"},
            {"properties": {"x": {"type": "integer"}}},
        ]
    )
    for side in ("then", "else"):
        if draw(st.booleans()):
            out[side] = draw(sides)
    if draw(st.booleans()):
        out["additionalProperties"] = False
    return out


@given(conditional())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_if_is_exact(schema: dict[str, Any]) -> None:
    assert failed_if(schema, list, lambda s: True) is not None
    assert_exact(schema)


@given(conditional())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_if_keeps_the_closed_language(schema: dict[str, Any]) -> None:
    assert_same_as_subtracted(schema)


def assert_same_as_subtracted(schema: dict[str, Any]) -> None:
    """kor's closed objects: the factored `else` accepts the pool's instances that the
    `if` subtracted as DFAs did."""
    factored = _accepted(schema, open_objects=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OneOfFactor, "failed_if", lambda self, holder, *settled: None)
        patch.setattr(OneOfFactor, "negated_if", lambda self, holder, settled: None)
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        subtracted = _accepted(schema, open_objects=False)
    assert factored == subtracted, schema


def test_if_on_an_undeclared_member_is_not_factored() -> None:
    assert failed_if({"if": {"properties": {"x": {}}}}, list, lambda s: True) is None
    declared = {"if": {"properties": {"x": {"const": 1}}, "required": ["x"]},
                "else": {"properties": {"x": {}}}}  # fmt: skip
    assert failed_if(declared, list, lambda s: True) == {
        "type": "object",
        "properties": {"x": {"not": {"const": 1}}},
    }


@st.composite
def open_else(draw: st.DrawFn) -> dict[str, Any]:
    """An `if` on member x (maybe `type: object`, maybe required) whose holder does not
    declare x, with an `else` (inline or through `$ref`) open to other members (intlayer)."""
    cond: dict[str, Any] = {"properties": {"x": draw(VALUES)}}
    if draw(st.booleans()):
        cond["required"] = ["x"]
    if draw(st.booleans()):
        cond["type"] = "object"
    extra = draw(st.sampled_from([True, {"type": "integer"}, {"not": {"type": "string"}}]))
    target = {"type": "object", "additionalProperties": extra}
    out: dict[str, Any] = {"$defs": {"open": target}, "if": cond}
    out["else"] = {"$ref": "#/$defs/open"} if draw(st.booleans()) else target
    if draw(st.booleans()):
        out["then"] = draw(
            st.sampled_from(
                [
                    {"required": ["kind"]},
                    {"type": "object"},
                    {"properties": {"kind": {"type": "string"}}},
                ]
            )
        )
    return out


def _resolving(schema: dict[str, Any]) -> Any:
    return lambda s: Resolver(schema).resolve(s["$ref"], s, "")[0]


@given(open_else())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_if_beside_an_open_else_is_exact(schema: dict[str, Any]) -> None:
    assert failed_if(schema, list, lambda s: True, _resolving(schema)) is not None
    assert_exact(schema)


@given(open_else())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_factored_if_beside_an_open_else_keeps_the_closed_language(schema: dict[str, Any]) -> None:
    assert_same_as_subtracted(schema)


def test_if_beside_a_closed_else_is_not_factored() -> None:
    closed = {"if": {"properties": {"x": {}}}, "else": {"additionalProperties": False}}
    assert failed_if(closed, list, lambda s: True, lambda s: None) is None
    typed = {"if": {"type": "object", "properties": {"x": {"const": 1}}, "required": ["x"]},
             "else": {"additionalProperties": True}}  # fmt: skip
    assert failed_if(typed, list, lambda s: True) == {"properties": {"x": {"not": {"const": 1}}}}
    other_type = {"if": {"type": "array", "properties": {"x": {}}}, "else": typed["else"]}
    assert failed_if(other_type, list, lambda s: True) is None


@st.composite
def negated(draw: st.DrawFn) -> dict[str, Any]:
    """`if: {not: T}`, T a test on member x (prometheus' auth), beside a base that declares
    x or closes the object, or neither (then the `if` is subtracted as before)."""
    test: dict[str, Any] = {"properties": {"x": draw(VALUES)}}
    if draw(st.booleans()):
        test["required"] = ["x"]
    if draw(st.booleans()):
        test["type"] = "object"
    out: dict[str, Any] = {"if": {"not": test}}
    sides = st.sampled_from(
        [
            {"required": ["kind"]},
            {"properties": {"kind": {"const": None}}},
            {"type": "object"},
            {"properties": {"x": {"type": "integer"}}},
        ]
    )
    for side in ("then", "else"):
        if draw(st.booleans()):
            out[side] = draw(sides)
    base = draw(
        st.sampled_from(
            [
                {},
                {"properties": {"x": {}, "kind": {}}},
                {"properties": {"kind": {}}, "additionalProperties": False},
            ]
        )
    )
    return {**base, "allOf": [out]}


@given(negated())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_negated_if_is_exact(schema: dict[str, Any]) -> None:
    assert_exact(schema)


@given(negated())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_negated_if_with_closed_objects(schema: dict[str, Any]) -> None:
    """No invalid instance, and all the subtraction accepted (it subtracted an
    over-approximation of `not T`, which also removed objects without x)."""
    assert_widened(schema, OneOfFactor, "negated_if", lambda self, holder, settled: None)


def test_negated_if_needs_the_member_settled() -> None:
    factor = OneOfFactor(list, lambda s: True)
    holder = {"if": {"not": {"properties": {"x": {"const": None}}}}}
    assert factor.negated_if(holder, lambda name: False) is None
    holds, fails = factor.negated_if(holder, lambda name: True) or ({}, {})
    assert holds == {"type": "object", "properties": {"x": {"not": {"const": None}}},
                     "required": ["x"]}  # fmt: skip
    assert fails == {"properties": {"x": {"const": None}}}
