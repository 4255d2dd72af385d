"""Embedded automata read as one symbol by a rule body's NFA in call mode (`nfa.NFA`).

A prefix-free automaton (one accepting state that reads nothing more, a start never
re-entered) embedded in a rule body with calls, such as the JSON string automaton at a
string value and at an object key, costs its states at every copy through the subset
construction and the refinement, and they come out as they went in. Call mode reads it
as one transition on a class of its own, as it reads a call ("folded"), and
`call_classes.marker_table` spells it out: from a state with that transition to q, its
first bytes lead into a copy of its states (one per folded automaton, state and q) whose
accepting state is q.

That is the byte pipeline's minimal DFA when (`apart`, `separated`, checked at build time;
else the body is built with its automata spelled out, `NFA.unfold`):
- no byte that starts a folded automaton's words is read elsewhere in the body (by a
  byte leaf or another folded automaton): every byte string then reads one way as bytes,
  calls and words of the automata (each prefix-free), so the states of the minimal DFA
  over those symbols stay distinct over bytes;
- no state of a copy reads the very bytes a non-accepting state outside the copies reads
  (equivalent states read the same bytes), so none is equivalent to one outside; nor are
  two copies' states: for A's states s != s', a shortest word in the symmetric difference
  of their residuals leads one to a state outside the copies and the other (A is prefix-
  free) to a copy's state or to none; for s = s' (continuations q != q'), the residual of
  s is prefix-free, so R·L(q) = R·L(q') only if L(q) = L(q').
Every state of a copy is reachable and live (the automaton is minimal), so the DFA spelled
out is minimal; `marker_table` numbers it in the byte pipeline's canonical order.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from kor_cli.grammar.call_markers import MARK

if TYPE_CHECKING:
    from kor_cli.grammar.fsm import ByteDFA

_MAX_SIZE = 256  # automata up to this size are folded (their byte-mask edges are cached)


class Fold(NamedTuple):
    """A foldable automaton: its start and accepting state, the bytes its words start
    with, each state's edges as (lowest byte, byte mask, target) by lowest byte, and the
    byte sets the states of a copy read (all but the start and the accepting state)."""

    start: int
    accept: int
    first: int
    rows: list[list[tuple[int, int, int]]]
    targets: list[list[int]]  # each state's targets, by lowest byte
    unions: frozenset[int]
    table: np.ndarray  # the automaton's transitions


_folds: weakref.WeakKeyDictionary[ByteDFA, Fold | None] = weakref.WeakKeyDictionary()


def fold_of(dfa: ByteDFA) -> Fold | None:
    """The `Fold` of `dfa`, or None if it cannot be folded (a fact of the automaton alone,
    kept while it lives: the fixed string automaton's for the process)."""
    try:
        return _folds[dfa]
    except KeyError:
        found = _folds[dfa] = _fold(dfa)
        return found


def _fold(dfa: ByteDFA) -> Fold | None:
    if dfa.marks is not None or not dfa.trimmed or dfa.num_states > _MAX_SIZE:
        return None
    table = dfa.transitions
    accepting = np.flatnonzero(dfa.accepting).tolist()
    start = dfa.start
    if len(accepting) != 1 or accepting[0] == start:
        return None
    accept = accepting[0]
    if table[accept].any() or (table == start).any() or table[:, MARK:].any():
        return None
    rows = [sorted([(m & -m, m, t) for m, t in row]) for row in dfa.edges()]
    first = sum(m for _, m, _ in rows[start])
    unions = frozenset(
        sum(m for _, m, _ in row) for s, row in enumerate(rows) if s and s != start and s != accept
    )
    targets = [[t for _, _, t in row] for row in rows]
    return Fold(start, accept, first, rows, targets, unions, table)


def apart(
    edges: Sequence[Sequence[tuple[int, int]]], base: int, symbols: Sequence[int | ByteDFA]
) -> bool:
    """Whether the first bytes of the folded automata among `symbols` (the others: callees)
    are read by no byte edge of the NFA (`edges`, classes below `base` bytes) and by no
    other folded automaton."""
    seen = 0
    for row in edges:
        for m, _ in row:
            seen |= m
    seen &= (1 << base) - 1
    for x in symbols:
        fold = None if type(x) is int else fold_of(x)
        if fold is None:
            continue
        if seen & fold.first:
            return False
        seen |= fold.first
    return True


def separated(
    rows: Sequence[dict[int, int]],
    block: Sequence[int],
    accepting: Sequence[bool],
    base: int,
    symbols: Sequence[int | ByteDFA],
) -> bool:
    """Whether no non-accepting live state of the minimal symbol-level DFA (`rows`,
    `block` as `refine.live_blocks` gives them) reads, over bytes, the very byte set of a
    state inside a folded automaton's copy."""
    folds = [fold_of(x) if type(x) is not int else None for x in symbols]
    inner = frozenset().union(*(f.unions for f in folds if f is not None))
    plain = (1 << base) - 1
    for s, row in enumerate(rows):
        if block[s] < 0 or accepting[s]:
            continue
        union = 0
        for m in row.values():
            union |= m
        high = union >> base
        union &= plain
        while high:
            low = high & -high
            fold = folds[low.bit_length() - 1]
            union |= fold.first if fold is not None else 1 << MARK
            high ^= low
        if union in inner:
            return False
    return True


class Copies:
    """The copies of folded automata that `call_classes.marker_table`'s BFS meets: one
    per automaton and continuation (a state's Nerode block), its states numbered as the
    BFS reaches them; their rows are filled from the automaton's table at the end."""

    def __init__(
        self, block: Sequence[int], reach: Callable[[int], int], add: Callable[[object], int]
    ) -> None:
        """`reach(t)`: the rule number of the symbol-level state `t`; `add(entry)`: the
        number of a new state (non-accepting) queued as `entry`."""
        self._block, self._reach, self._add = block, reach, add
        # (automaton, continuation block) -> [fold, continuation, numbers, rows, states]
        self._copies: dict[tuple[int, int], list[Any]] = {}

    def enter(self, fold: Fold, t: int) -> list[tuple[int, int, tuple[list[Any], int]]]:
        """The edges into `fold`'s copy ending in `t`: (lowest byte, byte mask, target)
        with targets to number (`state`) in order."""
        key = (id(fold), self._block[t])
        copy = self._copies.get(key)
        if copy is None:
            copy = self._copies[key] = [fold, t, [0] * len(fold.rows), [], []]
        return [(lo, m, (copy, a)) for lo, m, a in fold.rows[fold.start]]

    def state(self, target: tuple[list[Any], int]) -> int:
        """The rule number of a target `enter` gave (numbered now if new)."""
        return self._state(*target)

    def _state(self, copy: list[Any], a: int) -> int:
        numbers = copy[2]
        found = numbers[a]
        if not found:
            fold = copy[0]
            found = numbers[a] = self._reach(copy[1]) if a == fold.accept else self._add((copy, a))
        return found

    def visit(self, here: int, entry: tuple[list[Any], int]) -> None:
        """Number the targets of the copy's state `entry` (rule number `here`)."""
        copy, a = entry
        copy[3].append(here)
        copy[4].append(a)
        numbers = copy[2]
        for t in copy[0].targets[a]:
            if not numbers[t]:
                self._state(copy, t)

    def fill(self, table: np.ndarray, form: np.ndarray | None = None) -> np.ndarray:
        """`table` with the copies' rows filled in (rows and targets through `form`)."""
        for fold, _, numbers, rows, states in self._copies.values():
            targets = np.array(numbers, dtype=np.int32)
            if form is not None:
                targets, rows = form[targets], form[rows]
            table[rows] = targets[fold.table[states]]
        return table
