"""`rules.split_calls` of a minimal DFA keeps every state outside the call markers without
a reachability search: the same rule as the searched split, and the same refusals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rule_strategies import CALL_TREES

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, alt, literal, opt, repeat, seq
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.rules import Rule, call, split_calls


def same_rule(a: Rule, b: Rule) -> bool:
    return (
        np.array_equal(a.dfa.transitions, b.dfa.transitions)
        and np.array_equal(a.dfa.accepting, b.dfa.accepting)
        and a.dfa.start == b.dfa.start
        and dict(a.calls) == dict(b.calls)
    )


def searched(dfa: ByteDFA) -> Rule:
    """The split of the same table, not vouched minimal: reachability is searched."""
    return split_calls(ByteDFA(dfa.transitions, dfa.accepting, dfa.start))


def bodies() -> st.SearchStrategy[Node]:
    """Rule bodies with at least one call."""
    return st.tuples(CALL_TREES, st.integers(0, 3)).map(lambda p: seq(p[0], call(p[1])))


@settings(max_examples=150, deadline=None)
@given(bodies())
def test_split_of_a_minimal_dfa_equals_the_searched_split(body: Node) -> None:
    dfa = compile_ast(body)
    assert dfa.trimmed
    fast = split_calls(dfa)
    assert fast.calls
    assert same_rule(fast, searched(dfa))


def test_listed_calls_split_alike() -> None:
    item = alt(call(0), call(5), literal("x"))
    body = seq(literal("["), opt(repeat(item, 1, None, literal(","))), literal("]"))
    dfa = compile_ast(body)
    fast = split_calls(dfa)
    assert same_rule(fast, searched(dfa))
    assert sorted({c for pairs in fast.calls.values() for c, _ in pairs}) == [0, 5]


def marker_table() -> np.ndarray:
    """1 --F8--> 2 -d-> 3 ... 7 -d-> 8 (return) --b--> 9 (accepting); and 1 --a--> 3,
    a byte into the marker's inside."""
    table = np.zeros((10, 256), dtype=np.int32)
    table[1, 0xF8] = 2
    for state in range(2, 8):
        table[state, 0xF9] = state + 1
    table[8, ord("b")] = 9
    table[1, ord("a")] = 3
    return table


def test_a_byte_into_a_marker_path_is_refused_either_way() -> None:
    accepting = np.zeros(10, dtype=bool)
    accepting[9] = True
    for trimmed in (True, False):
        dfa = ByteDFA(marker_table(), accepting, 1, trimmed=trimmed)
        try:
            split_calls(dfa)
        except GrammarError as error:
            assert "0xF8-0xFF" in str(error)
        else:
            raise AssertionError(f"a byte into a marker path was split (trimmed={trimmed})")


def test_without_the_stray_byte_both_ways_read_the_call() -> None:
    table = marker_table()
    table[1, ord("a")] = 0
    accepting = np.zeros(10, dtype=bool)
    accepting[9] = True
    rules = [split_calls(ByteDFA(table, accepting, 1, trimmed=t)) for t in (True, False)]
    assert same_rule(*rules)
    assert dict(rules[0].calls) == {1: ((0, 2),)}  # state 1 calls rule 0, returns to 2 (was 8)
