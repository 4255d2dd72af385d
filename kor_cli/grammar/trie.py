"""TokenTrie: every walkable token of a vocabulary as a byte trie, stored level by level.

Walking a DFA over the trie instead of over each token shares the work of common
prefixes (Qwen: 151k tokens, 975k bytes, 333k trie nodes). Nodes are numbered level by
level and, within a level, in byte order, so the subtree of any node is one contiguous
range on every level. A walk first computes levels 0 and 1 (first and second bytes); if
the surviving two-byte prefixes cover few nodes (structural states: keys, punctuation),
it walks only their ranges, otherwise (inside free text) it walks every level as whole
array slices (about 2 ms for Qwen on one core), stopping at an all-dead level.
The per-node state buffer is pooled and put back all-zero, so a walk allocates nothing
large.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

# Above this share of all nodes under live two-byte prefixes, walk whole levels instead.
_DENSE_SHARE = 0.25
_DEAD_CHECK = 4  # a dense walk looks for an all-dead level every this many levels


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
        branch_first = np.zeros(0, dtype=np.int64)
        branch: list[np.ndarray] = []  # per level ≥ 1: each node's level-1 ancestor
        offsets = [0]
        self.token_node = np.zeros(len(ids), dtype=np.int32)  # sorted token → its end node
        node_of = np.zeros(len(ids), dtype=np.int32)  # sorted token → its latest node
        for level in range(depth):
            members = np.flatnonzero(lens > level)
            fresh = lcp[members] <= level
            reps = members[fresh]
            bytes_.append(padded[reps, level])
            parents.append(node_of[reps])
            if level == 1:
                branch_first = reps
            if level:
                parent_local = node_of[reps] - offsets[level - 1]
                branch.append(branch[-1][parent_local] if branch else np.arange(len(reps)))
            glob = offsets[-1] + np.cumsum(fresh, dtype=np.int32) - 1
            ends = lens[members] == level + 1
            self.token_node[members[ends]] = glob[ends]
            node_of[members] = glob
            offsets.append(offsets[-1] + len(reps))

        self.num_nodes = offsets[-1]
        self.node_by_id = np.full(len(token_bytes), self.num_nodes, dtype=np.int32)
        self.node_by_id[self.token_ids] = self.token_node  # token id → end node
        self.depth = depth
        self.offsets = offsets
        self.parent = _cat(parents, np.int32)
        self.byte = _cat(bytes_, np.int32)
        firsts = padded[:, 0] if len(ids) else np.zeros(0, dtype=np.uint8)
        self.token_ranges = np.searchsorted(firsts, np.arange(257))  # sorted tokens by byte
        # one-byte tokens sort first among those of their byte: they end here
        self.single_end = self.token_ranges[:-1] + np.bincount(firsts[lens == 1], minlength=256)
        # the tokens under level-1 node n: branch_tokens[n] .. branch_tokens[n + 1] (give or
        # take the one-byte token of the next first byte: it ends at a root, also walked)
        self.branch_tokens = np.append(branch_first, len(ids))
        roots = offsets[1] if depth else 0
        seconds = offsets[2] if depth > 1 else roots
        # children of root r on level 1: child_ranges[r] .. child_ranges[r + 1]
        self.child_ranges = roots + np.searchsorted(
            self.parent[roots:seconds], np.arange(roots + 1)
        )
        # nodes on levels ≥ 1, keyed level * n1 + level-1 ancestor (ascending in node order)
        width = max(seconds - roots, 1)
        levels = np.repeat(np.arange(1, depth), np.diff(offsets[1:])) if depth else []
        anc = _cat(branch, np.int64)
        self.branch_key = np.asarray(levels, dtype=np.int64) * width + anc
        self.branch_width = width
        self.branch_nodes = np.bincount(anc, minlength=width)  # subtree sizes of level-1 nodes
        self.branch_depth = np.zeros(width, dtype=np.int64)  # levels down to each one's deepest
        np.maximum.at(self.branch_depth, anc, np.asarray(levels, dtype=np.int64) + 1)
        # a dense walk reads all end nodes by token id (one gather over the vocabulary) when
        # the trie holds most tokens, else it scatters its few allowed ids
        self._by_id = 4 * len(ids) > len(token_bytes)
        self._pool: list[np.ndarray] = []  # all-zero state buffers, one per concurrent walk

    @property
    def nbytes(self) -> int:
        """Memory held by the trie's arrays."""
        arrays = (
            self.token_ids, self.token_node, self.node_by_id, self.parent, self.byte,
            self.token_ranges, self.single_end, self.child_ranges, self.branch_key,
            self.branch_nodes, self.branch_depth, self.branch_tokens,
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

    def walk(self, transitions: np.ndarray, first: np.ndarray, out: np.ndarray) -> None:
        """Set `out[token]` for every token whose bytes never reach the dead state.

        `first[b]` is the state after a first byte b (from state s: row s of the table);
        `transitions` is the DFA's [num_states, 256] int32 table, flattened, for the other
        bytes. `out` is a bool array over the token ids (the `token_bytes` passed in), False
        at this trie's tokens; its other entries are left as they are.
        """
        try:
            states = self._pool.pop()
        except IndexError:  # one more node than the trie holds: the dead stand-in
            states = np.zeros(self.num_nodes + 1, dtype=np.int32)
        roots = self.offsets[1] if self.depth else 0
        states[:roots] = first.take(self.byte[:roots])
        live_roots = np.flatnonzero(states[:roots])
        level1 = _expand(self.child_ranges[live_roots], self.child_ranges[live_roots + 1])
        self._step(transitions, states, level1)
        branches = level1[states[level1] != 0] - roots
        if self.branch_nodes[branches].sum() > _DENSE_SHARE * self.num_nodes:
            end = self._walk_dense(transitions, states)
            if self._by_id:
                np.logical_or(out, states.take(self.node_by_id), out=out)
            else:
                out[self.token_ids[states.take(self.token_node) != 0]] = True
            states[:end] = 0
        else:
            heads = self.byte[live_roots]  # their one-byte tokens are allowed
            out[self.token_ids[_expand(self.token_ranges[heads], self.single_end[heads])]] = True
            if len(branches):
                firsts, lasts = _runs(branches)  # one range per run on each level
                nodes = self._walk_branches(transitions, states, branches, firsts, lasts)
                chosen = _expand(self.branch_tokens[firsts], self.branch_tokens[lasts + 1])
                alive = states.take(self.token_node.take(chosen)) != 0
                out[self.token_ids.take(chosen[alive])] = True
                if 16 * len(nodes) > self.num_nodes:
                    states[self.offsets[2] :] = 0  # one fill beats a large scatter
                else:
                    states[nodes] = 0
            states[:roots] = 0
            states[level1] = 0
        self._pool.append(states)

    def _step(self, transitions: np.ndarray, states: np.ndarray, nodes: np.ndarray) -> None:
        """States of `nodes` from their parents' states (already computed)."""
        index = states.take(self.parent.take(nodes))
        np.left_shift(index, 8, out=index)
        np.bitwise_or(index, self.byte.take(nodes), out=index)
        states[nodes] = transitions.take(index)

    def _walk_dense(self, transitions: np.ndarray, states: np.ndarray) -> int:
        """Levels 2 and deeper as whole slices, down to an all-dead level (checked every
        _DEAD_CHECK levels); returns the end of the nodes written."""
        end = self.offsets[min(2, self.depth)]
        for level in range(2, self.depth):
            lo, end = self.offsets[level], self.offsets[level + 1]
            index = states.take(self.parent[lo:end])
            np.left_shift(index, 8, out=index)
            np.bitwise_or(index, self.byte[lo:end], out=index)
            transitions.take(index, out=states[lo:end])
            if level % _DEAD_CHECK == 0 and not states[lo:end].any():
                break  # every deeper node descends from a dead one
        return end

    def _walk_branches(
        self,
        transitions: np.ndarray,
        states: np.ndarray,
        branches: np.ndarray,
        firsts: np.ndarray,
        lasts: np.ndarray,
    ) -> np.ndarray:
        """Levels 2 and deeper, only under the live level-1 nodes `branches` (in runs
        firsts[i] .. lasts[i]); returns the nodes it may have written."""
        levels = np.arange(2, int(self.branch_depth[branches].max(initial=0)), dtype=np.int64)
        if not len(levels):
            return np.zeros(0, dtype=np.int64)
        base = levels[:, None] * self.branch_width
        lo = np.searchsorted(self.branch_key, (base + firsts[None, :]).ravel())
        hi = np.searchsorted(self.branch_key, (base + lasts[None, :] + 1).ravel())
        nodes = self.offsets[1] + _expand(lo, hi)  # grouped by level, like the numbering
        bounds = np.concatenate(([0], np.cumsum((hi - lo).reshape(len(levels), -1).sum(1))))
        for level in range(len(levels)):
            part = nodes[bounds[level] : bounds[level + 1]]
            self._step(transitions, states, part)
            if not states[part].any():
                break  # every deeper node descends from a dead one
        return nodes


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and the last of each run of consecutive integers in sorted `values`."""
    if not len(values):
        return values, values
    breaks = np.flatnonzero(np.diff(values) != 1)
    return values[np.concatenate(([0], breaks + 1))], values[np.concatenate((breaks, [-1]))]


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


def _expand(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The concatenation of the index ranges lo[i] .. hi[i]."""
    counts = hi - lo
    total = int(counts.sum())
    shift = np.repeat(lo - (np.cumsum(counts) - counts), counts)
    return shift + np.arange(total)


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
