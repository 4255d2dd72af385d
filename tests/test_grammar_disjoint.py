"""Products left out (`json_disjoint`, `json_conditions`): still exact.

Hypothesis builds tagged unions (options told apart by type, `const`/`enum`, a required
discriminator member, nested anyOf/oneOf, `not` of a type, which members are present,
an always-true option, options closed to one member each) and lists of `if`s on one
member's value, and compares the compiled grammar
with jsonschema on a pool of instances: every valid instance is accepted, no invalid one.
"""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_disjoint import complement_types, disjoint, shape
from kor_cli.grammar.json_keywords import Collector, Part
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_schema import SchemaCompiler

KINDS = ["a", "b", "c"]
SCALARS = [None, True, 0, 1, 2.5, "", "a", "b", "x"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


def _objects() -> list[Any]:
    out: list[Any] = [{}, {"x": 1}, {"x": "a"}, {"y": None}]
    for kind, x in itertools.product([*KINDS, 1], [None, 1, "a", [1]]):
        out += [{"kind": kind}, {"kind": kind, "x": x}, {"kind": kind, "y": True, "x": x}]
    return out


POOL = SCALARS + [[], [1], ["a", None]] + _objects()

member = st.sampled_from([{"type": "integer"}, {"type": "string"}, {}, {"const": 1},
                          {"enum": ["a", None]}, False])  # fmt: skip


@st.composite
def tagged(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from([{"const": k} for k in KINDS] + [{"enum": KINDS[:2]}, {}]))
    props = {"kind": kind, "x": draw(member)}
    required = draw(st.lists(st.sampled_from(["kind", "x", "y"]), max_size=2, unique=True))
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if draw(st.booleans()):
        del schema["type"]
    if draw(st.booleans()):  # closed: a member the other option requires may be excluded
        schema["additionalProperties"] = False
    return schema


NAMES = st.lists(st.sampled_from(["kind", "x", "y"]), min_size=1, max_size=2, unique=True)
LEAVES = st.one_of(
    tagged(),
    st.sampled_from(TYPES).map(lambda t: {"type": t}),
    st.sampled_from(SCALARS).map(lambda v: {"const": v}),
    st.lists(st.sampled_from(SCALARS), min_size=1, max_size=3).map(lambda vs: {"enum": vs}),
    st.lists(st.sampled_from(TYPES), min_size=1, max_size=3).map(lambda ts: {"not": {"type": ts}}),
    NAMES.map(lambda ns: {"required": ns}),
    NAMES.map(lambda ns: {"not": {"required": ns}}),
    NAMES.map(lambda ns: {"not": {"anyOf": [{"required": [n]} for n in ns]}}),
    st.just({"title": "anything"}),
)
OPTIONS = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, min_size=2, max_size=3).flatmap(
        lambda ss: st.sampled_from([{"oneOf": ss}, {"anyOf": ss}])
    ),
    max_leaves=6,
)


def _accepted(schema: Any, instance: Any) -> bool:
    grammar = compile_json_schema(schema, GrammarOptions(open_objects=True))
    loc = LocationSpace(Resolver(schema)).at([schema])
    return grammar.accepts(serialize(reorder(instance, loc)).encode())


def assert_exact(schema: Any) -> None:
    """The grammar accepts exactly the valid instances of POOL (open objects, as the spec);
    a refusal must be a named empty language, and then nothing in POOL is valid."""
    validator = jsonschema.Draft202012Validator(schema)
    try:
        grammar = compile_json_schema(schema, GrammarOptions(open_objects=True))
    except GrammarError as error:
        assert "nothing is left" in error.message or "matches no" in error.message
        assert not any(validator.is_valid(i) for i in POOL)
        return
    loc = LocationSpace(Resolver(schema)).at([schema])
    for instance in POOL:
        text = serialize(reorder(instance, loc)).encode()
        assert grammar.accepts(text) == validator.is_valid(instance), (schema, instance)


@given(st.lists(OPTIONS, min_size=2, max_size=4))
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_one_of_with_disjoint_options_is_exact(options: list[Any]) -> None:
    schema = {"oneOf": options}
    assert_exact(schema)


@given(OPTIONS, OPTIONS)
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
def test_disjoint_shapes_share_no_instance(a: Any, b: Any) -> None:
    root = {"$defs": {"a": a, "b": b}}
    collector = Collector(Resolver(root), {}, 3)
    if disjoint(shape(collector, [Part(a, "/$defs/a")]), shape(collector, [Part(b, "/$defs/b")])):
        both = [i for i in POOL if jsonschema.Draft202012Validator(a).is_valid(i)
                and jsonschema.Draft202012Validator(b).is_valid(i)]  # fmt: skip
        assert not both, (a, b, both)


def test_tagged_union_needs_no_product() -> None:
    def option(kind: str, value: Any) -> dict[str, Any]:
        return {"type": "object", "properties": {"kind": {"const": kind}, "v": value},
                "required": ["kind", "v"]}  # fmt: skip

    tree = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/t"}}]}
    options = [option("n", {"type": "integer"}), option("t", {"$ref": "#/$defs/t"})]
    schema = {"$defs": {"t": tree}, "oneOf": [*options, {"type": "null"}]}
    grammar = compile_json_schema(schema)
    assert grammar.has_calls  # no product: recursion stays a rule, unbounded
    deep: Any = 1
    for _ in range(8):
        deep = [deep]
    assert _accepted(schema, {"kind": "t", "v": deep})
    assert _accepted(schema, None)
    assert not _accepted(schema, {"kind": "n", "v": [1]})


def test_not_of_a_type_is_the_other_types() -> None:
    assert complement_types({"type": "null"}) == ["array", "boolean", "object", "string", "number"]
    assert complement_types({"type": ["number", "string"]}) == ["array", "boolean", "null",
                                                                 "object"]  # fmt: skip
    assert complement_types({"type": "number", "minimum": 1}) is None
    assert complement_types({"type": "integer"}) is None  # non-integral numbers: no `type`
    assert complement_types({"type": "null", "title": "t"}) is not None  # annotations only
    schema = {"type": "object", "additionalProperties": {"not": {"type": "null"}}}
    assert _accepted(schema, {"a": 1, "b": [None]})
    assert not _accepted(schema, {"a": None})


@st.composite
def conditional(draw: st.DrawFn) -> dict[str, Any]:
    """An `if` on the value of "kind" (const or enum, maybe required / typed), then/else."""
    test = draw(st.sampled_from([{"const": k} for k in [*KINDS, 1]] + [{"enum": KINDS[1:]}]))
    cond: dict[str, Any] = {"properties": {"kind": test}}
    if draw(st.booleans()):
        cond["required"] = ["kind"]
    if draw(st.booleans()):
        cond["type"] = "object"
    out = {
        "if": cond,
        "then": draw(
            st.sampled_from(
                [{"required": ["x"]}, {"type": "object"}, {"properties": {"x": draw(member)}}]
            )
        ),
    }
    if draw(st.booleans()):
        out["else"] = draw(
            st.sampled_from(
                [{"properties": {"x": {"type": "string"}}}, {"required": ["y"]}, {"type": "null"}]
            )
        )
    return out  # fmt: skip


@given(st.lists(conditional(), min_size=2, max_size=5), st.sampled_from([None, "object"]))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_conditions_on_one_member_are_exact(conditions: list[Any], kind: str | None) -> None:
    schema: dict[str, Any] = {"allOf": conditions}
    if kind:
        schema["type"] = kind
    assert_exact(schema)


def test_many_conditions_on_one_member_compile_as_cases() -> None:
    # 40 conditionals: 2^40 combinations resolved one `if` at a time, 43 cases here
    names = [f"k{i}" for i in range(40)]
    conditions = [{"if": {"properties": {"kind": {"const": n}}, "required": ["kind"]},
                   "then": {"properties": {"v": {"const": n}}, "required": ["v"]}}
                  for n in names]  # fmt: skip
    schema = {"type": "object", "properties": {"kind": {"type": "string"}, "v": {}},
              "allOf": conditions}  # fmt: skip
    options = GrammarOptions(time_limit_s=60)
    assert accepted_with(schema, {"kind": "k7", "v": "k7"}, options)
    assert not accepted_with(schema, {"kind": "k7", "v": "k8"}, options)
    assert accepted_with(schema, {"kind": "other", "v": 1}, options)
    assert accepted_with(schema, {"v": [1]}, options)


def accepted_with(schema: Any, instance: Any, options: GrammarOptions) -> bool:
    grammar = compile_json_schema(schema, options)
    loc = LocationSpace(Resolver(schema)).at([schema])
    return grammar.accepts(serialize(reorder(instance, loc)).encode())


PRESENCE = st.one_of(
    st.lists(st.sampled_from(["kind", "x", "y"]), min_size=2, max_size=3).map(
        lambda ns: {"oneOf": [{"required": [n]} for n in ns]}
    ),
    NAMES.map(lambda ns: {"not": {"required": ns}}),
    NAMES.map(lambda ns: {"not": {"anyOf": [{"required": [n]} for n in ns]}}),
)


@given(st.lists(PRESENCE, min_size=1, max_size=2), st.sampled_from([{}, {"type": "object"}]))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_presence_applicators_are_exact(applied: list[Any], base: dict[str, Any]) -> None:
    schema = {**base, "allOf": applied}
    assert_exact(schema)


@st.composite
def closed_single(draw: st.DrawFn) -> list[Any]:
    """2-3 `oneOf` options, each closed to one member of its own (maybe required/typed)."""
    names = draw(st.lists(st.sampled_from(["kind", "x", "y"]), min_size=2, max_size=3,
                          unique=True))  # fmt: skip
    out = []
    for name in names:
        option: dict[str, Any] = {"properties": {name: draw(member)}}
        option["additionalProperties"] = False
        if draw(st.booleans()):
            option["required"] = [name]
        if draw(st.booleans()):
            option["type"] = "object"
        out.append(option)
    return out


@given(closed_single(), st.sampled_from([{}, {"type": "object"}, {"required": ["x"]}]))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_one_of_closed_single_members_is_exact(options: list[Any], base: dict[str, Any]) -> None:
    assert_exact({**base, "oneOf": options})


def test_many_closed_single_members_need_no_product() -> None:
    # traefik's middlewares: 25 options {properties: {m_k: ...}, additionalProperties: false}
    # pass together on the empty object, so no two were proven disjoint: 25 subtractions
    value = {"type": "object", "properties": {"v": {"type": "integer"}}}
    options = [{"properties": {f"m{k}": value}, "additionalProperties": False} for k in range(25)]
    schema = {"type": "object", "oneOf": options}
    compiler = SchemaCompiler(schema)
    compiler.compile()
    assert compiler.subtracted == []
    options_ = GrammarOptions()
    assert accepted_with(schema, {"m3": {"v": 1}}, options_)
    assert not accepted_with(schema, {"m3": {"v": 1}, "m4": {}}, options_)
    assert not accepted_with(schema, {}, options_)  # every option passes


@given(st.lists(tagged(), min_size=2, max_size=3))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_one_of_within_an_object_is_exact(options: list[Any]) -> None:
    assert_exact({"type": "object", "oneOf": options})


def test_options_without_type_are_disjoint_within_an_object() -> None:
    # webjob-publish-settings: options tell runMode apart but say no `type`; they all
    # accept every non-object, which the root's `type: object` rules out
    options = [{"properties": {"mode": {"enum": ["a"]}, "at": {}}, "required": ["at"]},
               {"properties": {"mode": {"enum": ["b", "c"]}}, "required": ["mode"]}]  # fmt: skip
    compiler = SchemaCompiler({"type": "object", "oneOf": options})
    compiler.compile()
    assert compiler.subtracted == []
    untyped = SchemaCompiler({"oneOf": options})
    untyped.compile()
    assert untyped.subtracted == []  # non-objects pass both, so fail: objects only
    assert_exact({"oneOf": options})
    other = [*options, {"type": "string"}]  # a third option that constrains non-objects
    typed = SchemaCompiler({"oneOf": other})
    typed.compile()
    assert typed.subtracted == []  # still two options that pass every non-object
    assert_exact({"oneOf": other})


NEGATED_KIND = {"properties": {"kind": {"enum": KINDS[:2]}}}
NEGATED = st.sampled_from(
    [NEGATED_KIND, {"properties": {"x": {"type": "integer"}}},
     {"required": ["y"]}, {"properties": {"kind": {"const": "c"}}, "required": ["kind"]}]
)  # fmt: skip


@given(tagged(), NEGATED)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_closed_objects_do_not_narrow_what_a_rival_subtracts(option: Any, negated: Any) -> None:
    """Objects are closed by default where values are generated, not inside what a `oneOf`
    subtracts: a rival `{type: object, not: N}` fails wherever N (open, as the spec says)
    holds, so a value `option` accepts on its own and the rival fails stays accepted
    (aspire-8.0's extension option rejected every resource with a member besides `type`)."""
    rival = {"type": "object", "required": ["kind"], "not": negated}
    schema = {"oneOf": [option, rival]}
    validator = jsonschema.Draft202012Validator(schema)
    try:
        alone = compile_json_schema(option, GrammarOptions())
    except GrammarError as error:  # e.g. a required member whose schema is `false`
        assert "matches no" in error.message or "nothing is left" in error.message
        return
    try:
        both: Any = compile_json_schema(schema, GrammarOptions())
    except GrammarError as error:  # empty: then nothing below may be expected of it
        assert "nothing is left" in error.message
        both = None
    loc = LocationSpace(Resolver(schema)).at([schema])
    for instance in POOL:
        text = serialize(reorder(instance, loc)).encode()
        if alone.accepts(text) and validator.is_valid(instance):
            assert both is not None and both.accepts(text), (schema, instance)
        if both is not None and both.accepts(text):
            assert validator.is_valid(instance), (schema, instance)


def test_a_rival_negation_holds_deep_free_values() -> None:
    """What a rival's `not` leaves free is any value at any depth the option reaches, not
    `max_any_depth` deep (aspire-8.0: a parameter's `inputs.value.default.generate`)."""
    deep: Any = {"type": "integer"}
    for name in "wzyx":
        deep = {"type": "object", "properties": {name: deep}, "required": [name]}
    option = {"properties": {"kind": {"const": "a"}, "v": deep}, "required": ["kind"]}
    rival = {"type": "object", "required": ["kind"], "not": NEGATED_KIND}
    grammar = compile_json_schema({"oneOf": [option, rival]}, GrammarOptions(max_any_depth=2))
    assert grammar.accepts(b'{"kind":"a","v":{"x":{"y":{"z":{"w":1}}}}}')
    assert grammar.accepts(b'{"kind":"c"}')
    assert not grammar.accepts(b'{"kind":"b"}')
