"""Dependencies that only ask for one member's value, grouped into cases of that value
(`json_conditions.group_dependencies`): exact, and linear in their number.

Hypothesis builds `dependentSchemas` whose schemas test the member "kind" (const or enum,
maybe required, maybe `type: object`) beside open or closed objects, and compares the
grammar with jsonschema on a pool of instances (open objects, as the specification); with
kor's closed objects it accepts no invalid instance and all that one dependency at a time
accepted.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_disjoint import KINDS, POOL, accepted_with, assert_exact

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_keywords
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_keywords import Collector, Part
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver

TESTS = st.sampled_from([{"const": k} for k in [*KINDS, 1]] + [{"enum": KINDS[1:]},
                                                                {"enum": ["a", None]}])  # fmt: skip


@st.composite
def dependent(draw: st.DrawFn) -> dict[str, Any]:
    """2-3 triggers, each asking for a value of "kind"; a base open, typed or closed."""
    triggers = draw(st.lists(st.sampled_from(["x", "y", "kind"]), min_size=2, max_size=3,
                             unique=True))  # fmt: skip
    deps = {}
    for trigger in triggers:
        cond: dict[str, Any] = {"properties": {"kind": draw(TESTS)}}
        if draw(st.booleans()):
            cond["required"] = ["kind"]
        if draw(st.booleans()):
            cond["type"] = "object"
        deps[trigger] = cond
    base = draw(st.sampled_from([
        {}, {"type": "object"}, {"properties": {"kind": {}, "x": {}, "y": {}}},
        {"properties": {"kind": {"type": "string"}, "x": {}}, "additionalProperties": False},
    ]))  # fmt: skip
    return {**base, "dependentSchemas": deps}


def _grouped(schema: Any) -> bool:
    facts = Collector(Resolver(schema), {}, 3).collect([Part(schema, "")])
    assert facts is not None
    return any(kind == "cases" and value[0] == "dependencies@kind"
               for kind, _, value in facts.pending)  # fmt: skip


@given(dependent())
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_grouped_dependencies_are_exact(schema: dict[str, Any]) -> None:
    assert _grouped(schema)
    assert_exact(schema)


def accepted(schema: Any) -> list[bool]:
    """Which pool instances the grammar (kor's closed objects) accepts."""
    try:
        grammar = compile_json_schema(schema, GrammarOptions())
    except GrammarError as error:
        assert "nothing is left" in error.message or "matches no" in error.message
        return [False] * len(POOL)
    loc = LocationSpace(Resolver(schema)).at([schema])
    return [grammar.accepts(serialize(reorder(i, loc)).encode()) for i in POOL]


def assert_widened(schema: Any, module: Any, name: str, stand_in: Any) -> None:
    """kor's closed objects: no instance jsonschema rejects, and every instance accepted
    with `module.name` replaced by `stand_in` (the former path)."""
    mine = accepted(schema)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, name, stand_in)
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        before = accepted(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for instance, ours, theirs in zip(POOL, mine, before, strict=True):
        assert not ours or validator.is_valid(instance), (schema, instance)
        assert ours or not theirs, (schema, instance)


@given(dependent())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_grouped_dependencies_with_closed_objects(schema: dict[str, Any]) -> None:
    """One dependency at a time, a dependency's schema naming `kind` closed the object to
    `kind`, and then rejected its trigger: the grouped cases do not."""
    assert_widened(schema, json_keywords, "group_dependencies", lambda facts: None)


def test_other_dependencies_are_left_as_they_are() -> None:
    one = {"dependentSchemas": {"x": {"properties": {"kind": {"const": "a"}}}}}
    assert not _grouped(one)  # one dependency: nothing to gain
    mixed = {"dependentSchemas": {"x": {"properties": {"kind": {"const": "a"}}},
                                  "y": {"properties": {"x": {"const": 1}}}}}  # fmt: skip
    assert not _grouped(mixed)  # two members tested, one each
    names = {"dependentRequired": {"x": ["kind"], "y": ["kind"]}}
    assert not _grouped(names)


def test_many_dependencies_on_one_member_compile_as_cases() -> None:
    # mongodb-atlas-search-index-definition: 18 members, each allowed for some `type`s;
    # one dependency at a time that is 2^18 cases, grouped 3 + the listed values
    kinds = [f"k{i}" for i in range(6)]
    names = [f"m{i}" for i in range(24)]
    deps = {n: {"properties": {"kind": {"enum": kinds[i % 3: i % 3 + 2]}}}
            for i, n in enumerate(names)}  # fmt: skip
    props = {"kind": {"enum": kinds}, **{n: {"type": "integer"} for n in names}}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": props, "dependencies": deps}  # fmt: skip
    options = GrammarOptions(time_limit_s=60)
    assert accepted_with(schema, {"kind": "k0", "m0": 1, "m3": 2}, options)
    assert not accepted_with(schema, {"kind": "k0", "m1": 1}, options)  # m1: k1 or k2
    assert accepted_with(schema, {"m1": 1, "m2": 2}, options)  # no kind: vacuous
    assert not accepted_with(schema, {"kind": "k5", "m0": 1}, options)
