"""Loop skips: trie subtrees a self-looping DFA state allows whole, without walking them.

Inside a word, an email's local part or a hostname label, a DFA state loops on itself over
a class of bytes (`[a-z]`, atext, `[0-9A-Za-z]`). A trie walk from such a state follows
every token made of those bytes, tens of thousands of nodes for a large vocabulary, only to
find them all allowed. Per tokenizer, `LoopSkips` keeps for each trie node the set of bytes
below it and the range of sorted tokens under it. When a walk reaches a node in a state
that loops on every byte below the node, all the tokens under it are allowed (each of
their remaining bytes keeps the state, which is live) and the walk goes no deeper there.

Byte sets are 128-bit: bit b for an ASCII byte b > 0, bit 0 for the NUL byte and every byte
from 0x80. A node's set holds bit 0 when any of those is below it; a state's loop class
holds bit 0 only when it loops on all of them, so the subset test stays sound.

A node in a looping state whose subtree is not whole goes by its runs instead
(`trie_runs`): its run tokens are allowed and the walk goes on from its live exits only.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from kor_cli.grammar.trie import (
    TokenTrie,
    expand_spans,
    int_view,
    levels_up,
    preorder,
    token_ranges,
)
from kor_cli.grammar.trie_runs import class_key, loop_runs

_FOLD = np.where((np.arange(256) > 0) & (np.arange(256) < 128), np.arange(256), 0)


def _bits(folded: np.ndarray) -> np.ndarray:
    """[n, 2] uint64: one bit per folded byte value."""
    out = np.zeros((len(folded), 2), dtype=np.uint64)
    rows = np.arange(len(folded))
    out[rows, folded >> 6] = np.left_shift(np.uint64(1), (folded & 63).astype(np.uint64))
    return out


class LoopSkips:
    """Per trie node: the bytes below it as two 64-bit words (`low`, `high`; a leaf has
    every bit, so no loop class covers it) and the sorted-token range under it (`first` ..
    `last`, itself included)."""

    def __init__(self, trie: TokenTrie) -> None:
        n = trie.num_nodes
        below = np.zeros((n, 2), dtype=np.uint64)
        own = _bits(_FOLD[trie.byte]) if n else below
        for lo, hi, starts, heads in levels_up(trie):
            below[heads] = np.bitwise_or.reduceat(own[lo:hi] | below[lo:hi], starts, axis=0)
        below[trie.child_count == 0] = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
        self.low = np.ascontiguousarray(below[:, 0])
        self.high = np.ascontiguousarray(below[:, 1])
        self.first, self.last = token_ranges(trie)
        # the trie's preorder, for the loop-run tables (`trie_runs`), stored with these
        self.depth, self.pre, self.preorder = preorder(trie)
        self._views: list[tuple[memoryview, ...]] = []  # plain-int reads, made on first use

    @property
    def nbytes(self) -> int:
        arrays = (self.low, self.high, self.first, self.last, self.depth, self.pre, self.preorder)
        return sum(a.nbytes for a in arrays)

    def along(self, trie: TokenTrie, data: bytes) -> tuple[list[int], int, int]:
        """`trie.along(data)` (the sorted positions of the tokens that are a prefix of
        `data`, and the range of those that extend it) by following `data` down `trie`,
        of which these are the skips: a few reads a byte, not a bisect of the tokens."""
        if not self._views:
            arrays = (trie.byte, trie.child_start, trie.token_node, self.first, self.last)
            self._views.append(tuple(map(int_view, arrays)))
        byte, child_start, token_node, first, last = self._views[0]
        prefixes: list[int] = []
        lo, hi = 0, trie.offsets[1] if trie.depth else 0
        node = -1
        for value in data:
            node = bisect_left(byte, value, lo, hi)
            if node == hi or byte[node] != value:
                return prefixes, 0, 0
            at = first[node]
            while at < len(token_node) and token_node[at] == node:  # its own token(s)
                prefixes.append(at)
                at += 1
            lo, hi = child_start[node], child_start[node + 1]
        if node < 0:
            return prefixes, 0, len(token_node)
        start = first[node]  # past the node's own token(s): the tokens that run on
        while start <= last[node] and token_node[start] == node:
            start += 1
        return prefixes, start, last[node] + 1


_LEARN_ALL = 2048  # a DFA of at most this many states learns every loop class at once
# nodes in one looping state go by their runs (`trie_runs`) when their subtrees hold at least
# _RUN_NODES nodes, at least _BUILD_SHARE of the trie when their class has no tables yet, and
# at most _RUN_MAX_SHARE of it (more: nearly every token is a run token, and a whole-level
# walk finds them faster)
_RUN_NODES, _BUILD_SHARE, _RUN_MAX_SHARE = 256, 0.01, 0.4
ONE_STATE = True  # a frontier in one state takes the scalar path (False: the array path)


class LoopPrune:
    """The pruning step of one DFA's trie walks: drops from a walk's frontier the nodes
    whose state loops on every byte below them, allowing their subtrees' tokens."""

    def __init__(self, skips: LoopSkips, trie: TokenTrie, table: np.ndarray) -> None:
        self.skips = skips
        self.trie = trie
        self.table = table  # [num_states, 256]
        self.flat = table.ravel()
        self.runs = loop_runs(trie)
        self.runs.adopt(skips.depth, skips.pre, skips.preorder)
        # per state, the bytes it does not loop on (folded, as two words: `~` of its class)
        self.not_low = np.full(len(table), np.uint64(0xFFFF_FFFF_FFFF_FFFF))
        self.not_high = self.not_low.copy()
        self.loops = np.zeros(len(table), dtype=bool)  # the state loops on some byte
        self.known = np.zeros(len(table), dtype=bool)  # the states learnt so far
        self.all_known = len(table) <= _LEARN_ALL  # small DFAs: every state at once
        self._classes: dict[int, tuple[np.ndarray, bytes]] = {}  # state → class, its key
        if self.all_known:
            self._learn(None)

    def _learn(self, fresh: np.ndarray | None) -> None:
        """Find the loop classes of the states `fresh` (distinct, not yet known; None:
        every state)."""
        if fresh is None:  # int32 as the table: no widening of every entry to compare
            fresh = np.arange(len(self.table), dtype=self.table.dtype)
            low = self.table[:, :128]
        else:
            low = self.table[fresh, :128]
        rows = low == fresh[:, None]  # [k, 128]: an ASCII byte keeps the state
        # bit 0 stands for NUL and every byte from 0x80: set only when all of them loop
        nul = np.flatnonzero(rows[:, 0])
        if len(nul):
            rows[nul, 0] = (self.table[fresh[nul], 128:] == fresh[nul, None]).all(axis=1)
        packed = np.packbits(rows, axis=1, bitorder="little")
        words = packed.view("<u8").astype(np.uint64)
        self.not_low[fresh] = ~words[:, 0]
        self.not_high[fresh] = ~words[:, 1]
        self.loops[fresh] = (words[:, 0] | words[:, 1]) != 0
        self.known[fresh] = True

    def __call__(
        self, nodes: np.ndarray, states: np.ndarray, out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The frontier less the nodes whose subtrees are allowed whole (their tokens, and
        their own, set in `out`)."""
        if not self.all_known:
            known = self.known.take(states)
            if not known.all():
                self._learn(np.unique(states[~known]))
        one = None  # the frontier's one state, if it has one
        if ONE_STATE and len(states) and states[0] == states[-1] and (states == states[0]).all():
            one = int(states[0])
            if not self.loops[one]:
                return nodes, states
            outside = self.skips.low.take(nodes) & self.not_low[one]
            outside |= self.skips.high.take(nodes) & self.not_high[one]
        elif not self.loops.take(states).any():
            return nodes, states
        else:
            outside = self.skips.low.take(nodes) & self.not_low.take(states)
            outside |= self.skips.high.take(nodes) & self.not_high.take(states)
        whole = outside == 0
        if not whole.any():
            return nodes, states
        done = nodes[whole]
        spans = expand_spans(self.skips.first.take(done), self.skips.last.take(done) + 1)
        out[self.trie.token_ids.take(spans)] = True
        keep = ~whole
        nodes, states = nodes[keep], states[keep]
        if one is not None:
            return self._runs_one(nodes, states, one, out)
        return self._runs(nodes, states, out)

    def _class(self, state: int) -> tuple[np.ndarray, bytes]:
        """The bytes `state` loops on (bool [256]) and their class key, once per state."""
        found = self._classes.get(state)
        if found is None:
            loops = self.table[state] == state
            found = self._classes[state] = (loops, class_key(loops))
        return found

    def _takes_runs(self, size: int, loops: np.ndarray, key: bytes | None) -> bool:
        """Whether nodes of `size` subtree nodes in one state of class `loops` go by runs."""
        share = size / max(self.trie.num_nodes, 1)
        return _RUN_NODES <= size <= _RUN_MAX_SHARE * self.trie.num_nodes and (
            share >= _BUILD_SHARE or self.runs.known(loops, key)
        )

    def _runs_one(
        self, nodes: np.ndarray, states: np.ndarray, state: int, out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`_runs` of a frontier all in `state` (a looping one): the same nodes and exits,
        in the same order, with scalar reads of the state."""
        looping = self.trie.child_count.take(nodes) > 0
        if not looping.any():
            return nodes, states
        mine = nodes[looping]
        size = int(self.trie.subtree.take(mine).sum())
        loops, key = self._class(state)
        if not self._takes_runs(size, loops, key):
            return nodes, states
        exits, exit_states = self.runs.expand(
            self.flat, loops, mine, states[looping], out, state, key
        )
        keep = ~looping
        return np.concatenate((nodes[keep], exits)), np.concatenate((states[keep], exit_states))

    def _runs(
        self, nodes: np.ndarray, states: np.ndarray, out: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The frontier with the nodes in looping states replaced by their live run exits
        (`trie_runs`), their run tokens set in `out`, where their subtrees' size is in the
        range the constants above set."""
        looping = self.loops.take(states) & (self.trie.child_count.take(nodes) > 0)
        if not looping.any():
            return nodes, states
        sizes = self.trie.subtree.take(nodes)
        keep = ~looping
        found_nodes, found_states = [nodes], [states]
        for state in np.unique(states[looping]).tolist():
            mine = looping & (states == state)
            size = int(sizes[mine].sum())
            loops = self.table[state] == state
            if not self._takes_runs(size, loops, None):
                keep |= mine
                continue
            exits = self.runs.expand(self.flat, loops, nodes[mine], states[mine], out)
            found_nodes.append(exits[0])
            found_states.append(exits[1])
        if keep.all():
            return nodes, states
        found_nodes[0], found_states[0] = nodes[keep], states[keep]
        return np.concatenate(found_nodes), np.concatenate(found_states)
