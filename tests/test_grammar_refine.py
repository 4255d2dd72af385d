"""Sparse-row minimisation (`refine`) against the textbook reference and the dense paths:
random class tables (dead states, unreachable and unproductive states), their triples split
arbitrarily by class; whole random AST trees compiled with and without it give the same
tables (so the same fingerprints)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import dfa_cache
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar import minimize as minimize_module
from kor_cli.grammar.ast import Node, Product, alt, children, literal, seq
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.minimize import minimal_triples
from kor_cli.grammar.refine import canonical_blocks, sparse_rows
from tests.test_grammar_dfacore import LIMIT, reference_minimize, same, tables, trees


def triples_of(table: np.ndarray, split: list[bool]) -> list[tuple[int, int, int]]:
    """The live cells as (state, class mask, target): cells to one target grouped into one
    mask, or (where `split` says so) left one class per triple."""
    out: list[tuple[int, int, int]] = []
    for s, row in enumerate(table.tolist()):
        grouped: dict[int, int] = {}
        for c, t in enumerate(row):
            if not t:
                continue
            if split[(s + c) % len(split)]:
                out.append((s, 1 << c, t))
            else:
                grouped[t] = grouped.get(t, 0) | 1 << c
        out += [(s, m, t) for t, m in grouped.items()]
    return out


@given(tables(), st.lists(st.booleans(), min_size=1, max_size=5))
@settings(max_examples=400, deadline=None)
def test_sparse_matches_reference(
    case: tuple[np.ndarray, np.ndarray, int], split: list[bool]
) -> None:
    table, accepting, start = case
    expected = reference_minimize(table, accepting, start)
    triples = triples_of(table, split)
    found = minimal_triples(len(table), table.shape[1], accepting, start, triples)
    assert same(found, expected)


def test_rows_merge_masks_by_target() -> None:
    rows = sparse_rows(3, [(1, 0b01, 2), (1, 0b10, 2), (2, 0b11, 2)])
    assert rows == [{}, {2: 0b11}, {2: 0b11}]
    # 1 and 2 both loop on every class into {1, 2}: one accepting state
    assert canonical_blocks(rows, [False, True, True], 1) == ([0, 1, 1], [1])
    assert canonical_blocks(rows, [False, False, False], 1) is None


def test_long_chain_is_kept() -> None:
    """A chain (Moore's worst case: a round per state) stays a chain, numbered in order."""
    n = 300
    table = np.zeros((n + 2, 2), dtype=np.int32)
    table[1 : n + 1, 1] = np.arange(2, n + 2)
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    out = minimal_triples(len(table), 2, accepting, 1, triples_of(table, [False]))
    assert same(out, reference_minimize(table, accepting, 1))
    assert len(out[0]) == n + 2


@given(trees)
@settings(max_examples=200, deadline=None)
def test_compiled_tables_unchanged(node: Node) -> None:
    """compile_ast with the sparse path and small trees left unlowered equals compile_ast
    with only the dense paths, every tree lowered."""
    dfa_cache.clear()
    try:
        fast = compile_ast(node, LIMIT)
    except GrammarError:
        reject()
    dfa_cache.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(minimize_module, "_SPARSE", -1)
        patch.setattr(fsm_module, "_unfolded", lambda node, limit: limit)
        slow = compile_ast(node, LIMIT)
    dfa_cache.clear()
    assert fast.fingerprint() == slow.fingerprint()
    assert np.array_equal(fast.transitions, slow.transitions)


def has_product(node: Node) -> bool:
    return isinstance(node, Product) or any(has_product(x) for x in children(node))


@given(trees, st.integers(1, 80))
@settings(max_examples=300, deadline=None)
def test_unfolded_size_matches_census(node: Node, limit: int) -> None:
    """The bounded walk that lets a small tree skip lowering agrees with `_census`."""
    _, sizes = fsm_module._census(node)
    size = fsm_module._unfolded(node, limit)
    if has_product(node) or sizes[id(node)] >= limit:
        assert size >= limit
    else:
        assert size == sizes[id(node)]


def test_unfolded_walk_is_shallow() -> None:
    """A tree far deeper than the recursion limit is measured (and compiled) without
    recursing through it."""
    node: Node = literal("a")
    for _ in range(5000):
        node = seq(literal("b"), alt(node, literal("c")))
    assert fsm_module._unfolded(node, 64) == 64
