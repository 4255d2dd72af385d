"""A frame's masks as `pushdown` reads them, with its escaping tokens grouped on use.

A frame mask (`frame_masks`) holds the tokens that stay in the frame (packed words) and
the *escapes*: tokens read by ending the frame after some bytes, the caller reading the
rest (the suffix). The matcher only needs the escapes whose suffix starts with a byte the
real caller can read next, so they are kept as flat rows (token, offset, the byte at that
offset) and grouped into (suffix, tokens) by that byte the first time a stack asks for it
(`escapes_at`): after `}` a tokenizer has hundreds of tokens (`})`, `});`, `}\\n`, ...) and
a compact JSON caller reads only `,`, `]` and `}` there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.token_arrays import WIDTH, SortedTokens

_NONE = np.zeros(0, dtype=np.int64)
_VECTOR_ROWS = 64  # fewer escape rows read their bytes one by one


class Escape(NamedTuple):
    """The escaping tokens that leave `suffix` for the caller to read."""

    suffix: bytes
    tokens: tuple[int, ...]


class FrameMask:
    """The token masks of one top frame (see `frame_masks`): `stays` (packed <u4 words, stop
    ids never set), `ends` (the frame can end before reading a byte), and the escape rows:
    token ids, where each escapes (the caller reads from that byte on) and the byte there
    (`firsts`); `escape_bytes`: every first byte of a suffix, as a 256-bit int."""

    __slots__ = (
        "stays", "ends", "tokens", "offsets", "firsts", "token_bytes", "escape_bytes",
        "_grouped", "_every", "_by_token",
    )  # fmt: skip

    def __init__(
        self,
        stays: np.ndarray,
        ends: bool,
        tokens: np.ndarray = _NONE,
        offsets: np.ndarray = _NONE,
        firsts: np.ndarray = _NONE,
        token_bytes: Sequence[bytes | None] = (),
        escape_bytes: int = 0,
    ) -> None:
        self.stays, self.ends = stays, ends
        self.tokens, self.offsets, self.firsts = tokens, offsets, firsts
        self.token_bytes, self.escape_bytes = token_bytes, escape_bytes
        self._grouped: dict[int, tuple[Escape, ...]] | None = None  # made on use: most
        # frames are never asked (fewer objects for the collector)
        self._every: np.ndarray | None = None
        self._by_token: dict[int, int] | None = None  # token → its offsets as bits

    @property
    def escape_tokens(self) -> np.ndarray:
        """Every escaping token (ascending, int64)."""
        if self._every is None:
            tokens = self.tokens
            if not len(tokens):
                self._every = _NONE
            elif len(tokens) < _VECTOR_ROWS:  # a few: a sort in Python (~3 numpy calls less)
                self._every = np.array(sorted(set(tokens.tolist())), dtype=np.int64)
            else:
                self._every = distinct(tokens)
        return self._every

    def offset_bits(self) -> dict[int, int]:
        """Every escaping token's offsets, as an int of bits (made once: ints, not a list
        per token, for fewer objects for the collector)."""
        by_token = self._by_token
        if by_token is None:
            by_token = self._by_token = {}
            for row, at in zip(self.tokens.tolist(), self.offsets.tolist(), strict=True):
                by_token[row] = by_token.get(row, 0) | 1 << at
        return by_token

    def escapes_at(self, byte: int) -> tuple[Escape, ...]:
        """The escapes whose suffix starts with `byte`, by suffix (tokens ascending)."""
        grouped = self._grouped
        if grouped is None:
            grouped = self._grouped = {}
        found = grouped.get(byte)
        if found is None:
            rows = (self.firsts == byte).nonzero()[0]
            by_suffix: dict[bytes, list[int]] = {}
            token_bytes = self.token_bytes
            for token, at in zip(
                self.tokens[rows].tolist(), self.offsets[rows].tolist(), strict=True
            ):
                by_suffix.setdefault((token_bytes[token] or b"")[at:], []).append(token)
            found = tuple(Escape(x, tuple(sorted(t))) for x, t in sorted(by_suffix.items()))
            grouped[byte] = found
        return found

    def escapes(self) -> dict[int, tuple[Escape, ...]]:
        """Every escape, grouped by the first byte of its suffix."""
        bits, out = self.escape_bytes, {}
        while bits:
            byte = (bits & -bits).bit_length() - 1
            bits &= bits - 1
            out[byte] = self.escapes_at(byte)
        return out


def frame_mask(
    stays: np.ndarray,
    ends: bool,
    token_bytes: Sequence[bytes | None],
    rows: Iterable[tuple[np.ndarray, np.ndarray]] = (),
    sorted_: SortedTokens | None = None,
) -> FrameMask:
    """A `FrameMask` from its stays words, `ends`, and escape rows as (token ids, offsets)
    arrays (a token may escape at several offsets: one row each; no row twice). With the
    tokenizer's `sorted_` tokens, the bytes at the offsets are read off their padded matrix
    as arrays (a string body's frame has a thousand rows or more) instead of one by one."""
    parts = [(t, o) for t, o in rows if len(t)]
    if not parts:
        return FrameMask(stays, ends, token_bytes=token_bytes)
    if sum(len(t) for t, _ in parts) < _VECTOR_ROWS:  # few: as lists (~8 numpy calls less)
        ids: list[int] = []
        ats: list[int] = []
        for t, o in parts:
            ids += t.tolist()
            ats += o.tolist()
        bytes_ = [(token_bytes[t] or b"\0")[o] for t, o in zip(ids, ats, strict=True)]
        escape_bytes = 0
        for byte in bytes_:
            escape_bytes |= 1 << byte
        return FrameMask(
            stays,
            ends,
            np.array(ids, dtype=np.int64),
            np.array(ats, dtype=np.int64),
            np.array(bytes_, dtype=np.uint8),
            token_bytes,
            escape_bytes,
        )
    tokens = np.concatenate([t for t, _ in parts]).astype(np.int64, copy=False)
    offsets = np.concatenate([o for _, o in parts]).astype(np.int64, copy=False)
    firsts = _firsts(tokens, offsets, token_bytes, sorted_)
    present = np.zeros(256, dtype=bool)
    present[firsts] = True
    escape_bytes = int.from_bytes(np.packbits(present, bitorder="little").tobytes(), "little")
    return FrameMask(stays, ends, tokens, offsets, firsts, token_bytes, escape_bytes)


def _firsts(
    tokens: np.ndarray,
    offsets: np.ndarray,
    token_bytes: Sequence[bytes | None],
    sorted_: SortedTokens | None,
) -> np.ndarray:
    """The byte of each token at its offset (uint8), from the padded matrix where the
    offset lies inside it (one take at flat indexes: no `np.where`s nor a 2-D fancy
    index), the rest one by one."""
    if sorted_ is None or len(tokens) < _VECTOR_ROWS:
        pairs = zip(tokens.tolist(), offsets.tolist(), strict=True)
        return np.fromiter(
            ((token_bytes[t] or b"\0")[o] for t, o in pairs), dtype=np.uint8, count=len(tokens)
        )
    positions = sorted_.position(tokens)
    inside = (positions >= 0) & (offsets < WIDTH)
    matrix = sorted_.matrix()[1]  # C order; the rows outside clip, fixed below
    firsts = matrix.reshape(-1).take(positions * matrix.shape[1] + offsets, mode="clip")
    for row in (~inside).nonzero()[0].tolist():
        firsts[row] = (token_bytes[int(tokens[row])] or b"\0")[int(offsets[row])]
    return firsts


def stored_rows(
    escapes: Iterable[tuple[bytes, Sequence[int]]], token_bytes: Sequence[bytes | None]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Escape rows from (suffix, tokens) pairs (as the disk cache keeps them)."""
    tokens: list[int] = []
    offsets: list[int] = []
    for suffix, group in escapes:
        for token in group:
            tokens.append(token)
            offsets.append(len(token_bytes[token] or b"") - len(suffix))
    return [(np.asarray(tokens, dtype=np.int64), np.asarray(offsets, dtype=np.int64))]
