"""Fixed costs of a cold compile and first mask cut without changing answers: the start
rule's productivity check stops after one round when no rule recursed, and a cache folder
that cannot exist is found so once per process."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar import disk_cache
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.json_rules import RuleBook

RECURSIVE = {
    "type": "object",
    "properties": {"next": {"$ref": "#"}, "n": {"type": "integer"}},
    "required": ["n"],
}


def rounds(schema: dict) -> int:
    calls: list[int] = []
    real = RuleBook._round

    def spy(self: RuleBook, rule: int, known: dict[int, bool]) -> tuple:
        calls.append(rule)
        return real(self, rule, known)

    with mock.patch.object(RuleBook, "_round", spy):
        compile_json_schema(schema, GrammarOptions(time_limit_s=None, max_states=49_999))
    return len(calls)


def test_productivity_without_recursion_takes_one_round() -> None:
    assert rounds(RECURSIVE) == 1  # one rule (calling itself); `n` alone answers it
    grammar = compile_json_schema(RECURSIVE)
    assert grammar.accepts(b'{"next":{"n":1},"n":2}') and not grammar.accepts(b'{"next":{}}')


def test_a_recursion_without_a_way_out_is_still_found() -> None:
    endless = {"type": "object", "properties": {"n": {"$ref": "#"}}, "required": ["n"]}
    with pytest.raises(GrammarError, match="no finite expansion"):
        compile_json_schema(endless)


def test_calls_without_recursion_are_decided_in_one_round() -> None:
    """Scalars left free beside a constrained string: one call to the shared free-types
    rule, which calls nothing."""
    schema = {"type": ["null", "boolean", "number", "string"], "maxLength": 2}
    grammar = compile_json_schema(schema)
    assert grammar.has_calls
    assert rounds(schema) == 1
    assert grammar.accepts(b"12.5") and grammar.accepts(b'"ab"') and not grammar.accepts(b'"abc"')


def test_a_root_under_a_file_is_remembered(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    root = tmp_path / "file" / "cache"
    assert disk_cache.usable_root(root) is None
    with mock.patch.object(Path, "mkdir", side_effect=AssertionError("looked again")):
        assert disk_cache.usable_root(root) is None
        assert disk_cache.usable_root(str(root)) is None
    assert disk_cache.usable_root(tmp_path / "folder") == tmp_path / "folder"  # others still made


@pytest.mark.parametrize("small", [0, 10**9])  # every table searched by numpy / in Python
def test_max_depth_both_ways(small: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`json_values.max_depth` level by level in numpy equals the depth-first search and
    the nesting the languages were built with (loose values, real schemas' values)."""
    from kor_cli.grammar import json_values
    from kor_cli.grammar.fsm import compile_ast

    monkeypatch.setattr(json_values, "_SMALL_TABLE", small)
    for depth in range(5):
        assert json_values.max_depth(compile_ast(json_values.loose_value(depth))) == depth
    nested = {"type": "array", "items": {"type": "array", "items": {"type": "object"}}}
    dfa = compile_json_schema({"not": {"const": 1}, **nested}, GrammarOptions(max_any_depth=2)).dfa
    assert json_values.max_depth(dfa) == 4  # [ [ { any value: 2 deep } ] ] (under a product)
