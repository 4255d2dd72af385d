"""Bounded compiles (named limits, no escaping Python exception) and fixed refusals."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, compile_regex


def refusal(schema: Any, **options: Any) -> GrammarError:
    with pytest.raises(GrammarError) as error:
        compile_json_schema(schema, GrammarOptions(**options))
    return error.value


@pytest.mark.parametrize(
    ("schema", "keyword", "option"),
    [
        ({"type": "string", "pattern": "^x{1,5000}$"}, "pattern", "max_repeat"),
        ({"enum": [f"option-{i}" for i in range(20_000)]}, "enum", "max_enum"),
        ({"properties": {f"p{i}": {} for i in range(10_000)}}, "properties", "max_properties"),
    ],
)
def test_size_limits_refuse_at_once(schema: Any, keyword: str, option: str) -> None:
    start = time.monotonic()
    error = refusal(schema)
    assert error.keyword == keyword and f"GrammarOptions.{option}" in error.message
    assert time.monotonic() - start < 5  # refused before any automaton is built


def test_limits_can_be_raised() -> None:
    schema = {"type": "string", "pattern": "^x{1,1200}$"}
    assert refusal(schema).keyword == "pattern"
    dfa = compile_json_schema(schema, GrammarOptions(max_repeat=1200)).dfa
    assert dfa.accepts(b'"' + b"x" * 1200 + b'"') and not dfa.accepts(b'"' + b"x" * 1201 + b'"')
    with pytest.raises(GrammarError, match="max_repeat"):
        compile_regex("a{2000}")


def test_time_limit_is_a_named_refusal() -> None:
    # `not` needs the whole object as one DFA (no deferral): ~1.6 s of CPU here
    inner = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(100)}}
    schema = {"not": inner | {"required": ["p0"]}}
    start = time.monotonic()
    error = refusal(schema, time_limit_s=0.2)
    assert "more than 0.2 s of CPU time" in error.message and "time_limit_s" in error.message
    assert time.monotonic() - start < 30


def test_deep_schemas_are_named_errors() -> None:
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(2_000):
        schema = {"type": "array", "items": schema}
    assert "recursion limit" in refusal(schema).message


def test_items_that_cannot_exist_with_unique_items() -> None:
    dfa = compile_json_schema({"type": "array", "items": {"not": {}}, "uniqueItems": True}).dfa
    assert dfa.accepts(b"[]") and not dfa.accepts(b"[1]")


def test_matches_nothing_only_for_empty_languages() -> None:
    schema = {"allOf": [{"enum": [{"foo": 1}]}, {"not": {"maxProperties": 0}}]}
    dfa = compile_json_schema(schema).dfa
    assert dfa.accepts(b'{"foo":1}') and not dfa.accepts(b"{}")
    assert "no JSON value" in refusal({"type": "integer", "minimum": 3, "maximum": 2}).message
    assert "nothing is left once 'not'" in refusal({"not": {}}).message


def test_dynamic_ref_is_named() -> None:
    error = refusal({"type": "object", "properties": {"a": {"$dynamicRef": "#node"}}})
    assert error.keyword == "$dynamicRef" and error.pointer == "/properties/a"
