"""json_free_types: the types a conjunction leaves free are one call to a shared rule
(memoized per process); the language is the inline one, any depth and in the DFA view."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import dfa_cache, json_free_types
from kor_cli.grammar.compile import Grammar, GrammarOptions, compile_json_schema, serialize

SCHEMAS = [
    {"maxLength": 2},
    {"minItems": 1, "items": {"type": "integer"}},
    {"properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"type": ["boolean", "number", "array", "string"], "pattern": "^a"},
    {"properties": {"o": {"maxProperties": 1}}},
    {"items": {"properties": {"k": {"minimum": 2}}}},
]
VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([1.5, -0.25]),
        st.sampled_from(["", "a", "ab", "abc", "é\n"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "k", "o", "z"]), inner, max_size=3),
    ),
    max_leaves=12,
)  # fmt: skip


def compiled(schema: Any, shared: bool, options: GrammarOptions = GrammarOptions()) -> Grammar:
    compile_module._cache.clear()
    dfa_cache.clear()
    saved = json_free_types.MIN_GROUPS
    json_free_types.MIN_GROUPS = saved if shared else 99
    try:
        return compile_json_schema(schema, options)
    finally:
        json_free_types.MIN_GROUPS = saved


def free_rules(grammar: Grammar) -> list[int]:
    return [k for k, name in grammar.rules.names.items() if name.startswith("(any value: ")]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_free_types_are_a_shared_rule_with_the_inline_language(schema: Any) -> None:
    shared, inline = compiled(schema, True), compiled(schema, False)
    assert free_rules(shared) and not free_rules(inline)
    for rule_id in shared.rules.reachable_rules():  # every rule builds (none is empty)
        assert shared.rules.rule(rule_id).dfa.num_states > 1
    assert shared.dfa.fingerprint() == inline.dfa.fingerprint()  # the bounded DFA view
    again = compiled(schema, True)  # another cold compile: the memoized rule itself
    for rule in free_rules(shared):
        assert again.rules.rule(rule) is shared.rules.rule(rule)

    @settings(max_examples=40, deadline=None)
    @given(VALUES)
    def same(value: Any) -> None:
        text = serialize(value).encode()
        assert shared.accepts(text) == inline.accepts(text), text

    same()


def test_free_groups_key_the_rule() -> None:
    strings = compiled({"maxLength": 2}, True)  # free: null, boolean, number, array, object
    numbers = compiled({"minimum": 2}, True)  # free: null, boolean, string, array, object
    spaced = compiled({"maxLength": 2}, True, GrammarOptions(whitespace="spaced"))
    a, b, c = (g.rules.rule(free_rules(g)[0]) for g in (strings, numbers, spaced))
    assert a is not b and a is not c
    assert a.dfa.accepts(b"1.5") and not a.dfa.accepts(b'"x"')
    assert b.dfa.accepts(b'"x"') and not b.dfa.accepts(b"1.5")
    assert strings.accepts(b'{"a":[1,{}]}') and not strings.accepts(b'{"a": [1, {}]}')
    assert spaced.accepts(b'{"a": [1, {}]}') and not spaced.accepts(b'{"a":[1,{}]}')


def test_few_or_product_bound_free_types_stay_inline() -> None:
    assert not free_rules(compiled({"type": ["null", "boolean", "string"], "maxLength": 1}, True))
    scalars = {"type": ["null", "boolean", "string", "array"], "minItems": 1}  # no number
    assert not free_rules(compiled(scalars, True))  # nor container: stays inline
    # under `not` (a DFA difference) nothing may call a rule
    grammar = compiled({"not": {"maxLength": 2}}, True)
    assert not free_rules(grammar) and grammar.accepts(b'"abc"') and not grammar.accepts(b'"a"')


def test_the_location_walk_only_when_enough_types_are_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """`name_free` (a walk over the locations below) runs only where the free types could
    still be shared: a typed schema's few free groups are decided without it."""
    walked: list[object] = []
    real = json_free_types.name_free
    monkeypatch.setattr(json_free_types, "name_free", lambda loc: walked.append(loc) or real(loc))
    typed = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    grammar = compiled(typed, shared=True)
    assert walked == []
    assert grammar.accepts(b'{"a":null}') and not grammar.accepts(b'{"a":1}')
    grammar = compiled({"maxLength": 2}, shared=True)  # five groups free: the walk runs
    assert walked and grammar.accepts(b"[1]") and not grammar.accepts(b'"abc"')
