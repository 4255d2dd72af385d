"""Loop skips: per-node byte sets and token ranges, and trie walks that skip the subtrees a
self-looping state allows whole, against brute force."""

from __future__ import annotations

from unittest import mock

import numpy as np
from grammar_helpers import ToyDFA, brute_allowed, walk_mode
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import trie_loops
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.trie_loops import LoopSkips
from kor_cli.grammar.vocab import TokenizerInfo

ALPHABET = b"ab.-\x00\x80\xc3\xff"
TOKENS = st.lists(
    st.binary(min_size=1, max_size=5).map(lambda b: bytes(ALPHABET[c % 8] for c in b))
)


def _path(trie: TokenTrie, node: int) -> bytes:
    out = []
    while True:
        out.append(int(trie.byte[node]))
        if node < trie.offsets[1]:
            return bytes(reversed(out))
        node = int(trie.parent[node])


@settings(max_examples=150, deadline=None)
@given(tokens=TOKENS.filter(bool))
def test_skips_match_brute_force(tokens: list[bytes]) -> None:
    trie = TokenTrie(tokens)
    skips = LoopSkips(trie)
    for node in range(trie.num_nodes):
        path = _path(trie, node)
        under = [p for p, t in enumerate(trie.tokens) if t.startswith(path)]
        assert under == list(range(int(skips.first[node]), int(skips.last[node]) + 1))
        rests = {b for p in under for b in trie.tokens[p][len(path) :]}
        bits = sum(1 << b for b in {b if 0 < b < 128 else 0 for b in rests})
        got = int(skips.low[node]) | int(skips.high[node]) << 64
        assert got == (bits if trie.child_count[node] else (1 << 128) - 1)


@st.composite
def looping_dfas(draw: st.DrawFn) -> ToyDFA:
    """Small DFAs over ALPHABET in which most states loop on some bytes."""
    size = draw(st.integers(2, 6))
    rows = [[0] * 256 for _ in range(size)]
    for state in range(1, size):
        for byte in ALPHABET:
            rows[state][byte] = draw(st.sampled_from([state, state, *range(size)]))
    accepting = draw(st.sets(st.integers(1, size - 1), min_size=1))
    return ToyDFA(rows, accepting, start=draw(st.integers(1, size - 1)))


def _pruned_counter() -> tuple[list[int], object]:
    """A patch of LoopPrune.__call__ that counts the nodes it prunes."""
    pruned = [0]
    call = trie_loops.LoopPrune.__call__

    def counting(self, nodes, states, out):  # type: ignore[no-untyped-def]
        kept = call(self, nodes, states, out)
        pruned[0] += len(nodes) - len(kept[0])
        return kept

    return pruned, mock.patch.object(trie_loops.LoopPrune, "__call__", counting)


@settings(max_examples=200, deadline=None)
@given(dfa=looping_dfas(), tokens=TOKENS, learn_all=st.sampled_from([0, 2048]))
def test_pruned_walks_equal_brute_force(dfa: ToyDFA, tokens: list[bytes], learn_all: int) -> None:
    info = TokenizerInfo([None, *tokens], stop_ids=[0], vocab_size=len(tokens) + 3)
    # every frontier is offered to the pruning step, which learns the states' loop
    # classes all at once or as walks meet them
    with walk_mode("levels"), mock.patch.object(trie_loops, "_LEARN_ALL", learn_all):
        index = TokenIndex(dfa, info)
        for state in range(dfa.num_states):
            want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), want), state


def test_a_word_state_skips_its_words() -> None:
    lower = range(ord("a"), ord("z") + 1)
    rows = [[0] * 256 for _ in range(3)]
    for byte in lower:
        rows[1][byte] = rows[2][byte] = 2  # 1: a word starts, 2: in the word
    rows[2][ord(".")] = 1
    dfa = ToyDFA(rows, accepting=[2])
    tokens = [b"a", b"ab", b"abc", b"abd", b"ab.", b"b", b"b.c", b"b..", b"c\xc3", b"zz", b"-"]
    info = TokenizerInfo([None, *tokens], stop_ids=[0])
    pruned, patch = _pruned_counter()
    with walk_mode("levels"), patch:
        index = TokenIndex(dfa, info)
        for state in (1, 2):
            want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), want)
    assert pruned[0] > 0  # the walks did skip subtrees


@settings(max_examples=150, deadline=None)
@given(tokens=TOKENS.filter(bool), data=st.binary(max_size=6), cut=st.integers(0, 6))
def test_along_by_the_skips_equals_the_bisect(tokens: list[bytes], data: bytes, cut: int) -> None:
    trie = TokenTrie(tokens)
    skips = LoopSkips(trie)
    for probe in (data, tokens[0][:cut], tokens[-1]):
        prefixes, lo, hi = skips.along(trie, probe)
        want_prefixes, want_lo, want_hi = trie.along(probe)
        assert prefixes == want_prefixes
        assert list(range(lo, hi)) == list(range(want_lo, want_hi))
