"""Byte automata: the ByteDFA contract, construction, minimisation, products, numbers."""

from __future__ import annotations

import itertools
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import (
    Automaton,
    alt,
    byte_range,
    difference,
    intersect,
    join,
    literal,
    opt,
    repeat,
    seq,
)
from kor_cli.grammar.byte_dfa import ByteDFA, minimal
from kor_cli.grammar.charset import ALL, utf8
from kor_cli.grammar.fsm import compile_ast, product
from kor_cli.grammar.json_numbers import int_range, integer_bounds, multiple_of, number_range
from kor_cli.grammar.json_values import format_number

LETTER = byte_range(ord("a"), ord("c"))


def check_contract(dfa: ByteDFA) -> None:
    assert dfa.transitions.dtype == np.int32
    assert dfa.transitions.shape == (dfa.num_states, 256)
    assert dfa.accepting.dtype == bool and dfa.accepting.shape == (dfa.num_states,)
    assert not dfa.transitions[0].any() and not dfa.accepting[0]
    assert 0 < dfa.start < dfa.num_states
    assert dfa.transitions.min() >= 0 and dfa.transitions.max() < dfa.num_states


def test_contract_and_walks() -> None:
    dfa = compile_ast(seq(literal("ab"), repeat(literal("c"), 0, None), opt(literal("d"))))
    check_contract(dfa)
    assert dfa.accepts(b"ab") and dfa.accepts(b"abccd") and not dfa.accepts(b"abdd")
    assert dfa.walk(dfa.start, b"x") == 0
    assert dfa.walk(dfa.start, b"ab") == dfa.step(dfa.step(dfa.start, ord("a")), ord("b"))
    assert len(dfa.fingerprint()) == 64


def test_minimal_and_canonical() -> None:
    a = compile_ast(
        alt(literal("a"), literal("b"), seq(literal("a"), repeat(literal("a"), 0, None)))
    )
    b = compile_ast(alt(repeat(literal("a"), 1, None), literal("b")))
    assert a.num_states == b.num_states == 4  # dead, start, after a (loops), after b
    assert a.fingerprint() == b.fingerprint()
    assert compile_ast(literal("x")).fingerprint() != compile_ast(literal("y")).fingerprint()


def test_empty_language_and_limits() -> None:
    empty = compile_ast(alt())
    check_contract(empty)
    assert empty.is_empty() and not empty.accepts(b"")
    with pytest.raises(GrammarError, match="too large"):
        compile_ast(repeat(utf8(ALL), 0, 400), max_states=500)


def test_structurally_equal_trees_compile_once() -> None:
    def tree(word: str):  # fresh node objects on every call
        inner = intersect(repeat(LETTER, 1, 6), difference(repeat(LETTER, 0, None), literal(word)))
        return seq(literal("<"), inner, opt(seq(literal(","), inner)), literal(">"))

    first, again, other = compile_ast(tree("ab")), compile_ast(tree("ab")), compile_ast(tree("ba"))
    assert again is first  # the cache answered
    assert other is not first and other.fingerprint() != first.fingerprint()
    assert first.accepts(b"<ba>") and not first.accepts(b"<ab>") and other.accepts(b"<ab>")
    assert first.accepts(b"<abc,ba>") and not first.accepts(b"<ba,ab>")
    # a tree compiled under a large state limit still fails under a smaller one
    with pytest.raises(GrammarError, match="too large"):
        compile_ast(tree("ab"), max_states=5)


@given(st.lists(st.booleans(), min_size=1, max_size=4), st.integers(0, 4), st.data())
@settings(max_examples=40, deadline=None)
def test_join_matches_enumeration(required: list[bool], lo: int, data: st.DataObject) -> None:
    hi = data.draw(st.none() | st.integers(lo, 5))
    tail = data.draw(st.booleans())
    items = [(literal(chr(ord("a") + i)), r) for i, r in enumerate(required)]
    node = join(items, literal(","), literal("z") if tail else None, lo, hi)
    dfa = compile_ast(node)
    for picks in itertools.product([False, True], repeat=len(required)):
        for extra in range(3 if tail else 1):
            words = [chr(ord("a") + i) for i, p in enumerate(picks) if p] + ["z"] * extra
            ok = all(p or not r for p, r in zip(picks, required, strict=True))
            ok = ok and lo <= len(words) and (hi is None or len(words) <= hi)
            assert dfa.accepts(",".join(words).encode()) == ok, (words, lo, hi)


@given(
    st.integers(0, 3), st.none() | st.integers(0, 4), st.lists(st.sampled_from("ab,"), max_size=9)
)
@settings(max_examples=60, deadline=None)
def test_separated_repeat(lo: int, hi: int | None, chars: list[str]) -> None:
    if hi is not None and hi < lo:
        lo, hi = hi, lo
    dfa = compile_ast(repeat(alt(literal("a"), literal("b")), lo, hi, literal(",")))
    text = "".join(chars)
    parts = text.split(",") if text else []
    ok = (
        all(p in ("a", "b") for p in parts)
        and lo <= len(parts)
        and (hi is None or len(parts) <= hi)
    )
    assert dfa.accepts(text.encode()) == ok


def test_products() -> None:
    words = repeat(LETTER, 0, None)
    with_b = seq(words, literal("b"), words)
    short = repeat(LETTER, 0, 3)
    both = compile_ast(intersect(with_b, short))
    minus = compile_ast(difference(short, with_b))
    for n in range(5):
        for word in map("".join, itertools.product("abc", repeat=n)):
            assert both.accepts(word.encode()) == ("b" in word and n <= 3)
            assert minus.accepts(word.encode()) == ("b" not in word and n <= 3)
    a, b = compile_ast(short), compile_ast(with_b)
    assert product(a, b, "and").fingerprint() == both.fingerprint()
    assert compile_ast(seq(Automaton(both), literal("!"))).accepts(b"ab!")


def test_minimal_from_raw_table() -> None:
    table = np.zeros((4, 256), dtype=np.int32)
    table[1, ord("a")] = 2
    table[1, ord("b")] = 3  # 2 and 3 are equivalent accepting sinks
    dfa = minimal(table, np.array([False, False, True, True]), 1)
    assert dfa.num_states == 3 and dfa.accepts(b"a") and dfa.accepts(b"b")


@given(st.none() | st.integers(-2000, 2000), st.none() | st.integers(-2000, 2000), st.data())
@settings(max_examples=80, deadline=None)
def test_integer_ranges(lo: int | None, hi: int | None, data: st.DataObject) -> None:
    dfa = compile_ast(int_range(lo, hi))
    for n in data.draw(st.lists(st.integers(-3000, 3000), min_size=5, max_size=25)) + [
        lo or 0,
        hi or 0,
    ]:
        inside = (lo is None or n >= lo) and (hi is None or n <= hi)
        assert dfa.accepts(str(n).encode()) == inside, (lo, hi, n)
    for text in (b"-0", b"01", b"00", b"+1", b"1.0", b""):
        assert not dfa.accepts(text)


decimals = st.integers(-4000, 4000).map(lambda k: Decimal(k) / 100)
bounds = st.none() | st.tuples(decimals, st.booleans())


@given(bounds, bounds, st.lists(decimals, min_size=5, max_size=20))
@settings(max_examples=60, deadline=None)
def test_number_ranges(
    lower: tuple[Decimal, bool] | None, upper: tuple[Decimal, bool] | None, xs: list[Decimal]
) -> None:
    numbers = compile_ast(number_range(lower, upper))
    integers = compile_ast(int_range(*integer_bounds(lower, upper)))
    for x in xs + [b[0] for b in (lower, upper) if b is not None] + [Decimal("0.001")]:
        ok = (lower is None or (x > lower[0] if lower[1] else x >= lower[0])) and (
            upper is None or (x < upper[0] if upper[1] else x <= upper[0])
        )
        text = format_number(x).encode()
        assert numbers.accepts(text) == ok, (lower, upper, text)
        if x == x.to_integral_value():
            assert integers.accepts(text) == ok
    for text in (b"-0", b"1.50", b"1.", b".5", b"1e3", b"01"):
        assert not numbers.accepts(text)


@pytest.mark.parametrize("step", ["2", "7", "1.5", "0.25", "0.0001", "1E+2"])
def test_multiple_of(step: str) -> None:
    dfa = compile_ast(intersect(number_range(None, None), multiple_of(Decimal(step), 50_000)))
    for k in range(-300, 300, 7):
        x = Decimal(k) / 8
        assert dfa.accepts(format_number(x).encode()) == (x % Decimal(step) == 0), x


def test_multiple_of_limit() -> None:
    with pytest.raises(GrammarError, match="multipleOf"):
        multiple_of(Decimal("0.123456789"), 50_000)
