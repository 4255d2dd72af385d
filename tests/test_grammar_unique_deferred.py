"""`uniqueItems` over large items: the checked array's item rule (one DFA) is built when
the array is first reached (`json_unique.deferred_unique`), with the language it had.

Hypothesis draws arrays of tagged objects (duplicates, invalid items, too few items) and
checks acceptance against jsonschema; counters show no item DFA is built at compile time
(with minItems 1 productivity reads the item's AST). The matcher's per-token facts (first
byte, holds `,` / `[`), computed over all tokens at once, match each token's. Arrays of
distinct enum values past `INLINE_SIZE` are a rule built when reached, with the inline
DFA's language.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_unique
from kor_cli.grammar.ast import Automaton, Bytes, alt, difference, literal, repeat, seq
from kor_cli.grammar.compile import compile_json_schema, serialize
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_rules import RuleBook
from kor_cli.grammar.json_schema import SchemaCompiler
from kor_cli.grammar.json_values import string_node
from kor_cli.grammar.unique_matcher import unique_token_sets
from kor_cli.grammar.vocab import TokenizerInfo


def _option(tag: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"properties": {"k": {"const": tag}, "v": value}, "required": ["k"]}


ITEM = {"type": "object", "oneOf": [
    _option("a", {"type": "integer"}), _option("b", {"type": "boolean"}),
    _option("c", {"type": "string", "maxLength": 2}),
]}  # fmt: skip
ITEMS = st.fixed_dictionaries(
    {"k": st.sampled_from(["a", "b", "c", "d"])},
    optional={"v": st.one_of(st.integers(0, 2), st.booleans(), st.sampled_from(["", "x", "xyz"]))},
)


def _array(lo: int) -> dict[str, Any]:
    return {"type": "array", "items": ITEM, "uniqueItems": True, "minItems": lo}


@given(st.lists(ITEMS, max_size=4), st.integers(0, 1))
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
def test_accepted_iff_valid(items: list[Any], lo: int) -> None:
    schema = _array(lo)
    grammar = compile_json_schema(schema)
    assert grammar.rules.checked  # checked at run time
    text = serialize(json.loads(json.dumps(items, sort_keys=True))).encode()
    valid = jsonschema.Draft202012Validator(schema).is_valid(items)
    assert grammar.accepts(text) == valid, text


@pytest.mark.parametrize("lo", [0, 1])
def test_item_dfa_is_built_when_reached(lo: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The item rule's DFA is built when the matcher first enters an item, not at compile
    time; with minItems 1 (is there an item at all?) productivity decides on the item's
    AST, compiling only the products it needs, never the whole item DFA (`settle`)."""
    settled: list[int] = []
    built: list[int] = []
    settle, build = SchemaCompiler.settle, RuleBook.build
    monkeypatch.setattr(SchemaCompiler, "settle", lambda c, n: settled.append(1) or settle(c, n))
    monkeypatch.setattr(RuleBook, "build", lambda b, r: built.append(r) or build(b, r))
    monkeypatch.setattr(compile_module, "_cache", OrderedDict())
    schema = {"type": "object", "properties": {"list": _array(lo)}, "required": ["list"]}
    grammar = compile_json_schema(schema)
    (item,) = grammar.rules.checked.values()
    assert not settled and item not in built
    assert grammar.accepts(b'{"list":[{"k":"a","v":1},{"k":"b"}]}')
    assert not grammar.accepts(b'{"list":[{"k":"a","v":1},{"k":"a","v":1}]}')
    assert item in built


def test_an_empty_item_language_leaves_the_empty_array() -> None:
    item = {"type": "object", "allOf": [ITEM, {"properties": {"k": {"const": "z"}}}]}
    grammar = compile_json_schema({"type": "array", "items": item, "uniqueItems": True})
    assert grammar.accepts(b"[]")
    assert not grammar.accepts(b'[{"k":"z"}]')


@given(st.lists(st.one_of(st.none(), st.binary(max_size=4)), max_size=30))
@settings(max_examples=60, deadline=None)
def test_token_sets_are_each_tokens_facts(tokens: list[bytes | None]) -> None:
    info = TokenizerInfo(tokens + [b",", b"[a"], vocab_size=len(tokens) + 2)
    first, holding, opening = unique_token_sets(info)
    for i, data in enumerate(info.token_bytes):
        assert first[i] == (data[0] if data else -1)
        assert holding[i] == (bool(data) and b"," in data)
        assert opening[i] == (bool(data) and b"[" in data)


ENUM = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
DISTINCT = {"type": "array", "items": {"enum": ENUM}, "uniqueItems": True}


@given(st.lists(st.sampled_from(ENUM), max_size=7))
@settings(max_examples=60, deadline=None)
def test_distinct_enum_array_as_a_rule_is_exact(items: list[str]) -> None:
    grammar = compile_json_schema(DISTINCT)
    assert grammar.has_calls  # 2**6 used-sets over the trie: a rule built when reached
    valid = jsonschema.Draft202012Validator(DISTINCT).is_valid(items)
    assert grammar.accepts(serialize(items).encode()) == valid


def test_distinct_enum_array_rule_is_the_inline_language(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = compile_json_schema({"type": "object", "properties": {"a": DISTINCT}})
    assert any(name.endswith("/distinct") for name in rule.rules.names.values())
    view = rule.dfa
    monkeypatch.setattr(json_unique, "INLINE_SIZE", 10**9)
    monkeypatch.setattr(compile_module, "_cache", OrderedDict())
    inline = compile_json_schema({"type": "object", "properties": {"a": DISTINCT}})
    assert not any(name.endswith("/distinct") for name in inline.rules.names.values())
    for a, b in ((view, inline.dfa), (inline.dfa, view)):
        assert compile_ast(difference(Automaton(a), Automaton(b)), 10**6).is_empty()


LEAVES = st.one_of(
    st.binary(max_size=3).map(literal),
    st.integers(0, (1 << 256) - 1).map(lambda m: Bytes(m) if m else literal(b"x")),
    st.sampled_from([string_node(), string_node(1, 3), literal(b"")]),
)
NODES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(inner, st.integers(0, 2), st.sampled_from([None, 0, 1, 3])).map(
            lambda t: repeat(t[0], t[1], t[2] if t[2] is None else max(t[1], t[2]))
        ),
    ),
    max_leaves=8,
)


@given(NODES)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
def test_surely_many_means_more_than_max_values(node: Any) -> None:
    """`surely_many` on the AST alone implies `finite_texts` of the DFA finds too many
    strings (so a checked array need not build the item DFA to know it is no enum)."""
    if json_unique.surely_many(node):
        assert json_unique.finite_texts(compile_ast(node, 10_000)) is None


def test_surely_many_items_are_checked_without_their_dfa(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `uniqueItems` array of plain strings is a checked array whose item DFA is built
    when the array is first reached (not at compile time); duplicates are still refused."""
    schema = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
    settled: list[Any] = []
    monkeypatch.setattr(compile_module, "_cache", OrderedDict())
    original = SchemaCompiler.settle

    def settle(self: SchemaCompiler, node: Any) -> Any:
        settled.append(node)
        return original(self, node)

    monkeypatch.setattr(SchemaCompiler, "settle", settle)
    grammar = compile_json_schema(schema)
    assert grammar.has_calls and not settled
    assert grammar.accepts(b'["a","b"]') and not grammar.accepts(b'["a","a"]')
    assert not grammar.accepts(b'[""]')
