"""Free JSON string bodies: a frame's split from tables made once per tokenizer.

A *free string* state s of a rule reads what a canonical JSON string without constraints
holds (`json_values`): body characters (`string_body`: any but `"`, `\\` and controls, as
valid UTF-8) and the escapes of `"`, `\\` and the controls, until a closing quote leads
out to some state q. `STRING` is the automaton of that language from s (-1: dead; the
quote from its body state: the exit). `free_states` checks that a rule's
states read it: the states it reaches from s are an image of `STRING`'s (row for row,
every byte), none crossing (calls or accepts). Then a token's walk from s up to its
closing quote is the same in every such rule, so it is walked once per tokenizer
(`FreeTokens`, from the string-body tables): it stays in the string to its end (a body
token, an escape, a partial UTF-8 character: read by bytes), dies there, or closes at
some byte with a *tail* after it. A frame then walks only the tails: the trie of `"` +
tail over the few tokens that close (Qwen: ~1,200 of 151,643), from s, whose first byte
leads to q (~30 us, where a walk of every non-body token's (k, rest) and the rule's
chains and tables for it took ~250-400 us on a rule's first string). The same holds for
the tokens that start with the opening quote (`quoted`: their bytes after it).

The tables are the tokenizer's, like the sorted tokens and the body tables they come
from: a compile reuses them as it reuses those, and nothing in them depends on a grammar.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

import numpy as np

from kor_cli.grammar.bitmask import set_bits
from kor_cli.grammar.string_body import NOT_BODY, BodyTokens
from kor_cli.grammar.trie import TokenTrie, token_ranges

_QUOTE = ord('"')
_PROBE = ord("a")  # a body character: a free string's body reads it back to itself
_COLON = ord(":")
_INSIDE, _DEAD = -1, -2  # a token's fate from the body state, else its closing offset
_MANY = 512  # more token ids are set in words by a bincount
_WIDE = 8  # a node with more children reads their next states as one array
_FEW_NODES = 8  # a walk's nodes at most whose tokens `FreeTokens._few` sets node by node
Split = tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]  # `FreeTokens.split`


def _automaton() -> list[list[int]]:
    """`STRING`: next states (-1 dead) per state and byte; state 0 the body, whose quote
    exits (left -1 here: `free_states` checks it against the rule's exit). Its escapes
    are the canonical ones (`json_values`: `json.dumps` of `"`, `\\` and the controls), as a
    trie of their bytes; each state is numbered after one that leads to it."""
    escapes = [json.dumps(chr(c))[1:-1].encode() for c in (*range(0x20), _QUOTE, ord("\\"))]
    prefixes = sorted({e[:n] for e in escapes for n in range(1, len(e))}, key=len)
    number = {prefix: at + 1 for at, prefix in enumerate(prefixes)}  # body: 0
    cont1 = len(prefixes) + 1
    cont2, cont3 = cont1 + 1, cont1 + 2
    narrow = {0xE0: range(0xA0, 0xC0), 0xED: range(0x80, 0xA0)}  # then one more
    narrow |= {0xF0: range(0x90, 0xC0), 0xF4: range(0x80, 0x90)}  # then two more
    rows = [[-1] * 256 for _ in range(cont3 + 1 + len(narrow))]
    for byte in range(0x20, 0x80):
        rows[0][byte] = 0
    rows[0][_QUOTE] = -1
    for escape in escapes:  # a trie of the escapes' bytes, back to the body at their ends
        for n in range(1, len(escape) + 1):
            source = number.get(escape[: n - 1], 0)
            rows[source][escape[n - 1]] = number.get(escape[:n], 0)
    # UTF-8 (RFC 3629): leads, then continuations (the first narrowed after some leads)
    for byte in range(0xC2, 0xF5):
        rows[0][byte] = cont1 if byte < 0xE0 else cont2 if byte < 0xF0 else cont3
    for state, after in ((cont1, 0), (cont2, cont1), (cont3, cont2)):
        for byte in range(0x80, 0xC0):
            rows[state][byte] = after
    for state, (lead, span) in enumerate(narrow.items(), cont3 + 1):
        rows[0][lead] = state
        for byte in span:
            rows[state][byte] = cont1 if lead < 0xF0 else cont2
    return rows


STRING = _automaton()
_STRING = np.asarray(STRING, dtype=np.int64)
_SIZE = len(STRING)
# one byte per (state, next state) pair of STRING: how `free_states` finds the image
_FIRST = [
    [(to, byte) for to, byte in {t: b for b, t in reversed(list(enumerate(row)))}.items()]
    for row in STRING
]


def free_states(flat: np.ndarray, crossing: np.ndarray, state: int) -> bool:
    """True when `state` of a rule (`flat`: its pruned table, raveled; `crossing`: bool per
    state, calls or accepting) is a free string's body: the states it reaches by `STRING`'s
    bytes are an image of `STRING`'s, none crossing, and its quote is the exit."""
    image = [-1] * _SIZE
    image[0] = state
    rows = flat.reshape(-1, 256)
    for at in range(_SIZE):  # STRING's states are numbered in the order its edges reach them
        source = image[at]
        if source <= 0:
            return False
        row = rows[source]
        for to, byte in _FIRST[at]:
            if to >= 0 and image[to] < 0:
                image[to] = int(row[byte])
    if crossing.take(image).any():
        return False
    expect = np.asarray([*image, 0], dtype=rows.dtype).take(_STRING)  # -1 (dead) → 0
    expect[0, _QUOTE] = rows[state, _QUOTE]
    return bool((rows.take(image, axis=0) == expect).all())


# `STRING`'s rows as bytes, each next state s as s + 1 (dead: 0): translated by an image
# (`free_body_states`), the rows that image's table holds
_ROWS = bytes((_STRING + 1).astype(np.uint8))
# the edge that first reaches each state of `STRING` past its body, as `free_states` meets
# them: (from, byte)
_TREE = [
    next((at, byte) for at in range(to) for t, byte in _FIRST[at] if t == to)
    for to in range(1, _SIZE)
]


def free_body_states(flat: np.ndarray, crossing: np.ndarray) -> frozenset[int]:
    """The states of a rule that are free strings' bodies (`free_states` of each), found
    at once with few numpy calls (~3 us each on a cold walk): those that read `a` back to
    themselves (string bodies), their images of `STRING`'s states (along `_TREE`), none
    dead or crossing, whose rows are `STRING`'s translated by the image, compared as bytes
    (a rule of more than 256 states: `free_states`)."""
    size = len(flat) >> 8
    if size > 256:
        return frozenset(s for s in range(1, size) if free_states(flat, crossing, s))
    data = flat.astype(np.uint8).tobytes()
    crosses = crossing.tobytes()
    found: list[int] = []
    for state in range(1, size):
        if data[state << 8 | _PROBE] != state:
            continue
        image = [state]
        for at, byte in _TREE:
            image.append(data[image[at] << 8 | byte])
        if 0 in image or any(crosses[s] for s in image):
            continue
        got = b"".join([data[s << 8 : (s + 1) << 8] for s in image])
        want = _ROWS.translate(bytes([0, *image]).ljust(256, b"\0"))  # s + 1 → image[s]
        if got[:_QUOTE] == want[:_QUOTE] and got[_QUOTE + 1 :] == want[_QUOTE + 1 :]:
            found.append(state)  # (the quote exits: to any state)
    return frozenset(found)


class FreeTokens:
    """Per tokenizer (from one of its string-body tables, whose tokens may lack a first
    byte: `quoted`): the tokens that stay inside a free string from its body state, as
    packed words (with `alone`: the tokens that are that first byte alone, whose empty
    rest the table leaves out), and the trie of `"` + tail of those that close it
    (`lengths`: each token's length by id, whole: where its closing quote stands)."""

    def __init__(
        self, body: BodyTokens, lengths: np.ndarray, alone: np.ndarray | None = None
    ) -> None:
        width = len(body.counts)
        inside = body.counts < NOT_BODY  # nothing but body characters
        if alone is not None:
            inside[alone] = True
        rest = body.rest
        keyed: list[bytes | None] = [None] * width
        for token, key in zip(rest.token_ids.tolist(), rest.tokens, strict=True):
            fate = _fate(key[1:])  # past its first k body characters (STRING's body again)
            if fate == _INSIDE:
                inside[token] = True
            elif fate >= 0:
                keyed[token] = key[1 + fate :]  # the closing quote and its tail
        self.inside = np.packbits(inside, bitorder="little").view("<u4")
        self.tails = TokenTrie(keyed)
        first, last = token_ranges(self.tails)
        self._first, self._last = first, last + 1
        ids = self.tails.token_ids
        keys = np.fromiter(map(len, self.tails.tokens), np.int64, count=len(ids))
        self._close = lengths[ids] - keys  # sorted tail → its closing quote's offset
        self._kids = self.tails.child_start.tolist()  # node → its children's first node
        # node → tokens ending there, first and past-last sorted tail under it (`_few`)
        nodes = self.tails.num_nodes + 1
        self._ending = np.bincount(self.tails.token_node, minlength=nodes).tolist()
        self._first_at, self._last_at = first.tolist(), (last + 1).tolist()
        self._words: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # `_or`'s, by node
        self._bytes = self.tails.byte.tolist()
        # the splits where the closing quote leads to a final state (a string value that
        # ends its rule), or to a `:` into a call state that reads no byte (a key whose
        # value is a call: a map's `additionalProperties`): the same in every rule, made
        # once here, as the splits of small tables of those shapes
        self._closed = self._made(b"", ending=True)
        self._keyed = self._made(b":", ending=False)
        self.closed_frame: Any = None  # `frame_chain.closed_frame`'s (a FrameMask)

    def _made(self, after: bytes, ending: bool) -> Split:
        """The split from body state 1 of a table where the quote leads along `after` to
        its last state: final (`ending`), else crossing and reading no byte (read-only)."""
        size = len(after) + 3
        flat = np.zeros(size << 8, dtype=np.int64)
        for at, byte in enumerate(b'"' + after, 1):
            flat[at << 8 | byte] = at + 1
        last = np.arange(size) == size - 1
        none = np.zeros(size, dtype=bool)
        made = self._split(flat, none if ending else last, 1, last if ending else none)
        for array in (*made[:2], *(a for row in made[2] for a in row)):
            array.flags.writeable = False
        return made

    def split(
        self,
        flat: np.ndarray,
        crossing: np.ndarray,
        state: int,
        final: np.ndarray,
        reads: Sequence[Sequence[int]] | None = None,
    ) -> Split:
        """From free string state `state` (`free_states`) of a rule (`final`: bool per
        state, accepting and neither reading nor calling): the packed words of the tokens
        read by bytes, and of those that reach a crossing state after a byte and die by
        bytes later, less those that reach a final state first (a string value's `",`):
        they escape there and only there, returned as rows (token ids, offsets) as
        `frame_walk`'s escapes. One walk of the tails trie, depth first over its live nodes
        (a node with many children reads them as one array); where the quote leads to a
        final state or a key's `:` into a call, the split made at first (`_made`).
        `reads` (optional): the bytes each state reads (ascending), where a node's
        children are looked up by them when fewer."""
        quote = int(flat[state << 8 | _QUOTE])
        if final[quote]:
            made = self._closed
        elif _keyed(flat, crossing, final, quote, reads):
            made = self._keyed
        else:
            return self._split(flat, crossing, state, final, reads)
        return made[0].copy(), made[1].copy(), list(made[2])

    def _split(
        self,
        flat: np.ndarray,
        crossing: np.ndarray,
        state: int,
        final: np.ndarray,
        reads: Sequence[Sequence[int]] | None = None,
    ) -> Split:
        """`split` by one walk of the tails trie."""
        trie = self.tails
        stays = self.inside.copy()
        candidates = np.zeros(len(stays), dtype="<u4")
        if not trie.depth:
            return stays, candidates, []
        kids, byte, bytes_ = self._kids, self._bytes, trie.byte
        view = memoryview(flat)
        kept: list[int] = []  # nodes alive, or at a final state first (escaped)
        died: list[int] = []  # nodes whose subtree dies by bytes after a crossing state
        escaped: dict[int, list[int]] = {}  # depth → nodes at a final state first
        todo = [(0, trie.offsets[1], state, False, 1)]  # children lo..hi of a live node
        while todo:
            lo, hi, before, met, depth = todo.pop()
            if not met and reads is not None and len(reads[before]) < hi - lo:
                pairs = []  # the state's few bytes among many children (none dies here)
                for at in reads[before]:
                    node = bisect_left(byte, at, lo, hi)
                    if node < hi and byte[node] == at:
                        pairs.append((node, view[before << 8 | at]))
            elif hi - lo > _WIDE:  # many children: their next states by one array take
                heres = flat.take((before << 8) | bytes_[lo:hi])
                live = (heres != 0).nonzero()[0]  # of bools: numpy 2.3 is slower on ints
                if met and len(live) < hi - lo:
                    died.extend((np.flatnonzero(heres == 0) + lo).tolist())
                pairs = zip((live + lo).tolist(), heres[live].tolist(), strict=True)
            else:
                pairs = ((node, view[before << 8 | byte[node]]) for node in range(lo, hi))
            for node, here in pairs:
                if not here:
                    if met:
                        died.append(node)
                    continue
                kept.append(node)
                if not met and final[here]:  # a final state first: its subtree escapes
                    escaped.setdefault(depth, []).append(node)
                    continue
                if kids[node] < kids[node + 1]:
                    crossed = met or bool(crossing[here])
                    todo.append((kids[node], kids[node + 1], here, crossed, depth + 1))
        if len(kept) + len(died) + sum(map(len, escaped.values())) <= _FEW_NODES:
            return self._few(stays, candidates, kept, died, escaped)
        ids = trie.token_ids
        ends = trie.token_node
        alive = np.zeros(trie.num_nodes + 1, dtype=bool)
        alive[kept] = True
        _set(stays, ids[alive.take(ends)])
        if died:  # disjoint subtrees: the sorted tokens in first..last of each
            _set(candidates, ids[self._under(np.asarray(died, dtype=np.int64))])
        rows = []
        if escaped:
            at_end = np.zeros(trie.num_nodes + 1, dtype=bool)  # a token ending there stays
            at_end[[node for nodes in escaped.values() for node in nodes]] = True
            at_end = at_end.take(ends)
            for depth in sorted(escaped):
                nodes = np.asarray(escaped[depth], dtype=np.int64)
                under = np.flatnonzero(self._under(nodes) & ~at_end)
                rows.append((ids[under].astype(np.int64), self._close[under] + depth))
        return stays, candidates, rows

    def _few(
        self,
        stays: np.ndarray,
        candidates: np.ndarray,
        kept: list[int],
        died: list[int],
        escaped: dict[int, list[int]],
    ) -> Split:
        """`_split`'s words and rows from a walk of few nodes: each node's tokens (those
        ending there, those under it) as sorted-tail ranges, set by the words they change
        (made once per node and kind)."""
        ending, first, last = self._ending, self._first_at, self._last_at
        for node in kept:
            if ending[node]:
                self._or(stays, node, first[node], first[node] + ending[node])
        for node in died:
            if first[node] < last[node]:
                self._or(candidates, ~node, first[node], last[node])
        rows = []
        ids = self.tails.token_ids
        for depth in sorted(escaped):  # a token ending at the node stays (read whole)
            spans = sorted((first[node] + ending[node], last[node]) for node in escaped[depth])
            under = np.concatenate([np.arange(lo, hi) for lo, hi in spans])
            rows.append((ids[under].astype(np.int64), self._close[under] + depth))
        return stays, candidates, rows

    def _or(self, words: np.ndarray, key: int, lo: int, hi: int) -> None:
        """OR into packed `words` the bits of the sorted tails lo..hi (their distinct
        words and bits kept by `key`)."""
        found = self._words.get(key)
        if found is None:
            ids = self.tails.token_ids[lo:hi].astype(np.int64)
            at = np.unique(ids >> 5)
            bits = np.zeros(len(words), dtype="<u4")
            np.bitwise_or.at(bits, ids >> 5, np.left_shift(1, ids & 31).astype("<u4"))
            found = self._words[key] = at, bits[at]
        at, bits = found
        words[at] |= bits

    def _under(self, nodes: np.ndarray) -> np.ndarray:
        """Bool per sorted tail: under one of `nodes` (disjoint subtrees)."""
        size = len(self.tails.token_ids) + 1
        cover = np.bincount(self._first.take(nodes), minlength=size)
        cover -= np.bincount(self._last.take(nodes), minlength=size)
        return np.cumsum(cover[:-1]) > 0


def _keyed(
    flat: np.ndarray,
    crossing: np.ndarray,
    final: np.ndarray,
    quote: int,
    reads: Sequence[Sequence[int]] | None = None,
) -> bool:
    """True when state `quote` (after a closing quote) reads only `:`, into a crossing
    state that is not final and reads no byte; neither crosses there (`FreeTokens._keyed`;
    `reads`: each state's bytes, told by them)."""
    if crossing[quote]:
        return False
    if reads is not None:
        if reads[quote] != [_COLON]:
            return False
        into = int(flat[quote << 8 | _COLON])
        return not reads[into] and bool(crossing[into]) and not final[into]
    row = flat[quote << 8 : (quote + 1) << 8]
    into = int(row[_COLON])
    if not into or np.count_nonzero(row) != 1 or final[into] or not crossing[into]:
        return False
    return not flat[into << 8 : (into + 1) << 8].any()


def _fate(data: bytes) -> int:
    """`data` read by `STRING` from its body state: _INSIDE (to its end), _DEAD, or the
    offset of its closing quote."""
    at = 0
    for offset, byte in enumerate(data):
        if not at and byte == _QUOTE:
            return offset
        at = STRING[at][byte]
        if at < 0:
            return _DEAD
    return _INSIDE


def _set(words: np.ndarray, ids: np.ndarray) -> None:
    """Set the bits of distinct token `ids` in packed words (many: by one bincount, as the
    bits of a word are distinct their sum is their OR, exact in float64)."""
    ids = ids.astype(np.int64)
    if len(ids) > _MANY:
        bits = np.left_shift(1, ids & 31).astype(np.float64)
        words |= np.bincount(ids >> 5, bits, len(words)).astype("<u4")
    else:
        set_bits(words, ids)
