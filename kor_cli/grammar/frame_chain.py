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

from bisect import bisect_left

import numpy as np

from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_indexes import _BODY_READS
from kor_cli.grammar.frame_walk import RuleWalker
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
_NODES = 16  # trie nodes with children a walk visits before it leaves the frame to the split


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
    string body (`frame_indexes.split_beside`'s case) and no token's bytes run on into a
    state that may call, end the frame or read a string body: its stays are the tokens the
    table reads by bytes alone, found by walking the byte trie along the table (past the
    forced chain too: `",` into the keys that follow). None otherwise, or after `_NODES`
    trie nodes (the general split builds it)."""
    reads, flat = walker.reads, table.flat
    if len(reads[state]) != 1 or walker.follow[state] or table.accepting[state]:
        return None
    if state in table.calls or len(reads[flat[state << 8 | reads[state][0]]]) >= _BODY_READS:
        return None
    trie = _reads(info)
    child_start, bytes_, node_token, same = trie.child_start, trie.byte, trie.node_token, trie.same
    follow = walker.follow
    root = trie.roots[reads[state][0]]
    todo = [(root, flat[state << 8 | reads[state][0]])] if root >= 0 else []
    found: list[int] = []
    budget = _NODES
    while todo:  # (a trie node, the state its bytes lead to from `state`)
        node, at = todo.pop()
        token = node_token[node]
        if token >= 0:
            found.append(token)
            found += same.get(token, ())
        lo, hi = child_start[node], child_start[node + 1]
        if lo == hi:  # no token goes on
            continue
        nexts = reads[at]
        budget -= 1
        if follow[at] or len(nexts) >= _BODY_READS or budget < 0:
            return None  # tokens go on where the frame may call or end, or into a body
        base = at << 8
        if hi - lo <= len(nexts):  # the node's children the state reads
            for child in range(lo, hi):
                to = flat[base | bytes_[child]]
                if to:
                    todo.append((child, to))
            continue
        for byte in nexts:  # the state's bytes the node has a child for
            child = bisect_left(bytes_, byte, lo, hi)
            if child < hi and bytes_[child] == byte:
                todo.append((child, flat[base | byte]))
    stays = np.zeros(words, dtype="<u4")
    for token in found:
        stays[token >> 5] |= 1 << (token & 31)
    return FrameMask(stays, False, token_bytes=info.token_bytes)
