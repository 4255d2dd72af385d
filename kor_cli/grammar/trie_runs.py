"""Loop runs: what a trie walk allows below a node whose state loops on a class of bytes.

In `[a-z]+`, an email's atext or a hostname label, a DFA state t loops on a class L (t on every
byte of L). Below a trie node n reached in t, a token's bytes that stay in L keep t, so it is
allowed if they are all in L (a *run token* of n), and otherwise its fate is decided from its
first byte outside L on (at an *exit* of n, in the state t gives that byte). `trie_loops`
allows whole the subtrees made of L bytes only; a subtree that holds a few exits among many
run nodes would still be walked level by level. `RunTables` finds a node's run tokens and
exits at once, from two arrays per class in depth-first (preorder) node order, where the
subtree of n is one range: for each node, the depth its run of L bytes started at (for a
byte outside L: its parent's). A node below n is on n's run iff that depth is at most
n's depth + 1.
"""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path

import numpy as np

from kor_cli.grammar.disk_cache import read_arrays, write_arrays
from kor_cli.grammar.trie import TokenTrie, expand_spans, preorder

_MAX_CLASSES = 8  # class tables kept per trie (up to ~14 bytes a trie node each)
_ARRAYS = ("began", "run_keys", "run_tokens", "exits", "exit_keys")
_SOURCE: list[str] = []  # this module's source hash (its tables' layout), on first use


class _Order:
    """Per trie: each node's depth and preorder position, and the nodes in preorder."""

    def __init__(self, trie: TokenTrie | None = None) -> None:
        if trie is not None:  # else filled by `of`
            self.depth, self.pre, self.nodes = preorder(trie)

    @classmethod
    def of(cls, depth: np.ndarray, pre: np.ndarray, nodes: np.ndarray) -> _Order:
        """The order of these arrays (kept elsewhere: `trie_loops.LoopSkips`)."""
        order = cls()
        order.depth, order.pre, order.nodes = depth, pre, nodes
        return order


class RunTables:
    """One class's candidates: the nodes with a token inside the class and the nodes
    outside it whose parent is inside, sorted by (`start`, preorder) as the keys
    `start << 32 | preorder`, where `start` is the depth a node's run of class bytes started
    at (a node outside the class: its parent's). The run tokens and exits of a node n are
    the candidates of its subtree whose start is n's own (n in the class) or n's depth + 1
    (n outside it), and, n outside the class, its children outside it."""

    def __init__(self, trie: TokenTrie, order: _Order, loops: np.ndarray) -> None:
        n = trie.num_nodes
        inside = loops.take(trie.byte) if n else np.zeros(0, dtype=bool)
        began = np.where(inside, order.depth, order.depth + 1).astype(np.int16)
        start = began.copy()
        for level in range(1, trie.depth):
            lo, hi = trie.offsets[level], trie.offsets[level + 1]
            above = began.take(trie.parent[lo:hi])  # the parent's run start
            start[lo:hi] = above
            began[lo:hi] = np.where(inside[lo:hi], np.minimum(above, began[lo:hi]), began[lo:hi])
        start[inside] = began[inside]
        self.began = began  # node → its own run's start (outside the class: depth + 1)
        keys = start.astype(np.int64) << 32 | order.pre
        # the run tokens (their ids) and the nodes outside the class below one inside it,
        # each by their keys (an exit below a node outside the class is one of its children)
        ends = _sorted(order, start, inside & (trie.node_token >= 0))
        self.run_keys, self.run_tokens = keys.take(ends), trie.node_token.take(ends)
        below = inside.take(trie.parent) if n else inside
        below[: trie.offsets[1] if trie.depth else 0] = False  # roots have no parent
        self.exits = _sorted(order, start, ~inside & below)
        self.exit_keys = keys.take(self.exits)

    @classmethod
    def read(cls, path: Path, nodes: int) -> RunTables | None:
        """Tables stored by `write` (None: no file, or one that does not fit)."""
        found = read_arrays(path)
        if found is None or not set(_ARRAYS) <= found.keys() or len(found["began"]) != nodes:
            return None
        if len(found["run_keys"]) != len(found["run_tokens"]) or len(found["exits"]) != len(
            found["exit_keys"]
        ):
            return None
        tables = cls.__new__(cls)
        for name in _ARRAYS:
            setattr(tables, name, found[name])
        return tables

    def write(self, path: Path) -> None:
        write_arrays(path, {name: getattr(self, name) for name in _ARRAYS})


def _sorted(order: _Order, start: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """The `chosen` nodes by (start, preorder): those in preorder, stably sorted by start
    (small integers: a radix sort)."""
    nodes = order.nodes[chosen.take(order.nodes)]
    return nodes.take(np.argsort(start.take(nodes), kind="stable"))


class LoopRuns:
    """Run tokens and exits of trie nodes in looping states (class tables built on use)."""

    def __init__(self, trie: TokenTrie) -> None:
        self.trie = trie
        self._order: _Order | None = None
        self._adopted = False  # the preorder is another table's (not counted here)
        self._tables: dict[bytes, RunTables] = {}
        self._store: Path | None = None  # where class tables go on the disk cache

    def store_at(self, path: Path | None) -> None:
        """Keep class tables on the disk cache beside the tokenizer's tables file `path`
        (None: no disk cache): a process's first walk in a class reads them (~0.3 ms for
        [a-z] on Qwen) instead of building them (~5 ms)."""
        self._store = path

    def adopt(self, depth: np.ndarray, pre: np.ndarray, nodes: np.ndarray) -> None:
        """Use this preorder (`trie.preorder` of this trie, kept with the tokenizer's tables
        on the disk cache) instead of building it on the first class table (~4 ms on Qwen)."""
        if self._order is None:
            self._order, self._adopted = _Order.of(depth, pre, nodes), True

    @property
    def nbytes(self) -> int:
        """Memory held by the preorder (when built here) and the class tables so far."""
        own = self._order is not None and not self._adopted
        arrays = [self._order.depth, self._order.pre, self._order.nodes] if own else []
        for table in self._tables.values():
            arrays += (table.began, table.run_keys, table.run_tokens)
            arrays += (table.exits, table.exit_keys)
        return sum(a.nbytes for a in arrays)

    def known(self, loops: np.ndarray, key: bytes | None = None) -> bool:
        """True when the class `loops` (bool [256]; `key`: its `class_key`, when known)
        has its tables already."""
        return (class_key(loops) if key is None else key) in self._tables

    def expand(
        self,
        transitions: np.ndarray,
        loops: np.ndarray,
        nodes: np.ndarray,
        states: np.ndarray,
        out: np.ndarray,
        state: int | None = None,
        key: bytes | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """For `nodes` in `states`, states that all loop on the class `loops`: allow their
        own tokens, run tokens and the tokens at their live exits in `out`; returns those
        exits and their states, to walk on from. `state`: every one of `states` is this
        state (the exits' transitions read without repeating it per exit); `key`: the
        class's `class_key`, when known."""
        order = self._order_of()
        tables = self._tables_of(order, loops, key)
        trie = self.trie
        at = tables.began.take(nodes).astype(np.int64) << 32 | order.pre.take(nodes)
        past = at + trie.subtree.take(nodes)  # the key just past the subtree's
        at += 1
        keys = tables.run_keys
        spots = expand_spans(np.searchsorted(keys, at), np.searchsorted(keys, past))
        out[tables.run_tokens.take(spots)] = True
        tokens = trie.node_token.take(nodes)
        out[tokens[tokens >= 0]] = True
        keys = tables.exit_keys
        lo, hi = np.searchsorted(keys, at), np.searchsorted(keys, past)
        spots = expand_spans(lo, hi)
        exits = tables.exits.take(spots)
        one = state is not None
        bases = None if one else np.repeat(states << 8, hi - lo)
        outside = ~loops.take(trie.byte.take(nodes))
        if outside.any():  # their children outside the class are exits too
            heads = nodes[outside]
            first = trie.child_start.take(heads)
            kids = expand_spans(first, trie.child_start.take(heads + 1))
            leave = ~loops.take(trie.byte.take(kids))
            exits = np.concatenate((exits, kids[leave]))
            if not one:
                bases_kids = np.repeat(states[outside] << 8, trie.child_count.take(heads))
                bases = np.concatenate((bases, bases_kids[leave]))
        if one:  # one state: its row of the table, read at the exits' bytes
            index = trie.byte.take(exits) + np.int64(state << 8)
        else:
            index = bases | trie.byte.take(exits)
        exit_states = transitions.take(index)
        live = (exit_states != 0).nonzero()[0]
        exits = exits.take(live)
        tokens = trie.node_token.take(exits)
        out[tokens[tokens >= 0]] = True
        return exits, exit_states.take(live)

    def _order_of(self) -> _Order:
        if self._order is None:
            self._order = _Order(self.trie)
        return self._order

    def _tables_of(self, order: _Order, loops: np.ndarray, key: bytes | None = None) -> RunTables:
        key = class_key(loops) if key is None else key
        found = self._tables.get(key)
        if found is None:
            path = self._path(key)
            found = RunTables.read(path, self.trie.num_nodes) if path is not None else None
            if found is None:
                found = RunTables(self.trie, order, loops)
                if path is not None:
                    found.write(path)
            if len(self._tables) >= _MAX_CLASSES:
                self._tables.pop(next(iter(self._tables)))
            self._tables[key] = found
        return found

    def _path(self, key: bytes) -> Path | None:
        """The cache file of one class's tables (None: no disk cache)."""
        if self._store is None:
            return None
        if not _SOURCE:
            _SOURCE.append(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16])
        return self._store.with_name(f"{self._store.stem}-runs-{_SOURCE[0]}-{key.hex()}.bin")


def class_key(loops: np.ndarray) -> bytes:
    """The key of the class `loops` (bool [256]) among a trie's class tables."""
    return np.packbits(loops).tobytes()


_RUNS: weakref.WeakKeyDictionary[TokenTrie, LoopRuns] = weakref.WeakKeyDictionary()


def loop_runs(trie: TokenTrie) -> LoopRuns:
    """The `LoopRuns` of `trie`, one per trie (its class tables shared by every DFA)."""
    found = _RUNS.get(trie)
    if found is None:
        found = _RUNS[trie] = LoopRuns(trie)
    return found
