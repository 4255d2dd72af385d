"""Loop runs: a node's run tokens and exits from the class tables, against their definition,
and trie walks that take them, against brute force."""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

import numpy as np
import pytest
from grammar_helpers import WALKS, ToyDFA, brute_allowed, walk_mode
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grammar_trie_loops import ALPHABET, TOKENS, _path, looping_dfas

from kor_cli.grammar import trie_loops, trie_runs
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.vocab import TokenizerInfo


@settings(max_examples=150, deadline=None)
@given(
    tokens=TOKENS.filter(bool),
    members=st.sets(st.sampled_from(list(ALPHABET))),
    live=st.sets(st.sampled_from(list(ALPHABET))),
)
def test_runs_and_exits_match_their_definition(
    tokens: list[bytes], members: set[int], live: set[int]
) -> None:
    trie = TokenTrie(tokens)
    loops = np.zeros(256, dtype=bool)
    loops[list(members)] = True
    # state 1 loops on the class; a byte outside it leads to state 2 when in `live`
    transitions = np.zeros((3, 256), dtype=np.int32)
    transitions[1, list(members)] = 1
    transitions[1, [b for b in live if b not in members]] = 2
    runs = trie_runs.LoopRuns(trie)
    for node in range(trie.num_nodes):
        out = np.zeros(len(tokens), dtype=bool)
        exits, states = runs.expand(
            transitions.ravel(), loops, np.asarray([node]), np.asarray([1]), out
        )
        # the scalar path (every state is 1; the class's key given) finds the same
        one = np.zeros(len(tokens), dtype=bool)
        key = trie_runs.class_key(loops)
        got = runs.expand(
            transitions.ravel(), loops, np.asarray([node]), np.asarray([1]), one, 1, key
        )
        assert np.array_equal(got[0], exits) and np.array_equal(got[1], states)
        assert np.array_equal(one, out)
        out[trie.same_ids] = out[trie.same_as]  # as a walk ends: equal tokens share a fate
        path = _path(trie, node)
        want_exits = {
            other
            for other in range(trie.num_nodes)
            if (below := _path(trie, other)).startswith(path)
            and len(below) > len(path)
            and below[-1] not in members
            and below[-1] in live
            and all(b in members for b in below[len(path) : -1])
        }
        assert set(exits.tolist()) == want_exits
        assert (states == 2).all()
        exit_paths = [_path(trie, e) for e in want_exits]
        for token, data in enumerate(tokens):
            own_run = data.startswith(path) and all(b in members for b in data[len(path) :])
            at_exit = data in exit_paths
            assert out[token] == (own_run or at_exit), (token, data, path)


def _forced_runs() -> ExitStack:
    """Every looping frontier node goes by its runs, whatever its subtree's size."""
    stack = ExitStack()
    stack.enter_context(mock.patch.object(trie_loops, "_RUN_NODES", 0))
    stack.enter_context(mock.patch.object(trie_loops, "_BUILD_SHARE", 0.0))
    return stack


@WALKS
@pytest.mark.parametrize("one_state", [True, False])
@settings(max_examples=100, deadline=None)
@given(dfa=looping_dfas(), tokens=TOKENS)
def test_walks_by_runs_equal_brute_force(
    walk: str, one_state: bool, dfa: ToyDFA, tokens: list[bytes]
) -> None:
    info = TokenizerInfo([None, *tokens], stop_ids=[0], vocab_size=len(tokens) + 3)
    one = mock.patch.object(trie_loops, "ONE_STATE", one_state)
    with walk_mode(walk), _forced_runs(), one:
        index = TokenIndex(dfa, info)
        for state in range(dfa.num_states):
            want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), want), state


def test_a_dense_walk_shares_run_tokens_with_their_duplicates() -> None:
    # state 2 loops on the alphabet but \xc3, which leads to state 1 (looping on all): the
    # pruning step allows the run tokens under \xc3 by node, the first of two equal
    # tokens; a dense walk ended before its duplicate was given the same fate
    alphabet = [0, 45, 46, 97, 98, 128, 195, 255]
    rows = np.zeros((3, 256), dtype=np.int32)
    rows[1, alphabet] = 1
    rows[2, alphabet] = 2
    rows[2, 195] = 1
    dfa = ToyDFA(rows, [1], start=1)
    tokens = [b"ba", b"\xc3\x00", b"\xc3\x00", b"aa\x00"]
    info = TokenizerInfo([None, *tokens], stop_ids=[0], vocab_size=len(tokens) + 3)
    with walk_mode("dense"), _forced_runs():
        index = TokenIndex(dfa, info)
        for state in (1, 2):
            want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), want), state


def _names() -> ToyDFA:
    """`[A-Z][a-z]+( [A-Z][a-z]+)*"` (1: a capital, 2: the first lowercase letter, 3: in
    a word, 4: after the quote)."""
    rows = [[0] * 256 for _ in range(5)]
    for byte in range(ord("A"), ord("Z") + 1):
        rows[1][byte] = 2
    for byte in range(ord("a"), ord("z") + 1):
        rows[2][byte] = rows[3][byte] = 3
    rows[3][ord(" ")] = 1
    rows[3][ord('"')] = 4
    return ToyDFA(rows, accepting=[4])


def test_a_name_pattern_goes_by_its_runs() -> None:
    words = [b"ab", b"abc", b"ing", b"ing ", b"ing Th", b'ed"', b'ed",', b" The", b" the", b"Ab"]
    tokens = [*words, b"a", b"b", b"x y", b'"', b"A", b"AB", b"a\xc3", b"q."]
    info = TokenizerInfo([None, *tokens], stop_ids=[0])
    calls = [0]
    expand = trie_runs.LoopRuns.expand

    def counting(self, *args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return expand(self, *args)

    dfa = _names()
    counted = mock.patch.object(trie_runs.LoopRuns, "expand", counting)
    with walk_mode("levels"), _forced_runs(), counted:
        index = TokenIndex(dfa, info)
        for state in range(1, 5):
            want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), want), state
    assert calls[0] > 0


def test_class_tables_round_trip_the_disk_cache(tmp_path) -> None:
    trie = TokenTrie([b"abc", b"ab,", b"a", b"b.c", b"zz", b",a"])
    loops = np.zeros(256, dtype=bool)
    loops[list(b"abc")] = True
    built = trie_runs.LoopRuns(trie)
    built.store_at(tmp_path / "tables-x.bin")
    want = built._tables_of(built._order_of(), loops)
    (written,) = tmp_path.glob("tables-x-runs-*.bin")
    again = trie_runs.LoopRuns(trie)
    again.store_at(tmp_path / "tables-x.bin")
    with mock.patch.object(trie_runs.RunTables, "__init__", side_effect=AssertionError):
        read = again._tables_of(again._order_of(), loops)  # read, not built
    for name in trie_runs._ARRAYS:
        assert np.array_equal(getattr(read, name), getattr(want, name)), name
    written.write_bytes(b"broken")  # a broken file is rebuilt (and rewritten)
    third = trie_runs.LoopRuns(trie)
    third.store_at(tmp_path / "tables-x.bin")
    rebuilt = third._tables_of(third._order_of(), loops)
    assert all(np.array_equal(getattr(rebuilt, n), getattr(want, n)) for n in trie_runs._ARRAYS)
    assert trie_runs.RunTables.read(written, trie.num_nodes) is not None
    assert trie_runs.RunTables.read(written, trie.num_nodes + 1) is None  # another trie
