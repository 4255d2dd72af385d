"""TokenizerInfo: exact token bytes, stop ids and logits width, on toy and real tokenizers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.grammar.vocab import (
    TokenizerInfo,
    byte_level_bytes,
    bytes_to_unicode,
    sentencepiece_bytes,
)
from kor_cli.testing import QWEN_LOGITS_WIDTH, TOKENIZER_NAMES

TEXTS = [
    "hello world",
    "Hello, World! 123 4567.89",
    "  leading and trailing spaces  ",
    "tabs\tand\nnew\r\nlines\n\n",
    "accents: héllo wörld, naïve café, Ærøskøbing, ñ",
    "CJK: 中文字符，日本語のテキスト，한국어 텍스트",
    "emoji: 😀🎉👍🏽 👨‍👩‍👧 🇫🇷",
    '{"name": "Ana", "age": 31, "tags": ["a", "b"], "ok": true, "x": null}',
    '{\n  "nested": {"q": "say \\"hi\\"", "path": "C:\\\\dir"}\n}',
    "math ∑∫√ and symbols ©®™ and control \x01\x7f",
    "Ünïcödé ẞ ŉ ǅ ﬁ",  # letters that normalisers like to change
]

SPIECE = "\u2581"


def test_bytes_to_unicode_is_a_bijection() -> None:
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"


def test_byte_level_and_sentencepiece_decoding() -> None:
    assert byte_level_bytes("ĠÃ©") == b" \xc3\xa9"
    assert byte_level_bytes(SPIECE + "a") is None
    assert sentencepiece_bytes(SPIECE + "hello") == b" hello"
    assert sentencepiece_bytes("<0x0A>") == b"\n"
    assert sentencepiece_bytes("<0xE4>") == b"\xe4"
    assert sentencepiece_bytes("<0x0A>x") == b"<0x0A>x"
    assert sentencepiece_bytes("é") == "é".encode()


def test_direct_construction_pads_to_logits_width() -> None:
    info = TokenizerInfo([b"a", None, b"bc"], stop_ids=[1, 1], vocab_size=5)
    assert info.token_bytes == [b"a", None, b"bc", None, None]
    assert info.stop_ids == (1,)
    assert info.vocab_size == 5
    with pytest.raises(ValueError, match="outside the logits width"):
        TokenizerInfo([b"a"], stop_ids=[3])


def test_fingerprint_changes_with_bytes_stops_and_width() -> None:
    base = TokenizerInfo([b"a", b"b", None], stop_ids=[2])
    assert base.fingerprint == TokenizerInfo([b"a", b"b", None], stop_ids=[2]).fingerprint
    others = [
        TokenizerInfo([b"a", b"c", None], stop_ids=[2]),
        TokenizerInfo([b"ab", b"", None], stop_ids=[2]),
        TokenizerInfo([b"a", b"b", None], stop_ids=[]),
        TokenizerInfo([b"a", b"b", None], stop_ids=[2], vocab_size=4),
        TokenizerInfo([b"a", b"b", b""], stop_ids=[2]),
    ]
    assert len({base.fingerprint, *(o.fingerprint for o in others)}) == 6


class FakeTokenizer:
    """The handful of transformers tokenizer attributes that from_hf reads."""

    def __init__(self, vocab: dict[str, int], added: dict[int, tuple[str, bool]], eos: int | None):
        self._vocab = vocab
        self.added_tokens_decoder = {
            i: SimpleNamespace(content=c, special=s) for i, (c, s) in added.items()
        }
        self.eos_token_id = eos
        self.all_special_ids = [eos] if eos is not None else []

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)


def test_from_hf_byte_level_with_added_tokens_and_stops() -> None:
    vocab = {"a": 0, "Ġb": 1, "Ã©": 2, "<|end|>": 3, "<tool>": 4, "<|pad|>": 5}
    added = {3: ("<|end|>", True), 4: ("<tool>", False), 5: ("<|pad|>", True)}
    tok = FakeTokenizer(vocab, added, eos=3)
    info = TokenizerInfo.from_hf(
        tok, vocab_size=8, generation_config={"eos_token_id": [5, 3]}, extra_stop_ids=[0]
    )
    assert info.token_bytes == [b"a", b" b", b"\xc3\xa9", None, b"<tool>", None, None, None]
    assert info.stop_ids == (3, 5, 0)
    config = SimpleNamespace(eos_token_id=5)
    assert TokenizerInfo.from_hf(tok, generation_config=config).stop_ids == (3, 5)
    assert TokenizerInfo.from_hf(tok, vocab_size=3).token_bytes == [b"a", b" b", b"\xc3\xa9"]


def test_from_hf_sentencepiece_detected_by_byte_fallback() -> None:
    vocab = {"<unk>": 0, "</s>": 1, "<0x00>": 2, "<0x0A>": 3, SPIECE + "hi": 4, "é": 5, "Ġ": 6}
    tok = FakeTokenizer(vocab, {0: ("<unk>", True), 1: ("</s>", True)}, eos=1)
    info = TokenizerInfo.from_hf(tok)
    assert info.token_bytes == [None, None, b"\x00", b"\n", b" hi", "é".encode(), "Ġ".encode()]
    assert info.stop_ids == (1,)


def test_from_hf_byte_level_with_a_stray_token() -> None:
    vocab = {f"t{i}": i for i in range(200)} | {"Ġx": 200, "odd\u2581": 201}
    info = TokenizerInfo.from_hf(FakeTokenizer(vocab, {}, eos=None))
    assert info.token_bytes[200] == b" x" and info.token_bytes[201] is None


def test_from_hf_sentencepiece_without_byte_fallback() -> None:
    tok = FakeTokenizer({SPIECE + "x": 0, "y": 1}, {}, eos=None)
    info = TokenizerInfo.from_hf(tok)
    assert info.token_bytes == [b" x", b"y"]
    assert info.stop_ids == ()


# -- real tokenizers -------------------------------------------------------------------


def expected_bytes(name: str, text: str) -> bytes:
    """What the tokenizer's tokens spell: SentencePiece prepends a space unless one leads."""
    if name == "mistral-sp" and text and not text.startswith(" "):
        text = " " + text
    return text.encode("utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_tokens_concatenate_to_the_text(name, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    for text in TEXTS:
        ids = tokenizer(text, add_special_tokens=False).input_ids
        assert all(info.token_bytes[i] is not None for i in ids), text
        assert b"".join(info.token_bytes[i] for i in ids) == expected_bytes(name, text), text


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40))
def test_real_round_trip_property(name, text, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if any(info.token_bytes[i] is None for i in ids):
        # only text that spells a special token's content may map to it
        specials = [tokenizer.convert_ids_to_tokens(i) for i in ids if info.token_bytes[i] is None]
        assert all(s in text for s in specials)
        return
    assert b"".join(info.token_bytes[i] for i in ids) == expected_bytes(name, text)


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_specials_have_no_bytes(name, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    specials = [i for i, tok in tokenizer.added_tokens_decoder.items() if tok.special]
    assert specials and all(info.token_bytes[i] is None for i in specials)
    assert tokenizer.eos_token_id in info.stop_ids
    assert len(info.token_bytes) == info.vocab_size
    assert all(b for b in info.token_bytes if b is not None), "no empty-byte tokens expected"


@pytest.mark.slow
def test_real_special_counts(tokenizer_info_factory):
    qwen = tokenizer_info_factory("qwen")
    assert qwen.vocab_size == QWEN_LOGITS_WIDTH
    assert qwen.token_bytes[151_851:] == [None] * (QWEN_LOGITS_WIDTH - 151_851)
    assert sum(b is None for b in qwen.token_bytes) == 208 + QWEN_LOGITS_WIDTH - 151_851
    tekken = tokenizer_info_factory("tekken")
    assert sum(b is None for b in tekken.token_bytes[:1000]) == 1000
    assert all(b is not None for b in tekken.token_bytes[1000:])
    mistral = tokenizer_info_factory("mistral-sp")
    assert [mistral.token_bytes[i] for i in range(771, 774)] == [b"\x00", b"\x01", b"\x02"]
    # every single byte has a token, so any UTF-8 text can be spelled
    assert {b for b in mistral.token_bytes if b is not None and len(b) == 1} >= {
        bytes([i]) for i in range(256)
    }
