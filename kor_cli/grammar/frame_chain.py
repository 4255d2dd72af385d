"""The frame of a literal's byte, without the general split (`frame_masks`' fast path).

Most positions of a JSON grammar's fixed text (a key, `":"`, `","`, a const value) read one
byte, neither call nor accept, and lead to another such state: the run of forced states
(`frame_walk._chain`) spells the rest of the literal. From there a token either is a prefix
of that text (read by bytes: it stays), leaves it inside (dead: no crossing state on the
way), or holds all of it and goes on past the run's end. When no token goes on, the frame is
just the prefixes: no candidates, no escapes, no `ends`. That is what the general split
finds too (a pruned walk along the chain, its words, no escape rows, a frame without rows);
here the prefixes are read off the byte trie (a child per byte: a bisection of a node's few
children, not of the sorted tokens under the prefix) and the frame is made at once.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_indexes import _BODY_READS
from kor_cli.grammar.frame_walk import _CHAIN_MAX, RuleWalker
from kor_cli.grammar.index import token_trie
from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.trie import TokenTrie, _ints
from kor_cli.grammar.vocab import TokenizerInfo


class _TrieReads:
    """A token trie in the plain forms a walk along one text reads: each node's children
    (a range of nodes, ascending by byte), their bytes, the token each node spells (-1:
    none) and the others of equal bytes, the root of each first byte (-1: none)."""

    def __init__(self, trie: TokenTrie) -> None:
        self.trie = trie
        self.child_start = _ints(trie.child_start)
        self.byte = _ints(trie.byte)
        self.node_token = _ints(trie.node_token)
        self.roots = [-1] * 256
        for node in range(trie.offsets[1] if trie.depth else 0):
            self.roots[self.byte[node]] = node
        self.same: dict[int, list[int]] = {}
        for first, other in zip(trie.same_as.tolist(), trie.same_ids.tolist(), strict=True):
            self.same.setdefault(first, []).append(other)


_READS: dict[int, _TrieReads] = {}  # by id of the trie (held by the value)
_MAX_TRIES = 4


def _reads(info: TokenizerInfo) -> _TrieReads:
    trie = token_trie(info)
    found = _READS.get(id(trie))
    if found is None:
        if len(_READS) >= _MAX_TRIES:
            _READS.pop(next(iter(_READS)))
        found = _READS[id(trie)] = _TrieReads(trie)
    return found


def literal_frame(
    walker: RuleWalker, table: RuleTable, state: int, info: TokenizerInfo, words: int
) -> FrameMask | None:
    """The frame of `state` when it reads one byte, neither calls nor accepts, leads to no
    string body (`frame_indexes.split_beside`'s case) and no token runs past the end of its
    forced chain: its stays are the tokens that spell a prefix of the chain's text. None
    otherwise (the general split builds it)."""
    reads, flat = walker.reads, table.flat
    if len(reads[state]) != 1 or walker.follow[state] or table.accepting[state]:
        return None
    if state in table.calls or len(reads[flat[state << 8 | reads[state][0]]]) >= _BODY_READS:
        return None
    trie = _reads(info)
    child_start, bytes_, node_token, same = trie.child_start, trie.byte, trie.node_token, trie.same
    follow = walker.follow
    byte = reads[state][0]
    node, at, depth = trie.roots[byte], flat[state << 8 | byte], 1
    found: list[int] = []
    while node >= 0:  # the chain's text so far (`depth` bytes, to `at`) is node's prefix
        token = node_token[node]
        if token >= 0:
            found.append(token)
            found += same.get(token, ())
        lo, hi = child_start[node], child_start[node + 1]
        if lo == hi:  # no token goes on
            break
        nexts = reads[at]
        if len(nexts) != 1 or follow[at] or depth >= _CHAIN_MAX:
            return None  # tokens go on past the chain (or its walked part)
        byte = nexts[0]
        node = bisect_left(bytes_, byte, lo, hi)
        if node == hi or bytes_[node] != byte:
            break  # none goes on along the chain
        at, depth = flat[at << 8 | byte], depth + 1
    stays = np.zeros(words, dtype="<u4")
    for token in found:
        stays[token >> 5] |= 1 << (token & 31)
    return FrameMask(stays, False, token_bytes=info.token_bytes)
