"""TokenIndex: every mask equals a brute-force walk of the byte table."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from grammar_helpers import (
    DIGITS,
    STRING,
    WALKS,
    ToyDFA,
    brute_allowed,
    brute_masks,
    brute_next,
    chain_dfa,
    literal_dfa,
    live_states,
    person_dfa,
    reachable,
    walk_mode,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import trie as trie_module
from kor_cli.grammar.bitmask import as_numpy_bitmask, bits_set, set_bits, write_row
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import TOKENIZER_NAMES

TOY_BYTES: list[bytes | None] = [
    b"a", b"b", b"c", b"ab", b"abc", b"ba", b"cab", b"aaaa", b"\xc3", b"\xa9", b"\xc3\xa9",
    None, b"", b"ab", b"{", b'{"', b'"', b'",', b"1", b"12", b"x1",
]  # fmt: skip


def toy_info(**kw: object) -> TokenizerInfo:
    # id 11 (None) is the stop token; 13 duplicates 3; 21.. are padding
    return TokenizerInfo(TOY_BYTES, stop_ids=[11], vocab_size=24, **kw)  # type: ignore[arg-type]


def check_index(index: TokenIndex, dfa: ToyDFA, states: list[int]) -> None:
    info = index.info
    live = live_states(dfa)
    for state in states:
        want = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
        got = index.allowed(state)
        assert got.dtype == bool and got.shape == (info.vocab_size,)
        mismatch = np.flatnonzero(got != want)
        assert not len(mismatch), (state, [(i, info.token_bytes[i]) for i in mismatch[:10]])
        unpacked = np.unpackbits(index.packed(state).view(np.uint8), bitorder="little")
        assert np.array_equal(unpacked[: info.vocab_size].astype(bool), want)
        assert not unpacked[info.vocab_size :].any()
        for token in np.flatnonzero(want)[:200].tolist():
            if token not in info.stop_ids:
                assert index.next_state(state, token) == brute_next(
                    dfa, live, state, info.token_bytes[token]
                )


@WALKS
def test_toy_vocab_on_a_person_dfa(walk: str) -> None:
    dfa = person_dfa()
    with walk_mode(walk):
        index = TokenIndex(dfa, toy_info())
        check_index(index, dfa, list(range(dfa.num_states)))


@st.composite
def random_dfas(draw: st.DrawFn) -> ToyDFA:
    """Small random DFAs over a handful of bytes (the rest go to the dead state)."""
    size = draw(st.integers(2, 7))
    alphabet = draw(st.lists(st.sampled_from(b'abc{"1,\xc3\xa9x'), min_size=1, unique=True))
    rows = [[0] * 256 for _ in range(size)]
    for state in range(1, size):
        for byte in alphabet:
            rows[state][byte] = draw(st.integers(0, size - 1))
    accepting = draw(st.sets(st.integers(1, size - 1)))
    return ToyDFA(rows, accepting, start=draw(st.integers(1, size - 1)))


@WALKS
@settings(max_examples=150, deadline=None)
@given(dfa=random_dfas(), extra=st.lists(st.binary(min_size=1, max_size=6), max_size=30))
def test_random_dfas_and_vocabularies(walk: str, dfa: ToyDFA, extra: list[bytes]) -> None:
    info = TokenizerInfo([*TOY_BYTES, *extra], stop_ids=[11, 2], vocab_size=len(TOY_BYTES) + 40)
    with walk_mode(walk):
        index = TokenIndex(dfa, info)
        check_index(index, dfa, list(range(dfa.num_states)))


@st.composite
def sparse_letter_dfas(draw: st.DrawFn) -> ToyDFA:
    """Random DFAs over a-f whose states read few of them."""
    size = draw(st.integers(2, 5))
    rows = [[0] * 256 for _ in range(size)]
    for state in range(1, size):
        for byte in b"abcdef":
            rows[state][byte] = draw(st.sampled_from([0, 0, 0, *range(size)]))
    accepting = draw(st.sets(st.integers(1, size - 1)))
    return ToyDFA(rows, accepting, start=draw(st.integers(1, size - 1)))


@pytest.mark.parametrize("walk", ["depth-first", "hand-over"])
@settings(max_examples=150, deadline=None)
@given(
    dfa=sparse_letter_dfas(),
    extra=st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=10, max_size=60),
)
def test_walks_that_bisect_for_a_states_bytes(walk: str, dfa: ToyDFA, extra: list[str]) -> None:
    # a state reading one letter, of a node's three or more children, finds it by bisection
    tokens = [*TOY_BYTES, *(text.encode() for text in extra)]
    info = TokenizerInfo(tokens, stop_ids=[11], vocab_size=len(tokens) + 3)
    with walk_mode(walk), mock.patch.object(trie_module, "_FEW", 1):
        index = TokenIndex(dfa, info)
        check_index(index, dfa, list(range(dfa.num_states)))


def test_stop_ids_only_in_accepting_states() -> None:
    dfa = literal_dfa([b"ab", b"abc"])
    index = TokenIndex(dfa, toy_info())
    after_ab = dfa.walk(dfa.start, b"ab")
    assert index.allowed(after_ab)[11] and index.is_accepting(after_ab)
    assert not index.allowed(dfa.start)[11]
    assert index.next_state(after_ab, 11) == after_ab
    assert index.next_state(dfa.start, 11) == 0


def test_none_empty_and_padding_never_allowed() -> None:
    # a DFA that accepts every byte string: everything with bytes is allowed
    dfa = ToyDFA([[0] * 256, [1] * 256], accepting=[1])
    index = TokenIndex(dfa, toy_info())
    mask = index.allowed(1)
    assert mask[11] and not mask[12] and not mask[21:].any()
    assert mask[[i for i, b in enumerate(TOY_BYTES) if b]].all()
    assert index.next_state(1, 12) == 0 and index.next_state(1, 99) == 0


def test_states_that_cannot_accept_count_as_dead() -> None:
    # 1 -a-> 2 (accepting), 1 -b-> 3 -a-> 3: state 3 can never accept
    rows = [[0] * 256 for _ in range(4)]
    rows[1][ord("a")], rows[1][ord("b")], rows[3][ord("a")] = 2, 3, 3
    dfa = ToyDFA(rows, accepting=[2])
    index = TokenIndex(dfa, toy_info())
    assert np.flatnonzero(index.allowed(1)).tolist() == [0]  # "a" only, not "b" or "ba"
    assert not index.allowed(3).any()
    assert index.forced_bytes(1) == b"a"


def test_reachable_states_and_precompute_all() -> None:
    dfa = person_dfa()
    index = TokenIndex(dfa, toy_info())
    assert index.reachable_states() == reachable(dfa)
    index.precompute_all()
    assert index.built_states == len(reachable(dfa))
    assert index.nbytes > 0


def test_disk_cache_round_trip(tmp_path) -> None:
    dfa = chain_dfa(b"[", DIGITS, b"]")
    first = TokenIndex(dfa, toy_info(), cache_dir=tmp_path)
    first.precompute_all()
    files = list(tmp_path.iterdir())
    assert files == [first.cache_path]
    second = TokenIndex(dfa, toy_info(), cache_dir=tmp_path)
    assert second.built_states == first.built_states
    for state in reachable(dfa):
        assert np.array_equal(second.allowed(state), first.allowed(state))
        assert np.array_equal(second.packed(state), first.packed(state))
    # another grammar or another tokenizer uses another file
    other = TokenIndex(chain_dfa(b"[", DIGITS, b")"), toy_info(), cache_dir=tmp_path)
    assert other.cache_path != first.cache_path and other.built_states == 0
    widths = TokenIndex(dfa, TokenizerInfo(TOY_BYTES, [11], 64), cache_dir=tmp_path)
    assert widths.cache_path != first.cache_path


def test_broken_cache_file_is_ignored(tmp_path) -> None:
    dfa = chain_dfa(b"[", DIGITS, b"]")
    index = TokenIndex(dfa, toy_info(), cache_dir=tmp_path)
    assert index.cache_path is not None
    index.cache_path.write_bytes(b"not an npz file")
    again = TokenIndex(dfa, toy_info(), cache_dir=tmp_path)
    assert again.built_states == 0
    assert np.array_equal(again.allowed(dfa.start), index.allowed(dfa.start))
    with pytest.raises(ValueError, match="no cache_dir"):
        TokenIndex(dfa, toy_info()).save()


def test_masks_are_read_only_and_tensors_cached() -> None:
    torch = pytest.importorskip("torch")
    dfa = person_dfa()
    index = TokenIndex(dfa, toy_info())
    mask = index.allowed(dfa.start)
    with pytest.raises(ValueError):
        mask[0] = True
    tensor = index.tensor(dfa.start, "cpu")
    assert tensor.dtype == torch.bool and tensor.shape == (24,)
    assert tensor.numpy().tolist() == mask.tolist()
    assert index.tensor(dfa.start, torch.device("cpu")) is tensor


@pytest.mark.gpu
def test_tensors_on_cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    dfa = person_dfa()
    index = TokenIndex(dfa, toy_info())
    tensor = index.tensor(dfa.start, "cuda")
    assert tensor.is_cuda and tensor.dtype == torch.bool
    assert tensor.cpu().numpy().tolist() == index.allowed(dfa.start).tolist()
    assert index.tensor(dfa.start, torch.device("cuda")) is tensor
    assert index.nbytes >= tensor.nelement()


def test_forced_bytes_follow_single_paths() -> None:
    dfa = person_dfa()
    index = TokenIndex(dfa, toy_info())
    assert index.forced_bytes(dfa.start) == b'{"name": "'
    in_string = dfa.walk(dfa.start, b'{"name": "x')
    assert index.forced_bytes(in_string) == b""
    closed = dfa.walk(dfa.start, b'{"name": "x"')
    assert index.forced_bytes(closed) == b', "age": '
    assert index.forced_bytes(closed, limit=3) == b', "'
    in_digits = dfa.walk(closed, b', "age": 4')
    assert index.forced_bytes(in_digits) == b""


def test_along_finds_prefixes_and_run_ons() -> None:
    trie = TokenTrie([b"ab", b"a", b"ab", b"abd", b"abc", b"b", b"\xff\xffa", b"\xff", b"\xff\xff"])

    def along(data: bytes) -> tuple[list[bytes], list[bytes]]:
        prefixes, lo, hi = trie.along(data)
        return [trie.tokens[at] for at in prefixes], trie.tokens[lo:hi]

    assert along(b"ab") == ([b"a", b"ab", b"ab"], [b"abc", b"abd"])
    assert along(b"abcd") == ([b"a", b"ab", b"ab", b"abc"], [])
    assert along(b"\xff\xff") == ([b"\xff", b"\xff\xff"], [b"\xff\xffa"])
    assert along(b"zz") == ([], [])


def test_rejects_malformed_tables() -> None:
    with pytest.raises(ValueError, match="num_states, 256"):
        TokenIndex(mock.Mock(transitions=np.zeros((2, 10), dtype=np.int32)), toy_info())


# -- real tokenizers -------------------------------------------------------------------

SAMPLE = '{"name": "Zoë \\"Z\\" 中文 😀", "age": 42}'.encode()


def path_states(dfa: ToyDFA, data: bytes) -> list[int]:
    states, state = [dfa.start], dfa.start
    for byte in data:
        state = int(dfa.transitions[state, byte])
        states.append(state)
    return list(dict.fromkeys(states))


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_masks_equal_brute_force(name, tokenizer_info_factory) -> None:
    info = tokenizer_info_factory(name)
    dfa = person_dfa()
    assert dfa.matches(SAMPLE)
    index = TokenIndex(dfa, info)
    # every state on the way: keys, punctuation, string body, UTF-8 tails, escapes, digits
    chosen = path_states(dfa, SAMPLE)
    check_index(index, dfa, chosen)
    final = dfa.walk(dfa.start, SAMPLE)
    assert index.allowed(final)[list(info.stop_ids)].all()
    assert not index.allowed(dfa.start)[list(info.stop_ids)].any()
    padding = [i for i, b in enumerate(info.token_bytes) if b is None]
    assert not any(index.allowed(s)[padding].any() for s in chosen if s != final)


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_literal_and_loop_dfas(name, tokenizer_info_factory) -> None:
    info = tokenizer_info_factory(name)
    words = [b'"yes"', b'"no"', b'"maybe"', b"null", " \u00e9t\u00e9 \u4e2d".encode()]
    for dfa in (literal_dfa(words), chain_dfa(b"[", DIGITS, b"]"), chain_dfa(STRING)):
        index = TokenIndex(dfa, info)
        check_index(index, dfa, reachable(dfa)[:6])


@pytest.mark.slow
def test_real_qwen_padding_ids_never_allowed(tokenizer_info_factory) -> None:
    info = tokenizer_info_factory("qwen")
    dfa = ToyDFA([[0] * 256, [1] * 256], accepting=[1])  # any byte string
    mask = TokenIndex(dfa, info).allowed(1)
    assert mask.shape == (151_936,)
    assert not mask[151_851:].any()  # padding
    assert not mask[151_644:151_851].any()  # specials that are not stops
    assert mask[151_643]  # <|endoftext|>: the stop id
    assert mask[:151_643].all()


SCHEMAS = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())
STRINGS = {
    "type": "object",
    "properties": {
        "short": {"type": "string", "minLength": 2, "maxLength": 12},
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
        "line": {"type": "string", "pattern": "^.{1,6}$"},
        "mood": {"enum": ["\U0001f600 happy", "\u4e2d\u6587", "caf\u00e9", 'na\u00efve "q"']},
        "free": {"type": "string"},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["short", "code", "line", "mood", "free", "when"],
    "additionalProperties": False,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_masks_of_every_reachable_state(name, tokenizer_info_factory) -> None:
    """Forced states, string bodies (free, maxLength, patterns), enums, Unicode: all exact."""
    info = tokenizer_info_factory(name)
    schemas = [SCHEMAS[k]["schema"] for k in ("person", "reviews", "nested", "ui")]
    for schema in [*schemas, STRINGS]:
        dfa = compile_json_schema(schema).dfa
        index = TokenIndex(dfa, info)
        states = index.reachable_states()
        want = brute_masks(dfa, info.token_bytes, info.stop_ids, states)  # type: ignore[arg-type]
        for state in states:
            bad = np.flatnonzero(index.allowed(state) != want[state])
            assert not len(bad), (state, [(i, info.token_bytes[i]) for i in bad[:10]])
            fresh = TokenIndex(dfa, info)  # packed without a bool mask on the way
            bits = np.unpackbits(fresh.packed(state).view(np.uint8), bitorder="little")
            assert np.array_equal(bits[: info.vocab_size].astype(bool), want[state]), state
        for trie in (index._trie, index._shared().body.rest):
            assert not any(buffer.any() for buffer in trie._pool)  # pooled all-zero


REGEX_PIECES = ["a", "b", "[ab]", "(a|bc)", "x*", "(ab)+", "c?", "[0-9]{2,3}", "(a|)", "."]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(REGEX_PIECES), min_size=1, max_size=6))
def test_minimal_dfas_that_vouch_trimmed_are(pieces: list[str]) -> None:
    """A DFA marked `trimmed` (minimize's output) has no state but 0 that cannot accept,
    so the index may skip computing live states; its masks equal a brute-force walk."""
    from kor_cli.grammar.compile import compile_regex
    from kor_cli.grammar.live import live_states as index_live_states

    dfa = compile_regex("".join(pieces)).dfa
    assert dfa.trimmed
    assert index_live_states(dfa.transitions, dfa.accepting)[1:].all()
    index = TokenIndex(dfa, toy_info())
    toy = ToyDFA(dfa.transitions, np.flatnonzero(dfa.accepting), dfa.start)
    check_index(index, toy, list(range(dfa.num_states)))


def test_schema_dfas_are_trimmed_and_untrimmed_dfas_still_pruned() -> None:
    for entry in SCHEMAS.values():
        if not isinstance(entry, dict):
            continue  # the file's comment
        dfa = compile_json_schema(entry["schema"]).dfa
        assert dfa.trimmed
    rows = [[0] * 256 for _ in range(4)]
    rows[1][ord("a")], rows[1][ord("b")], rows[3][ord("b")] = 2, 3, 3  # 3 loops, never accepts
    dfa = ToyDFA(rows, accepting=[2])
    index = TokenIndex(dfa, toy_info())
    assert index.next_state(1, 1) == 0  # b"b" leads into a state that cannot accept
    check_index(index, dfa, [0, 1, 2, 3])


def test_tables_read_unaligned_from_the_disk_cache_still_walk() -> None:
    """A DFA read back from the disk cache may sit at any byte offset; skipping the pruning
    copy must not leave a memoryview that cannot read it."""
    from kor_cli.grammar.byte_dfa import ByteDFA
    from kor_cli.grammar.compile import compile_regex
    from kor_cli.grammar.rules import Rule
    from kor_cli.grammar.stacks import rule_table

    dfa = compile_regex("(ab|c)+x").dfa
    raw = bytearray(dfa.transitions.nbytes + 1)
    odd = np.frombuffer(raw, "<i4", offset=1).reshape(dfa.transitions.shape)
    odd[:] = dfa.transitions
    assert not odd.flags.aligned
    again = ByteDFA(odd, dfa.accepting, dfa.start, trimmed=True)
    index = TokenIndex(again, toy_info())
    toy = ToyDFA(dfa.transitions, np.flatnonzero(dfa.accepting), dfa.start)
    check_index(index, toy, list(range(dfa.num_states)))
    assert index.walk_bytes(dfa.start, b"abcx") == dfa.walk(dfa.start, b"abcx")
    table = rule_table(Rule(again, pruned=True))
    assert table.flat[dfa.start << 8 | ord("c")] == dfa.transitions[dfa.start, ord("c")]


@pytest.mark.parametrize("extra", [0, 1, 3])
def test_fill_row_writes_the_packed_mask_and_zeroes_the_rest(extra: int) -> None:
    dfa = person_dfa()
    index = TokenIndex(dfa, toy_info())
    words = (index.vocab_size + 31) // 32
    bitmask = np.full((3, words + extra), -1, dtype=np.int32)
    for state in [*reachable(dfa), 0]:
        for row in (0, 2):
            index.fill_row(state, bitmask, row)
            assert np.array_equal(bitmask[row, :words], index.packed(state).view(np.int32))
            assert not bitmask[row, words:].any()
        assert (bitmask[1] == -1).all()  # other rows untouched


def test_write_row_wraps_uint32_words_and_clears_on_none() -> None:
    words = np.array([0xFFFF_FFFF, 0x8000_0001, 7], dtype="<u4")
    bitmask = np.full((2, 3), 5, dtype=np.int32)
    write_row(bitmask, 1, words)
    assert np.array_equal(bitmask[1], words.view(np.int32)) and (bitmask[0] == 5).all()
    write_row(bitmask, 1, None)
    assert not bitmask[1].any() and (bitmask[0] == 5).all()
    assert as_numpy_bitmask(bitmask) is bitmask
    with pytest.raises(ValueError):
        as_numpy_bitmask(bitmask.astype(">i4"))


@pytest.mark.parametrize("count", [0, 1, 5, 16, 17, 60])
def test_set_bits_from_lists_and_arrays(count: int) -> None:
    """`set_bits` (a few ids one by one, more by ufunc.at) sets the same bits from a list
    or an int64 array, repeats included, onto words already set."""
    rng = np.random.default_rng(count)
    ids = rng.integers(0, 32 * 40, size=count).tolist()
    start = rng.integers(0, 1 << 32, size=40, dtype=np.uint64).astype("<u4")
    want = np.unpackbits(start.view(np.uint8), bitorder="little").astype(bool)
    want[ids] = True
    for these in (ids, np.asarray(ids, dtype=np.int64)):
        words = start.copy()
        set_bits(words, these)
        assert (np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool) == want).all()


@pytest.mark.parametrize("dtype", ["<u4", "<i4"])
def test_bits_set_reads_the_packed_bits_of_each_id(dtype: str) -> None:
    """`bits_set` answers per id whether its bit is set, bit 31 (the sign of an int32 word)
    included, in the order and with the repeats of the ids asked."""
    rng = np.random.default_rng(7)
    words = rng.integers(0, 1 << 32, size=40, dtype=np.uint64).astype("<u4")
    words[3] = 0x80000000
    bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
    ids = np.concatenate([rng.integers(0, 32 * 40, size=200), [127, 127, 96, 0]])
    got = bits_set(words.view(dtype), ids.astype(np.int64))
    assert got.tolist() == bits[ids].tolist()
