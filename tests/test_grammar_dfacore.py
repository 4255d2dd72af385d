"""The DFA pipeline's fast paths against slow references: Moore's vectorised refinement vs
a plain-Python Nerode partition and vs Hopcroft (the fallback), on random tables; whole
random AST trees (shared subtrees, products, embedded automata, joins) compiled vs
brute-force membership of every word over a three-letter alphabet up to length 5."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import dfa_cache
from kor_cli.grammar import fsm as fsm_module
from kor_cli.grammar import minimize as minimize_module
from kor_cli.grammar.ast import (
    EMPTY,
    Alt,
    Automaton,
    Bytes,
    Join,
    Node,
    Product,
    Repeat,
    Seq,
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
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.minimize import minimize


def reference_minimize(
    table: np.ndarray, accepting: np.ndarray, start: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Textbook Moore refinement in plain Python, then BFS numbering (dead block -> 0)."""
    rows = table.tolist()
    acc = accepting.tolist()
    block = [int(a) for a in acc]
    while True:
        keys = [(block[s], *(block[t] for t in rows[s])) for s in range(len(rows))]
        ids: dict[tuple[int, ...], int] = {}
        new = [ids.setdefault(key, len(ids)) for key in keys]
        if len(ids) == len(set(block)):
            break
        block = new
    dead = block[0]
    if block[start] == dead:
        return np.zeros((1, table.shape[1]), dtype=np.int32), np.zeros(1, dtype=bool), 0
    number = {block[start]: 1}
    queue = [start]
    out_rows: list[list[int]] = []
    out_acc = [False]
    rep = {block[start]: start}
    for s in queue:
        row = []
        for t in rows[s]:
            b = block[t]
            if b == dead:
                row.append(0)
                continue
            if b not in number:
                number[b] = len(number) + 1
                rep[b] = t
                queue.append(t)
            row.append(number[b])
        out_rows.append(row)
        out_acc.append(acc[s])
    out = np.zeros((len(out_rows) + 1, table.shape[1]), dtype=np.int32)
    out[1:] = out_rows
    return out, np.array(out_acc, dtype=bool), 1


@st.composite
def tables(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """A random class table with dead state 0, some states unable to accept."""
    n = draw(st.integers(2, 24))
    k = draw(st.integers(1, 5))
    cells = draw(st.lists(st.integers(0, n - 1), min_size=(n - 1) * k, max_size=(n - 1) * k))
    table = np.zeros((n, k), dtype=np.int32)
    table[1:] = np.array(cells, dtype=np.int32).reshape(n - 1, k)
    accepting = np.array([False, *draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))])
    return table, accepting, 1


def same(a: tuple[np.ndarray, np.ndarray, int], b: tuple[np.ndarray, np.ndarray, int]) -> bool:
    return a[2] == b[2] and np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@given(tables())
@settings(max_examples=300, deadline=None)
def test_moore_matches_reference(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    assert len(case[0]) <= minimize_module._SMALL  # the plain-Python path
    assert same(minimize(*case), reference_minimize(*case))
    with pytest.MonkeyPatch.context() as patch:  # the numpy path on the same tables
        patch.setattr(minimize_module, "_SMALL", 0)
        assert same(minimize(*case), reference_minimize(*case))


@given(tables())
@settings(max_examples=100, deadline=None)
def test_fallbacks_match(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    """Hopcroft (Moore past its round limit) and a colliding hash give the same table."""
    expected = reference_minimize(*case)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(minimize_module, "_SMALL", 0)
        patch.setattr(minimize_module, "_MOORE_ROUNDS", 0)
        assert same(minimize(*case), expected)
    with pytest.MonkeyPatch.context() as patch:  # every block hashes alike: check fails
        patch.setattr(minimize_module, "_SMALL", 0)
        patch.setattr(minimize_module, "_values", lambda n: np.ones(n, dtype=np.uint64))
        assert same(minimize(*case), expected)


def test_long_chain_uses_hopcroft() -> None:
    """A chain longer than the round limit (Moore would need one round per state)."""
    n = minimize_module._MOORE_ROUNDS + 40
    table = np.zeros((n + 2, 2), dtype=np.int32)
    table[1 : n + 1, 0] = np.arange(2, n + 2)
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    out = minimize(table, accepting, 1)
    assert same(out, reference_minimize(table, accepting, 1))
    assert len(out[0]) == n + 2  # nothing merges in a chain


ALPHABET = b"abc"
WORDS = [bytes(w) for n in range(6) for w in itertools.product(ALPHABET, repeat=n)]


def ends(
    node: Node, data: bytes, i: int, memo: dict[tuple[int, int], frozenset[int]]
) -> frozenset[int]:
    """Every j such that data[i:j] is in the language of `node` (brute force)."""
    key = (id(node), i)
    found = memo.get(key)
    if found is None:
        found = memo[key] = frozenset(_ends(node, data, i, memo))
    return found


def _ends(node: Node, data: bytes, i: int, memo: dict[tuple[int, int], frozenset[int]]) -> set[int]:
    if isinstance(node, Bytes):
        return {i + 1} if i < len(data) and node.mask >> data[i] & 1 else set()
    if isinstance(node, Automaton):
        out, state = set(), node.dfa.start
        for j in range(i, len(data) + 1):
            if node.dfa.accepting[state]:
                out.add(j)
            if j == len(data) or not state:
                break
            state = node.dfa.step(state, data[j])
        return out
    if isinstance(node, Seq):
        here = {i}
        for item in node.items:
            here = {j for p in here for j in ends(item, data, p, memo)}
        return here
    if isinstance(node, Alt):
        return {j for item in node.items for j in ends(item, data, i, memo)}
    if isinstance(node, Product):
        left, right = ends(node.left, data, i, memo), ends(node.right, data, i, memo)
        return set(left & right if node.op == "and" else left - right)
    if isinstance(node, Repeat):
        return _copies(node.item, node.sep, node.min, node.max, data, {(i, 0)}, memo)
    assert isinstance(node, Join)
    states = {(i, 0)}  # (position, items present so far)
    for item, required in node.items:
        nxt = set() if required else set(states)
        for p, c in states:
            starts = {q for q in ends(node.sep, data, p, memo)} if c else {p}
            nxt |= {(j, c + 1) for q in starts for j in ends(item, data, q, memo)}
        states = nxt
    hi = node.max_count
    out: set[int] = set()
    todo = list(states)
    seen = set(states)
    while todo:
        p, c = todo.pop()
        if c >= node.min_count and (hi is None or c <= hi):
            out.add(p)
        if node.tail is None or (hi is not None and c >= hi):
            continue
        starts = ends(node.sep, data, p, memo) if c else {p}
        for q in starts:
            for j in ends(node.tail, data, q, memo):
                state = (j, min(c + 1, node.min_count + 1) if hi is None else c + 1)
                if state not in seen:
                    seen.add(state)
                    todo.append(state)
    return out


def _copies(
    item: Node,
    sep: Node | None,
    lo: int,
    hi: int | None,
    data: bytes,
    states: set[tuple[int, int]],
    memo: dict[tuple[int, int], frozenset[int]],
) -> set[int]:
    """End positions after lo..hi copies of `item` (with `sep` between) from `states`."""
    out: set[int] = set()
    todo, seen = list(states), set(states)
    while todo:
        p, c = todo.pop()
        if c >= lo and (hi is None or c <= hi):
            out.add(p)
        if hi is not None and c >= hi:
            continue
        starts = ends(sep, data, p, memo) if sep is not None and c else {p}
        for q in starts:
            for j in ends(item, data, q, memo):
                state = (j, min(c + 1, max(lo, 1)) if hi is None else c + 1)
                if state not in seen:
                    seen.add(state)
                    todo.append(state)
    return out


def leaves() -> st.SearchStrategy[Node]:
    masks = st.integers(1, 7).map(
        lambda m: sum(1 << b for k, b in enumerate(ALPHABET) if m >> k & 1)
    )
    return masks.map(Bytes) | st.just(EMPTY)


def grow(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    """Inner nodes over `children` (some shared, some repeated, products, automata)."""
    pairs = st.tuples(children, children)
    counts = st.integers(0, 3).flatmap(
        lambda lo: st.tuples(st.just(lo), st.none() | st.integers(lo, lo + 3))
    )
    return st.one_of(
        st.lists(children, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(children, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(children, counts, st.none() | children).map(
            lambda t: repeat(t[0], t[1][0], t[1][1], t[2])
        ),
        st.tuples(
            st.lists(st.tuples(children, st.booleans()), min_size=1, max_size=3),
            children,
            st.none() | children,
            counts,
        ).map(lambda t: join(t[0], t[1], t[2], t[3][0], t[3][1])),
        pairs.map(lambda p: intersect(*p)),
        pairs.map(lambda p: difference(*p)),
        pairs.map(lambda p: seq(p[0], p[1], p[0], repeat(p[0], 0, 4))),  # shared subtree
        children.map(embedded),
    )


def embedded(node: Node) -> Node:
    try:
        return Automaton(compile_ast(node, LIMIT))
    except GrammarError:
        reject()


trees = st.recursive(leaves(), grow, max_leaves=12)


LIMIT = 3_000  # random trees can blow up (nested repeats of automata): such draws are rejected


def check_language(node: Node) -> None:
    try:
        dfa = compile_ast(node, LIMIT)
    except GrammarError:  # a blow-up of the random tree, not of the pipeline
        reject()
    for word in WORDS:
        expected = len(word) in ends(node, word, 0, {})
        assert dfa.accepts(word) == expected, (word, node)


@given(trees)
@settings(max_examples=300, deadline=None)
def test_compiled_language_matches_brute_force(node: Node) -> None:
    dfa_cache.clear()
    check_language(node)


@given(trees)
@settings(max_examples=60, deadline=None)
def test_large_shared_subtrees(node: Node) -> None:
    """Subtrees past the sharing threshold are compiled apart and embedded."""
    dfa_cache.clear()
    padding = literal("ab" * 40)  # makes `big` large enough to be shared; too long to matter
    big = alt(repeat(alt(node, literal("ab")), 2, 2, literal("c")), padding)
    tree = seq(big, opt(literal("c")), big)
    check_language(tree)
    assert dfa_cache.cached(big, LIMIT) is not None  # compiled apart, then embedded


def test_embedding_over_many_classes() -> None:
    """An automaton embedded in an NFA of more than 63 byte classes (several mask words)."""
    dfa_cache.clear()
    inner = Automaton(compile_ast(seq(byte_range(0, 199), repeat(byte_range(50, 250), 0, 2))))
    pairs = alt(*(seq(literal(bytes([b])), literal(bytes([b]))) for b in range(0, 200, 2)))
    tree = seq(pairs, inner, opt(inner))
    dfa = compile_ast(tree)
    words = [
        bytes([a, a, b, c])
        for a in range(0, 201, 5)
        for b in (0, 60, 199, 230)
        for c in (10, 120, 240)
    ]
    words += [
        bytes([a, a, b, c, d])
        for a in (0, 100, 198)
        for b in (49, 200)
        for c in (50, 251)
        for d in (0, 250)
    ]
    for word in words:
        assert dfa.accepts(word) == (len(word) in ends(tree, word, 0, {})), word
    assert sum(dfa.accepts(word) for word in words) > 50


@given(st.lists(trees, min_size=2, max_size=4), st.lists(trees, max_size=2))
@settings(max_examples=80, deadline=None)
def test_union_of_automata_by_products(automata: list[Node], others: list[Node]) -> None:
    """An Alt of automata (plus other items) compiled by products equals the NFA's DFA."""
    dfa_cache.clear()
    items = [embedded(node) for node in automata] + others
    tree = alt(*items)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fsm_module, "_UNION_SIZE", 1 << 40)
        try:
            by_nfa = compile_ast(tree, LIMIT)
        except GrammarError:
            reject()
    dfa_cache.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fsm_module, "_UNION_SIZE", 0)
        by_products = compile_ast(tree, LIMIT)  # never more pairs than the NFA's subsets
    assert by_products.fingerprint() == by_nfa.fingerprint()
    check_language(tree)
