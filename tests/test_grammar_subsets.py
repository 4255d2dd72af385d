"""The subset construction (`subsets`) against a textbook one: random NFAs over a few
classes (overlapping edges out of one state, epsilon chains and cycles, states that are
only reached by epsilon) give a DFA that walks in step with the sets of NFA states."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar.subsets import subsets

CLASSES = 4


@st.composite
def nfas(draw: st.DrawFn) -> tuple[list[list[tuple[int, int]]], list[list[int]], int, int]:
    """(edges, eps, start, accept): edges' class masks may overlap (or not) within a state;
    states may be dead (transitions into them lead to the dead state 0)."""
    n = draw(st.integers(2, 9))
    state = st.integers(0, n - 1)
    mask = st.integers(1, (1 << CLASSES) - 1)
    edges = [draw(st.lists(st.tuples(mask, state), max_size=3)) for _ in range(n)]
    eps = [draw(st.lists(state, max_size=2, unique=True)) for _ in range(n)]
    return edges, eps, draw(state), draw(state)


def closure(states: set[int], eps: list[list[int]]) -> frozenset[int]:
    out, todo = set(states), list(states)
    while todo:
        for y in eps[todo.pop()]:
            if y not in out:
                out.add(y)
                todo.append(y)
    return frozenset(out)


@settings(max_examples=300, deadline=None)
@given(nfas())
def test_subsets_walk_in_step_with_the_textbook_sets(nfa: tuple) -> None:
    edges, eps, start, accept = nfa
    accepting, rows = subsets(edges, eps, start, accept, CLASSES, 1000)
    assert len(accepting) == len(rows) and rows[0] == {} and not accepting[0]
    seen = {1: closure({start}, eps)}
    todo = [1]
    while todo:
        state = todo.pop()
        here = seen[state]
        assert accepting[state] == (accept in here)
        masks = list(rows[state].values())
        assert not any(a & b for i, a in enumerate(masks) for b in masks[i + 1 :])  # disjoint
        for k in range(CLASSES):
            reached = {t for s in here for m, t in edges[s] if m >> k & 1}
            target = next((t for t, m in rows[state].items() if m >> k & 1), 0)
            after = closure(reached, eps)
            assert bool(target) == bool(_live(after, edges, accept))  # 0: the dead state
            if target:
                assert accepting[target] == (accept in after)
                if target in seen:  # one DFA state per set of live NFA states
                    assert _live(seen[target], edges, accept) == _live(after, edges, accept)
                else:
                    seen[target] = after
                    todo.append(target)
    assert set(seen) == set(range(1, len(rows)))  # every state reachable from the start


def _live(states: frozenset[int], edges: list[list[tuple[int, int]]], accept: int) -> frozenset:
    """The states of a set that the construction keeps: those that read or accept."""
    return frozenset(s for s in states if edges[s] or s == accept)
