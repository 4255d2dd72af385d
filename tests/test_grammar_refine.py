"""Sparse-row minimisation (`refine`) against the textbook reference and the dense paths:
random class tables (dead states, unreachable and unproductive states), their triples split
arbitrarily by class; whole random AST trees compiled with and without it give the same
tables (so the same fingerprints)."""

from __future__ import annotations

import copy as copy_module
import dataclasses

import numpy as np
import pytest
from hypothesis import example, given, reject, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import dfa_cache
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar import minimize as minimize_module
from kor_cli.grammar.ast import (
    Alt,
    Automaton,
    Bytes,
    Join,
    Node,
    Product,
    Seq,
    alt,
    children,
    difference,
    intersect,
    join,
    literal,
    repeat,
    seq,
)
from kor_cli.grammar.byte_sets import byte_classes
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.minimize import minimal_triples
from kor_cli.grammar.refine import canonical_blocks, sparse_rows
from tests.test_grammar_dfacore import LIMIT, reference_minimize, same, tables, trees


def triples_of(table: np.ndarray, split: list[bool]) -> list[tuple[int, int, int]]:
    """The cells as (state, class mask, target): cells to one target grouped into one
    mask, or (where `split` says so) left one class per triple, a cell into the dead
    state then listed too (the subset construction lists one reaching the empty subset)."""
    out: list[tuple[int, int, int]] = []
    for s, row in enumerate(table.tolist()):
        grouped: dict[int, int] = {}
        for c, t in enumerate(row):
            if split[(s + c) % len(split)]:
                if s:
                    out.append((s, 1 << c, t))
            elif t:
                grouped[t] = grouped.get(t, 0) | 1 << c
        out += [(s, m, t) for t, m in grouped.items()]
    return out


@given(tables(), st.lists(st.booleans(), min_size=1, max_size=5), st.sampled_from([0, 10**9]))
@settings(max_examples=400, deadline=None)
def test_sparse_matches_reference(
    case: tuple[np.ndarray, np.ndarray, int], split: list[bool], list_fill: int
) -> None:
    """Whether the minimal table is filled in plain Python or by numpy (`_LIST_FILL`)."""
    table, accepting, start = case
    expected = reference_minimize(table, accepting, start)
    triples = triples_of(table, split)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(minimize_module, "_LIST_FILL", list_fill)
        found = minimal_triples(len(table), table.shape[1], accepting, start, triples)
    assert same(found, expected)
    assert found[0].dtype == np.int32 and found[1].dtype == bool


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
        patch.setattr(minimize_module, "SPARSE_STATES", -1)
        patch.setattr(fsm_module, "_AS_IS", 0)  # no subtree left as it is
        slow = compile_ast(node, LIMIT)
    dfa_cache.clear()
    assert fast.fingerprint() == slow.fingerprint()
    assert np.array_equal(fast.transitions, slow.transitions)


def has_product(node: Node) -> bool:
    return isinstance(node, Product) or any(has_product(x) for x in children(node))


@given(trees, st.integers(1, 80))
@settings(max_examples=300, deadline=None)
def test_unfolded_size_matches_census(node: Node, limit: int) -> None:
    """The bounded walk that lets a small tree skip lowering agrees with `_census`, and
    so do `_census`'s own sizes and "a Product below" flags, on every subtree."""
    _, sizes, below = fsm_module._census(node)
    size = fsm_module._unfolded(node, limit)
    stack, seen = [node], set()
    while stack:
        sub = stack.pop()
        if id(sub) not in seen and not isinstance(sub, Bytes):
            seen.add(id(sub))
            assert (id(sub) in below) == has_product(sub)
            if not isinstance(sub, Product):
                stack += children(sub)
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


def canon(node: Node) -> str:
    """A text equal for structurally equal trees (the reference for `structure`)."""
    if isinstance(node, Automaton):
        return f"A{node.dfa.fingerprint()}"
    fields = [
        canon(v) if isinstance(v, Node) else repr(v)
        for v in (getattr(node, f.name) for f in dataclasses.fields(node))  # type: ignore[arg-type]
    ]
    if isinstance(node, Join):
        fields[0] = repr([(canon(x), r) for x, r in node.items])
    elif isinstance(node, (Seq, Alt)):
        fields = [canon(x) for x in node.items]
    return f"{type(node).__name__}({','.join(fields)})"


def stale(node: Node) -> Node:
    """`node` numbered, then the intern table forgotten (a node that outlives a `clear`)."""
    dfa_cache.structure(node)
    dfa_cache.clear()
    return node


@given(trees, trees)
@example(Seq(()), stale(Seq(())))  # b and its copies kept a stale id (found by Hypothesis)
@settings(max_examples=200, deadline=None)
def test_structure_ids_match_structural_equality(a: Node, b: Node) -> None:
    """Equal ids exactly for structurally equal trees numbered since the last `clear`
    (fresh copies, shared subtrees, nodes numbered by an earlier call); never equal ids
    for different trees, whenever they were numbered."""
    if dfa_cache.structure(a) == dfa_cache.structure(b):
        assert canon(a) == canon(b)
    dfa_cache.clear()
    a, b = copy_module.deepcopy(a), copy_module.deepcopy(b)
    dfa_cache.structure(a)
    again = copy_module.deepcopy(b)
    assert dfa_cache.structure(seq(a, b, again)) > 0
    assert dfa_cache.structure(again) == dfa_cache.structure(b)
    assert (dfa_cache.structure(a) == dfa_cache.structure(b)) == (canon(a) == canon(b))


def test_structure_tells_near_misses_apart() -> None:
    """Trees that differ in one field only get different ids; their copies the same."""
    x, y = literal("ab"), alt(literal("a"), literal("b"))
    dfa = compile_ast(literal("q"))
    variants = [
        repeat(x, 0, 2),
        repeat(x, 0, 3),
        repeat(x, 1, 2),
        repeat(x, 0, None),
        repeat(x, 0, 2, literal(",")),
        join([(x, True), (y, False)], literal(",")),
        join([(x, False), (y, False)], literal(",")),
        join([(x, True), (y, False)], literal(","), tail=x),
        join([(x, True), (y, False)], literal(","), min_count=1),
        join([(x, True), (y, False)], literal(","), max_count=1),
        intersect(x, y),
        difference(x, y),
        seq(x, y),
        seq(y, x),
        alt(x, literal("c")),
        Automaton(dfa),
        Automaton(compile_ast(literal("r"))),
    ]
    ids = [dfa_cache.structure(v) for v in variants]
    assert len(set(ids)) == len(ids)
    assert [dfa_cache.structure(copy_module.deepcopy(v)) for v in variants] == ids


def plain_classes(masks: list[int]) -> list[int]:
    """The coarsest partition refining `masks`, bytes grouped by the masks holding them."""
    groups: dict[tuple[bool, ...], int] = {}
    for b in range(256):
        key = tuple(bool(m >> b & 1) for m in masks)
        groups[key] = groups.get(key, 0) | 1 << b
    return sorted(groups.values(), key=lambda c: (c & -c).bit_length())


masks = st.one_of(
    st.integers(0, 255).map(lambda b: 1 << b),
    st.lists(st.integers(0, 255), min_size=1, max_size=40).map(
        lambda bs: sum({1 << b for b in bs})
    ),
    st.tuples(st.integers(0, 255), st.integers(0, 255)).map(
        lambda t: ((1 << (max(t) + 1)) - 1) ^ ((1 << min(t)) - 1)
    ),
)


@given(st.lists(masks, max_size=30))
@settings(max_examples=300, deadline=None)
def test_byte_classes_match_grouping(given_masks: list[int]) -> None:
    """One-byte masks applied last give the same classes, in the same order."""
    class_of, classes = byte_classes(given_masks)
    assert classes == plain_classes(given_masks)
    assert all(classes[k] >> b & 1 for b, k in enumerate(class_of.tolist()))


@given(st.lists(masks, max_size=30), st.lists(st.integers(0, 7), min_size=256, max_size=256))
@settings(max_examples=300, deadline=None)
def test_byte_classes_from_a_partition(given_masks: list[int], labels: list[int]) -> None:
    """Starting from a partition (an automaton's classes) instead of refining by its masks
    one by one gives the same classes in the same order."""
    start = [0] * 8
    for b, label in enumerate(labels):
        start[label] |= 1 << b
    start = [m for m in start if m]
    class_of, classes = byte_classes(set(given_masks).difference(start), start)
    expected_of, expected = byte_classes([*given_masks, *start])
    assert classes == expected and class_of.tolist() == expected_of.tolist()


@st.composite
def excluded_words(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """Any word but a few (the key language of additionalProperties beside listed keys):
    a trie whose missing edges go to one looping state, so most trie states share one
    first signature and split only chain by chain; words are drawn from a small alphabet,
    so suffixes repeat (equivalent trie nodes), and the table may hold spare copies."""
    k = draw(st.integers(1, 4))
    words = draw(st.lists(st.lists(st.integers(0, k - 1), max_size=8), max_size=12))
    trie: list[dict[int, int]] = [{}, {}]  # state 0 dead, 1 the root
    ends: set[int] = set()
    for word in words:
        s = 1
        for c in word:
            if c not in trie[s]:
                trie[s][c] = len(trie)
                trie.append({})
            s = trie[s][c]
        ends.add(s)
    loop = len(trie)
    copies = draw(st.integers(0, 2))  # unreachable copies of the loop state
    table = np.zeros((loop + 1 + copies, k), dtype=np.int32)
    for s in range(1, loop):
        table[s] = [trie[s].get(c, loop) for c in range(k)]
    table[loop:] = loop
    accepting = np.ones(len(table), dtype=bool)
    accepting[0] = False
    accepting[list(ends)] = draw(st.booleans())  # the words themselves left out, or not
    return table, accepting, 1


@given(excluded_words(), st.lists(st.booleans(), min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_excluded_words_match_reference(
    case: tuple[np.ndarray, np.ndarray, int], split: list[bool]
) -> None:
    """Large blocks of one first signature refine exactly (dirty members, moved parts)."""
    table, accepting, start = case
    found = minimal_triples(len(table), table.shape[1], accepting, start, triples_of(table, split))
    assert same(found, reference_minimize(table, accepting, start))


@st.composite
def wide_tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """Up to 80 states on one or two classes, mostly accepting: large blocks of one
    depth and one first signature, split again and again as their successors move
    (cells from a drawn seed: uniform targets split such blocks unevenly far more often
    than shrink-friendly draws do)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    n = draw(st.integers(2, 80))
    k = draw(st.integers(1, 2))
    table = np.zeros((n, k), dtype=np.int32)
    table[1:] = rng.integers(1, n, size=(n - 1, k))
    accepting = np.ones(n, dtype=bool)
    accepting[[0, *rng.integers(1, n, size=draw(st.integers(0, 3)))]] = False
    return table, accepting, 1


@given(wide_tables())
@settings(max_examples=300, deadline=None)
def test_wide_blocks_match_reference(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    table, accepting, start = case
    found = minimal_triples(
        len(table), table.shape[1], accepting, start, triples_of(table, [False])
    )
    assert same(found, reference_minimize(table, accepting, start))
