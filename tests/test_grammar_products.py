"""Products (`intersect`/`difference`) lowered by `fsm._lower`: their sides go through
`dfa_cache`, so a side shared by several products is built once; languages are those
of brute force, and the same tables as with no cache at all."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from kor_cli.grammar import dfa_cache
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar.ast import Node, alt, difference, intersect, literal, repeat, seq
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from tests.test_grammar_dfacore import LIMIT, check_language, embedded, trees


def shared_sides(x: Node, y: Node, z: Node) -> Node:
    """`x` on the left of three products, `y` on both sides of two."""
    return alt(intersect(x, y), difference(x, z), seq(difference(x, y), intersect(z, y)))


@given(trees, trees, trees)
@settings(max_examples=120, deadline=None)
def test_shared_sides_match_brute_force(x: Node, y: Node, z: Node) -> None:
    dfa_cache.clear()
    check_language(shared_sides(x, y, z))


@given(trees, trees, trees)
@settings(max_examples=80, deadline=None)
def test_shared_sides_same_table_as_uncached(x: Node, y: Node, z: Node) -> None:
    """The cached sides give the table every product gets when built from scratch."""
    node = shared_sides(x, y, z)
    dfa_cache.clear()
    fast = embedded(node).dfa  # rejects a blow-up of the random tree
    dfa_cache.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fsm_module, "cached", lambda node, max_states: None)
        patch.setattr(fsm_module, "remember", lambda node, max_states, dfa: dfa)
        slow = compile_ast(node, LIMIT)
    dfa_cache.clear()
    assert fast.fingerprint() == slow.fingerprint()


def test_shared_side_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large side of three products (one pattern's key language split three ways) is
    determinised once; the products still differ."""
    words = alt(*(literal(w) for w in ("ab", "ba", "abc")))
    side = seq(literal('"'), repeat(words, 0, None), literal('"'))
    keys = [alt(*(literal(f'"{w}"') for w in words)) for words in (["ab"], ["ba", "abab"], [""])]
    built: list[Node] = []
    real = fsm_module._build

    def counting(node: Node, max_states: int) -> ByteDFA:
        built.append(node)
        return real(node, max_states)

    monkeypatch.setattr(fsm_module, "_build", counting)
    dfa_cache.clear()
    products = [compile_ast(difference(side, key)) for key in keys]
    dfa_cache.clear()
    assert sum(node is side for node in built) == 1
    for key, dfa in zip(["ab", "ba", ""], products, strict=True):
        assert not dfa.accepts(f'"{key}"'.encode())
        assert dfa.accepts(b'"abcab"')
    assert products[0].accepts(b'"ba"') and not products[1].accepts(b'"abab"')
