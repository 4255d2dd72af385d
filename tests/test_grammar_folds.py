"""`folds`: a prefix-free automaton embedded in a rule body with calls is read as one
symbol and spelled out after minimisation; the DFA is the very one the byte pipeline gives,
and bodies where it could merge with its context (or its first bytes are read elsewhere)
are built with it spelled out."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rule_strategies import LEAVES, trees

from kor_cli.grammar import dfa_cache, folds
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar.ast import Automaton, Bytes, Node, alt, literal, repeat, seq
from kor_cli.grammar.fsm import ByteDFA, compile_ast
from kor_cli.grammar.rules import _markers, call, split_calls


def _mask(text: bytes) -> int:
    return sum(1 << b for b in text)


_CHARS = Bytes(((1 << 0x80) - 1) & ~_mask(b'"\\') & ~((1 << 0x20) - 1))
STRING = compile_ast(
    seq(
        literal('"'),
        repeat(alt(_CHARS, seq(literal("\\"), Bytes(_mask(b'"\\nt')))), 0, None),
        literal('"'),
    )
)
AXB = compile_ast(seq(literal("a"), repeat(literal("x"), 0, None), literal("b")))  # a x* b
KEYS = compile_ast(alt(literal('"ab"'), literal('"ac"'), literal('"b"')))
LOOSE = compile_ast(seq(literal("a"), repeat(literal("x"), 0, None)))  # not prefix-free
AUTOMATA = [STRING, AXB, KEYS, LOOSE]
MORE = st.one_of(
    LEAVES,
    st.sampled_from(["y", "x", "b", "c", "xb", ":"]).map(literal),
    st.sampled_from(AUTOMATA).map(Automaton),
)
TREES = trees(MORE, max_leaves=10)


def check(node: Node, monkeypatch: pytest.MonkeyPatch) -> ByteDFA:
    """The DFA of `node` (with calls) equals the byte pipeline's, and so does its rule."""
    dfa_cache.clear()
    built = compile_ast(node)
    with monkeypatch.context() as patch:
        patch.setattr(fsm_module, "build_with_calls", lambda *_: None)
        dfa_cache.clear()
        reference = compile_ast(node)
    assert built.fingerprint() == reference.fingerprint()
    if built.marks is not None:
        assert built.marks == _markers(built.transitions)[:2]
    if not built.is_empty() and built.marks is not None:
        rule, again = split_calls(built), split_calls(reference)
        assert np.array_equal(rule.dfa.transitions, again.dfa.transitions)
        assert np.array_equal(rule.dfa.accepting, again.dfa.accepting)
        assert list(rule.calls.items()) == list(again.calls.items())
    return built


@given(TREES)
@settings(max_examples=300, deadline=None)
def test_folded_automata_give_the_byte_dfa(node: Node) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        check(seq(node, call(3)), monkeypatch)


def test_foldable() -> None:
    """Prefix-free automata whose start is never re-entered fold; others do not."""
    assert folds.fold_of(STRING) is not None
    assert folds.fold_of(AXB) is not None
    assert folds.fold_of(KEYS) is not None
    assert folds.fold_of(LOOSE) is None  # its accepting state reads on
    again = compile_ast(seq(repeat(literal("ab"), 1, None), literal("c")))  # re-enters a..
    assert folds.fold_of(again) is not None
    loop = compile_ast(repeat(literal("ab"), 1, None, literal(",")))
    assert folds.fold_of(loop) is None


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records, for each body built with calls, whether automata stayed folded."""
    seen: list[bool] = []
    real = folds.Copies.fill

    def fill(self: folds.Copies, *args: object) -> np.ndarray:
        seen.append(bool(self._copies))
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(folds.Copies, "fill", fill)
    return seen


def test_value_rule_folds_its_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`"..."` as a value and as a key: one symbol each, spelled out; the same DFA."""
    string = Automaton(STRING)
    member = seq(string, literal(":"), call(1))
    value = alt(
        literal("1"),
        string,
        seq(literal("["), repeat(call(1), 0, None, literal(",")), literal("]")),
        seq(literal("{"), repeat(member, 0, None, literal(",")), literal("}")),
    )
    seen = _spy(monkeypatch)
    check(value, monkeypatch)
    assert seen and all(seen)


def test_equivalent_context_is_spelled_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """`a x* b` inside the automaton reads as `y x* b` does outside it (the state after
    `a` and the state after `y` are one): the body is built with it spelled out."""
    seen = _spy(monkeypatch)
    inside = seq(Automaton(AXB), literal("c"), call(2))
    outside = seq(literal("y"), repeat(literal("x"), 0, None), literal("bc"), call(2))
    check(alt(inside, outside), monkeypatch)
    assert seen and not any(seen)


def test_first_bytes_read_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """A literal `"` next to the string automaton: spelled out (same DFA)."""
    seen = _spy(monkeypatch)
    check(alt(seq(Automaton(STRING), call(2)), seq(literal('"k"'), call(3))), monkeypatch)
    assert seen and not any(seen)
