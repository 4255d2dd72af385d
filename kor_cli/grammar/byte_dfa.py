"""`ByteDFA`, the minimal byte automaton every module here shares, and the small
constructors around it: the empty DFA, a raw table minimised (`minimal`), a class-level
table minimised and expanded to 256 columns (`from_class_table`, `expanded`).

`fsm` builds these from an AST; `fingerprint()` identifies the language (results are
minimal and canonically numbered).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from kor_cli.grammar.call_classes import Marks, Split, Table
from kor_cli.grammar.minimize import minimize


class ByteDFA:
    """A deterministic automaton over bytes.

    `transitions`: int32 [num_states, 256]; state 0 is the dead state (all transitions to
    0, never accepting). `accepting`: bool [num_states]. `start`: never 0. `trimmed`: the
    builder vouches that every state but 0 can reach an accepting state (minimal DFAs), so
    a token index need not compute which states are live. `marks` (a rule body's DFA built
    with calls as symbols, else None): its call markers as `rules.split_calls` reads them
    (state -> its (callee, return state) pairs, callees ascending; the states inside
    markers); `split` (such a DFA, else None): makes the (table, accepting, calls) of the
    rule `rules.split_calls` reads off it. Such a DFA's table is made on first use (`lazy`).
    """

    __slots__ = (
        "transitions",
        "accepting",
        "start",
        "_compressed",
        "_edges",
        "_fingerprint",
        "trimmed",
        "marks",
        "split",
        "_pending",
        "__weakref__",
    )

    def __init__(
        self, transitions: np.ndarray, accepting: np.ndarray, start: int, trimmed: bool = False
    ) -> None:
        transitions = np.ascontiguousarray(transitions, dtype=np.int32)
        accepting = np.ascontiguousarray(accepting, dtype=bool)
        if transitions.ndim != 2 or transitions.shape[1] != 256:
            raise ValueError(f"transitions must be [num_states, 256], got {transitions.shape}")
        if len(accepting) != len(transitions) or not 0 < start < len(transitions):
            raise ValueError("accepting must match transitions and 0 < start < num_states")
        if transitions[0].any() or accepting[0]:
            raise ValueError("state 0 must be the dead state")
        self.transitions = transitions
        self.accepting = accepting
        self.start = int(start)
        self.trimmed = trimmed
        self._compressed: tuple[np.ndarray, list[int], np.ndarray] | None = None
        self._edges: list[list[tuple[int, int]]] | None = None
        self._fingerprint: str | None = None
        self.marks: Marks | None = None
        self.split: Callable[[], Split] | None = None

    @classmethod
    def made(
        cls, transitions: np.ndarray, accepting: np.ndarray, start: int, trimmed: bool = False
    ) -> ByteDFA:
        """A DFA of arrays its builder made right (C-contiguous int32 [n, 256] and bool
        [n], dead state 0, 0 < start < n): `ByteDFA(...)` without the checks."""
        out = cls.__new__(cls)
        out.transitions, out.accepting = transitions, accepting
        out.start, out.trimmed = start, trimmed
        out._compressed = out._edges = out._fingerprint = out.marks = out.split = None
        return out

    @classmethod
    def lazy(cls, built: Table) -> ByteDFA:
        """The trimmed DFA (start 1) of a rule body built with calls (`build_with_calls`:
        a thunk of its `transitions`, as `made` takes them, made on first use; accepting;
        marks; `split`: a rule build reads that alone)."""
        out = cls.__new__(cls)
        out._pending, out.accepting, out.marks, out.split = built
        out.start, out.trimmed = 1, True
        out._compressed = out._edges = out._fingerprint = None
        return out

    def __getattr__(self, name: str) -> np.ndarray:
        """A lazy DFA's table, made on first use (any other unset attribute: an error)."""
        pending = self._pending if name == "transitions" else None
        if pending is None:
            raise AttributeError(name)
        self.transitions = pending()
        self._pending = None
        return self.transitions

    @property
    def num_states(self) -> int:
        return len(self.accepting)

    def step(self, state: int, byte: int) -> int:
        return int(self.transitions[state, byte])

    def walk(self, state: int, data: bytes) -> int:
        """State after reading `data` from `state` (0 if it dies)."""
        table = self.transitions
        for byte in data:
            state = int(table[state, byte])
            if not state:
                return 0
        return state

    def accepts(self, data: bytes) -> bool:
        return bool(self.accepting[self.walk(self.start, data)])

    def is_empty(self) -> bool:
        """True if the language is empty (minimal DFAs: no accepting state)."""
        return not self.accepting.any()

    def fingerprint(self) -> str:
        if self._fingerprint is None:
            digest = hashlib.sha256(b"kor-byte-dfa-v1")
            digest.update(self.start.to_bytes(8, "little"))
            digest.update(self.accepting.astype(np.uint8).tobytes())
            digest.update(self.transitions.astype("<i4").tobytes())
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def compressed(self) -> tuple[np.ndarray, list[int], np.ndarray]:
        """(class of each byte, byte mask of each class, table [num_states, num_classes]).

        Classes group bytes with identical columns, ordered by their lowest byte.
        """
        if self._compressed is None:
            class_of, reps = column_classes(self.transitions)
            masks = [0] * len(reps)
            for b, k in enumerate(class_of.tolist()):
                masks[k] |= 1 << b
            self._compressed = (class_of, masks, self.transitions[:, reps])
        return self._compressed

    def edges(self) -> list[list[tuple[int, int]]]:
        """For each state, its live transitions as (byte mask, target) pairs."""
        if self._edges is None:
            _, masks, table = self.compressed()
            self._edges = []
            for row in table.tolist():
                grouped: dict[int, int] = {}
                for k, target in enumerate(row):
                    if target:
                        grouped[target] = grouped.get(target, 0) | masks[k]
                self._edges.append([(mask, t) for t, mask in grouped.items()])
        return self._edges

    def __repr__(self) -> str:
        return f"ByteDFA(num_states={self.num_states}, start={self.start})"


def column_classes(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group equal columns: (class of each column, first column of each class), by first column."""
    columns = np.ascontiguousarray(table.T)
    rows = columns.view(np.dtype((np.void, columns.dtype.itemsize * columns.shape[1])))
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.ravel()], first[order]


def from_class_table(
    table: np.ndarray, accepting: np.ndarray, start: int, class_of: np.ndarray
) -> ByteDFA:
    """Minimise a class-level table and expand it to a `ByteDFA` (empty language allowed)."""
    return expanded(minimize(table, accepting, start), class_of)


def expanded(minimal: tuple[np.ndarray, np.ndarray, int], class_of: np.ndarray) -> ByteDFA:
    """The `ByteDFA` of a minimal class-level (table, accepting, start)."""
    table, accepting, start = minimal
    if start == 0:
        return empty_dfa()
    columns = table.take(class_of, axis=1)  # C-contiguous, as `made` needs
    return ByteDFA.made(columns, accepting, start, trimmed=True)  # minimize trims


def empty_dfa() -> ByteDFA:
    """The DFA of the empty language."""
    return ByteDFA(np.zeros((2, 256), dtype=np.int32), np.zeros(2, dtype=bool), 1)


def minimal(transitions: np.ndarray, accepting: np.ndarray, start: int) -> ByteDFA:
    """Minimal canonical DFA of a raw [num_states, 256] table with dead state 0."""
    class_of, reps = column_classes(np.asarray(transitions, dtype=np.int32))
    table = np.asarray(transitions, dtype=np.int32)[:, reps]
    return from_class_table(table, np.asarray(accepting, dtype=bool), start, class_of)
