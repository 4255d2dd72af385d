"""The minimal DFA of a rule body with calls, built with each call as one symbol.

A call is spelled by a 7-byte marker (`call_markers`), so over bytes every call costs six
NFA states and six DFA states inside the marker, through the subset construction and the
minimisation. Here the NFA reads a marker as one transition on a class of its own (one
per callee, after the byte classes); the minimal DFA of that alphabet has exactly the
states of the byte DFA outside the markers (marker codes are prefix-free and of one
length, so residuals correspond one to one), and the states inside a marker are set by
the (callee digits left, return state) pairs still open after the digits read so far.
`marker_table` writes them back in, numbered in the byte DFA's canonical BFS order (a
state's byte targets by lowest class, then its marker; a marker state's targets by digit),
so the table is the very one the byte pipeline gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kor_cli.grammar.ast import Node
from kor_cli.grammar.call_markers import BASE, DIGIT0, MARK, WIDTH
from kor_cli.grammar.minimize import SPARSE_STATES, fill_table
from kor_cli.grammar.nfa import NFA, NotMarked, byte_classes
from kor_cli.grammar.refine import live_blocks
from kor_cli.grammar.subsets import subsets

Marks = tuple[dict[int, tuple[tuple[int, int], ...]], set[int]]
Table = tuple[np.ndarray, np.ndarray, int, Marks]


def build_with_calls(
    node: Node, masks: set[int], automata: set[int], max_states: int, partition: Sequence[int] = ()
) -> Table | None:
    """(table [n, 256], accepting, start, marks; start 0 for the empty language) of `node`
    (`marks`: each state's calls, (callee, return state) pairs by callee, and the states
    inside markers, as `rules.split_calls` reads them off the table); `masks`: the byte
    sets of its leaves, `automata`: those of its automata's classes (`partition`: one
    automaton's, all its classes, as `nfa.leaf_masks` gives them). None when a marker
    byte is not in a well-formed marker of a `Seq` (or is read inside an embedded
    automaton not built so: see `nfa.NFA`), or the state limits may be near: the caller
    builds it over bytes."""
    if any(m >> MARK and m & (m - 1) for m in masks):
        return None  # a leaf's byte set holds marker bytes
    low = (1 << MARK) - 1  # an automaton's class may hold marker bytes (dead ones; a live
    ones = {m & low for m in masks | automata} - {0}  # one refused): cut off here
    first = [m & low for m in partition if m & low]  # and the marker bytes apart
    if first:
        first.append(((1 << 256) - 1) ^ low)
    class_of, class_masks = byte_classes(ones.difference(first), first)
    nfa = NFA(class_masks, 10 * max_states, class_of.tolist(), calls=SPARSE_STATES)
    start = nfa.new()
    try:
        accept = nfa.build(node, start)
    except NotMarked:
        return None
    if len(nfa.edges) + WIDTH * nfa.marked > 10 * max_states:
        return None  # over bytes the NFA is past its limit: the byte pipeline says so
    assert nfa.callees is not None
    callees = list(nfa.callees)  # class len(class_masks) + j: a call to callees[j]
    base = len(class_masks)
    accepting, rows = subsets(nfa.edges, nfa.eps, start, accept, base + len(callees), max_states)
    if len(rows) > SPARSE_STATES:
        return None
    if len(rows) * (1 + WIDTH * len(callees)) > max_states:  # (else surely in bounds)
        calls = sum((m >> base).bit_count() for row in rows for m in row.values())
        if len(rows) + WIDTH * calls > max_states:
            return None  # (over bytes, at most WIDTH more states per call: maybe past it)
    found = live_blocks(rows, accepting.tolist(), 1)
    if found is None:
        return np.zeros((1, 256), dtype=np.int32), np.zeros(1, dtype=bool), 0, ({}, set())
    return marker_table(found[0], found[1], accepting.tolist(), base, callees, class_of)


def marker_table(
    rows: list[dict[int, int]],
    block: list[int],
    accepting: Sequence[bool],
    base: int,
    callees: list[int],
    class_of: np.ndarray,
) -> Table:
    """The minimal byte DFA, markers spelled out, of the minimal call-class DFA given by
    its live `rows` and Nerode `block`s (state 1 the start): BFS from the start, a
    state's byte targets by lowest class and then its marker state; a marker state is
    (digits read, the open (callee digits left, return state) pairs)."""
    plain = (1 << base) - 1
    number = {block[1]: 1}  # block -> its number (a state outside markers)
    inner: dict[tuple[int, frozenset[tuple[int, int]]], int] = {}  # marker state -> number
    queue: list[int | tuple[int, list[tuple[int, int]]]] = [1]
    acc = [False, accepting[1]]
    callers: list[tuple[int, list[tuple[int, int]]]] = []  # (state, its (callee, return))
    triples: list[tuple[int, int, int]] = []  # byte transitions: (state, class mask, target)
    cells: list[tuple[int, int, int]] = []  # marker transitions: (state, byte, target)

    def reach(t: int) -> int:
        found = number.get(block[t])
        if found is None:
            found = number[block[t]] = len(queue) + 1
            queue.append(t)
            acc.append(accepting[t])
        return found

    def marked(level: int, pairs: list[tuple[int, int]]) -> int:
        key = (level, frozenset((c, block[t]) for c, t in pairs))
        found = inner.get(key)
        if found is None:
            found = inner[key] = len(queue) + 1
            queue.append((level, pairs))
            acc.append(False)
        return found

    for here, entry in enumerate(queue, 1):
        if type(entry) is int:
            row = rows[entry]
            if len(row) == 1:  # most states: one target, by bytes
                ((t, m),) = row.items()
                if m <= plain:
                    found = number.get(block[t])
                    if found is None:
                        found = number[block[t]] = len(queue) + 1
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
                cells.append((here, MARK, marked(0, calls)))
                callers.append((here, calls))
            continue
        level, pairs = entry  # type: ignore[misc]
        scale = BASE ** (WIDTH - 1 - level)
        by_digit: dict[int, list[tuple[int, int]]] = {}
        for c, t in pairs:
            by_digit.setdefault(c // scale, []).append((c % scale, t))
        for digit in sorted(by_digit):
            group = by_digit[digit]
            last = level == WIDTH - 1  # then one pair: a state calls a callee once
            target = reach(group[0][1]) if last else marked(level + 1, group)
            cells.append((here, DIGIT0 + digit, target))
    size = len(queue) + 1
    table = fill_table(size, base, triples).take(class_of, axis=1)
    states, columns, targets = zip(*cells, strict=True) if cells else ((), (), ())
    table[list(states), list(columns)] = targets
    found = {
        here: tuple(sorted((c, number[block[t]]) for c, t in calls)) for here, calls in callers
    }
    return table, np.array(acc, dtype=bool), 1, (found, set(inner.values()))
