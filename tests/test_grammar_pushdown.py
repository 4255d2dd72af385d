"""Pushdown matcher: every mask equals a brute-force walk of a reference simulation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from unittest import mock

import jsonschema
import numpy as np
import pytest
from grammar_helpers import chain_dfa, literal_dfa, person_dfa
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pushdown_helpers import Reference
from pushdown_toys import (
    ALPHABET,
    GRAMMARS,
    NESTED,
    STOP,
    TOY,
    TOY_TOKENS,
    TREE,
    check_along,
    rules_of,
    sample_texts,
    unpack,
)

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, alt, literal, opt, repeat, seq
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.frame_escapes import frame_mask
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.pushdown import (
    MAX_STACKS,
    PushdownGrammar,
    PushdownMatcher,
    _by_second,
    pushdown_grammar,
)
from kor_cli.grammar.rules import call

SCHEMAS = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())


@pytest.mark.parametrize("name", GRAMMARS)
def test_toy_masks_equal_the_reference(name: str) -> None:
    rules = rules_of(GRAMMARS[name])
    check_along(rules, TOY, sample_texts(rules, 8))


@pytest.mark.parametrize("name", GRAMMARS)
def test_escape_reads_by_the_top_frame_equal_the_stack_walks(name: str) -> None:
    """`_read_longer` and the bytes after a byte (`_bytes_of` the position `_after` it)
    read by the top frames' tables where they can (popping frames at final states; a frame
    that calls or can end by its closure over CONTEXT, `_local`), one walk for suffixes
    sharing their first two bytes: the same answers as stepping the stacks, on every stack
    met along sample texts (twice: the second on warm stacks)."""
    rules = rules_of(GRAMMARS[name])
    grammar = PushdownGrammar(rules, TOY)
    stacks = grammar.stacks
    suffixes = [bytes(p) for n in (1, 2, 3) for p in itertools.product(ALPHABET, repeat=n)]
    met: set[int] = set()
    for text in sample_texts(rules, 6):
        config = grammar.start
        for byte in text:
            met |= config
            config = stacks.walk(config, bytes((byte,)))
    for _ in range(2):
        for stack in sorted(met):
            for byte in ALPHABET:
                longer = [bytes((byte,)) + data for data in suffixes]
                ids = np.arange(len(longer))
                rows = [(ids, np.zeros(len(longer), dtype=np.int64))]
                escapes = frame_mask(np.zeros(1, dtype="<u4"), False, longer, rows)
                read: list[int] = []
                grammar._read_longer(stack, byte, _by_second(escapes, byte), read)
                want = [i for i, d in enumerate(longer) if stacks.walk((stack,), d)]
                assert sorted(read) == want, (stack, byte)
        for stack in sorted(met):
            bits = stacks.next_bytes((stack,))
            assert grammar._next_bytes(stack) == bits, stack
            for byte in range(256):
                first = grammar._after(stacks.frame(stack), byte)
                assert (first is not None) == bool(bits >> byte & 1), (stack, byte)
                if first is not None:
                    want = stacks.next_bytes(stacks.step(stack, byte))
                    assert grammar._bytes_of(first) == want, (stack, byte)


def test_a_text_of_the_language_is_accepted_token_by_token() -> None:
    rules = rules_of(TREE)
    grammar = PushdownGrammar(rules, TOY)
    matcher = PushdownMatcher(grammar)
    text = b'{"v":1,"kids":[{"v":11},{"v":1,"kids":[]}]}'
    ids = {b: i for i, b in enumerate(TOY_TOKENS) if b}
    for token in (b'{"v":', b"1", b',"kids":[', b'{"v":', b"1", b"1", b"},", b'{"v":', b"1"):
        assert matcher.accept_token(ids[token])
    assert not matcher.accept_token(ids[b"]"])  # a kid's "v" is a number: no ']' yet
    assert matcher.accept_bytes(b',"kids":[') and matcher.accept_token(ids[b"]}]"])
    assert not matcher.is_accepting and not matcher.is_terminated()
    assert matcher.accept_bytes(b"}")
    assert matcher.is_accepting and matcher.is_terminated()  # complete, nothing can follow
    assert matcher.accept_token(STOP) and matcher.is_terminated()
    assert not matcher.packed_mask().any() and not matcher.accept_token(ids[b"1"])
    matcher.rollback(1)
    assert matcher.is_accepting and matcher.steps == 12
    assert Reference(rules).accepting(Reference(rules).walk(Reference(rules).start(), text))


def test_an_ambiguous_grammar_keeps_at_most_max_stacks() -> None:
    """Two `anyOf` branches calling overlapping recursive rules double the parses at every
    level: past `MAX_STACKS` the oldest are kept, every step stays consistent with its mask,
    and a deep document still completes and validates."""
    schema = {
        "$defs": {
            "a": {"type": "array", "items": {"$ref": "#/$defs/n"}},
            "b": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 5},
            "n": {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}, {"const": 1}]},
        },
        "$ref": "#/$defs/n",
    }
    grammar = PushdownGrammar(compile_json_schema(schema).rules, TOY)
    matcher = PushdownMatcher(grammar)
    ids = {b: i for i, b in enumerate(TOY_TOKENS) if b}
    depth = 40
    for level in range(depth):
        assert matcher.accept_token(ids[b"["])
        assert len(matcher.config) <= min(MAX_STACKS, 2 ** (level + 1))
        allowed = np.flatnonzero(unpack(matcher.packed_mask(), TOY.vocab_size))
        for token in allowed[:: max(1, len(allowed) // 16)]:  # a mask's tokens step on
            assert matcher.accept_token(int(token)), TOY_TOKENS[token]
            matcher.rollback(1)
    assert len(matcher.config) == MAX_STACKS
    assert matcher.accept_bytes(b"1" + b"]" * depth) and matcher.is_accepting
    text = b"[" * depth + b"1" + b"]" * depth
    jsonschema.validate(json.loads(text), schema)


def test_unbounded_depth() -> None:
    grammar = PushdownGrammar(rules_of(NESTED), TOY)
    matcher = PushdownMatcher(grammar)
    ids = {b: i for i, b in enumerate(TOY_TOKENS) if b}
    depth = 3000
    assert matcher.accept_bytes(b"[" * depth)
    allowed = unpack(matcher.packed_mask(), TOY.vocab_size)
    assert allowed[ids[b"]]]]"]] and allowed[ids[b"[]"]] and not allowed[STOP]
    assert matcher.accept_bytes(b"]" * (depth - 1)) and not matcher.is_accepting
    assert matcher.forced_bytes() == b""  # ',' or ']'
    assert matcher.accept_bytes(b"]") and matcher.is_accepting
    assert not matcher.accept_bytes(b"]")
    parens = PushdownMatcher(
        PushdownGrammar(rules_of({0: seq(literal("("), opt(call(0)), literal(")"))}), TOY)
    )
    assert parens.accept_bytes(b"(" * depth + b")")
    assert parens.forced_bytes(limit=10 * depth) == b")" * (depth - 1)  # through every return


def test_forced_bytes_through_calls_and_returns() -> None:
    rules = rules_of(TREE)
    matcher = PushdownMatcher(PushdownGrammar(rules, TOY))
    assert matcher.forced_bytes() == b'{"v":'
    assert matcher.accept_bytes(b'{"v":1,"kids":[{"v":2}')
    assert matcher.forced_bytes() == b""  # ',' or ']'
    assert matcher.accept_bytes(b"]")
    assert matcher.forced_bytes() == b"}"  # the rule's end, then the root's end: nothing forced
    assert matcher.accept_bytes(b"}") and matcher.forced_bytes() == b""
    tail = rules_of({0: seq(literal("<"), call(1), literal(">")), 1: literal("abc")})
    assert PushdownMatcher(PushdownGrammar(tail, TOY)).forced_bytes() == b"<abc>"
    assert PushdownMatcher(PushdownGrammar(tail, TOY)).forced_bytes(3) == b"<ab"


def test_rollback_reset_and_state_key() -> None:
    matcher = PushdownMatcher(PushdownGrammar(rules_of(NESTED), TOY))
    start = matcher.state_key()
    assert matcher.accept_bytes(b"[[") and matcher.accept_bytes(b"]")
    key = matcher.state_key()
    masks = matcher.packed_mask().copy()
    assert matcher.accept_bytes(b",[")
    matcher.rollback(1)
    assert matcher.state_key() == key and np.array_equal(matcher.packed_mask(), masks)
    assert matcher.steps == 2
    with pytest.raises(ValueError):
        matcher.rollback(3)
    matcher.reset()
    assert matcher.steps == 0 and matcher.state_key() == start
    assert not matcher.accept_bytes(b"]") and matcher.steps == 0


def test_fill_bitmask_rows() -> None:
    torch = pytest.importorskip("torch")
    matcher = PushdownMatcher(PushdownGrammar(rules_of(NESTED), TOY))
    words = (TOY.vocab_size + 31) // 32
    bitmask = torch.full((2, words), -1, dtype=torch.int32)
    matcher.fill_next_token_bitmask(bitmask, 1)
    assert (bitmask[0] == -1).all()
    assert np.array_equal(bitmask[1].numpy().view("<u4"), matcher.packed_mask())
    array = np.full((1, words), -1, dtype=np.int32)
    matcher.fill_next_token_bitmask(array)
    assert np.array_equal(array[0].view("<u4"), matcher.packed_mask())


@pytest.mark.parametrize("name", ["tree", "rpc"])
def test_filled_rows_equal_the_reference_past_the_mask_cache(name: str) -> None:
    # fill_next_token_bitmask copies a cached int32 view of the configuration's mask; with
    # a cache of two masks the views are evicted with them and rebuilt: every filled row
    # is still the reference's mask, and no view outlives its mask
    rules = rules_of(GRAMMARS[name])
    reference = Reference(rules)
    words = (TOY.vocab_size + 31) // 32
    with mock.patch("kor_cli.grammar.pushdown._MAX_CACHED", 2):
        grammar = PushdownGrammar(rules, TOY)
        for text in sample_texts(rules, 6, seed=5):
            matcher, config = PushdownMatcher(grammar), reference.start()
            for at in range(len(text) + 1):
                row = np.full((2, words), -1, dtype=np.int32)
                matcher.fill_next_token_bitmask(row, 1)
                want = reference.allowed(config, TOY.token_bytes, TOY.stop_ids)
                want = np.concatenate([want, np.zeros(TOY.vocab_size - len(want), bool)])
                assert np.array_equal(unpack(row[1].view("<u4"), TOY.vocab_size), want)
                assert (row[0] == -1).all()
                assert set(grammar._rows) <= set(grammar._masks) | {frozenset()}
                if at < len(text):
                    assert matcher.accept_bytes(text[at : at + 1])
                    config = reference.step(config, text[at])


@pytest.mark.parametrize("name", ["tree", "rpc", "nullable"])
def test_masks_share_frame_arrays_without_writing_them(name: str) -> None:
    # a one-stack configuration whose top frame reads no escape and cannot end shares its
    # frame's `stays` array: no later mask (ORs, escapes read) may write into it, and the
    # memory figure counts a shared array once
    rules = rules_of(GRAMMARS[name])
    grammar = PushdownGrammar(rules, TOY)
    texts = sample_texts(rules, 6, seed=3)
    frames = grammar.frames
    seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    shared = 0
    for text in texts:
        matcher = PushdownMatcher(grammar)
        for at in range(len(text) + 1):
            words = matcher.packed_mask()
            for mask in frames._masks.values():
                seen.setdefault(id(mask.stays), (mask.stays, mask.stays.copy()))
            shared += any(words.base is stays for stays, _ in seen.values())
            if at < len(text):
                assert matcher.accept_bytes(text[at : at + 1])
    assert shared  # some configuration's mask is a frame's own array
    for stays, before in seen.values():
        assert np.array_equal(stays, before)
    arrays = {id(w): w for w in (*grammar._stack_masks.values(), *grammar._masks.values())}
    own = sum(w.nbytes for k, w in arrays.items() if k not in seen and w is not frames.stop_words)
    assert grammar.nbytes == frames.nbytes + own


def test_left_recursion_is_refused_before_matching() -> None:
    with pytest.raises(GrammarError, match="left recursion"):
        PushdownGrammar(rules_of({0: alt(seq(call(0), literal("+1")), literal("1"))}), TOY)


@pytest.mark.parametrize(
    "dfa",
    [person_dfa(), literal_dfa([b'"yes"', b'"no"', b"null"]), chain_dfa(b"[", "DIGITS", b"]")],
)
def test_one_rule_gives_the_token_index_masks(dfa) -> None:
    grammar = pushdown_grammar(dfa, TOY)
    index = TokenIndex(dfa, TOY)
    for state in range(1, dfa.num_states):
        frame = grammar.stacks.push(0, grammar.rules.start, state)
        assert np.array_equal(grammar.mask(frozenset((frame,))), index.packed(state)), state


# -- random rule sets -------------------------------------------------------------------
PIECES = [b"[", b"]", b",", b"x", b"{", b"}", b'"', b"1", b"ab", b"],", b""]


@st.composite
def rule_sets(draw: st.DrawFn) -> dict[int, Node]:
    count = draw(st.integers(1, 3))

    def node(depth: int) -> Node:
        kind = draw(
            st.sampled_from(
                ["lit", "call", "seq", "alt", "opt", "rep"] if depth else ["lit", "call"]
            )
        )
        if kind == "lit":
            return literal(draw(st.sampled_from(PIECES)))
        if kind == "call":
            return call(draw(st.integers(0, count - 1)))
        if kind == "seq":
            return seq(*(node(depth - 1) for _ in range(draw(st.integers(2, 3)))))
        if kind == "alt":
            return alt(node(depth - 1), node(depth - 1))
        if kind == "opt":
            return opt(node(depth - 1))
        sep = draw(st.sampled_from([None, literal(","), literal("")]))
        return repeat(node(depth - 1), draw(st.integers(0, 1)), None, sep)

    bodies = {}
    for k in range(count):
        base = literal(draw(st.sampled_from([b"x", b"[]", b"1", b"ab"])))
        bodies[k] = alt(base, seq(literal(draw(st.sampled_from(PIECES))), node(3)))
    return bodies


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_sets(), st.integers(0, 2**32 - 1))
def test_random_rule_sets_equal_the_reference(bodies: dict[int, Node], seed: int) -> None:
    rules = rules_of(bodies)
    try:
        rules.reachable_rules()
    except GrammarError as error:
        assume("left recursion" not in str(error))
        raise
    check_along(rules, TOY, sample_texts(rules, 3, seed, max_len=16))


# -- real tokenizers --------------------------------------------------------------------
