"""Rules: call markers survive the regex → minimal DFA pipeline and split back into calls."""

from __future__ import annotations

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import ALL_BYTES, alt, byteset, literal, opt, repeat, seq
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.regex import fullmatch
from kor_cli.grammar.rules import MAX_RULES, Rule, RuleSet, call, marker, split_calls


def test_markers_are_fixed_width_distinct_and_not_utf8() -> None:
    ids = [0, 1, 6, 7, 48, 2400, MAX_RULES - 1]
    spelled = [marker(k) for k in ids]
    assert len(set(spelled)) == len(ids)
    assert all(len(m) == len(spelled[0]) and min(m) >= 0xF8 for m in spelled)
    for m in spelled:
        with pytest.raises(UnicodeDecodeError):
            m.decode("utf-8")
    with pytest.raises(GrammarError, match="out of range"):
        call(MAX_RULES)


def walk(rule: Rule, state: int, data: bytes) -> int:
    for byte in data:
        state = int(rule.dfa.transitions[state, byte])
    return state


def test_split_calls_of_a_nested_array_rule() -> None:
    # A -> "[" (A ("," A)*)? "]"
    body = seq(literal("["), opt(repeat(call(3), 1, None, literal(","))), literal("]"))
    rule = split_calls(compile_ast(body))
    assert not rule.dfa.transitions[:, 0xF8:].any()
    start = rule.dfa.start
    inside = walk(rule, start, b"[")
    assert rule.calls.get(start) is None
    ((callee, after_item),) = rule.calls[inside]
    assert callee == 3
    assert walk(rule, inside, b"]") and rule.dfa.accepting[walk(rule, inside, b"]")]
    assert not walk(rule, inside, b",")  # an item first
    again = walk(rule, after_item, b",")
    assert rule.calls[again] == ((3, after_item),)
    assert rule.dfa.accepting[walk(rule, after_item, b"]")]
    assert rule.call_states[[inside, again]].all() and rule.call_states.sum() == 2


def test_split_calls_keeps_states_reached_only_through_a_return() -> None:
    rule = split_calls(compile_ast(seq(call(1), literal("x"), call(2))))
    start = rule.dfa.start
    ((one, middle),) = rule.calls[start]
    after_x = walk(rule, middle, b"x")
    ((two, end),) = rule.calls[after_x]
    assert (one, two) == (1, 2) and rule.dfa.accepting[end]
    assert rule.dfa.num_states == 5  # dead, start, middle, after x, end


def test_split_calls_gives_one_return_state_per_callee() -> None:
    # "a" call(1) "b" | "a" call(1) "c" | "a" call(2): one state calls 1 and 2
    body = alt(
        seq(literal("a"), call(1), alt(literal("b"), literal("c"))), seq(literal("a"), call(2))
    )
    rule = split_calls(compile_ast(body))
    after_a = walk(rule, rule.dfa.start, b"a")
    pairs = rule.calls[after_a]
    assert [callee for callee, _ in pairs] == [1, 2]
    ret1 = pairs[0][1]
    assert walk(rule, ret1, b"b") and walk(rule, ret1, b"c") and rule.dfa.accepting[pairs[1][1]]


@pytest.mark.parametrize(
    "body",
    [
        seq(literal("a"), repeat(fullmatch("[x-z]"), 0, None), literal(b"\xf8\xf9")),  # cut short
        seq(literal("a"), repeat(byteset(ALL_BYTES), 0, None)),  # any byte, 0xF8 included
        seq(call(1), literal(b"\xfa")),
    ],
)
def test_split_calls_refuses_raw_high_bytes(body) -> None:
    with pytest.raises(GrammarError, match="0xF8-0xFF"):
        split_calls(compile_ast(body))


def ruleset(bodies: dict[int, object], start: int = 0) -> RuleSet:
    return RuleSet(start, lambda k: compile_ast(bodies[k]), names={k: f"R{k}" for k in bodies})


def test_ruleset_builds_lazily_and_caches() -> None:
    built: list[int] = []
    bodies = {0: seq(literal("<"), call(1), literal(">")), 1: literal("x"), 2: literal("unused")}

    def build(k: int):
        built.append(k)
        return compile_ast(bodies[k])

    rules = RuleSet(0, build)
    assert rules.built == 0
    assert rules.rule(0) is rules.rule(0)
    assert built == [0] and rules.has_calls
    rules.rule(1)
    assert built == [0, 1]
    assert rules.reachable_rules() == [0, 1]
    key = rules.key()
    assert key == RuleSet(0, build).key()
    other = {**bodies, 1: literal("y")}
    assert RuleSet(0, lambda k: compile_ast(other[k])).key() != key
    assert RuleSet(0, build, key="schema A").key() != RuleSet(0, build, key="schema B").key()


def test_nullable_and_epsilon_states() -> None:
    rules = ruleset({0: seq(call(1), call(2), literal("!")), 1: opt(literal("a")), 2: literal("b")})
    assert rules.nullable(1) and not rules.nullable(2) and not rules.nullable(0)
    start = rules.rule(0).dfa.start
    ((_, after_one),) = rules.rule(0).calls[start]
    assert rules.epsilon_states(0, start) == [start, after_one]
    assert ruleset({0: seq(call(1), call(1)), 1: opt(literal("a"))}).nullable(0)


@pytest.mark.parametrize(
    "bodies",
    [
        {0: alt(call(0), literal("x"))},  # A -> A | "x"
        {0: seq(call(1), literal("x")), 1: alt(seq(call(0), literal("y")), literal("z"))},
        {0: seq(call(1), call(0), literal("x")), 1: opt(literal("a"))},  # through a nullable rule
    ],
)
def test_left_recursion_is_a_named_error(bodies) -> None:
    rules = ruleset(bodies)
    with pytest.raises(GrammarError, match="left recursion: R0 -> .*R0"):
        rules.rule(0)
    with pytest.raises(GrammarError, match="left recursion"):
        rules.rule(0)  # not half-built after the error


def test_right_and_middle_recursion_are_fine() -> None:
    rules = ruleset(
        {
            0: alt(
                seq(literal("["), opt(call(0)), literal("]")),
                seq(literal("a"), call(0)),
                literal("a"),
            )
        }
    )
    assert set(callee for pairs in rules.rule(0).calls.values() for callee, _ in pairs) == {0}


def test_from_dfa_is_one_rule_without_calls() -> None:
    dfa = compile_ast(literal("abc"))
    rules = RuleSet.from_dfa(dfa)
    assert rules.rule(rules.start).dfa is dfa and not rules.has_calls
    assert rules.key() == RuleSet.from_dfa(compile_ast(literal("abc"))).key()
    assert rules.key() != RuleSet.from_dfa(compile_ast(literal("abd"))).key()


def test_an_empty_rule_is_an_error() -> None:
    with pytest.raises(GrammarError, match="R1 matches nothing"):
        ruleset({0: call(1), 1: alt()}).rule(0)


def test_rooted_puts_a_new_root_over_the_same_rules() -> None:
    rules = ruleset({0: seq(literal("["), opt(call(0)), literal("]"))})
    inner = rules.rule(0)
    wrapped = rules.rooted(lambda body: seq(literal("<"), body, literal(">")), "envelope")
    assert wrapped.start != rules.start and wrapped.rule(0) is inner  # shared, not rebuilt
    root = wrapped.rule(wrapped.start)
    ((callee, _),) = root.calls[walk(root, root.dfa.start, b"<")]
    assert callee == 0 and wrapped.name(wrapped.start) == "envelope"
    assert wrapped.key() != rules.key()
    again = rules.rooted(lambda body: seq(literal("<"), body, literal(">")))
    assert again.key() == wrapped.key()
    assert wrapped.rooted(lambda body: body).start != wrapped.start


def test_rules_split_off_minimal_dfas_need_no_pruning() -> None:
    """`Rule.pruned` (the pushdown tables skip their live-state pass): every state of such
    a rule reaches an accepting or a calling state, on every rule of the recursive schemas."""
    from kor_cli.grammar.compile import compile_json_schema
    from kor_cli.grammar.live import live_states
    from kor_cli.testing import RECURSIVE_NAMES, recursive_schema

    seen = 0
    for name in RECURSIVE_NAMES:
        rules = compile_json_schema(recursive_schema(name)).rules
        todo, done = [rules.start], set()
        while todo:
            rule_id = todo.pop()
            if rule_id in done:
                continue
            done.add(rule_id)
            rule = rules.rule(rule_id)
            todo += [callee for pairs in rule.calls.values() for callee, _ in pairs]
            assert rule.pruned
            table = rule.dfa.transitions
            assert live_states(table, rule.dfa.accepting | rule.call_states)[1:].all()
            seen += 1
    assert seen > len(RECURSIVE_NAMES)
    odd = split_calls(compile_ast(literal("ab")))
    assert odd.pruned and not Rule(odd.dfa).pruned  # only a builder that knows says so
