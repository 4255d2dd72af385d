"""Cheap productivity (`json_witness`), enum literals decided beside their constraints, and
a utcm-monitor-like schema (one discriminator `if` per resource type, a deferred resource
object in each case): its deferred values are not built to learn they have a value, and the
language is the one the schema says."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar.ast import Node, Product, children, intersect
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_location import Location, LocationSpace, _member_schemas
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_sample import has_string, sample
from kor_cli.grammar.json_schema import STRICT, SchemaCompiler
from kor_cli.grammar.json_values import quoted, string_node
from tests.test_grammar_json_rules import check

PATTERNS = ["^a+$", "^[Yy][Ee][Ss]$", "b", "^$", "^(x|yz)$", "^a{3}$"]
NAMES = ["a", "b", "c"]

SCALARS = st.one_of(
    st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"]).map(
        lambda t: {"type": t}
    ),
    st.builds(
        lambda p, lo, hi: {"type": "string", "pattern": p, "minLength": lo, "maxLength": hi},
        st.sampled_from(PATTERNS), st.integers(0, 3), st.integers(0, 3),
    ),
    st.builds(lambda p: {"pattern": p}, st.sampled_from(PATTERNS)),
    st.lists(st.sampled_from(["a", "yes", 1, None, True]), min_size=1, max_size=3).map(
        lambda e: {"enum": e}
    ),
    st.builds(lambda v, t: {"const": v, "type": t}, st.sampled_from(["a", 2, None]),
              st.sampled_from(["string", "integer", "null"])),
    st.sampled_from([True, False, {}, {"minimum": 3}, {"type": "string", "format": "date"}]),
    st.builds(lambda t, lo, hi: {"type": t, "minimum": lo, "maximum": hi},
              st.sampled_from(["integer", "number"]), st.sampled_from([-1, 0.5, 2]),
              st.sampled_from([-2, 0.7, 2, 10**16])),
)  # fmt: skip


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    required = st.lists(st.sampled_from([*NAMES, "d"]), max_size=3, unique=True)
    extra = st.sampled_from([None, False, {"type": "string"}])
    return st.one_of(
        st.builds(_object, props, required, extra),
        st.builds(lambda o, n: {**o, "minProperties": n}, st.builds(_object, props, required,
                  extra), st.integers(1, 2)),
        st.lists(inner, min_size=2, max_size=2).map(lambda c: {"allOf": c}),
        st.lists(inner, min_size=1, max_size=3).map(lambda c: {"anyOf": c}),
        st.lists(inner, min_size=1, max_size=3).map(lambda c: {"oneOf": c}),
        st.builds(_patterned, props, st.lists(st.sampled_from(NAMES), max_size=1), inner),
        st.builds(lambda c, n: {"type": "array", "items": c, "maxItems": n}, inner,
                  st.integers(0, 2)),
        st.builds(lambda c, lo, u: {"type": "array", "items": c, "minItems": lo,
                                    "uniqueItems": u}, inner, st.integers(1, 2), st.booleans()),
        st.builds(lambda o, n: {**o, "not": n}, st.builds(_object, props, required, extra),
                  st.one_of(inner, containers_of(inner))),
        st.builds(lambda o, i, t, e: {**o, "if": i, "then": t, "else": e},
                  st.builds(_object, props, required, extra),
                  st.one_of(inner, containers_of(inner)), inner, inner),
        st.builds(lambda o, d, n: {**o, "dependentRequired": d, "propertyNames": n},
                  st.builds(_object, props, required, extra),
                  st.dictionaries(st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES))),
                  st.sampled_from([True, {"maxLength": 1}, {"pattern": "^a"}])),
    )  # fmt: skip


def containers_of(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Objects a `not` may refuse or not: required, forbidden or counted names, types."""
    props = st.dictionaries(st.sampled_from(NAMES), st.one_of(inner, st.just(False)), max_size=2)
    required = st.lists(st.sampled_from([*NAMES, "d"]), max_size=2, unique=True)
    simple = st.one_of(
        st.builds(lambda p, r: {"properties": p, "required": r}, props, required),
        st.builds(lambda n: {"maxProperties": n}, st.integers(0, 2)),
        st.builds(lambda n: {"minProperties": n}, st.integers(1, 3)),
        st.sampled_from([{"type": "string"}, {"type": ["object", "null"]}, True, False]),
    )
    cases = st.lists(st.one_of(simple, inner), min_size=1, max_size=3)
    return st.one_of(simple, cases.map(lambda c: {"anyOf": c}), cases.map(lambda c: {"oneOf": c}))


def _object(props: dict[str, Any], required: list[str], extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if extra is not None:
        out["additionalProperties"] = extra
    return out


def _patterned(props: dict[str, Any], required: list[str], value: Any) -> dict[str, Any]:
    return {**_object(props, required, None), "patternProperties": {"^a": value}}


TREES = st.recursive(SCALARS, containers, max_leaves=8)


@given(TREES)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_witness_never_claims_an_empty_schema(schema: Any) -> None:
    """Whenever the cheap proof says a schema has a value, the compiled grammar is not
    empty (the start rule, built eagerly, generates a string)."""
    compiler = SchemaCompiler(schema, max_states=20_000)
    if not compiler.witness.exists([schema]):
        return
    compile_module._cache.clear()
    try:
        compile_json_schema(schema, GrammarOptions(max_states=20_000))
    except GrammarError as error:
        assert "nothing" not in str(error) and "no JSON value" not in str(error), schema
        assert error.keyword or "too large" in str(error), error


def test_witness_answers() -> None:
    yes = {"type": "object", "required": ["a"], "properties": {"a": {"pattern": "^[Yy]$"}}}
    closed = {"type": "object", "required": ["a"], "additionalProperties": False}
    empty_pattern = {"type": "string", "pattern": "^a$", "maxLength": 0}
    compiler = SchemaCompiler({"$defs": {"y": yes}})
    exists = compiler.witness.exists
    assert exists([yes]) and exists([{}, {"$ref": "#/$defs/y"}]) and exists([{"enum": [1]}])
    assert not exists([closed]) and not exists([empty_pattern]) and not exists([False])
    assert not exists([{"type": "string"}, {"type": "integer"}, {"not": {}}])  # unknown
    assert not exists([{"enum": ["a"]}, {"enum": ["b"]}])
    some = {"anyOf": [{"type": "string", "maxLength": 0, "minLength": 1}, {"$ref": "#/$defs/y"}]}
    assert exists([some]) and exists([{"type": "object"}, some])
    assert not exists([{"type": "string"}, some])  # the object branch is not a string
    assert not exists([{"anyOf": [closed, False]}]) and not exists([{"anyOf": []}])
    plugins = {"oneOf": [{"type": "array", "items": yes}, {"type": ["object", "null"]}]}
    assert exists([plugins]) and exists([{"type": "object"}, plugins])  # types apart
    assert not exists([{"type": "string"}, plugins])
    assert not exists([{"oneOf": [{"type": "integer"}, {"type": "number"}]}])  # unknown
    assert exists([{"oneOf": [{"type": "string"}, {"minimum": 1}]}])  # {} fails the string
    assert not exists([{"oneOf": [{"type": "string"}, {"minimum": 1}]}, {"type": "string"}])
    # branches that share the object type: a witness object every other branch refuses
    kinds = [{"required": ["a"], "properties": {"a": {}, "b": False}}, {"required": ["b"]}]
    assert exists([{"oneOf": [False, *kinds]}]) and exists([{"oneOf": [{}, *kinds[1:]]}])
    assert not exists([{"oneOf": [{}, {"properties": {"a": {}}}]}])  # {} satisfies both
    assert not exists([{"oneOf": [kinds[0], {"required": ["a"]}]}])  # {"a":..} both
    assert exists([{"oneOf": [kinds[0], {"properties": {"a": False}}]}])
    assert not exists([{"oneOf": [{"required": ["a"]}, {"required": ["a"]}]}])
    # minProperties: optional members every schema naming members declares
    some = {"type": "object", "minProperties": 1, "properties": {"a": False, "b": {}}}
    assert exists([some]) and not exists([some, {"properties": {"a": {}}}])
    assert not exists([{**some, "maxProperties": 0}]) and exists([{"minProperties": 1}, {}])
    assert not exists([{"type": "object", "minProperties": 1, "additionalProperties": False}])
    # minItems, formats, dependencies and propertyNames that the witness can tell apart
    items = {"type": "array", "items": yes, "minItems": 2}
    assert exists([items]) and not exists([{**items, "uniqueItems": True}])
    assert not exists([{**items, "maxItems": 1}]) and not exists([{**items, "items": False}])
    assert exists([{"type": "string", "format": "date"}, {"format": "not-a-known-format"}])
    assert not exists([{"type": "string", "format": "date", "pattern": "^x"}])
    depends = {"dependentRequired": {"a": ["c"]}, "propertyNames": {"maxLength": 0}}
    assert exists([{"type": "object", **depends}]) and not exists([yes, depends])
    patterned = {"type": "object", "patternProperties": {"^a": {"type": "integer"}}}
    assert exists([patterned]) and not exists([{**patterned, "required": ["a"], **yes}])
    assert exists([{"type": "integer", "minimum": 1.5, "maximum": 2}, {"minimum": -3}])
    assert not exists([{"type": "number", "minimum": 0.5, "maximum": 0.7}])  # unknown
    assert not exists([{"type": "integer", "minimum": 3}, {"maximum": 2}])


def _products(node: Node) -> int:
    seen: set[int] = set()
    todo, count = [node], 0
    while todo:
        n = todo.pop()
        if id(n) not in seen:
            seen.add(id(n))
            count += isinstance(n, Product)
            todo += children(n)
    return count


@given(st.lists(st.sampled_from(["yes", "YES", "a", "aaa", "x", "yz", "", 'q"']), min_size=1,
                max_size=4, unique=True), st.sampled_from(PATTERNS))  # fmt: skip
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_enum_beside_a_pattern_without_a_product(values: list[str], pattern: str) -> None:
    """The literals a pattern accepts, chosen at compile time (no product left for the
    rule build), and exactly those: Python's `re` agrees on these ASCII patterns."""
    schema = {"enum": values, "pattern": pattern}
    kept = [v for v in values if re.search(pattern, v)]
    compiler = SchemaCompiler(schema)
    try:
        book = compiler.compile()
    except GrammarError:
        assert not kept
        return
    assert _products(book.bodies[book.start]) == 0
    grammar = compile_json_schema(schema)
    for value in values:
        assert grammar.accepts(('"' + value.replace('"', '\\"') + '"').encode()) == (value in kept)


@given(st.lists(st.one_of(
    st.builds(dict, properties=st.dictionaries(st.sampled_from(NAMES), st.just({}))),
    st.builds(dict, additionalProperties=st.just({"type": "string"})),
    st.builds(dict, patternProperties=st.just({"^a": {}})),
    st.just({"type": "object"}),
), max_size=6), st.sampled_from([*NAMES, "z", None]))  # fmt: skip
@settings(max_examples=80, deadline=None)
def test_child_locations_read_the_nodes_that_apply(nodes: list[Any], key: str | None) -> None:
    """A child location's schemas are those of every node's `_member_schemas`, in order."""
    space = LocationSpace(Resolver({}))
    loc = Location(space, tuple(nodes))
    want = [sub for node in nodes for sub in _member_schemas(node, key)]
    assert loc.child(key) is space.at(want)


def utcm_like(kinds: int) -> dict[str, Any]:
    """Resources of `kinds` types: `resourceType` matches a case-insensitive pattern, and
    an `if` per type (its `const`) picks the schema of `properties` from `$defs`."""
    names = [f"micro.kind{k}" for k in range(kinds)]
    insensitive = "|".join(
        "".join(f"[{c.upper()}{c}]" if c.isalpha() else re.escape(c) for c in n) for n in names
    )
    defs = {
        n: {
            "type": "object",
            "required": ["Identity"],
            "properties": {
                "Identity": {"pattern": "^([Yy][Ee][Ss])$"},
                **{f"P{p}": {"type": "string"} for p in range(8)},
                "Ensure": {"enum": ["Present", "Absent"], "type": "string"},
            },
        }
        for n in names
    }
    cases = [
        {"if": {"properties": {"resourceType": {"const": n}}},
         "then": {"properties": {"properties": {"$ref": f"#/$defs/{n}"}}}}
        for n in names
    ]  # fmt: skip
    return {
        "$defs": defs,
        "type": "object",
        "required": ["resourceType", "displayName", "properties"],
        "properties": {
            "displayName": {"type": "string"},
            "resourceType": {"pattern": f"^({insensitive})$"},
            "properties": {},
        },
        "allOf": cases,
    }


def test_utcm_like_cases_prove_their_values_unbuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start rule (every case) is built for the first mask; the deferred resource
    objects are proved productive, not built (before: every one of them, each call)."""
    schema = utcm_like(12)
    book = SchemaCompiler(schema).compile()
    book.build(book.start)
    assert book.forced == 0 and len(book._pending) >= 12
    assert _products(book.bodies[book.start]) <= 2  # the "none of the values" case only


def test_utcm_like_language() -> None:
    schema = utcm_like(6)
    good = {"Identity": "yes", "P3": "v", "Ensure": "Absent"}
    valid = [
        {"displayName": "d", "resourceType": "micro.kind2", "properties": good},
        {"displayName": "", "resourceType": "micro.kind5", "properties": {"Identity": "YES"}},
        {"displayName": "d", "resourceType": "MICRO.Kind2", "properties": {"any": [1]}},
    ]
    invalid = [
        {"displayName": "d", "resourceType": "micro.kind2", "properties": {"P3": "v"}},
        {"displayName": "d", "resourceType": "micro.kind2", "properties": {"Identity": "no"}},
        {"displayName": "d", "resourceType": "micro.kind9", "properties": good},
        {"resourceType": "micro.kind1", "properties": good},
        {"displayName": "d", "resourceType": "micro.kind1", "properties": [1]},
    ]
    check(schema, valid, invalid)


@given(
    st.sampled_from([*PATTERNS, "1.0", "^\\d{2,3}-[A-Z]$", "é+", "^(ab|c)*z$", "\\\\", "^[^a]$"]),
    st.integers(0, 4),
    st.sampled_from([None, 0, 1, 3, 6]),
)
@settings(max_examples=120, deadline=None)
def test_sampled_pattern_strings_are_strings_of_the_pattern(
    pattern: str, low: int, high: int | None
) -> None:
    """A text found on a pattern's AST (`json_sample`) is one the compiled string of the
    pattern within the lengths accepts; the found answer agrees with the compiled one."""
    compiler = SchemaCompiler({})
    body = compiler.defer.parsed(pattern, STRICT)
    node = intersect(string_node(low, high), quoted(body))
    dfa = compile_ast(node)
    if has_string(body, low, high):
        text = sample(quoted(body))
        assert text is not None and dfa.accepts(text), (pattern, text)
    assert compiler._some_string([pattern], low, high) == (not dfa.is_empty())
