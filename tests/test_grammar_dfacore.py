"""The DFA pipeline's fast paths against slow references: Moore's vectorised refinement vs
a plain-Python Nerode partition and vs Hopcroft (the fallback), on random tables."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import minimize as minimize_module
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
    assert same(minimize(*case), reference_minimize(*case))


@given(tables())
@settings(max_examples=100, deadline=None)
def test_fallbacks_match(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    """Hopcroft (Moore past its round limit) and a colliding hash give the same table."""
    expected = reference_minimize(*case)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(minimize_module, "_MOORE_ROUNDS", 0)
        assert same(minimize(*case), expected)
    with pytest.MonkeyPatch.context() as patch:  # every block hashes alike: check fails
        patch.setattr(minimize_module, "_mix", lambda x: np.ones(len(x), dtype=np.uint64))
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
