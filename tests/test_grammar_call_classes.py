"""`call_classes`: a rule body's DFA built with each call as one symbol is the very DFA the
byte pipeline gives (markers spelled out, canonical numbering), and its `marks` are the
calls `rules.split_calls` reads off the table; bodies it cannot take fall back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from rule_strategies import CALL_TREES

from kor_cli.errors import GrammarError
from kor_cli.grammar import dfa_cache
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar.ast import ALL_BYTES, Automaton, Bytes, Node, alt, literal, repeat, seq
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.rules import Rule, _markers, call, split_calls


def over_bytes(node: Node, monkeypatch: pytest.MonkeyPatch) -> ByteDFA:
    """The DFA of `node` built by the byte pipeline (call mode off)."""
    with monkeypatch.context() as patch:
        patch.setattr(fsm_module, "build_with_calls", lambda *_: None)
        dfa_cache.clear()
        return compile_ast(node)


def check(node: Node, monkeypatch: pytest.MonkeyPatch) -> ByteDFA:
    dfa_cache.clear()
    built = compile_ast(node)
    reference = over_bytes(node, monkeypatch)
    assert built.fingerprint() == reference.fingerprint()
    if built.marks is not None:
        found, inside, _ = _markers(built.transitions)
        assert built.marks == (found, inside)
        assert list(built.marks[0]) == sorted(built.marks[0])
    if not built.is_empty():
        rule, again = _split(built), _split(reference)
        if isinstance(rule, str) or isinstance(again, str):
            assert rule == again
        else:
            assert np.array_equal(rule.dfa.transitions, again.dfa.transitions)
            assert list(rule.calls.items()) == list(again.calls.items())
    return built


def _split(dfa: ByteDFA) -> Rule | str:
    """The rule, or the refusal's message."""
    try:
        return split_calls(dfa)
    except GrammarError as error:
        return error.message


@given(CALL_TREES)
@settings(max_examples=150, deadline=None)
def test_calls_as_symbols_give_the_byte_dfa(node: Node) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        check(node, monkeypatch)


@given(CALL_TREES, CALL_TREES)
@settings(max_examples=60, deadline=None)
def test_embedded_automata_with_calls(inner: Node, outer: Node) -> None:
    """An automaton built with calls embeds its calls as call classes (its `marks`); one
    built over bytes with markers makes the outer body fall back: the same DFA."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        dfa_cache.clear()
        marked = compile_ast(inner)
        plain = over_bytes(inner, monkeypatch)
        for dfa in (marked, plain):
            if not dfa.is_empty():
                check(seq(literal("{"), Automaton(dfa), outer, Automaton(dfa)), monkeypatch)


def test_marker_bytes_outside_markers_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A byte set holding marker bytes, a lone lead byte or digit, a short marker: built
    over bytes (the same DFA; `marks` None)."""
    mark, digit = 1 << 0xF8, 1 << 0xF9
    for node in (
        seq(call(3), Bytes(ALL_BYTES)),
        alt(call(3), Bytes(mark)),
        seq(call(3), Bytes(digit)),
        seq(call(3), Bytes(mark), Bytes(digit)),
    ):
        assert check(node, monkeypatch).marks is None


def test_rule_of_a_recursive_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call of `[value, ...]` and `{"k": value, ...}` is one symbol; the rule has
    its calls back."""
    value = alt(
        literal("1"), seq(literal("["), repeat(call(1), 0, None, literal(",")), literal("]"))
    )
    built = check(alt(value, seq(literal('{"k":'), call(1), literal("}"))), monkeypatch)
    assert built.marks is not None
    rule = split_calls(built)
    assert sorted(c for pairs in rule.calls.values() for c, _ in pairs) == [1, 1, 1]


def test_large_automaton_with_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """An automaton past `nfa._EDGES_SIZE` states (edges read off its table) embeds its
    calls too."""
    keys = alt(*(seq(literal(f'"{i:04d}":'), call(i)) for i in range(150)))
    dfa_cache.clear()
    inner = compile_ast(repeat(keys, 1, None, literal(",")))
    assert inner.marks is not None and inner.num_states > 256
    built = check(seq(literal("{"), Automaton(inner), literal("}"), call(2)), monkeypatch)
    assert built.marks is not None


@pytest.mark.parametrize("max_states", [2, 8, 12, 20, 40])
def test_state_limits_as_over_bytes(max_states: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Near the state limits a body is refused exactly when the byte pipeline refuses it
    (its markers' states count)."""
    node = seq(literal("["), repeat(alt(call(1), call(2)), 0, None, literal(",")), literal("]"))

    def outcome(calls: bool) -> str:
        with monkeypatch.context() as patch:
            if not calls:
                patch.setattr(fsm_module, "build_with_calls", lambda *_: None)
            dfa_cache.clear()
            try:
                return compile_ast(node, max_states).fingerprint()
            except GrammarError as error:
                return error.message

    assert outcome(True) == outcome(False)
