"""`json_numbers.settled_spellings` builds the spellings of a number language from its DFA
directly: the same language (the same minimal DFA) as the products and NFA of `spellings`."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import json_numbers as jn
from kor_cli.grammar.ast import Node, alt, intersect, literal
from kor_cli.grammar.fsm import compile_ast

DECIMALS = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False)
BOUNDS = st.none() | st.tuples(DECIMALS, st.booleans())


def reference(node: Node, scientific: bool) -> str:
    spelled = jn.spellings(node)
    return compile_ast(alt(spelled, jn.SCIENTIFIC) if scientific else spelled).fingerprint()


@settings(max_examples=80, deadline=None)
@given(BOUNDS, BOUNDS, st.sampled_from(["number", "integer", "fraction"]), st.booleans())
def test_same_language_as_the_products(
    lower: tuple[Decimal, bool] | None,
    upper: tuple[Decimal, bool] | None,
    kind: str,
    scientific: bool,
) -> None:
    if kind == "integer":
        node = jn.int_range(*jn.integer_bounds(lower, upper))
    else:
        node = jn.number_range(lower, upper)
        if kind == "fraction":
            node = intersect(node, jn.FRACTIONAL)
    assert jn.settled_spellings(node, scientific).dfa.fingerprint() == reference(node, scientific)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text("0123456789.-e", min_size=1, max_size=5), min_size=1, max_size=4))
def test_any_language_not_only_canonical_numbers(texts: list[str]) -> None:
    """Texts that are not canonical numbers (`007`, `1.50`, `.`) get exactly the trailing
    zeros `spellings` gives them too."""
    node = alt(*(literal(t) for t in texts))
    for scientific in (False, True):
        assert jn.settled_spellings(node, scientific).dfa.fingerprint() == reference(
            node, scientific
        )


def test_spellings_of_a_bounded_number() -> None:
    bounds = (Decimal(0), False), (Decimal("2.5"), True)
    dfa = jn.settled_spellings(jn.number_range(*bounds), False).dfa
    assert all(dfa.accepts(t) for t in (b"0", b"0.0", b"2", b"2.00", b"2.4", b"2.40", b"1.5"))
    assert not any(dfa.accepts(t) for t in (b"2.5", b"2.50", b"-1", b"3", b"2.", b"1e0"))
    nothing = jn.number_range((Decimal(2), False), (Decimal(1), False))
    assert jn.settled_spellings(nothing, False).dfa.is_empty()
    assert jn.settled_spellings(nothing, True).dfa.accepts(b"1e5")  # exponent forms only
