"""String bodies: token counts, chain detection, and masks equal to a brute-force walk."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from grammar_helpers import (
    STRING,
    WALKS,
    ToyDFA,
    brute_allowed,
    brute_masks,
    chain_dfa,
    person_dfa,
    walk_mode,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import index as index_module
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, compile_regex
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.pushdown import PushdownGrammar
from kor_cli.grammar.string_body import BodyChains, BodyTokens, crossing_table, split_body
from kor_cli.grammar.token_tables import shared_tables
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import TOKENIZER_NAMES

# whole pieces: body characters (DEL and the first and last of every UTF-8 length class
# and range), escapes, quotes, JSON punctuation, controls, partial / invalid / overlong /
# surrogate / too-high UTF-8
BOUNDARIES = "\u0080\u07ff\u0800\u0fff\u1000\ud7ff\ue000\uffff\U00010000\U00040000\U0010ffff"
PIECES = [
    b"a", b"Z", b" ", b"\x7f", "\u00e9".encode(), "\u4e2d".encode(), "\U0001f600".encode(),
    *(c.encode() for c in BOUNDARIES), b'"', b"\\", b"\\n", b"\\u00e9", b",", b"}", b":",
    b"\n", b"\x00", b"\xc3", b"\xa9", b"\xe4\xb8", b"\x80", b"\xf0\x9f", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe0\x80\x80", b"\xff", b"1",
]  # fmt: skip

SCHEMAS = [
    {"type": "string"},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 2, "maxLength": 4},
    {"type": "string", "pattern": "^.{1,3}$"},  # any character but a newline (escapes too)
    {"type": "string", "pattern": "^[a-z]{1,3}$"},
    {"enum": ["\u00e9\u4e2d", "ab", 'a"b', "\U0001f600"]},
    {"type": "object", "properties": {"k": {"type": "string", "maxLength": 2}}},
    {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
    {"type": "string", "format": "date"},
]

# bytes whose transitions decide body chains: ASCII body bytes, quote and backslash, lead
# bytes of every UTF-8 length class and the edges of the continuation ranges
EDGES = b' a~\x7f"\\\x00\xc2\xdf\xe0\xe1\xec\xed\xee\xf0\xf1\xf4\x80\x8f\x90\x9f\xa0\xbf'


def toy_dfa(dfa: object) -> ToyDFA:
    return ToyDFA(dfa.transitions, np.flatnonzero(dfa.accepting), dfa.start)  # type: ignore[attr-defined]


def check_all_states(dfa: ToyDFA, info: TokenizerInfo) -> None:
    index = TokenIndex(dfa, info)
    states = list(range(dfa.num_states))
    want = brute_masks(dfa, info.token_bytes, info.stop_ids, states)
    for state in states:
        got = index.allowed(state)
        bad = np.flatnonzero(got != want[state])
        assert not len(bad), (state, [(i, info.token_bytes[i]) for i in bad[:10]])
        words = index.packed(state).view(np.uint8)
        bits = np.unpackbits(words, count=info.vocab_size, bitorder="little").astype(bool)
        assert np.array_equal(bits, want[state]), state


def test_body_tokens_count_characters_and_split_the_others() -> None:
    tokens: list[bytes | None] = [
        b"ab", "\u00e9".encode(), b"a\x7f", "\u4e2d\U0001f600".encode(), b'a"', b"\xc3",
        b"\\n", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"ab\n", b"x" * 300,
        None, b"", b'"', "\u00e9".encode() + b"\xe4\xb8", b"stop",
    ]  # fmt: skip
    body = BodyTokens(tokens, exclude=[16])
    counts = {i: int(c) for i, c in enumerate(body.counts[: len(tokens)]) if c < 2**31 - 1}
    assert counts == {0: 2, 1: 1, 2: 2, 3: 2}
    assert len(body.counts) == 32 and body.mask(1).tolist() == [i == 1 for i in range(32)]
    keyed = dict(zip(body.rest.token_ids.tolist(), body.rest.tokens, strict=True))
    assert keyed == {
        4: b'\x01"', 5: b"\x00\xc3", 6: b"\x00\\n", 7: b"\x00\xed\xa0\x80",
        8: b"\x00\xf4\x90\x80\x80", 9: b"\x00\xc0\xaf", 10: b"\x02\n",
        11: b"\xff" + b"x" * 45, 14: b'\x00"', 15: b"\x01\xe4\xb8",
    }  # fmt: skip
    assert body.longest == 255


def test_chains_of_free_and_bounded_strings() -> None:
    free = compile_json_schema({"type": "string"}).dfa
    inside = free.walk(free.start, b'"')
    chains = BodyChains(np.asarray(free.transitions), 40)
    remaining, after = chains.ahead(inside)  # type: ignore[misc]
    assert remaining == 40 and (after == inside).all() and len(after) == 256
    assert chains.ahead(free.start) is None  # no body character goes on

    bounded = compile_json_schema({"type": "string", "minLength": 1, "maxLength": 3}).dfa
    chains = BodyChains(np.asarray(bounded.transitions), 40)
    path = [bounded.walk(bounded.start, b'"' + b"\xc3\xa9" * k) for k in range(4)]
    for k, state in enumerate(path):
        remaining, after = chains.ahead(state)  # type: ignore[misc]
        assert remaining == 3 - k
        assert after[: 4 - k].tolist() == path[k:] and not after[4 - k :].any()
    capped = BodyChains(np.asarray(bounded.transitions), 2)
    assert capped.ahead(path[0])[0] == 2  # type: ignore[index]

    # a countdown longer than twice the cap: each state, in whatever order it is asked,
    # sees min(cap, what is left) more characters and the exact states after them
    long = compile_json_schema({"type": "string", "maxLength": 12}).dfa
    path = [long.walk(long.start, b'"' + b"a" * k) for k in range(13)]
    exact = BodyChains(np.asarray(long.transitions), 40)
    for order in (range(12), reversed(range(12))):  # (the last state: no chain of its own)
        capped = BodyChains(np.asarray(long.transitions), 3)
        for k in order:
            remaining, after = capped.ahead(path[k])  # type: ignore[misc]
            want_remaining, want_after = exact.ahead(path[k])  # type: ignore[misc]
            assert remaining == min(3, want_remaining) == min(3, 12 - k)
            assert after[: remaining + 1].tolist() == want_after[: remaining + 1].tolist()

    letters = compile_regex("[a-z]*").dfa  # not every body character
    assert BodyChains(np.asarray(letters.transitions), 40).ahead(letters.start) is None


# lead bytes and the ranges of the bytes after them, per UTF-8 length class (RFC 3629)
CONT = range(0x80, 0xC0)
CLASSES = [
    (range(0xC2, 0xE0), [CONT]),
    ([0xE0], [range(0xA0, 0xC0), CONT]),
    ([*range(0xE1, 0xED), 0xEE, 0xEF], [CONT, CONT]),
    ([0xED], [range(0x80, 0xA0), CONT]),
    ([0xF0], [range(0x90, 0xC0), CONT, CONT]),
    ([0xF1, 0xF2, 0xF3], [CONT, CONT, CONT]),
    ([0xF4], [range(0x80, 0x90), CONT, CONT]),
]
BODY_ASCII = [b for b in range(0x20, 0x80) if b not in b'"\\']


def split_string_dfa() -> tuple[ToyDFA, list[list[int]]]:
    """A free JSON string (no escapes) whose UTF-8 length classes share no state, unlike
    a minimal DFA's: every byte range of every class is then checked on its own. Returns
    the DFA (start 1, body 2, end 3) and each class's states after its lead and later bytes."""
    rows = [[0] * 256 for _ in range(4)]
    rows[1][ord('"')], rows[2][ord('"')] = 2, 3
    for byte in BODY_ASCII:
        rows[2][byte] = 2
    tails = []
    for leads, follow in CLASSES:
        chain = [len(rows) + k for k in range(len(follow))]
        rows += [[0] * 256 for _ in follow]
        for lead in leads:
            rows[2][lead] = chain[0]
        for state, nxt, allowed in zip(chain, [*chain[1:], 2], follow, strict=True):
            for byte in allowed:
                rows[state][byte] = nxt
        tails.append(chain)
    return ToyDFA(rows, [3]), tails


ODD = (
    [("ascii", 2, b) for b in (0x20, 0x61, 0x7F)]
    + [
        (f"class {c} byte {k}", tail, byte)
        for c, (leads, follow) in enumerate(CLASSES)
        for k, (tail, allowed) in enumerate(zip(split_string_dfa()[1][c], follow, strict=True))
        for byte in (allowed[0], allowed[-1])
    ]
    + [(f"class {c} lead", 2, leads[-1]) for c, (leads, _) in enumerate(CLASSES)]
)


def test_split_classes_still_make_a_chain() -> None:
    dfa, _ = split_string_dfa()
    assert BodyChains(dfa.transitions, 40).ahead(2)[0] == 40  # type: ignore[index]
    check_all_states(dfa, TokenizerInfo([*PIECES, None], stop_ids=[len(PIECES)]))


@pytest.mark.parametrize("where, state, byte", ODD, ids=[w for w, _, _ in ODD])
def test_one_odd_byte_breaks_the_chain(where: str, state: int, byte: int) -> None:
    dfa, _ = split_string_dfa()
    assert dfa.transitions[state, byte]
    dfa.transitions[state, byte] = 3  # the end of the string instead
    assert BodyChains(dfa.transitions, 40).ahead(2) is None
    check_all_states(dfa, TokenizerInfo([*PIECES, None], stop_ids=[len(PIECES)]))


@WALKS
def test_toy_dfas_every_state(walk: str) -> None:
    tokens = [*PIECES, *(a + b for a in PIECES[:8] for b in PIECES)]
    info = TokenizerInfo([*tokens, None], stop_ids=[len(tokens)], vocab_size=len(tokens) + 3)
    with walk_mode(walk):
        for dfa in (person_dfa(), chain_dfa(b"[", STRING, b"]")):
            check_all_states(dfa, info)
        for schema in SCHEMAS:
            check_all_states(toy_dfa(compile_json_schema(schema).dfa), info)


@st.composite
def mutated(draw: st.DrawFn) -> ToyDFA:
    """A compiled string-ish DFA with a few transitions on chain-deciding bytes redirected."""
    dfa = toy_dfa(compile_json_schema(draw(st.sampled_from(SCHEMAS))).dfa)
    rows = dfa.transitions.copy()
    for _ in range(draw(st.integers(0, 3))):
        state = draw(st.integers(1, dfa.num_states - 1))
        rows[state, draw(st.sampled_from(EDGES))] = draw(st.integers(0, dfa.num_states - 1))
    return ToyDFA(rows, np.flatnonzero(dfa.accepting), dfa.start)


token_strings = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map(b"".join)


@WALKS
@settings(max_examples=120, deadline=None)
@given(
    dfa=mutated(),
    vocab=st.lists(token_strings, min_size=1, max_size=60),
    run_on=st.sampled_from([0, 64]),
)
def test_random_string_dfas_and_vocabularies(
    walk: str, dfa: ToyDFA, vocab: list[bytes], run_on: int
) -> None:
    info = TokenizerInfo([*PIECES, *vocab, None], stop_ids=[len(PIECES) + len(vocab)])
    with (
        walk_mode(walk),
        mock.patch.object(index_module, "_MAX_RUN_ON", run_on),
    ):
        check_all_states(dfa, info)


@settings(max_examples=20, deadline=None)
@given(dfa=mutated(), vocab=st.lists(token_strings, min_size=1, max_size=20))
def test_brute_masks_agree_with_the_byte_by_byte_oracle(dfa: ToyDFA, vocab: list[bytes]) -> None:
    info = TokenizerInfo([*vocab, None, b""], stop_ids=[len(vocab)])
    states = list(range(dfa.num_states))
    fast = brute_masks(dfa, info.token_bytes, info.stop_ids, states)
    for state in states:
        assert np.array_equal(
            fast[state], brute_allowed(dfa, info.token_bytes, [len(vocab)], state)
        )


@pytest.mark.parametrize("schema", [{"type": "string"}, {"type": "string", "maxLength": 9}])
def test_tokens_that_open_a_string(schema: dict) -> None:
    """A forced quote with too many tokens after it: they are judged less the quote, and
    may hold more body characters than any token that does not start with one."""
    vocab = [b'"', b'"' + b"a" * 10, b'"' + b"a" * 9, b'"ab"', b'"a\\n', b'"\xc3', b"a", b"b"]
    dfa = toy_dfa(compile_json_schema(schema).dfa)
    with mock.patch.object(index_module, "_MAX_RUN_ON", 0):
        check_all_states(dfa, TokenizerInfo([*vocab, None], stop_ids=[len(vocab)]))
    index = TokenIndex(dfa, TokenizerInfo([*vocab, None], stop_ids=[len(vocab)]))
    assert index.allowed(dfa.start)[1] == ("maxLength" not in schema)


RECURSIVE = {  # string bodies inside rules with calls: values, keys, bounded strings
    "type": "object",
    "properties": {"method": {"type": "string"}, "params": {"$ref": "#/$defs/v"}},
    "required": ["method", "params"],
    "$defs": {
        "v": {
            "anyOf": [
                {"type": "string", "maxLength": 3},
                {"type": "string", "pattern": "^[^x]*$"},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}},
                {"type": "array", "items": {"$ref": "#/$defs/v"}},
            ]
        }
    },
}


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_split_body_equals_the_two_index_lookups(name: str, tokenizer_info_factory) -> None:
    # one walk of the rest trie gives exactly the masks of the rule's two token indexes:
    # tokens living by bytes, and those dying by bytes after reaching a crossing state
    info = tokenizer_info_factory(name)
    grammar = compile_json_schema(RECURSIVE, GrammarOptions(max_recursion_depth=2))
    assert grammar.has_calls
    frames = PushdownGrammar(grammar.rules, info).frames
    body = shared_tables(info).body
    checked = crossed = 0
    for rule_id in grammar.rules.reachable_rules():
        table = frames.stacks.table(rule_id)
        indexes = frames._rule_indexes(rule_id, table)
        assert indexes.crossing is not None
        flat = indexes.by_bytes._flat.reshape(-1, 256)
        both = crossing_table(flat, indexes.crossing_states).ravel()
        for state in range(1, indexes.size):
            ahead = indexes.by_bytes._chains.ahead(state)
            if ahead is None:
                continue
            split = split_body(body, ahead, indexes.crossing_states, both)
            assert split is not None
            stays = indexes.by_bytes.packed(state) & frames._keep
            crossing = indexes.crossing.packed(indexes.size + state) & frames._keep & ~stays
            assert np.array_equal(split[0], stays)
            assert np.array_equal(split[1], crossing)
            checked += 1
            crossed += bool(split[1].any())  # a value's closing quote, then a wrong byte
    assert checked >= 3 and crossed >= 1
