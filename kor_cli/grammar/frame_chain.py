"""The frame of a literal's byte, without the general split (`frame_masks`' fast path).

Most positions of a JSON grammar's fixed text (a key, `":"`, `","`, a const value) read one
byte, neither call nor accept, and lead to another such state: the run of forced states
(`frame_walk._chain`) spells the rest of the literal. From there a token either is a prefix
of that text (read by bytes: it stays), leaves it inside (dead: no crossing state on the
way), or holds all of it and goes on past the run's end, into whatever follows (the keys
after `,"`, a value after `:`). When every token's bytes stay in states that neither call,
accept nor read a string body, the frame is just the tokens read by bytes: no candidates,
no escapes, no `ends`. That is what the general split finds too (a pruned walk, its words,
no escape rows, a frame without rows); here they are read off the byte trie along the table
(a child per byte: a bisection of a node's few children, or the node's children looked up
in the table, not bisections of the sorted tokens under the prefix) and the frame is made
at once. A walk that meets such a state, or visits `_NODES` nodes, leaves the frame to the
general split.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

import numpy as np

from kor_cli.grammar.bitmask import bits_set
from kor_cli.grammar.frame_escapes import FrameMask, frame_mask
from kor_cli.grammar.frame_indexes import BODY_READS, _free
from kor_cli.grammar.frame_rows import less_rows
from kor_cli.grammar.frame_walk import RuleWalker
from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.token_arrays import WIDTH, sorted_tokens
from kor_cli.grammar.token_tables import token_trie
from kor_cli.grammar.trie import TokenTrie, int_view
from kor_cli.grammar.vocab import TokenizerInfo

_Rows = tuple[np.ndarray, np.ndarray, np.ndarray, int]  # `_TrieReads.escaping`


class _TrieReads:
    """A token trie in the plain forms a walk along one text reads: each node's children
    (a range of nodes, ascending by byte), their bytes, the token each node spells (-1:
    none) and the others of equal bytes, the root of each first byte (-1: none)."""

    def __init__(self, trie: TokenTrie) -> None:
        self.trie = trie
        self.child_start = int_view(trie.child_start)
        self.byte = int_view(trie.byte)
        self.node_token = int_view(trie.node_token)
        self.roots = [-1] * 256
        for node in range(trie.offsets[1] if trie.depth else 0):
            self.roots[self.byte[node]] = node
        self.same: dict[int, list[int]] = {}
        for first, other in zip(trie.same_as.tolist(), trie.same_ids.tolist(), strict=True):
            self.same.setdefault(first, []).append(other)
        # by byte b: the tokens whose first byte is b and that go on (sorted order), as a
        # frame's escape rows after b (ids, offsets 1, the bytes there; read-only) and
        # those bytes' bits: a table of at most 256 entries, the tokenizer's
        self.going_on: dict[int, _Rows] = {}

    def escaping(self, byte: int, info: TokenizerInfo) -> _Rows:
        """`going_on` of `byte` (made on first use; the same in every grammar: `}` runs
        past the end of an object in rpc's rules 0 and 1 and its value start)."""
        found = self.going_on.get(byte)
        if found is None:
            sorted_ = sorted_tokens(info)
            tokens, ids = sorted_.tokens, sorted_.ids
            text = _ONE[byte]
            lo = bisect_right(tokens, text)
            hi = bisect_left(tokens, _after(text), lo)
            escaping = ids[lo:hi].copy()
            offsets = np.ones(hi - lo, np.int64)
            firsts = sorted_.matrix()[1][lo:hi, 1].copy()
            present = np.zeros(256, dtype=bool)
            present[firsts] = True
            bits = int.from_bytes(np.packbits(present, bitorder="little").tobytes(), "little")
            for array in (escaping, offsets, firsts):
                array.flags.writeable = False
            found = self.going_on[byte] = escaping, offsets, firsts, bits
            _share(escaping, offsets)
        return found


def going_rows(
    info: TokenizerInfo,
    walked: list[tuple[np.ndarray, np.ndarray]],
    stays: np.ndarray,
    candidates: np.ndarray | None,
) -> _Rows | None:
    """The tokenizer's rows of one byte (`_TrieReads.escaping`) where a frame build's walked
    escape rows are exactly those (the tokens that start with it and go on, escaping after
    it: `}` at an object's start in a value rule) and none of them stays or is a candidate
    (`less_rows` would keep them all): the frame takes them as they are, with their bytes
    and `shared_groups`' memo, instead of filtering them and reading their bytes again
    (~110 us cold on mistral-sp's 81 rows). None otherwise."""
    if len(walked) != 1:
        return None
    tokens, offsets = walked[0]
    if not len(tokens) or offsets[0] != 1:
        return None
    data = info.token_bytes[int(tokens[0])]
    if not data:
        return None
    rows = _reads(info).escaping(data[0], info)
    if len(rows[0]) != len(tokens) or not np.array_equal(rows[0], tokens):
        return None
    if not np.array_equal(rows[1], offsets):
        return None
    for words in (stays, candidates):
        if words is not None and _any_set(words, tokens):
            return None
    return rows


def _any_set(words: np.ndarray, tokens: np.ndarray) -> bool:
    """Whether the bit of some token of `tokens` is set in packed `words`."""
    if len(tokens) < _FEW_TESTS:
        view = memoryview(words)
        return any(view[t >> 5] >> (t & 31) & 1 for t in tokens.tolist())
    return bool(bits_set(words, tokens).any())


_FEW_TESTS = 48  # `_any_set` tests fewer tokens in Python


def shared_groups(frame: FrameMask) -> dict[int, Any] | None:
    """A memo for what readers find in `frame`'s escape rows (pushdown's groups by second
    byte, by byte) where those rows are the tokenizer's own arrays (a `_TrieReads.escaping`
    row set or `closed_frame`'s, told by identity): the same for every frame that holds
    them, in any grammar. None for other rows."""
    found = _GROUPS.get(id(frame.tokens))
    if found is None or found[0] is not frame.tokens or found[1] is not frame.offsets:
        return None
    return found[2]


def _share(tokens: np.ndarray, offsets: np.ndarray) -> None:
    if len(_GROUPS) >= _MAX_GROUPS:
        del _GROUPS[next(iter(_GROUPS))]
    _GROUPS[id(tokens)] = tokens, offsets, {}


# by id of a token array of read-only escape rows the tokenizer's tables hold (held by the
# value: its id is not reused while it is here): the rows' offsets and `shared_groups`' memo
_GROUPS: dict[int, tuple[np.ndarray, np.ndarray, dict[int, Any]]] = {}
_MAX_GROUPS = 1024
_READS: dict[int, _TrieReads] = {}  # by id of the trie (held by the value)
_MAX_TRIES = 4
_LAST: list[tuple[TokenizerInfo, _TrieReads]] = []  # the latest tokenizer asked for
_ONE = [bytes([byte]) for byte in range(256)]
_U4 = np.dtype("<u4")
_NODES = 16  # trie nodes with children a walk visits before it leaves the frame to the split
_FIRSTS = 12  # bytes a state reads at most to be walked here (a number or a body reads more)


def _reads(info: TokenizerInfo) -> _TrieReads:
    if _LAST and _LAST[0][0] is info:  # a compile's frames ask for one's, dozens of times
        return _LAST[0][1]
    trie = token_trie(info)
    found = _READS.get(id(trie))
    if found is None:
        if len(_READS) >= _MAX_TRIES:
            _READS.pop(next(iter(_READS)))
        found = _READS[id(trie)] = _TrieReads(trie)
    _LAST[:] = [(info, found)]
    return found


def literal_frame(
    walker: RuleWalker,
    table: RuleTable,
    state: int,
    info: TokenizerInfo,
    words: int,
    calls: bool = True,
) -> FrameMask | None:
    """The frame of `state` when it reads a few bytes (not a string body's), neither calls
    nor accepts, and no token's bytes run on into a state that may call, end the frame or
    read a string body: its stays are the tokens the table reads by bytes alone, found by
    walking the byte trie along the table (past a literal's forced chain too: `,"` into the
    keys that follow). Tokens that go on past a final state escape there (`calls`: the
    rule set has calls; without, the frame ends the grammar and they are dead). None
    otherwise, or after `_NODES` trie nodes (the general split builds it)."""
    reads, flat, follow = walker.reads, table.flat, walker.follow
    firsts = reads[state]
    if not firsts or len(firsts) > _FIRSTS or follow[state] or table.accepting[state]:
        return None
    if state in table.calls:
        return None
    final, base = table.final, state << 8
    for byte in firsts:  # into a call or a string body at once (`,` before a value): tokens
        at = flat[base | byte]  # go on there (`,"`, `,[`...), where the walk below gives up,
        if not final[at] and (follow[at] or len(reads[at]) >= BODY_READS):
            return None  # having touched the trie (a few us cold): no walk
    trie = _LAST[0][1] if _LAST and _LAST[0][0] is info else _reads(info)
    child_start, bytes_, node_token, same = trie.child_start, trie.byte, trie.node_token, trie.same
    roots = trie.roots
    todo = []
    for byte in firsts:
        if roots[byte] >= 0:
            todo.append((roots[byte], flat[base | byte], _ONE[byte]))
    found: list[int] = []
    ending: list[bytes] = []  # texts at final states that tokens go on past (they escape)
    budget = _NODES
    while todo:  # (a trie node, the state its bytes lead to from `state`, those bytes)
        node, at, text = todo.pop()
        while True:  # down a literal's chain (one byte a state) without the stack
            token = node_token[node]
            if token >= 0:
                found.append(token)
                if token in same:
                    found += same[token]
            lo, hi = child_start[node], child_start[node + 1]
            if lo == hi:  # no token goes on
                break
            if final[at]:  # the frame ends here and only here: the caller reads the rest
                ending.append(text)
                break
            nexts = reads[at]
            budget -= 1
            if follow[at] or len(nexts) >= BODY_READS or budget < 0:
                return None  # tokens go on where the frame may call or end, or into a body
            base = at << 8
            if len(nexts) == 1:  # the one child it reads, next (as popped next from `todo`)
                byte = nexts[0]
                child = lo if hi - lo == 1 else bisect_left(bytes_, byte, lo, hi)
                if child < hi and bytes_[child] == byte:
                    node, at, text = child, flat[base | byte], text + _ONE[byte]
                    continue
                break
            if hi - lo <= len(nexts):  # the node's children the state reads
                for child in range(lo, hi):
                    to = flat[base | bytes_[child]]
                    if to:
                        todo.append((child, to, text + _ONE[bytes_[child]]))
                break
            for byte in nexts:  # the state's bytes the node has a child for
                child = bisect_left(bytes_, byte, lo, hi)
                if child < hi and bytes_[child] == byte:
                    todo.append((child, flat[base | byte], text + _ONE[byte]))
            break
    stays = np.zeros(words, _U4)
    view = memoryview(stays)  # Python ints: no numpy scalars (~0.3 us a token less)
    for token in found:
        view[token >> 5] |= 1 << (token & 31)
    if not ending or not calls:  # a rule set without calls: nothing reads on past a final state
        return FrameMask(stays, False, token_bytes=info.token_bytes)
    if all(len(text) == 1 for text in ending):  # the tokenizer's rows, by byte
        rows = [trie.escaping(text[0], info) for text in ending]
        rows = [row for row in rows if len(row[0])]
        if not rows:
            return FrameMask(stays, False, token_bytes=info.token_bytes)
        escaping, offsets, firsts, escape_bytes = rows[0]
        if len(rows) > 1:  # (the rows of each text in turn, as one array each)
            escaping, offsets, firsts = (np.concatenate([r[k] for r in rows]) for k in range(3))
            for row in rows[1:]:
                escape_bytes |= row[3]
        return FrameMask(stays, False, escaping, offsets, firsts, info.token_bytes, escape_bytes)
    sorted_ = sorted_tokens(info)
    tokens, ids, matrix = sorted_.tokens, sorted_.ids, sorted_.matrix()[1]
    spans = []
    for text in ending:  # the tokens that spell `text` and go on (sorted positions)
        lo = bisect_right(tokens, text)
        spans.append((lo, bisect_left(tokens, _after(text), lo), len(text)))
    if all(lo == hi for lo, hi, _ in spans):
        return FrameMask(stays, False, token_bytes=info.token_bytes)
    if any(depth >= WIDTH for _, _, depth in spans):
        rows = [(ids[lo:hi], np.full(hi - lo, depth, np.int64)) for lo, hi, depth in spans]
        return frame_mask(stays, False, info.token_bytes, rows, sorted_)
    # `frame_mask`'s escape rows, with the bytes at the offsets read off the matrix by range
    escaping = np.concatenate([ids[lo:hi] for lo, hi, _ in spans])
    offsets = np.concatenate([np.full(hi - lo, depth, np.int64) for lo, hi, depth in spans])
    firsts = np.concatenate([matrix[lo:hi, depth] for lo, hi, depth in spans])
    present = np.zeros(256, dtype=bool)
    present[firsts] = True
    escape_bytes = int.from_bytes(np.packbits(present, bitorder="little").tobytes(), "little")
    return FrameMask(stays, False, escaping, offsets, firsts, info.token_bytes, escape_bytes)


def closed_frame(
    walker: RuleWalker, table: RuleTable, state: int, info: TokenizerInfo
) -> FrameMask | None:
    """The frame of a free string's body (`free_string`) whose closing quote leads to a
    final state (a string value that ends its rule), in a rule set with calls: neither
    calling nor accepting, it reads by bytes only, so its frame is the general build's of
    the free tables' closed split (`FreeTokens.split`: stays, no candidates, escape rows
    at the quote), the same in every such rule of the tokenizer. Its words and rows
    (read-only; with the rows' bytes and escape bytes) are made once per tokenizer, where
    each such frame cost ~100 us cold (copies of the split, `less_rows`, the rows' bytes).
    None where `state` is no such body."""
    if walker.follow[state] or state in table.calls or len(walker.reads[state]) < BODY_READS:
        return None
    if not table.final[table.flat[state << 8 | _QUOTE]] or not _free(walker, state):
        return None
    sorted_ = sorted_tokens(info)
    free = sorted_.free_strings()[0]
    made = free.closed_frame
    if made is None:
        stays, crossing, rows = free.split(*walker.arrays(), state, walker.finals(), walker.reads)
        if crossing.any():  # (none: the split's quote leads to a final state)
            return None
        rows = [less_rows(rows, stays, None)] if rows else []
        frame = frame_mask(stays, False, info.token_bytes, rows, sorted_)
        for array in (frame.stays, frame.tokens, frame.offsets, frame.firsts):
            array.flags.writeable = False
        made = free.closed_frame = frame
        _share(frame.tokens, frame.offsets)
    return FrameMask(
        made.stays, False, made.tokens, made.offsets, made.firsts,
        info.token_bytes, made.escape_bytes,
    )  # fmt: skip


_QUOTE = ord('"')


def _after(text: bytes) -> bytes:
    """The least bytes above every bytes that start with `text`."""
    head = text.rstrip(b"\xff")
    return head[:-1] + _ONE[head[-1] + 1] if head else b"\xff" * (len(text) + 1)
