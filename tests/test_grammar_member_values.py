"""`oneOf` options told apart by a member's patterns (`json_member_values`), and options
that pass every non-object told apart on objects only (`json_disjoint._objects_apart`):
no product, still exact.

Hypothesis draws options that constrain one required string member by a pattern (with or
without `type` here and there) and compares the grammar with jsonschema on a pool of
instances (exact but for `$` before a final newline, which the strict dialect does not
accept, as everywhere); patterns found apart share no string of a pool.
"""

from __future__ import annotations

import re
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_disjoint import _accepted, assert_exact

from kor_cli.grammar.json_defer import DeferPolicy
from kor_cli.grammar.json_member_values import PatternsApart, apart
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_schema import SchemaCompiler

PATTERNS = [r"\.less$", r"\.(scss|sass)$", r"\.(jsx|js|es6)$", r"\.js$", r"^x", r"y", r"\d$",
            r"^a+$", r"^(a|b)$", r"[.]"]  # fmt: skip
STRINGS = ["x.less", "a.scss", "b.sass", "c.js", "c.jsx", "x", "xy", "y", "a", "aa", "b", "1",
           "x1", "a.less\n", "", ".", "s.es6", "js"]  # fmt: skip


def _apart(p: str, q: str) -> bool:
    return PatternsApart(DeferPolicy(Resolver({})).parsed)(p, q)


@given(st.sampled_from(PATTERNS), st.sampled_from(PATTERNS))
@settings(max_examples=60, deadline=None)
def test_patterns_apart_share_no_string(p: str, q: str) -> None:
    if _apart(p, q):
        assert not [s for s in STRINGS if re.search(p, s) and re.search(q, s)], (p, q)


def test_suffixes_are_apart_and_overlaps_are_not() -> None:
    assert _apart(r"\.less$", r"\.(scss|sass)$") and _apart(r"^a+$", r"\d$")
    assert not _apart(r"\.js$", r"\.(jsx|js|es6)$") and not _apart(r"^x", r"y")
    strings = (frozenset({"string"}), frozenset({r"\.less$"}))
    anything = (None, frozenset({r"\.js$"}))
    assert apart(strings, anything, _apart)  # the common type is string
    assert not apart(anything, anything, _apart)  # a non-string passes both patterns
    assert apart((frozenset({"integer"}), frozenset()), strings, _apart)


@st.composite
def by_patterns(draw: st.DrawFn) -> dict[str, Any]:
    patterns = draw(st.lists(st.sampled_from(PATTERNS), min_size=2, max_size=4, unique=True))
    options: list[Any] = []
    for p in patterns:
        value: dict[str, Any] = {"pattern": p}
        if draw(st.booleans()):
            value["type"] = "string"
        option: dict[str, Any] = {"properties": {"f": value, "g": {}}}
        if draw(st.booleans()):
            option["type"] = "object"
        options.append(option)
    schema: dict[str, Any] = {"required": ["f"], "oneOf": options}
    if draw(st.booleans()):
        schema["properties"] = {"f": {"type": "string"}}
    if draw(st.booleans()):
        schema["type"] = draw(st.sampled_from(["object", ["object", "string"]]))
    return schema


POOL_VALUES = [*(s for s in STRINGS if not s.endswith("\n")), 1, None]


@given(by_patterns())
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_one_of_told_apart_by_patterns_is_exact(schema: dict[str, Any]) -> None:
    assert_exact(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in POOL_VALUES:
        for instance in ({"f": value}, {"f": value, "g": 2}, value):
            assert _accepted(schema, instance) == validator.is_valid(instance), instance
    for value in STRINGS:  # `$` before a final newline: accepted only if valid
        assert not _accepted(schema, {"f": value}) or validator.is_valid({"f": value})


def test_compilerconfig_like_options_need_no_product() -> None:
    # compilerconfig: seven options with only `properties`, told apart by `inputFile`'s
    # patterns; no `type` anywhere, so every non-object passes them all (and fails)
    options = [{"properties": {"file": {"pattern": p}, "o": {"type": "object"}}}
               for p in PATTERNS[:3]]  # fmt: skip
    schema = {
        "$defs": {"config": {"required": ["file"], "properties": {"file": {"type": "string"}},
                             "oneOf": options}},
        "type": "array", "items": {"$ref": "#/$defs/config"},
    }  # fmt: skip
    compiler = SchemaCompiler(schema)
    compiler.compile()
    assert compiler.subtracted == []
    assert_exact(schema["$defs"]["config"])
