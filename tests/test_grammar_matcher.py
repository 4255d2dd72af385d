"""GrammarMatcher: accepting tokens and bytes, stops, rollback, forced bytes."""

from __future__ import annotations

import numpy as np
import pytest
from grammar_helpers import DIGITS, STRING, ToyDFA, chain_dfa, literal_dfa, person_dfa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.matcher import GrammarMatcher
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import TOKENIZER_NAMES

# one token per printable ASCII byte, a few merges, a UTF-8 split, a stop (None) and padding
VOCAB: list[bytes | None] = [bytes([b]) for b in range(32, 127)]
VOCAB += [b'{"', b'":', b'": "', b'",', b"na", b"me", b"\xc3", b"\xa9", b"\xc3\xa9", None]
STOP = len(VOCAB) - 1


def token(data: bytes) -> int:
    return VOCAB.index(data)


@pytest.fixture
def person() -> GrammarMatcher:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP], vocab_size=len(VOCAB) + 3)
    return GrammarMatcher(TokenIndex(person_dfa(), info))


def feed(matcher: GrammarMatcher, *pieces: bytes) -> None:
    for piece in pieces:
        assert matcher.accept_token(token(piece)), piece


def test_accepts_allowed_tokens_and_rejects_the_rest(person: GrammarMatcher) -> None:
    start = person.state
    assert not person.accept_token(token(b"a"))
    assert person.state == start and person.steps == 0
    assert person.allowed_mask()[token(b'{"')] and person.allowed_mask()[token(b"{")]
    feed(person, b'{"', b"na", b"me", b'": "', b"\xc3")
    assert not person.accept_token(token(b"}"))  # a UTF-8 continuation byte must follow
    feed(person, b"\xa9", b"}")  # text again
    assert not person.is_accepting
    for bad in (-1, STOP + 1, 10**6):
        assert not person.accept_token(bad)


def test_stop_only_in_accepting_states_then_finished(person: GrammarMatcher) -> None:
    feed(person, b'{"', b"na", b"me", b'": "', b"\xc3\xa9", b'",', b" ", b'"', b"a", b"g")
    assert not person.accept_token(STOP)
    feed(person, b"e", b'":', b" ", b"4", b"2")
    assert not person.allowed_mask()[STOP]
    feed(person, b"}")
    assert person.is_accepting and not person.is_finished
    mask = person.allowed_mask()
    assert mask[STOP] and mask.sum() == 1
    assert person.accept_token(STOP)
    assert person.is_finished
    assert not person.allowed_mask().any()
    assert not person.packed_mask().any()
    assert not person.accept_token(STOP) and not person.accept_bytes(b"")
    assert person.forced_bytes() == b""


def test_rollback_and_reset(person: GrammarMatcher) -> None:
    feed(person, b'{"', b"na", b"me")
    after_name = person.state
    feed(person, b'": "', b"x")
    assert person.steps == 5
    person.rollback(2)
    assert person.state == after_name and person.steps == 3
    with pytest.raises(ValueError, match="cannot roll back 4"):
        person.rollback(4)
    person.rollback(0)
    assert person.steps == 3
    person.reset()
    assert person.steps == 0 and person.state == person.index.start


def test_rollback_over_a_stop(person: GrammarMatcher) -> None:
    assert person.accept_bytes(b'{"name": "", "age": 7}')
    before = person.state
    assert person.accept_token(STOP) and person.is_finished
    person.rollback(1)
    assert not person.is_finished and person.state == before
    assert person.accept_token(STOP)


def test_accept_bytes(person: GrammarMatcher) -> None:
    assert person.accept_bytes(b'{"name": "Zo\xc3')  # may stop inside a character
    assert person.accept_token(token(b"\xa9"))
    assert not person.accept_bytes(b"\xa9")  # a lone continuation byte
    assert not person.accept_bytes(b'", "height": ')
    assert person.steps == 2
    assert person.accept_bytes(b'", "age": ')
    assert person.forced_bytes() == b""


def test_masks_in_every_form_agree(person: GrammarMatcher) -> None:
    torch = pytest.importorskip("torch")
    feed(person, b'{"', b"na")
    mask = person.allowed_mask()
    assert np.flatnonzero(mask).tolist() == [token(b"m"), token(b"me")]
    bits = np.unpackbits(person.packed_mask().view(np.uint8), bitorder="little")
    assert np.array_equal(bits[: len(mask)].astype(bool), mask)
    assert person.mask_tensor("cpu").dtype == torch.bool
    assert person.mask_tensor().numpy().tolist() == mask.tolist()


def test_forced_bytes_through_keys_and_punctuation(person: GrammarMatcher) -> None:
    assert person.forced_bytes() == b'{"name": "'
    assert person.accept_bytes(person.forced_bytes())
    assert person.forced_bytes() == b""  # free text: a branch
    feed(person, b"x", b'",')
    assert person.forced_bytes() == b' "age": '
    assert person.forced_bytes(limit=4) == b' "ag'


def test_forced_bytes_stop_at_branches_and_accepting_states() -> None:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP])
    enum = GrammarMatcher(TokenIndex(literal_dfa([b'"red"', b'"green"', b'"grey"']), info))
    assert enum.forced_bytes() == b'"'
    enum.accept_bytes(b'"g')
    assert enum.forced_bytes() == b"re"
    enum.accept_bytes(b"ree")
    assert enum.forced_bytes() == b'n"'
    prefix = GrammarMatcher(TokenIndex(literal_dfa([b"ab", b"abcd"]), info))
    assert prefix.forced_bytes() == b"ab"  # "ab" is complete: the model may stop there
    prefix.accept_bytes(b"ab")
    assert prefix.forced_bytes() == b""
    prefix.accept_bytes(b"c")
    assert prefix.forced_bytes() == b"d"
    # 1 -a-> 2, then 2 -b-> 1 or 2 -c-> 3 (accepting): "a" is forced, then a branch
    rows = [[0] * 256 for _ in range(4)]
    rows[1][ord("a")], rows[2][ord("b")], rows[2][ord("c")] = 2, 1, 3
    assert GrammarMatcher(TokenIndex(ToyDFA(rows, [3]), info)).forced_bytes() == b"a"
    # a dead end does not count as a way forward: 1 -a-> 2 (accepting), 1 -b-> 0
    rows = [[0] * 256 for _ in range(3)]
    rows[1][ord("a")], rows[1][ord("b")] = 2, 0
    assert GrammarMatcher(TokenIndex(ToyDFA(rows, [2]), info)).forced_bytes() == b"a"


def test_forced_bytes_limit_on_a_long_literal() -> None:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP])
    long = GrammarMatcher(TokenIndex(literal_dfa([b"k" * 600]), info))
    assert long.forced_bytes() == b"k" * 256
    assert long.forced_bytes(limit=10) == b"k" * 10


def test_a_dead_start_is_an_error() -> None:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP])
    with pytest.raises(ValueError, match="accepts nothing"):
        GrammarMatcher(TokenIndex(ToyDFA([[0] * 256] * 2, accepting=[]), info))


# -- real tokenizers -------------------------------------------------------------------

WORD = st.text(
    st.sampled_from(list("abcxyz ABC019_-.,:;!?'\"\\/{}[]()éüßçñ中文日本語한국😀🎉\n\t")),
    min_size=1,
    max_size=12,
)


def walk_tokens(matcher: GrammarMatcher, ids: list[int]) -> None:
    """Accept `ids` one by one, each one allowed by the mask at its step; then stop."""
    for step, token_id in enumerate(ids):
        assert matcher.allowed_mask()[token_id], (step, token_id)
        assert matcher.accept_token(token_id), (step, token_id)
    assert matcher.is_accepting
    stops = list(matcher.index.info.stop_ids)
    assert matcher.allowed_mask()[stops].all()
    assert matcher.accept_token(stops[0]) and matcher.is_finished


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(WORD, min_size=1, max_size=6, unique=True), pick=st.integers(0, 5))
def test_real_tokenizations_of_a_finite_language(
    name, words, pick, tokenizer_factory, tokenizer_info_factory
) -> None:
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    # a leading space makes SentencePiece spell exactly the text (it adds none then)
    texts = [" " + w for w in words]
    matcher = GrammarMatcher(TokenIndex(literal_dfa(t.encode() for t in texts), info))
    text = texts[pick % len(texts)]
    walk_tokens(matcher, tokenizer(text, add_special_tokens=False).input_ids)


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_tokenizations_of_json_like_text(name, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    dfa = chain_dfa(b' {"name": ', STRING, b', "age": ', DIGITS, b', "tags": [', STRING, b"]}")
    index = TokenIndex(dfa, info)
    for text in [
        ' {"name": "Zoë \\"Z\\" 中文 😀", "age": 42, "tags": ["a\\nb"]}',
        ' {"name": "", "age": 0, "tags": [""]}',
        ' {"name": "O\'Brien, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "age": 1234567, "tags": ["x y z"]}',
    ]:
        walk_tokens(GrammarMatcher(index), tokenizer(text, add_special_tokens=False).input_ids)
