"""AST → Thompson NFA over byte classes (the coarsest partition of 0..255 that every
byte set of the AST is a union of).

States have consuming edges `(class_mask, target)` (bit k of `class_mask`: byte class k)
and epsilon edges. Construction invariant: building a node from state `src` adds edges
out of `src` but never into it, so alternatives may share their entry state. Every state
can reach the accept state, because the AST constructors remove the empty language.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Alt, Automaton, Bytes, Join, Node, Repeat, Seq
from kor_cli.grammar.call_markers import BASE, DIGIT0, MARK, WIDTH
from kor_cli.grammar.limits import check

if TYPE_CHECKING:
    from kor_cli.grammar.byte_dfa import ByteDFA


class NFA:
    """A Thompson NFA under construction; `build(node, src)` returns the exit state."""

    def __init__(
        self,
        class_masks: list[int] | None,
        limit: int,
        byte_class: list[int] | None = None,
        calls: int = 0,
    ) -> None:
        """`byte_class` (optional): the class of each byte, as `byte_classes` gives it.
        `class_masks` None: each byte is a class of its own, so that an edge's class mask
        is its byte mask (no partition to compute). `calls` (call mode, if not 0): each
        call marker (`call_markers`) is one transition on a class of its own, class
        `len(class_masks) + callees[callee]` (callees numbered as met); a marker byte
        anywhere else, or more than about `calls` states, raises `NotMarked`."""
        self.by_bytes = class_masks is None
        self.class_masks = _BYTES if class_masks is None else class_masks
        self.base = len(self.class_masks)  # the first call class (call mode)
        self.limit = limit
        self.edges: list[list[tuple[int, int]]] = []
        self.eps: list[list[int]] = []
        self._memo: dict[int, int] = {}
        self._embedded: dict[int, tuple[list[list[tuple[int, int]]], list[int]]] = {}
        self._reps: np.ndarray | None = None  # one byte of each class
        self._heads: int | None = None  # the lowest byte of each class, as a mask
        self.callees: dict[int, int] | None = None  # call mode: callee -> its class - base
        self.marked = 0  # call mode: markers read as one transition (each WIDTH + 1 bytes)
        if calls:  # markers' bytes: a lead byte (_LEAD), digits (_DIGIT), not classes
            self.callees = {}
            self.limit = min(limit, calls)
            self._memo.update(_MARKER_BYTES)
        self._byte_class = byte_class
        self._next_check = 0

    def new(self) -> int:
        size = len(self.edges)
        if size >= self._next_check:
            self._guard(1)
        self.edges.append([])
        self.eps.append([])
        return size

    def _guard(self, count: int) -> None:
        """Check the CPU limit every 1024 states and the state limit before adding `count`."""
        size = len(self.edges)
        check()
        if size + count > self.limit:
            if self.callees is not None:
                raise NotMarked  # call mode: large (built over bytes instead)
            raise GrammarError(
                f"grammar too large: more than {self.limit} NFA states "
                "(reduce repetition counts, lengths or nesting)"
            )
        self._next_check = min(size + count + 1024, self.limit)

    def classes_of(self, byte_mask: int) -> int:
        """The class mask covering exactly the bytes of `byte_mask` (a union of classes)."""
        found = self._memo.get(byte_mask)
        if found is None and self.by_bytes:  # (marker bytes alone are in `_memo`)
            if self.callees is not None and byte_mask >> MARK:
                raise NotMarked  # marker bytes in a byte set
            return byte_mask
        if found is None and not byte_mask & (byte_mask - 1):  # one byte: its own class
            byte = byte_mask.bit_length() - 1
            found = self._memo[byte_mask] = 1 << self._class_of()[byte]
        elif found is None:  # the classes whose lowest byte it holds (the partition refines it)
            if self.callees is not None and byte_mask >> MARK:
                raise NotMarked  # marker bytes in a byte set
            heads = self._heads
            if heads is None:
                heads = self._heads = sum(cls & -cls for cls in self.class_masks)
            inside = byte_mask & heads
            if inside.bit_count() * 2 > len(self.class_masks):  # most classes: those outside
                inside, found = heads ^ inside, (1 << len(self.class_masks)) - 1
            else:
                found = 0
            byte_class = self._class_of()
            while inside:
                low = inside & -inside
                found ^= 1 << byte_class[low.bit_length() - 1]
                inside ^= low
            self._memo[byte_mask] = found
        return found

    def _class_of(self) -> list[int]:
        """The class of each byte (built on first use)."""
        if self._byte_class is None:
            self._byte_class = [0] * 256
            for k, cls in enumerate(self.class_masks):
                while cls:
                    low = cls & -cls
                    self._byte_class[low.bit_length() - 1] = k
                    cls ^= low
        return self._byte_class

    def build(self, node: Node, src: int) -> int:
        if type(node) is Bytes:
            found = self.classes_of(node.mask)
            if found < 0:  # a marker's byte alone
                raise NotMarked
            dst = self.new()
            self.edges[src].append((found, dst))
            return dst
        if type(node) is Seq:
            edges = self.edges
            items = iter(node.items)
            for item in items:
                if type(item) is Bytes:  # most items: a byte leaf, added here (no call)
                    found = self._memo.get(item.mask)
                    if found is None:
                        found = self.classes_of(item.mask)
                    elif found < 0:
                        found = self._call(found, items)
                    dst = len(edges)
                    if dst >= self._next_check:
                        self._guard(1)
                    edges.append([])
                    self.eps.append([])
                    edges[src].append((found, dst))
                    src = dst
                else:
                    src = self.build(item, src)
            return src
        if isinstance(node, Alt):
            dst = self.new()
            for item in node.items:
                self.eps[self.build(item, src)].append(dst)
            return dst
        if isinstance(node, Repeat):
            return self._repeat(node, src)
        if isinstance(node, Join):
            return self._join(node, src)
        if isinstance(node, Automaton):
            return self._automaton(node, src)
        raise TypeError(f"cannot build an NFA from {type(node).__name__}")

    def _call(self, found: int, items: Iterator[Node]) -> int:
        """The class of the call whose marker's lead byte was just read (`found`): its
        digits are the next `WIDTH` items."""
        if found != _LEAD:
            raise NotMarked
        callee = 0
        for _ in range(WIDTH):
            item = next(items, None)
            if type(item) is not Bytes or self._memo.get(item.mask) != _DIGIT:
                raise NotMarked
            callee = callee * BASE + item.mask.bit_length() - 1 - DIGIT0
        self.marked += 1
        return self._callee_class(callee)

    def _callee_class(self, callee: int) -> int:
        """The class mask of a call to `callee` (call mode)."""
        assert self.callees is not None
        return 1 << (self.base + self.callees.setdefault(callee, len(self.callees)))

    def _fresh(self, src: int) -> int:
        state = self.new()
        self.eps[src].append(state)
        return state

    def _repeat(self, node: Repeat, src: int) -> int:
        item, sep = node.item, node.sep
        cur = src
        for i in range(node.min):
            cur = self._copy(item, sep if i else None, cur)
        if node.max is None:
            if node.min:
                loop = self._fresh(cur)
                self.eps[self._copy(item, sep, loop)].append(loop)
                return loop
            entry = self._fresh(src)
            end = self.build(item, entry)
            dst = self.new()
            self.eps[src].append(dst)
            self.eps[end].append(dst)
            self.eps[self.build(sep, end) if sep is not None else end].append(entry)
            return dst
        dst = self.new()
        for i in range(node.min, node.max):
            self.eps[cur].append(dst)
            cur = self._copy(item, sep if i else None, cur)
        self.eps[cur].append(dst)
        return dst

    def _copy(self, item: Node, sep: Node | None, cur: int) -> int:
        if sep is not None:
            cur = self.build(sep, cur)
        return self.build(item, cur)

    def _join(self, node: Join, src: int) -> int:
        n = len(node.items)
        if (
            node.tail is None
            and node.min_count <= n
            and (node.max_count is None or n <= node.max_count)
            and all(required for _, required in node.items)
        ):  # every item present, a count in bounds: the items in sequence
            for i, (item, _) in enumerate(node.items):
                src = self.build(item, self.build(node.sep, src) if i else src)
            return src
        lo, hi = node.min_count, node.max_count
        cap = max(lo, 1) if hi is None else hi
        n = len(node.items)
        need_after = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            need_after[i] = need_after[i + 1] + node.items[i][1]
        avail_after = [n - i if node.tail is None else 1 << 30 for i in range(n + 1)]

        def ok(i: int, c: int) -> bool:
            return (hi is None or c + need_after[i] <= hi) and c + avail_after[i] >= lo

        dst = self.new()
        before: dict[int, int] = {0: src}  # emitted count -> state, before item i
        for i, (item, required) in enumerate(node.items):
            after: dict[int, int] = {}
            entries: dict[int, int] = {}
            for c, state in before.items():
                nc = min(c + 1, cap) if hi is None else c + 1
                if ok(i + 1, nc):
                    entry = entries.get(nc)
                    if entry is None:
                        entry = entries[nc] = self.new()
                    self.eps[self.build(node.sep, state) if c else state].append(entry)
                if not required and ok(i + 1, c):
                    self.eps[state].append(self._slot(after, c))
            for nc, entry in entries.items():
                self.eps[self.build(item, entry)].append(self._slot(after, nc))
            before = after
        self._tail(node, before, cap, dst)
        return dst

    def _slot(self, states: dict[int, int], count: int) -> int:
        found = states.get(count)
        if found is None:
            found = states[count] = self.new()
        return found

    def _tail(self, node: Join, before: dict[int, int], cap: int, dst: int) -> None:
        """Exit after the items; tail copies continue the count (one copy per count)."""
        lo, hi = node.min_count, node.max_count
        counts = dict(before)
        order = list(before)
        entries: dict[int, int] = {}
        while order:
            k = order.pop()
            cur = counts[k]
            if k >= lo:
                self.eps[cur].append(dst)
            if node.tail is None or (hi is not None and k >= hi):
                continue
            nk = min(k + 1, cap) if hi is None else k + 1
            entry = entries.get(nk)
            if entry is None:
                entry = entries[nk] = self.new()
                target = counts.get(nk)
                if target is None:
                    target = counts[nk] = self.new()
                    order.append(nk)
                self.eps[self.build(node.tail, entry)].append(target)
            self.eps[self.build(node.sep, cur) if k else cur].append(entry)

    def _automaton(self, node: Automaton, src: int) -> int:
        """A copy of the embedded DFA's live states (its class-level edges are computed
        once per NFA, then shifted for every copy)."""
        dfa = node.dfa
        rows, accepting = self._embedding(dfa)
        size = len(self.edges)
        self._guard(len(rows))
        shift = size - 1  # DFA state s (1..) is NFA state shift + s
        self.edges.extend([(m, t + shift) for m, t in row] for row in rows)
        self.eps.extend([] for _ in rows)
        dst = self.new()
        self.eps[src].append(shift + dfa.start)
        for s in accepting:
            self.eps[shift + s].append(dst)
        return dst

    def _embedding(self, dfa: ByteDFA) -> tuple[list[list[tuple[int, int]]], list[int]]:
        """Class-mask edges of the DFA's states 1.. and its accepting states: a small DFA's
        from its (cached) byte-mask edges, a large one's vectorised (`_table_edges`). In
        call mode a DFA built so (`marks`) has its calls as call-class edges, the states
        inside its markers none; another that reads a marker byte raises `NotMarked`."""
        found = self._embedded.get(id(dfa))
        if found is None:
            marks = dfa.marks if self.callees is not None else None
            inside = marks[1] if marks is not None else ()
            if dfa.num_states <= _EDGES_SIZE and self.by_bytes:  # byte-mask edges as they are
                rows = dfa.edges()[1:]  # (not changed here: `_automaton` copies them)
                if marks is not None:  # the states inside markers: no byte edges
                    rows = [
                        [(m, t) for m, t in row if t not in inside] if s not in inside else []
                        for s, row in enumerate(rows, 1)
                    ]
                if self.callees is not None and any(m >> MARK for row in rows for m, _ in row):
                    raise NotMarked  # a marker byte inside an automaton
            elif dfa.num_states <= _EDGES_SIZE:
                memo = self._memo
                rows = []
                for s, row in enumerate(dfa.edges()[1:], 1):
                    out = []
                    for m, t in row if s not in inside else ():
                        if t not in inside:  # (a marker's lead byte: its calls below)
                            found_m = memo.get(m)
                            if found_m is None:
                                found_m = self.classes_of(m)
                            if found_m < 0:
                                raise NotMarked  # a marker byte inside an automaton
                            out.append((found_m, t))
                    rows.append(out)
            else:
                if self.callees is not None and marks is None:
                    if dfa.transitions[:, MARK:].any():
                        raise NotMarked
                rows = self._table_edges(dfa)
            if marks is not None:
                if dfa.num_states > _EDGES_SIZE:  # marker bytes read as a class: dropped
                    rows = [[x for x in row if x[1] not in inside] for row in rows]
                    rows = [[] if s in inside else row for s, row in enumerate(rows, 1)]
                for s, pairs in marks[0].items():
                    rows[s - 1] += [(self._callee_class(c), t) for c, t in pairs]
            found = self._embedded[id(dfa)] = (rows, np.flatnonzero(dfa.accepting).tolist())
        return found

    def _table_edges(self, dfa: ByteDFA) -> list[list[tuple[int, int]]]:
        """The DFA's columns at one byte of each NFA class, grouped by (state, target)."""
        if self.by_bytes:  # the DFA's own classes, their bits then spelled as bytes
            _, masks, compressed = dfa.compressed()
            spelled: dict[int, int] = {}
            rows = self._class_edges(compressed[1:], dfa.num_states)
            for row in rows:
                for k, (bits, t) in enumerate(row):
                    mask = spelled.get(bits)
                    if mask is None:
                        mask = spelled[bits] = sum(masks[b] for b in _bit_list(bits))
                    row[k] = (mask, t)
            return rows
        if self._reps is None:
            self._reps = np.array([(m & -m).bit_length() - 1 for m in self.class_masks])
        return self._class_edges(dfa.transitions[1:, self._reps], dfa.num_states)

    @staticmethod
    def _class_edges(table: np.ndarray, num_states: int) -> list[list[tuple[int, int]]]:
        """Each row's live cells grouped by target, as (class bits, target) pairs."""
        rows: list[list[tuple[int, int]]] = [[] for _ in range(len(table))]
        src, cls = np.nonzero(table)
        if len(src):
            key = src.astype(np.int64) * num_states + table[src, cls]
            order = np.argsort(key, kind="stable")
            key, cls = key[order], cls[order]
            starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
            pairs = key[starts].tolist()
            for pair, mask in zip(pairs, _or_of_bits(cls, starts), strict=True):
                rows[pair // num_states].append((mask, pair % num_states))
        return rows


_LEAD = -1  # `classes_of` in call mode: a marker's lead byte
_DIGIT = -2  # and a digit
_MARKER_BYTES = {1 << MARK: _LEAD, **{1 << (DIGIT0 + d): _DIGIT for d in range(BASE)}}
_BYTES = [1 << b for b in range(256)]  # the classes of an NFA over bytes (`NFA(None, ...)`)


class NotMarked(Exception):
    """Call mode met a marker byte outside a well-formed marker (the caller builds the
    NFA over bytes instead)."""


_EDGES_SIZE = 256  # embedded DFAs up to this size are read off their (cached) byte-mask edges


def _bit_list(mask: int) -> list[int]:
    """The positions of the set bits of `mask`."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _or_of_bits(bits: np.ndarray, starts: np.ndarray) -> list[int]:
    """For each run of `bits` beginning at `starts`, the int with those bit positions set."""
    out: list[int] = [0] * len(starts)
    for word in range(0, int(bits.max()) + 1, 63):  # 63 positions at a time as uint64
        inside = (bits >= word) & (bits < word + 63)
        shifted = np.left_shift(np.uint64(1), np.clip(bits - word, 0, 62).astype(np.uint64))
        part = np.bitwise_or.reduceat(np.where(inside, shifted, np.uint64(0)), starts).tolist()
        out = [a | b << word for a, b in zip(out, part, strict=True)] if word else part
    return out
