"""dfa_cache: structurally equal trees share one compiled DFA until the cache is cleared."""

from __future__ import annotations

from kor_cli.grammar import dfa_cache
from kor_cli.grammar.ast import Node, alt, literal, repeat, seq
from kor_cli.grammar.fsm import ByteDFA, compile_ast

LIMIT = 1 << 20


def tree() -> Node:
    item = alt(literal("ab"), literal("c"))
    return seq(literal("["), repeat(item, 0, None, literal(",")), literal("]"))


def test_equal_trees_share_a_dfa_and_clear_forgets_it() -> None:
    dfa = compile_ast(tree())
    assert isinstance(dfa, ByteDFA) and dfa.accepts(b"[ab,c]") and not dfa.accepts(b"[a]")
    dfa_cache.remember(tree(), LIMIT, dfa)
    assert dfa_cache.cached(tree(), LIMIT) is dfa  # another object, the same structure
    assert dfa_cache.cached(seq(tree(), literal("x")), LIMIT) is None
    dfa_cache.clear()
    assert dfa_cache.cached(tree(), LIMIT) is None
