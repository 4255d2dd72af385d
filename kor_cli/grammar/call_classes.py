"""The minimal DFA of a rule body with calls, built with each call as one symbol.

A call is spelled by a 7-byte marker (`call_markers`), so over bytes every call costs six
NFA states and six DFA states inside the marker, through the subset construction and the
minimisation. Here the NFA reads a marker as one transition on a class of its own (one
per callee, after the 256 bytes: each byte is a class, so an edge's class mask is its
byte mask and no partition is computed); the minimal DFA of that alphabet has exactly the
states of the byte DFA outside the markers (marker codes are prefix-free and of one
length, so residuals correspond one to one), and the states inside a marker are set by
the (callee digits left, return state) pairs still open after the digits read so far.
`marker_table` writes them back in, numbered in the byte DFA's canonical BFS order (a
state's byte targets by lowest class, then its marker; a marker state's targets by digit),
so the table is the very one the byte pipeline gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kor_cli.grammar.ast import Node
from kor_cli.grammar.call_markers import BASE, DIGIT0, MARK, WIDTH
from kor_cli.grammar.minimize import SPARSE_STATES, fill_bytes
from kor_cli.grammar.nfa import NFA, NotMarked
from kor_cli.grammar.refine import live_blocks
from kor_cli.grammar.subsets import subsets

Calls = dict[int, tuple[tuple[int, int], ...]]
Marks = tuple[Calls, set[int]]
Split = tuple[np.ndarray, np.ndarray, Calls]  # a rule's table, accepting and calls
Table = tuple[Callable[[], np.ndarray], np.ndarray, Marks, Callable[[], Split]]
EMPTY: Table = (  # the empty language (`fsm` builds its own DFA)
    lambda: np.zeros((1, 256), dtype=np.int32),
    np.zeros(1, dtype=bool),
    ({}, set()),
    lambda: (np.zeros((1, 256), dtype=np.int32), np.zeros(1, dtype=bool), {}),
)


def build_with_calls(node: Node, masks: set[int], max_states: int) -> Table | None:
    """(a thunk of the table [n, 256], accepting, marks, split; start 1; `EMPTY` for the
    empty language) of `node` (`marks`: each state's calls, (callee, return state) pairs
    by callee, and the states inside markers, as `rules.split_calls` reads them off the
    table; `split`: a thunk of the rule it reads off, see `marker_table`); `masks`: byte
    sets of its leaves (those `leaf_masks` met up to a marker: the NFA checks all). The
    NFA's classes are the bytes (each edge's class mask its byte mask), then the calls: no
    partition to compute, nor to map masks to. None when a marker
    byte is not in a well-formed marker of a `Seq` (or is read inside an embedded
    automaton not built so: see `nfa.NFA`), or the state limits may be near: the caller
    builds it over bytes."""
    if any(m >> MARK and m & (m - 1) for m in masks):
        return None  # a leaf's byte set holds marker bytes
    nfa = NFA(None, 10 * max_states, calls=SPARSE_STATES)  # over bytes: no classes to find
    start = nfa.new()
    try:
        accept = nfa.build(node, start)
    except NotMarked:
        return None
    if len(nfa.edges) + WIDTH * nfa.marked > 10 * max_states:
        return None  # over bytes the NFA is past its limit: the byte pipeline says so
    assert nfa.callees is not None
    callees = list(nfa.callees)  # class base + j: a call to callees[j]
    base = nfa.base
    accepting, rows = subsets(nfa.edges, nfa.eps, start, accept, base + len(callees), max_states)
    if len(rows) > SPARSE_STATES:
        return None
    if len(rows) * (1 + WIDTH * len(callees)) > max_states:  # (else surely in bounds)
        calls = sum((m >> base).bit_count() for row in rows for m in row.values())
        if len(rows) + WIDTH * calls > max_states:
            return None  # (over bytes, at most WIDTH more states per call: maybe past it)
    found = live_blocks(rows, accepting, 1)
    if found is None:
        return EMPTY
    return marker_table(found[0], found[1], accepting, base, callees)


def marker_table(
    rows: list[dict[int, int]],
    block: list[int],
    accepting: Sequence[bool],
    base: int,
    callees: list[int],
) -> Table:
    """The minimal byte DFA, markers spelled out, of the minimal call-class DFA given by
    its live `rows` and Nerode `block`s (state 1 the start): BFS from the start, a
    state's byte targets by lowest class and then its marker state; a marker state is
    (digits read, the open (callee digits left, return state) pairs). Its table and the
    rule `rules.split_calls` reads off it (its states outside markers, numbered in that
    order) are made when asked for (thunks: a rule build asks for the rule alone)."""
    plain = (1 << base) - 1
    number = {block[1]: 1}  # block -> its number in the rule (a state outside markers)
    form = [0, 1]  # a rule state's number in the DFA with markers (its place in `queue`)
    inner: dict[object, int] = {}  # marker state -> number
    queue: list[int | tuple[int, list[tuple[int, int]]]] = [1]
    acc = [False, accepting[1]]  # of the rule's states
    callers: list[tuple[int, list[tuple[int, int]]]] = []  # (rule state, its (callee, return))
    triples: list[tuple[int, int, int]] = []  # the rule's transitions: (state, class mask, target)
    cells: list[tuple[int, int, int]] = []  # marker transitions: (state, byte, target)

    def reach(t: int) -> int:
        found = number.get(block[t])
        if found is None:
            found = number[block[t]] = len(form)
            form.append(len(queue) + 1)
            queue.append(t)
            acc.append(accepting[t])
        return found

    def marked(level: int, pairs: list[tuple[int, int]]) -> int:
        if len(pairs) == 1:  # most: one call (the pairs' callees differ: a row's classes do)
            ((c, t),) = pairs
            key: object = (level, c, block[t])
        else:
            key = (level, frozenset((c, block[t]) for c, t in pairs))
        found = inner.get(key)
        if found is None:
            found = inner[key] = len(queue) + 1
            queue.append((level, pairs))
        return found

    here = 0  # the rule's number of the state at `at`
    for at, entry in enumerate(queue, 1):
        if type(entry) is int:
            here += 1
            row = rows[entry]
            if len(row) == 1:  # most states: one target, by bytes
                ((t, m),) = row.items()
                if m <= plain:
                    found = number.get(block[t])
                    if found is None:
                        found = number[block[t]] = len(form)
                        form.append(len(queue) + 1)
                        queue.append(t)
                        acc.append(accepting[t])
                    triples.append((here, m, found))
                    continue
            calls = []
            for low, t, m in sorted([(m & -m, t, m) for t, m in row.items()]):
                if m & plain:  # by lowest class (the masks are disjoint)
                    triples.append((here, m & plain, reach(t)))
                m >>= base
                while m:
                    low = m & -m
                    calls.append((callees[low.bit_length() - 1], t))
                    m ^= low
            if calls:
                cells.append((at, MARK, marked(0, calls)))
                callers.append((here, calls))
            continue
        level, pairs = entry  # type: ignore[misc]
        scale = BASE ** (WIDTH - 1 - level)
        if len(pairs) == 1:
            ((c, t),) = pairs
            if level == WIDTH - 1:
                target = form[reach(t)]
            else:
                target = marked(level + 1, [(c % scale, t)])
            cells.append((at, DIGIT0 + c // scale, target))
            continue
        by_digit: dict[int, list[tuple[int, int]]] = {}
        for c, t in pairs:
            by_digit.setdefault(c // scale, []).append((c % scale, t))
        for digit in sorted(by_digit):
            group = by_digit[digit]
            last = level == WIDTH - 1  # then one pair: a state calls a callee once
            target = form[reach(group[0][1])] if last else marked(level + 1, group)
            cells.append((at, DIGIT0 + digit, target))
    calls = {
        here: tuple(sorted((c, number[block[t]]) for c, t in pairs)) for here, pairs in callers
    }
    size = len(queue) + 1
    spelled = np.zeros(size, dtype=bool)
    spelled[form] = acc
    found = {form[here]: tuple((c, form[t]) for c, t in pairs) for here, pairs in calls.items()}

    def split() -> Split:
        """The rule: its states' table (no marker bytes), accepting, calls."""
        return fill_bytes(len(form), triples), np.array(acc, dtype=bool), calls

    def spelled_out() -> np.ndarray:
        """The table with markers (the rule's states renumbered, marker cells added)."""
        out = fill_bytes(size, [(form[s], m, form[t]) for s, m, t in triples])
        states, columns, targets = zip(*cells, strict=True) if cells else ((), (), ())
        out[list(states), list(columns)] = targets
        return out

    marks = (found, set(inner.values()))
    return spelled_out, spelled, marks, split
