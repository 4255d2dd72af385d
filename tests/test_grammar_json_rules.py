"""Recursive `$ref` compiles to rules (calls), not unrolled copies: instances nest to any
depth, invalid ones are rejected at any depth, unproductive rules are never called, and
recursion under products stays bounded and call-free.

Texts are walked through the rule DFAs by a small reference interpreter (`ends`), which
checks the compiler independently of the pushdown matcher, and through the pushdown
matcher itself (byte level), which must agree.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import dfa_cache, json_rules, shared_rules
from kor_cli.grammar.ast import NOTHING
from kor_cli.grammar.compile import Grammar, GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_rule_walk import substitute
from kor_cli.grammar.pushdown import PushdownGrammar, PushdownMatcher
from kor_cli.grammar.rules import RuleSet, call
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import RECURSIVE_NAMES, recursive_schema

BYTES = TokenizerInfo([bytes([b]) for b in range(256)] + [None], stop_ids=[256], vocab_size=257)


def ends(rules: RuleSet, rule_id: int, data: bytes, at: int, memo: dict[Any, set[int]]) -> set[int]:
    """Positions where a string of rule `rule_id` read from `at` may end."""
    key = (rule_id, at)
    if key in memo:
        return memo[key]
    memo[key] = set()  # a call back to the same place reads nothing: no new ends
    rule = rules.rule(rule_id)
    out: set[int] = set()
    seen: set[tuple[int, int]] = set()
    todo = [(rule.dfa.start, at)]
    while todo:
        state, pos = todo.pop()
        if (state, pos) in seen:
            continue
        seen.add((state, pos))
        if rule.dfa.accepting[state]:
            out.add(pos)
        if pos < len(data) and rule.dfa.transitions[state, data[pos]]:
            todo.append((int(rule.dfa.transitions[state, data[pos]]), pos + 1))
        for callee, back in rule.calls.get(state, ()):
            todo += [(back, end) for end in ends(rules, callee, data, pos, memo)]
    memo[key] = out
    return out


def matches(grammar: Grammar, text: str) -> bool:
    """The reference interpreter's verdict, checked against the pushdown matcher's."""
    data = text.encode()
    verdict = len(data) in ends(grammar.rules, grammar.rules.start, data, 0, {})
    matcher = PushdownMatcher(PushdownGrammar(grammar.rules, BYTES))
    assert (matcher.accept_bytes(data) and matcher.is_accepting) == verdict, text
    return verdict


def canonical(schema: Any, instance: Any) -> str:
    return serialize(reorder(instance, LocationSpace(Resolver(schema)).at([schema])))


def check(schema: Any, valid: list[Any], invalid: list[Any]) -> Grammar:
    grammar = compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for instance in valid:
        assert validator.is_valid(instance), instance
        assert matches(grammar, canonical(schema, instance)), instance
    for instance in invalid:
        assert not validator.is_valid(instance), instance
        assert not matches(grammar, canonical(schema, instance)), instance
    return grammar


TREE, COMMENTS, RPC, MUTUAL = (recursive_schema(name) for name in RECURSIVE_NAMES)


def nested_tree(depth: int, bad: bool = False) -> dict[str, Any]:
    node: dict[str, Any] = {"v": "x" if bad else depth}
    for level in range(depth):
        node = {"v": level, "kids": [node, {"v": -level}]}
    return node


def nested_comment(depth: int, author: str = "ann") -> dict[str, Any]:
    node: dict[str, Any] = {"author": author, "text": "deep"}
    for level in range(depth):
        node = {"author": "bob", "text": f"level {level}", "replies": [node]}
    return node


def nested_value(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for level in range(depth):
        value = [value, {"k": value}] if level % 2 else {"x": value, "y": [level]}
    return value


def test_tree_nests_to_any_depth() -> None:
    grammar = check(
        TREE,
        [nested_tree(d) for d in (0, 1, 4, 12, 100)],
        [nested_tree(12, bad=True), {"kids": []}, {"v": 1, "kids": [{"kids": []}]}],
    )
    assert grammar.has_calls


def test_nested_comments() -> None:
    check(
        COMMENTS,
        [{"thread": []}, {"thread": [nested_comment(10), nested_comment(2)]}],
        [{"thread": [nested_comment(9, author="a" * 9)]}, {"thread": [{"author": "x"}]}],
    )


def test_json_rpc_params() -> None:
    call = {"jsonrpc": "2.0", "method": "sum", "id": 1}
    check(
        RPC,
        [call, {**call, "params": nested_value(9)}, {**call, "params": nested_value(6, None)}],
        [{**call, "params": nested_value(9, 1.5)}, {**call, "jsonrpc": "1.0"}],
    )


def test_ref_to_the_root_and_mutual_recursion() -> None:
    linked = {"type": "object", "properties": {"next": {"$ref": "#"}, "n": {"type": "integer"}}}
    chain: dict[str, Any] = {"n": 0}
    for k in range(15):
        chain = {"next": chain, "n": k}
    check(linked, [chain, {}], [{"next": {"next": {"n": "1"}}}])
    deep: Any = {}
    for _ in range(8):
        deep = {"b": [deep, {}]}
    check(MUTUAL, [deep, {"b": []}], [{"b": [{}, {}, {}]}, {"b": [{"b": [{"b": {}}]}]}])


def test_a_deferred_value_calls_the_start_rule() -> None:
    """A deferred value that reaches the root again (built after the root) calls the start
    rule itself, not a copy of the root object as a rule of its own (the same DFA twice)."""
    item = {"type": "object", "properties": {"name": {"type": "string"}}}
    props = {f"p{k}": {"type": "array", "items": item} for k in range(4)}
    other = {"type": "object", "properties": {f"q{k}": {"type": "integer"} for k in range(8)}}
    children = {"anyOf": [{"type": "array", "items": {"$ref": "#"}}, other]}
    schema = {
        "type": "object",
        "properties": {**props, "children": children},
        "additionalProperties": False,
    }
    valid = [{"children": [{"children": {"q1": 2}}, {"p0": [{}]}]}]
    grammar = check(schema, valid, [{"children": [1]}])
    rules = grammar.rules
    assert rules.start == 0 and rules.has_calls
    reached = rules.reachable_rules()
    called = {
        callee for k in reached for pairs in rules.rule(k).calls.values() for callee, _ in pairs
    }
    assert 0 in called
    root = rules.rule(0).dfa.fingerprint()
    assert [k for k in reached if k and rules.rule(k).dfa.fingerprint() == root] == []


def test_a_small_value_recursing_into_the_root_is_built_with_it() -> None:
    """ui's `children` (an array of `$ref: "#"` beside a large root) is not deferred: the
    `$ref` back to the root being built costs a call, so the recursion closes on the root as
    tree's `kids` do: the start rule calls itself."""
    item = {"type": "object", "properties": {"name": {"type": "string"}}}
    props = {f"p{k}": {"type": "array", "items": item} for k in range(4)}
    children = {"type": "array", "items": {"$ref": "#"}}
    schema = {"type": "object", "properties": {**props, "children": children}}
    grammar = check(schema, [{"children": [{"children": [{}, {"p0": [{}]}]}]}], [{"children": [1]}])
    rules = grammar.rules
    start = rules.rule(rules.start)
    assert rules.start in {callee for pairs in start.calls.values() for callee, _ in pairs}


def test_unproductive_rules_are_never_called() -> None:
    e = {"type": "object", "properties": {"n": {"$ref": "#/$defs/e"}}, "required": ["n"]}
    endless = {"$defs": {"e": e}}
    schema = {
        **endless,
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/e"}, "b": {"$ref": "#"}, "c": {"type": "null"}},
    }
    grammar = check(schema, [{}, {"b": {"b": {"c": None}}}], [{"a": {}}])
    rules = grammar.rules
    for rule_id in rules.reachable_rules():  # every reachable rule generates a string
        assert shortest(rules, rule_id, {}) is not None
    with pytest.raises(GrammarError, match="no finite expansion") as error:
        compile_json_schema({**schema, "required": ["a"]})
    assert error.value.keyword == "$ref"


def shortest(rules: RuleSet, rule_id: int, memo: dict[int, str | None]) -> str | None:
    """A shortest string of the rule (None if it has none), by breadth-first search."""
    if rule_id in memo:
        return memo[rule_id]
    memo[rule_id] = None
    rule = rules.rule(rule_id)
    paths = {rule.dfa.start: ""}
    frontier = [rule.dfa.start]
    while frontier:
        nxt = []
        for state in frontier:
            if rule.dfa.accepting[state]:
                memo[rule_id] = paths[state]
                return paths[state]
            steps = [(int(t), chr(b)) for b, t in enumerate(rule.dfa.transitions[state]) if t]
            for callee, back in rule.calls.get(state, ()):
                text = shortest(rules, callee, memo)
                if text is not None:
                    steps.append((back, text))
            for target, text in steps:
                if target not in paths:
                    paths[target] = paths[state] + text
                    nxt.append(target)
        frontier = nxt
    return None


def test_recursion_under_products_stays_bounded() -> None:
    # `not` and `oneOf` are exact on whole DFAs: their branches are unrolled, call-free
    kids = {"type": "array", "items": {"$ref": "#/$defs/tree"}}
    tree = {**TREE, "properties": {**TREE["properties"], "kids": kids}}
    other = {"type": "object", "properties": {"v": {"const": 100}}, "required": ["v"]}
    schema = {"$defs": {"tree": tree}, "oneOf": [{"$ref": "#/$defs/tree"}, other]}
    grammar = compile_json_schema(schema)  # `other` overlaps a tree: subtracted as DFAs
    assert not grammar.has_calls
    assert matches(grammar, canonical(TREE, nested_tree(2)))
    assert not matches(grammar, '{"v":100}')  # both options
    assert not matches(grammar, canonical(TREE, nested_tree(6)))  # past max_recursion_depth
    # an option that only asks for a member is subtracted member by member: calls kept
    other = {"type": "object", "required": ["w"]}
    schema = {"$defs": {"tree": tree}, "oneOf": [{"$ref": "#/$defs/tree"}, other]}
    grammar = compile_json_schema(schema, GrammarOptions(open_objects=True))
    assert grammar.has_calls
    assert matches(grammar, serialize(nested_tree(6))) and matches(grammar, '{"w":2}')
    assert matches(grammar, '{"v":1,"kids":[{"v":2,"w":1}]}')  # `w` below the top: a tree
    assert not matches(grammar, '{"v":1,"w":2}') and not matches(grammar, '{"w":2,"v":1}')
    # options that cannot overlap (here by type) need no product: oneOf is anyOf, any depth
    schema = {"$defs": {"tree": tree}, "oneOf": [{"$ref": "#/$defs/tree"}, {"type": "null"}]}
    grammar = compile_json_schema(schema)
    assert grammar.has_calls
    assert matches(grammar, canonical(TREE, nested_tree(6)))
    # a recursive grammar beside a product: calls outside, the product call-free
    mixed = {**TREE, "properties": {**TREE["properties"], "tag": {"not": {"const": "x"}}}}
    check(mixed, [{"v": 1, "tag": "y", "kids": [nested_tree(7)]}], [{"v": 1, "tag": "x"}])


def test_one_rule_grammars_are_plain_dfas() -> None:
    schema = {"type": "object", "properties": {"a": {"$defs": {}, "$ref": "#/$defs/x"}},
              "$defs": {"x": {"type": "array", "items": {"$ref": "#/$defs/y"}},
                        "y": {"enum": [1, 2]}}}  # fmt: skip
    grammar = compile_json_schema(schema)
    assert not grammar.has_calls
    assert grammar.rules.rule(grammar.rules.start).dfa is grammar.dfa
    assert not grammar.rules.rule(grammar.rules.start).calls


def random_text(rules: RuleSet, rule_id: int, rng: random.Random, budget: list[int]) -> bytes:
    """A random string of the rule: random steps while `budget` lasts, then shortest ways."""
    rule = rules.rule(rule_id)
    state, out = rule.dfa.start, bytearray()
    while True:
        budget[0] -= 1
        moves = [("byte", b, int(t)) for b, t in enumerate(rule.dfa.transitions[state]) if t]
        moves += [("call", c, back) for c, back in rule.calls.get(state, ())]
        if rule.dfa.accepting[state] and (not moves or rng.random() < 0.2 or budget[0] < 0):
            return bytes(out)
        if budget[0] < 0:
            moves = [m for m in moves if _closer(rules, rule_id, state, m)] or moves
        kind, what, target = rng.choice(moves)
        out += bytes([what]) if kind == "byte" else random_text(rules, what, rng, budget)
        state = target


def _closer(rules: RuleSet, rule_id: int, state: int, move: tuple[str, int, int]) -> bool:
    distance = _distances(rules, rule_id)
    return distance[move[2]] < distance[state] and (move[0] == "byte" or move[1] != rule_id)


_DIST: dict[tuple[int, int], list[float]] = {}


def _distances(rules: RuleSet, rule_id: int) -> list[float]:
    """Per state, the fewest steps (bytes, calls) to acceptance without recursing."""
    found = _DIST.get((id(rules), rule_id))
    if found is None:
        rule = rules.rule(rule_id)
        n = len(rule.dfa.transitions)
        found = [0.0 if rule.dfa.accepting[s] else float("inf") for s in range(n)]
        changed = True
        while changed:
            changed = False
            for s in range(1, n):
                targets = {int(t) for t in rule.dfa.transitions[s] if t}
                targets |= {back for c, back in rule.calls.get(s, ()) if c != rule_id}
                best = min((found[t] + 1 for t in targets), default=float("inf"))
                if best < found[s]:
                    found[s], changed = best, True
        _DIST[(id(rules), rule_id)] = found
    return found


@given(st.sampled_from([TREE, COMMENTS, RPC, MUTUAL]), st.randoms(use_true_random=False))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_texts_are_valid(schema: Any, rng: random.Random) -> None:
    grammar = compile_json_schema(schema, GrammarOptions(whitespace="spaced"))
    validator = jsonschema.Draft202012Validator(schema)
    for _ in range(3):
        data = random_text(grammar.rules, grammar.rules.start, rng, [rng.randrange(20, 400)])
        text = data.decode()
        instance = json.loads(text, parse_float=Decimal)
        assert validator.is_valid(instance), text
        assert matches(grammar, text)


values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-99, 99), st.text(max_size=4)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=30,
)


@given(values)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_any_nesting_of_params_is_accepted(params: Any) -> None:
    instance = {"jsonrpc": "2.0", "method": "m", "params": params, "id": 7}
    assert matches(compile_json_schema(RPC), canonical(RPC, instance))


def wide(prefix: str, count: int) -> dict[str, Any]:
    props = {
        f"{prefix}{k}": {"type": "string", "pattern": f"^{prefix}[0-9]+$"} for k in range(count)
    }
    return {"type": "object", "properties": props, "required": [f"{prefix}0"]}


def test_large_values_are_rules_built_when_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {
        "type": "object",
        "properties": {"a": wide("a", 60), "b": {"type": "array", "items": wide("b", 60)}},
        "required": ["a"],
    }
    grammar = compile_json_schema(schema)
    assert grammar.has_calls and grammar.rules.built == 1  # only the start rule so far
    instance = {"a": {"a0": "a1", "a7": "a22"}, "b": [{"b0": "b3"}]}
    assert matches(grammar, canonical(schema, instance))
    assert not matches(grammar, canonical(schema, {"a": {"a0": "b1"}}))
    # inlining every call gives the one-rule grammar back, to the byte
    monkeypatch.setattr("kor_cli.grammar.json_rules.SPLIT_SIZE", 10**9)
    monkeypatch.setattr("kor_cli.grammar.json_defer.DEFER_SIZE", 10**9)
    monkeypatch.setattr("kor_cli.grammar.json_member_rules.OBJECT_NODES", 10**9)
    whole = compile_json_schema(schema, GrammarOptions(time_limit_s=29.0))  # not cached
    assert not whole.has_calls
    assert grammar.dfa.fingerprint() == whole.dfa.fingerprint()


def test_grammar_accepts_walks_the_rules() -> None:
    grammar = compile_json_schema(TREE)
    deep = canonical(TREE, nested_tree(30)).encode()
    assert grammar.accepts(deep) and not grammar.accepts(deep[:-1])
    assert not grammar.dfa.accepts(deep)  # the DFA view stops at max_recursion_depth
    flat = compile_json_schema({"type": "integer"})
    assert flat.accepts(b"12") and not flat.accepts(b"1.5")


REF = {"$ref": "#/$defs/n"}
LEAVES = st.sampled_from(
    [{"type": "integer", "minimum": 0}, {"type": "string", "maxLength": 3},
     {"enum": [1, "a", None]}, {"type": "boolean"}, REF, REF]
)  # fmt: skip


def shapes(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda c: {"type": "array", "items": c[0]}),
        st.dictionaries(names, children, min_size=1, max_size=3).map(
            lambda p: {"type": "object", "properties": p, "required": sorted(p)[:1]}
        ),
        st.lists(children, min_size=2, max_size=2).map(lambda c: {"anyOf": c}),
        st.lists(children, min_size=2, max_size=2).map(lambda c: {"oneOf": c}),
        children.map(lambda c: {"type": "array", "items": c, "maxItems": 2}),
    )


RECURSIVE = st.recursive(LEAVES, shapes, max_leaves=5).map(
    lambda body: {"$defs": {"n": body}, "$ref": "#/$defs/n"}
)


@given(RECURSIVE, st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_recursive_schemas_generate_valid_texts(schema: Any, rng: random.Random) -> None:
    try:
        grammar = compile_json_schema(schema, GrammarOptions(max_states=20_000))
    except GrammarError as error:  # nothing finite, a cycle that never descends, too large,
        # or no value at all (oneOf of two equal branches): which of the two empty-language
        # messages comes depends on what earlier compiles left in the process's caches
        message = str(error)
        assert error.keyword == "$ref" or any(
            words in message for words in ("nothing", "too large", "matches no JSON value")
        ), message
        return
    validator = jsonschema.Draft202012Validator(schema)
    try:
        for _ in range(3):
            data = random_text(grammar.rules, grammar.rules.start, rng, [rng.randrange(10, 200)])
            instance = json.loads(data, parse_float=Decimal)
            try:
                valid = validator.is_valid(instance)
            except RecursionError:  # jsonschema loops on a cycle that reads nothing (anyOf [#n, …])
                valid = None
            assert valid is not False, (schema, data)
            assert matches(grammar, data.decode())
    except GrammarError as error:  # a rule built when first reached can be past max_states
        assert "too large" in str(error)


def _rule_prints(schema: Any) -> dict[int, tuple[str, list[Any]]]:
    """Every reachable rule's DFA fingerprint and calls, built afresh (caches cleared)."""
    compile_module._cache.clear()
    dfa_cache.clear()
    shared_rules.clear()
    rules = compile_json_schema(schema).rules
    assert rules is not None
    out = {}
    for k in rules.reachable_rules():
        rule = rules.rule(k)
        out[k] = (rule.dfa.fingerprint(), sorted(rule.calls.items()))
    return out


@pytest.mark.parametrize("name", RECURSIVE_NAMES)
def test_bodies_share_one_call_marker_per_callee(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = recursive_schema(name, closed=True)
    made: list[int] = []

    def counted(rule_id: int) -> Any:
        made.append(rule_id)
        return call(rule_id)

    monkeypatch.setattr(json_rules, "call", counted)
    shared = _rule_prints(schema)
    assert sorted(made) == sorted(set(made))  # each callee's marker made once
    assert set(made) == {c for _, calls in shared.values() for p in calls for c, _ in p[1]}

    def fresh(self: json_rules.RuleBook, rule: int) -> Any:  # a new marker at every call
        def leaf(c: Any) -> Any:
            return call(c.rule) if self.productive(c.rule) else NOTHING

        return substitute(self.body(rule), leaf, self._settled)

    monkeypatch.setattr(json_rules.RuleBook, "resolved", fresh)
    assert _rule_prints(schema) == shared  # the same rules, to the byte
