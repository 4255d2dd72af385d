"""dfa_cache: structurally equal trees share one compiled DFA until the cache is cleared."""

from __future__ import annotations

from kor_cli.grammar import dfa_cache
from kor_cli.grammar.ast import Node, alt, literal, repeat, seq
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast

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


def test_trees_of_a_new_shape_are_never_walked() -> None:
    """A lookup whose shape nothing held has misses without keying the tree; a DFA
    remembered so is keyed when a tree of its shape is looked up, and then hits."""
    dfa_cache.clear()
    first, other = tree(), seq(literal("{"), literal("}"))
    dfa = compile_ast(first, LIMIT)
    assert dfa_cache.cached(other, LIMIT) is None
    assert "_structure" not in first.__dict__ and "_structure" not in other.__dict__
    assert dfa_cache.cached(tree(), LIMIT) is dfa
    assert "_structure" in first.__dict__


def test_held_states_are_counted_through_eviction(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Keyed and unkeyed DFAs count toward the bound; eviction keeps the count exact."""
    dfa_cache.clear()
    monkeypatch.setattr(dfa_cache, "_MAX_CACHED_STATES", 40)
    trees = [seq(literal("["), repeat(literal("ab"), 0, k), literal("]")) for k in range(1, 9)]
    for item in trees + trees[:3]:
        dfa_cache.remember(item, LIMIT, compile_ast(item))
        held = list(dfa_cache._dfas.values()) + [
            d for v in dfa_cache._unkeyed.values() for _, d in v
        ]
        assert dfa_cache._cached_states == sum(d.num_states for d in held) <= 40
        assert sum(dfa_cache._shapes.values()) == len(held)
    dfa_cache.clear()
