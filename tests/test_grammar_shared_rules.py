"""shared_rules: the name-free "any value" rule is built once per process and options,
survives `dfa_cache.clear()`, and never serves a rule built under other options or ids."""

from __future__ import annotations

import inspect
import itertools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import dfa_cache, shared_rules
from kor_cli.grammar.compile import Grammar, GrammarOptions, compile_json_schema
from kor_cli.grammar.json_containers import ANY_RULE, memo_key
from kor_cli.grammar.json_schema import SchemaCompiler
from kor_cli.grammar.rules import Rule, RuleSet

FREE_MEMBER = {"type": "object", "properties": {"a": {}}}
FREE_ITEMS = {"type": "array", "minItems": 1}
RECURSIVE = {"type": "object", "properties": {"a": {"$ref": "#"}, "b": {}}}  # any value: rule 2


def cold() -> None:
    """What a cold benchmark clears before each schema (the memo stays)."""
    compile_module._cache.clear()
    dfa_cache.clear()


def any_rules(rules: RuleSet) -> dict[int, Rule]:
    return {k: rules.rule(k) for k, name in rules.names.items() if name == ANY_RULE}


def compiled(schema: Any) -> Grammar:
    cold()
    return compile_json_schema(schema)


def compiled_any(schema: Any, options: GrammarOptions) -> dict[int, Rule]:
    cold()
    return any_rules(compile_json_schema(schema, options).rules)


def same(a: Rule, b: Rule) -> bool:
    return a.dfa.fingerprint() == b.dfa.fingerprint() and dict(a.calls) == dict(b.calls)


def test_schemas_share_the_any_value_rule_across_cold_compiles() -> None:
    options = GrammarOptions()
    first = compiled_any(FREE_MEMBER, options)
    assert list(first) == [1]
    held = shared_rules.memoized()
    second = compiled_any(FREE_ITEMS, options)  # another schema, dfa_cache cleared between
    assert second[1] is first[1]
    assert shared_rules.memoized() == held
    # the rule calls itself (values nest to any depth) and is the rule built from scratch
    shared_rules.clear()
    fresh = compiled_any(FREE_ITEMS, options)
    assert fresh[1] is not first[1] and same(fresh[1], first[1])
    assert {callee for pairs in first[1].calls.values() for callee, _ in pairs} == {1}


OPTIONS = [
    GrammarOptions(whitespace=ws, lenient=lenient, open_objects=open_objects)
    for ws, lenient, open_objects in itertools.product(
        ("compact", "spaced"), (False, True), (False, True)
    )
] + [GrammarOptions(max_any_depth=2), GrammarOptions(max_recursion_depth=1)]


@pytest.mark.parametrize("schema", [FREE_MEMBER, RECURSIVE])
def test_memo_never_serves_a_rule_of_other_options_or_ids(schema: Any) -> None:
    # every options set in turn with the memo warm from all the others: each gets exactly
    # the rule a fresh process would build
    shared_rules.clear()
    warm = [compiled_any(schema, o) for o in OPTIONS for _ in range(2)][::2]
    for options, got in zip(OPTIONS, warm, strict=True):
        shared_rules.clear()
        fresh = compiled_any(schema, options)
        assert fresh.keys() == got.keys()
        assert all(same(fresh[k], got[k]) for k in fresh)
    compact, spaced = warm[0], warm[4]
    rule = next(iter(compact))
    assert not same(compact[rule], spaced[rule])  # the separators shape it
    texts = {"compact": b'[1,{"k":[]}]', "spaced": b'[1, {"k": []}]'}
    for ws, text in texts.items():  # the memo warm with both: each grammar its own texts
        grammar = compile_json_schema({"type": "array"}, GrammarOptions(whitespace=ws))
        assert grammar.accepts(text)
        assert not any(grammar.accepts(t) for t in texts.values() if t != text)


def test_the_recursive_schema_puts_the_any_value_rule_at_another_id() -> None:
    first, recursive = (
        compiled_any(FREE_MEMBER, GrammarOptions()),
        compiled_any(RECURSIVE, GrammarOptions()),
    )
    assert list(first) == [1] and list(recursive) == [2]
    assert not same(first[1], recursive[2])  # its calls spell its own id
    assert {c for pairs in recursive[2].calls.values() for c, _ in pairs} == {2}


def test_the_state_limit_is_part_of_the_key() -> None:
    small, large = GrammarOptions(max_states=20_000), GrammarOptions(max_states=40_000)
    a, b = compiled_any(FREE_MEMBER, small)[1], compiled_any(FREE_MEMBER, large)[1]
    assert a is not b and same(a, b)


def test_the_key_names_every_option_of_the_compiler() -> None:
    # a new SchemaCompiler option must join the key (or be the state limit RuleBook adds)
    params = inspect.signature(SchemaCompiler.__init__).parameters
    values = {"whitespace": "spaced", "lenient": True, "open_objects": True,
              "max_recursion_depth": 5, "max_any_depth": 5}  # fmt: skip
    assert set(params) - {"self", "root", "loader", "max_states"} == set(values)
    base = memo_key(SchemaCompiler({}))
    for name, value in values.items():
        assert memo_key(SchemaCompiler({}, **{name: value})) != base, name


def test_masks_from_the_memoized_rule_equal_fresh_ones(tokenizer_info_factory) -> None:
    from kor_cli.grammar.surface import GrammarMatcher, compile_grammar

    info = tokenizer_info_factory("qwen")

    def masks(schema: Any) -> list[np.ndarray]:
        cold()
        matcher = GrammarMatcher(compile_grammar(compile_json_schema(schema), info))
        out = []
        for step in (b'{"a":', b"[", b"{", b'"k":', b"[]", b"}", b"]", b"}"):
            buf = np.zeros((1, (info.vocab_size + 31) // 32), dtype=np.int32)
            matcher.fill_next_token_bitmask(buf, 0)
            out.append(buf[0].copy())
            assert matcher.accept_bytes(step), step
        return out

    compiled_any(FREE_ITEMS, GrammarOptions())  # the memo holds the rule
    warm = masks(FREE_MEMBER)
    shared_rules.clear()
    fresh = masks(FREE_MEMBER)
    assert all(np.array_equal(a, b) for a, b in zip(warm, fresh, strict=True))


def test_fixed_automata_are_built_once_and_spell_what_their_asts_spell() -> None:
    from kor_cli.grammar import charset as cs
    from kor_cli.grammar.ast import Automaton, repeat, seq
    from kor_cli.grammar.fsm import compile_ast
    from kor_cli.grammar.json_numbers import any_number
    from kor_cli.grammar.json_values import QUOTE, any_char, json_char, string_node

    assert isinstance(any_char(), Automaton) and any_char() is any_char()
    assert isinstance(string_node(), Automaton) and string_node() is string_node()
    assert any_number() is any_number()
    dfa_cache.clear()
    char = compile_ast(json_char(cs.ALL))
    assert any_char().dfa.fingerprint() == char.fingerprint()
    text = compile_ast(seq(QUOTE, repeat(json_char(cs.ALL), 0, None), QUOTE))
    assert string_node().dfa.fingerprint() == text.fingerprint()
    for good, bad in ((b'"a\\n\\u0001\xc3\xa9"', b'"\x01"'), (b'""', b'"\\x"')):
        assert string_node().dfa.accepts(good) and not string_node().dfa.accepts(bad)
    bounded = compile_ast(string_node(1, 2))
    assert bounded.accepts(b'"\\"\xe2\x82\xac"') and not bounded.accepts(b'"abc"')
    assert compile_ast(any_number()).accepts(b"-1.5e3")
    costs = shared_rules.one_offs()
    assert costs["automata"] >= 2 and costs["automata_ms"] > 0


@pytest.mark.parametrize(
    "schema", [True, {}, {"maxContains": 1}, {"allOf": [{}, True]}, {"then": {"const": 0}}]
)
def test_unconstrained_schemas_start_at_the_shared_rule(schema: Any) -> None:
    items = compiled_any(FREE_ITEMS, GrammarOptions())[1]  # the memo holds the rule
    cold()
    grammar = compile_json_schema(schema)
    rules = grammar.rules
    assert rules.names[rules.start] == ANY_RULE and rules.rule(rules.start) is items
    deep = [[{"k": [None, 1.5, "x"]}]] * 3
    for _ in range(10):
        deep = [{"k": deep}]
    assert grammar.accepts(json.dumps(deep, separators=(",", ":")).encode())
    assert not grammar.accepts(b"[1,]") and not grammar.accepts(b'{"a":1 }')
    # its DFA view is the bounded value it was (max_any_depth containers deep)
    bounded = compile_json_schema(schema, GrammarOptions(bounded_any=True))
    assert not bounded.has_calls
    assert grammar.dfa.fingerprint() == bounded.dfa.fingerprint()
    assert grammar.dfa.accepts(b"[[[1]]]") and not grammar.dfa.accepts(b"[[[[1]]]]")


def test_frames_of_shared_rules_are_built_once_per_tokenizer(tokenizer_info_factory) -> None:
    from kor_cli.grammar.frame_masks import FrameMasks
    from kor_cli.grammar.stacks import Stacks
    from kor_cli.grammar.vocab import TokenizerInfo

    qwen = tokenizer_info_factory("qwen")
    shared_rules.clear()
    first, second = compiled({"maxLength": 2}), compiled({"minimum": 0, "maxLength": 3})
    rules_a, rules_b = first.rules, second.rules
    free = [k for k, n in rules_a.names.items() if n.startswith("(any value")]
    assert free and all(rules_a.shared.get(k) for k in free)
    frames_a, frames_b = FrameMasks(Stacks(rules_a), qwen), FrameMasks(Stacks(rules_b), qwen)
    same = [k for k in free if rules_b.shared.get(k) == rules_a.shared[k]]
    assert same and len(same) < len(free)  # "any value" (and not the free numbers' rule)
    for k in same:  # the same rule in another grammar: the same frame
        state = rules_a.rule(k).dfa.start
        assert frames_b.get(k, state) is frames_a.get(k, state)
    assert shared_rules.one_offs()["frames"] >= len(same)
    # built apart (memo cleared) the frames are equal; another tokenizer gets its own
    starts = {k: rules_a.rule(k).dfa.start for k in free}
    before = {k: frames_a.get(k, starts[k]) for k in free}
    shared_rules.clear()
    fresh = FrameMasks(Stacks(compiled({"maxLength": 2}).rules), qwen)
    toy = TokenizerInfo([bytes([b]) for b in range(256)], vocab_size=256)
    other = FrameMasks(Stacks(compiled({"maxLength": 2}).rules), toy)
    for k in free:
        want, got = fresh.get(k, starts[k]), before[k]
        assert want is not got and np.array_equal(want.stays, got.stays)
        assert want.ends == got.ends and want.escapes() == got.escapes()
        assert other.get(k, starts[k]).stays.shape != got.stays.shape


@pytest.mark.parametrize(
    ("schema", "steps"),
    [({"maxLength": 2}, [b"[", b"1", b",", b'{"k":', b'"ab"', b"}", b"]"]),
     ({"properties": {"a": {"minimum": 1}}}, [b'{"a":', b"2", b"}"])],
)  # fmt: skip
def test_masks_over_shared_frames_equal_fresh_ones(
    schema: Any, steps: list[bytes], tokenizer_info_factory
) -> None:
    from kor_cli.grammar.surface import GrammarMatcher, compile_grammar

    info = tokenizer_info_factory("qwen")

    def masks() -> list[np.ndarray]:
        cold()
        nowhere = Path(os.devnull) / "no-cache"  # no disk cache: the frames are built here
        compiled = compile_grammar(compile_json_schema(schema), info, cache_dir=nowhere)
        matcher = GrammarMatcher(compiled)
        out = []
        for step in [*steps, b""]:
            buf = np.zeros((1, (info.vocab_size + 31) // 32), dtype=np.int32)
            matcher.fill_next_token_bitmask(buf, 0)
            out.append(buf[0].copy())
            assert matcher.accept_bytes(step), step
        return out

    shared_rules.clear()
    fresh = masks()  # frames of the shared rules built (and memoized) here
    warm = masks()  # another compile: the memoized frames
    assert all(np.array_equal(a, b) for a, b in zip(warm, fresh, strict=True))
