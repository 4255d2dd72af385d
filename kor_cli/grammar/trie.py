"""TokenTrie: every walkable token of a vocabulary as a byte trie, stored level by level.

Walking a DFA over the trie instead of over each token shares the work of common
prefixes (Qwen: 151k tokens, 975k bytes, 333k trie nodes). Nodes are numbered level by
level and, within a level, in byte order, so the children of a node are one contiguous
range of the next level. A walk starts with the roots (first bytes). When the subtrees
under the surviving roots, or under the surviving two-byte prefixes, hold a large share
of all nodes (inside free text) it walks every level as whole array slices (about 2 ms
for Qwen on one core), stopping at an all-dead level. Otherwise (structural states: keys,
punctuation, value starts) it follows only the surviving nodes: as whole-array steps
while they are many, depth first in plain Python (one vectorised step per node of many
children) while they are few, a budget of nodes at a time, so a state that allows `{`,
`"` or a digit touches a few hundred nodes, not the tens of thousands under those first
bytes, and a run of spaces costs no array step per space. The per-node state buffer of
a dense walk is pooled and put back all-zero, so a walk allocates nothing large.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

# Above this share of all nodes under live two-byte prefixes, walk whole levels instead.
_DENSE_SHARE = 0.25
_DEAD_CHECK = 4  # a dense walk looks for an all-dead level every this many levels
_DEPTH_FIRST = 64  # at most this many nodes in the frontier: walk them depth first,
_BUDGET = 32  # for at most this many nodes, then on in whole-array steps
_WIDE = 24  # a node with more children steps them as one array in a depth-first walk
_FEW = 8  # ... or, given the states' bytes, bisects for those a state reads (at most this
# many, and fewer than half its children)
# drops the nodes whose subtrees it allows whole from a frontier (nodes, states, out)
Prune = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None


class TokenTrie:
    """A byte trie over the tokens that have bytes (minus `exclude`), built with numpy."""

    def __init__(self, token_bytes: Sequence[bytes | None], exclude: Sequence[int] = ()) -> None:
        skip = set(exclude)
        ids = [i for i, b in enumerate(token_bytes) if b and i not in skip]
        ids.sort(key=token_bytes.__getitem__)
        tokens = [token_bytes[i] or b"" for i in ids]
        self.tokens = tokens  # sorted order → bytes
        lens = np.fromiter(map(len, tokens), dtype=np.int32, count=len(tokens))
        self.token_ids = np.asarray(ids, dtype=np.int32)  # sorted order → token id
        depth = int(lens.max()) if len(ids) else 0
        padded = _padded(tokens, lens, depth)

        # lcp[k]: common prefix length of sorted tokens k-1 and k (0 for k = 0)
        lcp = np.zeros(len(ids), dtype=np.int32)
        if len(ids) > 1:
            differ = padded[1:] != padded[:-1]
            first = np.where(differ.any(axis=1), differ.argmax(axis=1), depth)
            lcp[1:] = np.minimum(first, np.minimum(lens[1:], lens[:-1]))

        parents: list[np.ndarray] = []
        bytes_: list[np.ndarray] = []
        offsets = [0]
        self.token_node = np.zeros(len(ids), dtype=np.int32)  # sorted token → its end node
        node_of = np.zeros(len(ids), dtype=np.int32)  # sorted token → its latest node
        for level in range(depth):
            members = np.flatnonzero(lens > level)
            fresh = lcp[members] <= level
            reps = members[fresh]
            bytes_.append(padded[reps, level])
            parents.append(node_of[reps])
            glob = offsets[-1] + np.cumsum(fresh, dtype=np.int32) - 1
            ends = lens[members] == level + 1
            self.token_node[members[ends]] = glob[ends]
            node_of[members] = glob
            offsets.append(offsets[-1] + len(reps))

        self.num_nodes = offsets[-1]
        self.node_by_id = np.full(len(token_bytes), self.num_nodes, dtype=np.int32)
        self.node_by_id[self.token_ids] = self.token_node  # token id → end node
        # end node → token id (the first in sorted order of tokens with equal bytes; the
        # others are `same_ids`, allowed with `same_as`)
        same = np.zeros(len(ids), dtype=bool)
        same[1:] = self.token_node[1:] == self.token_node[:-1]
        self.node_token = np.full(self.num_nodes, -1, dtype=np.int32)
        self.node_token[self.token_node[~same]] = self.token_ids[~same]
        self.same_ids = self.token_ids[same]
        self.same_as = self.node_token[self.token_node[same]]
        self.depth = depth
        self.offsets = offsets
        self.parent = _cat(parents, np.int32)
        self.byte = _cat(bytes_, np.int32)
        roots = offsets[1] if depth else 0
        # children of node n: child_start[n] .. child_start[n + 1] (parents ascend past roots)
        self.child_start = roots + np.searchsorted(
            self.parent[roots:], np.arange(self.num_nodes + 1)
        ).astype(np.int32)
        self.child_count = np.diff(self.child_start)
        self.subtree = np.ones(self.num_nodes, dtype=np.int32)  # nodes under each, itself too
        for level in range(depth - 1, 0, -1):
            lo, hi = offsets[level], offsets[level + 1]
            np.add.at(self.subtree, self.parent[lo:hi], self.subtree[lo:hi])
        # a dense walk reads all end nodes by token id (one gather over the vocabulary) when
        # the trie holds most tokens, else it scatters its few allowed ids
        self._by_id = 4 * len(ids) > len(token_bytes)
        self._pool: list[np.ndarray] = []  # all-zero state buffers, one per concurrent walk
        self._views: list[tuple[memoryview, ...]] = []  # plain-int reads, made on first use
        self._dups: list[dict[int, list[int]]] = []  # token → those spelled alike, on use

    @property
    def nbytes(self) -> int:
        """Memory held by the trie's arrays."""
        arrays = (
            self.token_ids, self.token_node, self.node_by_id, self.node_token, self.parent,
            self.byte, self.child_start, self.child_count, self.subtree, self.same_ids,
            self.same_as,
        )  # fmt: skip
        return sum(a.nbytes for a in arrays)

    def along(self, data: bytes) -> tuple[list[int], int, int]:
        """Where `data` meets the sorted tokens: the positions of the tokens that are a
        prefix of `data` (itself included), and the range lo..hi of those that extend it."""
        tokens = self.tokens
        prefixes: list[int] = []
        lo, hi = 0, len(tokens)
        for end in range(1, len(data) + 1):
            head = data[:end]
            lo = bisect_left(tokens, head, lo, hi)
            above = _above(head)
            if above is not None:
                hi = bisect_left(tokens, above, lo, hi)
            while lo < hi and tokens[lo] == head:  # the shortest sort first
                prefixes.append(lo)
                lo += 1
            if lo == hi:
                break
        return prefixes, lo, hi

    def walk(
        self,
        transitions: np.ndarray,
        first: np.ndarray,
        out: np.ndarray,
        prune: Prune = None,
        ways: dict[int, list[int]] | None = None,
    ) -> None:
        """Set `out[token]` for every token whose bytes never reach the dead state.

        `first[b]` is the state after a first byte b (from state s: row s of the table);
        `transitions` is the DFA's [num_states, 256] int32 table, flattened, for the other
        bytes. `out` is a bool array over the token ids (the `token_bytes` passed in), False
        at this trie's tokens; its other entries are left as they are. `prune` (optional)
        takes a frontier (nodes, states, out), sets the tokens of the subtrees it allows
        whole and returns the frontier without them (`trie_loops.LoopPrune`). `ways`
        (optional, kept by the caller per DFA): state → the bytes it reads, filled here on
        use; a depth-first step then finds a wide node's live children by bisecting its
        children for those bytes instead of reading them all.
        """
        roots = self.offsets[1] if self.depth else 0
        root_states = first.take(self.byte[:roots])
        nodes = (root_states != 0).nonzero()[0]
        states = root_states.take(nodes)
        dense = _DENSE_SHARE * self.num_nodes
        size = self.subtree.take(nodes).sum()
        pruned = False  # whether `nodes` were offered to `prune`
        if prune is not None and (len(nodes) > _DEPTH_FIRST or size > dense):
            nodes, states = prune(nodes, states, out)
            pruned = True
            size = self.subtree.take(nodes).sum()
        if size > dense:  # maybe free text: look one level on
            self._mark(nodes, out)
            kids, kid_states = self._children(transitions, nodes, states)
            pruned = False
            if prune is not None and len(kids) > _DEPTH_FIRST:
                kids, kid_states = prune(kids, kid_states, out)
                pruned = True
            # (pruning may leave deeper nodes, run exits: only a walk of level 1 goes dense)
            level1 = not len(kids) or kids.max() < self.offsets[min(2, self.depth)]
            if level1 and self.subtree.take(kids).sum() > dense:
                self._walk_dense(transitions, root_states, kids, kid_states, out)
                self._share(out)  # the pruning step allowed run tokens by node
                return
            nodes, states = kids, kid_states
        self._walk_sparse(transitions, nodes, states, out, prune, pruned, ways)
        self._share(out)

    def walk_few(
        self, transitions: np.ndarray, state: int, ways: dict[int, list[int]], budget: int
    ) -> list[int] | None:
        """The tokens `walk` allows from `state`, by one depth-first walk in plain Python,
        for a state whose live part of the trie is small (digits, punctuation, a value's
        first bytes); tokens spelled alike included. None once it has visited and read more
        than `budget` nodes and children (the caller walks with `walk`): the live part is
        large. `ways` as in `walk`: a wide node's live children are found by bisecting for
        the bytes its state reads, where those are fewer than half its children."""
        if not self._views:
            self._views.append(tuple(map(int_view, (self.child_start, self.byte, self.node_token))))
        child_start, byte, node_token = self._views[0]
        table = int_view(transitions)
        found: list[int] = []
        stack: list[tuple[int, int]] = []
        base, lo, hi = state << 8, 0, self.offsets[1] if self.depth else 0
        work = 0
        while True:
            live = None
            if hi - lo > _WIDE:
                live = ways.get(state)
                if live is None:
                    live = ways[state] = transitions[base : base + 256].nonzero()[0].tolist()
                if 2 * len(live) >= hi - lo:
                    live = None
            work += 1 + (hi - lo if live is None else len(live))
            if work > budget:
                return None
            kids: Iterable[int] = range(lo, hi)
            if live is not None:  # the children on the bytes the state reads
                kids = [
                    k for v in live if (k := bisect_left(byte, v, lo, hi)) < hi and byte[k] == v
                ]
            for kid in kids:
                nxt = table[base | byte[kid]]
                if nxt:
                    stack.append((kid, nxt))
                    token = node_token[kid]
                    if token >= 0:
                        found.append(token)
            if not stack:
                break
            node, state = stack.pop()
            base, lo, hi = state << 8, child_start[node], child_start[node + 1]
        if len(self.same_ids):
            if not self._dups:
                dups: dict[int, list[int]] = {}
                for token, first in zip(self.same_ids.tolist(), self.same_as.tolist(), strict=True):
                    dups.setdefault(first, []).append(token)
                self._dups.append(dups)
            dups = self._dups[0]
            found += [more for token in found if token in dups for more in dups[token]]
        return found

    def _share(self, out: np.ndarray) -> None:
        """Tokens spelled like an earlier one share its fate (found by its end node)."""
        if len(self.same_ids):
            out[self.same_ids] = out.take(self.same_as)

    def _mark(self, nodes: np.ndarray, out: np.ndarray) -> None:
        """Allow the tokens that end at `nodes`."""
        ids = self.node_token.take(nodes)
        out[ids[ids >= 0]] = True

    def _children(
        self, transitions: np.ndarray, nodes: np.ndarray, states: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The live children of `nodes` (in `states`) and their states."""
        counts = self.child_count.take(nodes)
        ends = counts.cumsum()
        kids = np.repeat(self.child_start.take(nodes) - ends + counts, counts)
        kids += np.arange(len(kids), dtype=kids.dtype)
        index = np.repeat(states << 8, counts)
        index |= self.byte.take(kids)
        kid_states = transitions.take(index)
        alive = (kid_states != 0).nonzero()[0]
        return kids.take(alive), kid_states.take(alive)

    def _walk_sparse(
        self,
        transitions: np.ndarray,
        nodes: np.ndarray,
        states: np.ndarray,
        out: np.ndarray,
        prune: Prune = None,
        pruned: bool = False,
        ways: dict[int, list[int]] | None = None,
    ) -> None:
        """Follow the live `nodes` (with `states`) down: whole-array steps while they are
        many, depth first while they are few (once a depth-first walk has run out of
        budget, only while their whole subtrees are few). `pruned`: `nodes` have been
        offered to `prune` already; `ways` as in `walk`."""
        reached = []
        spent = False  # a depth-first walk ran out of budget: many nodes live below
        while len(nodes):
            reached.append(nodes)
            if prune is not None and len(nodes) > _DEPTH_FIRST and not pruned:  # wide
                nodes, states = prune(nodes, states, out)
            pruned = False
            if len(nodes) <= _DEPTH_FIRST and (
                not spent or self.subtree.take(nodes).sum() <= _DEPTH_FIRST
            ):
                left = self._depth_first(transitions, nodes.tolist(), states.tolist(), out, ways)
                if not left:
                    break
                spent = True
                nodes, states = np.asarray(left, dtype=np.int32).T
            else:
                nodes, states = self._children(transitions, nodes, states)
        if reached:
            self._mark(np.concatenate(reached), out)

    def _depth_first(
        self,
        transitions: np.ndarray,
        nodes: list[int],
        states: list[int],
        out: np.ndarray,
        ways: dict[int, list[int]] | None = None,
    ) -> list[tuple[int, int]]:
        """Allow the tokens below `nodes` (in `states`) that stay alive, in plain Python
        (a node of more than _WIDE children steps them as one array). Past _BUDGET nodes
        it stops and returns the (node, state) pairs it has yet to expand (their own tokens
        allowed already), for whole-array steps: the live part under a few nodes may be
        large (a lowercase root inside a word) or small (a run of spaces). With `ways`, a
        node whose state reads at most _FEW bytes, fewer than half its children, finds
        its live children by bisection."""
        if not self._views:
            self._views.append(tuple(map(int_view, (self.child_start, self.byte, self.node_token))))
        child_start, byte, node_token = self._views[0]
        table = int_view(transitions)
        found: list[int] = []
        stack = list(zip(nodes, states, strict=True))
        budget = max(_BUDGET, 1)  # one node at least: each call makes progress
        while stack and budget:
            budget -= 1
            node, state = stack.pop()
            lo, hi = child_start[node], child_start[node + 1]
            base = state << 8
            live = None
            if ways is not None and hi - lo > 2 * _FEW:
                live = ways.get(state)
                if live is None:
                    row = transitions[base : base + 256]
                    live = ways[state] = row.nonzero()[0].tolist()
                if len(live) > _FEW or 2 * len(live) >= hi - lo:
                    live = None
            if live is not None:  # each byte the state reads (all lead on), if a child
                for value in live:
                    kid = bisect_left(byte, value, lo, hi)
                    if kid < hi and byte[kid] == value:
                        stack.append((kid, table[base | value]))
                        token = node_token[kid]
                        if token >= 0:
                            found.append(token)
                continue
            if hi - lo > _WIDE:
                kid_states = transitions.take(self.byte[lo:hi] | base)
                alive = (kid_states != 0).nonzero()[0]
                pairs = zip((alive + lo).tolist(), kid_states.take(alive).tolist(), strict=True)
            else:
                pairs = ((kid, table[base | byte[kid]]) for kid in range(lo, hi))
            for kid, nxt in pairs:
                if nxt:
                    stack.append((kid, nxt))
                    token = node_token[kid]
                    if token >= 0:
                        found.append(token)
        out[found] = True
        return stack

    def _walk_dense(
        self,
        transitions: np.ndarray,
        root_states: np.ndarray,
        level1: np.ndarray,
        level1_states: np.ndarray,
        out: np.ndarray,
    ) -> None:
        """Levels 2 and deeper as whole slices, down to an all-dead level (checked every
        _DEAD_CHECK levels), from the roots' states and those of the live level-1 nodes
        `level1`; then one gather of every token's end state."""
        try:
            states = self._pool.pop()
        except IndexError:  # one more node than the trie holds: the dead stand-in
            states = np.zeros(self.num_nodes + 1, dtype=np.int32)
        roots = len(root_states)
        states[:roots] = root_states
        states[level1] = level1_states
        end = self.offsets[min(2, self.depth)]
        for level in range(2, self.depth):
            lo, end = self.offsets[level], self.offsets[level + 1]
            index = states.take(self.parent[lo:end])
            np.left_shift(index, 8, out=index)
            np.bitwise_or(index, self.byte[lo:end], out=index)
            transitions.take(index, out=states[lo:end])
            if level % _DEAD_CHECK == 0 and not states[lo:end].any():
                break  # every deeper node descends from a dead one
        if self._by_id:
            np.logical_or(out, states.take(self.node_by_id), out=out)
        else:
            out[self.token_ids[states.take(self.token_node) != 0]] = True
        states[:end] = 0
        self._pool.append(states)


def int_view(array: np.ndarray) -> memoryview:
    """A memoryview of an int32 array that reads plain ints (native byte order)."""
    native = np.ascontiguousarray(array, dtype=np.int32)
    return memoryview(native).cast("B").cast("i")


def _above(prefix: bytes) -> bytes | None:
    """The least byte string above every string that starts with `prefix` (None: none)."""
    head = prefix.rstrip(b"\xff")
    return head[:-1] + bytes([head[-1] + 1]) if head else None


def _padded(tokens: list[bytes], lens: np.ndarray, depth: int) -> np.ndarray:
    """The tokens as a zero-padded [num_tokens, depth] uint8 array."""
    out = np.zeros((len(tokens), depth), dtype=np.uint8)
    if tokens:
        flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
        rows = np.repeat(np.arange(len(tokens)), lens)
        starts = np.repeat(np.cumsum(lens) - lens, lens)
        out[rows, np.arange(len(flat)) - starts] = flat
    return out


def levels_up(trie: TokenTrie) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """The levels below the roots, deepest first: (lo, hi, starts, heads), the level's nodes
    lo..hi, where each parent's run of children starts (from lo) and those parents."""
    for level in range(trie.depth - 1, 0, -1):
        lo, hi = int(trie.offsets[level]), int(trie.offsets[level + 1])
        if lo == hi:
            continue
        parents = trie.parent[lo:hi]
        starts = np.flatnonzero(np.r_[True, parents[1:] != parents[:-1]])
        yield lo, hi, starts, parents[starts]


def token_ranges(trie: TokenTrie) -> tuple[np.ndarray, np.ndarray]:
    """Per node of `trie`: the first and last (inclusive) sorted-token index in its subtree,
    its own token included (`len(token_ids)` and -1 where there is none)."""
    count = len(trie.token_ids)
    first = np.full(trie.num_nodes, count, dtype=np.int32)
    first[trie.token_node[::-1]] = np.arange(count - 1, -1, -1, dtype=np.int32)
    last = np.full(trie.num_nodes, -1, dtype=np.int32)
    last[trie.token_node] = np.arange(count, dtype=np.int32)
    for lo, hi, starts, heads in levels_up(trie):
        first[heads] = np.minimum(first[heads], np.minimum.reduceat(first[lo:hi], starts))
        last[heads] = np.maximum(last[heads], np.maximum.reduceat(last[lo:hi], starts))
    return first, last


def preorder(trie: TokenTrie) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node of `trie`: its depth (int16) and preorder position, and the nodes in
    preorder (depth first, children in byte order), where each subtree is one range."""
    n = trie.num_nodes
    depth = np.zeros(n, dtype=np.int16)
    pre = np.zeros(n, dtype=np.int32)
    roots = trie.offsets[1] if trie.depth else 0
    sizes = trie.subtree
    pre[:roots] = np.cumsum(sizes[:roots]) - sizes[:roots]
    for level in range(1, trie.depth):
        lo, hi = trie.offsets[level], trie.offsets[level + 1]
        parents = trie.parent[lo:hi]
        before = np.cumsum(sizes[lo:hi]) - sizes[lo:hi]  # earlier nodes of the level
        first = trie.child_start.take(parents) - lo  # the parent's first child
        pre[lo:hi] = pre.take(parents) + 1 + before - before.take(first)
        depth[lo:hi] = level
    nodes = np.empty(n, dtype=np.int32)
    nodes[pre] = np.arange(n, dtype=np.int32)
    return depth, pre, nodes


def expand_spans(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of the index ranges lo[i] .. hi[i]."""
    counts = hi - lo
    total = int(counts.sum())
    shift = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return shift + np.arange(total)


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
