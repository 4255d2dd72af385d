"""TokenizerInfo: the exact bytes of every token id, the stop ids and the logits width.

Bytes, not characters (docs/design.md §4): a token may hold half a UTF-8 character, so each id
gets its raw byte string, read from the tokenizer's vocabulary, never from `decode([id])`.

- Byte-level BPE (GPT-2, Qwen, Tekken, Llama-3): each character of the token string stands
  for one byte through GPT-2's `bytes_to_unicode` table; the table is inverted here.
- SentencePiece: `▁` is a space, `<0xNN>` (byte fallback) is that byte, the rest is UTF-8.
- Special tokens (every added token marked special, every `all_special_ids` entry) and the
  padding ids between the tokenizer length and the logits width have no bytes (`None`).
  Added tokens that are not special are plain text: their content's UTF-8 bytes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPIECE_SPACE = "\u2581"  # ▁


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character table (256 entries)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    table = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shift)
            shift += 1
    return table


_UNICODE_TO_BYTE: dict[str, int] = {ch: b for b, ch in bytes_to_unicode().items()}


def byte_level_bytes(token: str) -> bytes | None:
    """Bytes of a byte-level BPE token string; None if a character is not in the table."""
    try:
        return bytes(_UNICODE_TO_BYTE[ch] for ch in token)
    except KeyError:
        return None


def sentencepiece_bytes(token: str) -> bytes:
    """Bytes of a SentencePiece piece: `<0xNN>` → that byte, `▁` → space, else UTF-8."""
    match = _BYTE_FALLBACK.fullmatch(token)
    if match:
        return bytes([int(match.group(1), 16)])
    return token.replace(_SPIECE_SPACE, " ").encode("utf-8")


class TokenizerInfo:
    """Each token id's exact bytes (None: no bytes), the stop ids and the logits width.

    `token_bytes` has `vocab_size` entries (the model's logits width, which may exceed the
    tokenizer length; the padding ids are None). `fingerprint` is a sha256 over the byte
    table, the width and the stop ids: equal fingerprints mean interchangeable indexes.
    """

    def __init__(
        self,
        token_bytes: Sequence[bytes | None],
        stop_ids: Iterable[int] = (),
        vocab_size: int | None = None,
    ) -> None:
        width = len(token_bytes) if vocab_size is None else vocab_size
        table = list(token_bytes[:width])
        table += [None] * (width - len(table))
        stops = tuple(dict.fromkeys(int(i) for i in stop_ids))
        bad = [i for i in stops if not 0 <= i < width]
        if bad:
            raise ValueError(f"stop ids {bad} are outside the logits width {width}")
        self.token_bytes: list[bytes | None] = table
        self.stop_ids: tuple[int, ...] = stops
        self.vocab_size: int = width
        self.fingerprint: str = _fingerprint(table, stops)

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_size={self.vocab_size}, stop_ids={self.stop_ids}, "
            f"fingerprint={self.fingerprint[:12]})"
        )

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        vocab_size: int | None = None,
        generation_config: Any = None,
        extra_stop_ids: Iterable[int] = (),
    ) -> TokenizerInfo:
        """Read a transformers tokenizer's byte table and stop ids.

        `vocab_size` is the model's logits width (default: the tokenizer's size); ids the
        model cannot emit (at or above it), stop ids included, are dropped. Stop ids: the
        tokenizer's eos, then `generation_config.eos_token_id` (an int or a list; object or
        mapping), then `extra_stop_ids`.
        """
        vocab: dict[str, int] = tokenizer.get_vocab()
        size = max(len(tokenizer), max(vocab.values(), default=-1) + 1)
        width = size if vocab_size is None else int(vocab_size)
        added = tokenizer.added_tokens_decoder
        special = {i for i, tok in added.items() if tok.special}
        special.update(tokenizer.all_special_ids)
        regular = {tok: i for tok, i in vocab.items() if i not in added}
        to_bytes = _scheme(regular)

        table: list[bytes | None] = [None] * width
        for token, i in regular.items():
            if i < width and i not in special:
                table[i] = to_bytes(token)
        for i, tok in added.items():
            if i < width and i not in special:
                table[i] = tok.content.encode("utf-8")

        stops = [tokenizer.eos_token_id, *_config_eos(generation_config), *extra_stop_ids]
        return cls(table, (i for i in stops if i is not None and i < width), width)


def _scheme(regular: Mapping[str, int]) -> Callable[[str], bytes | None]:
    """The token-string → bytes function that fits this vocabulary.

    Byte fallback pieces mean SentencePiece. Otherwise the vocabulary is byte-level when
    nearly every token spells bytes through the table (a stray token that does not gets
    None, so one odd entry cannot flip the whole table); else it is SentencePiece without
    byte fallback (where `▁` starts about half of the pieces).
    """
    if "<0x00>" in regular:
        return sentencepiece_bytes
    alphabet = _UNICODE_TO_BYTE.keys()
    stray = sum(1 for token in regular if not set(token) <= alphabet)
    if stray <= len(regular) // 100:
        return byte_level_bytes
    return sentencepiece_bytes


def _config_eos(generation_config: Any) -> list[int]:
    """`eos_token_id` of a GenerationConfig (or a mapping) as a list."""
    if generation_config is None:
        return []
    if isinstance(generation_config, Mapping):
        eos = generation_config.get("eos_token_id")
    else:
        eos = getattr(generation_config, "eos_token_id", None)
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(i) for i in eos]


def _fingerprint(table: Sequence[bytes | None], stops: Sequence[int]) -> str:
    digest = hashlib.sha256()
    digest.update(f"kor-vocab-v1 {len(table)} {list(stops)}\n".encode())
    for token in table:
        # length-prefixed so that no two different tables hash the same stream
        digest.update(b"\xff\xff\xff\xff" if token is None else len(token).to_bytes(4, "little"))
        digest.update(token or b"")
    return digest.hexdigest()
