"""A frame build's escape rows and candidate ids, in Python where they are few.

A cold frame build (`frame_masks.FrameMasks._build`) turns a handful of rows or words into
a handful of others: a pruned walk's split as words (`split_words`) and its escapes as rows
(`escape_rows`), the escapes less those that stay or are candidates (`less_rows`), the
offsets of the candidates that end the frame (`offset_rows`), the candidates' ids from
their words (`ids_of_words`). At a JSON value's start on a 32k
vocabulary these hold 5-15 tokens, where each numpy call costs 1-5 us cold and a Python
step ~0.2 us: below `FEW_ROWS` rows they are walked in Python, with the same results (the
same rows in the same order) as the array forms, which larger inputs keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kor_cli.grammar.bitmask import bits_set, set_bits
from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.token_arrays import WIDTH, SortedTokens

if TYPE_CHECKING:
    from kor_cli.grammar.frame_walk import Split

FEW_ROWS = 48  # fewer rows are walked in Python
FEW_WORDS = 16  # `ids_of_words` unpacks this many non-zero words in Python
_FEW = 16  # fewer tokens read by bytes are set in their words one by one (no ufunc.at)
NO_IDS = np.zeros(0, dtype=np.int64)
_OFFSETS = np.arange(1, WIDTH, dtype=np.int64)
_OFFSET_BITS = (1 << WIDTH) - 2  # `offset_rows`' bits 1..WIDTH-1


def less_rows(
    walked: list[tuple[np.ndarray, np.ndarray]],
    stays: np.ndarray,
    candidates: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The escape rows the walks found, less the tokens that stay or are candidates (as
    words; the simulation tells all of their ways). Rows from several walks are made
    distinct and sorted by (token, offset)."""
    if sum(len(t) for t, _ in walked) < FEW_ROWS:
        pairs: list[tuple[int, int]] = []
        for tokens, offsets in walked:
            pairs += zip(tokens.tolist(), offsets.tolist(), strict=True)
        if len(walked) > 1:
            pairs = sorted(set(pairs))
        view = memoryview(stays)
        kept = [(t, o) for t, o in pairs if not view[t >> 5] >> (t & 31) & 1]
        if candidates is not None:
            view = memoryview(candidates)
            kept = [(t, o) for t, o in kept if not view[t >> 5] >> (t & 31) & 1]
        return (
            np.array([t for t, _ in kept], dtype=np.int64),
            np.array([o for _, o in kept], dtype=np.int64),
        )
    tokens = np.concatenate([t for t, _ in walked])
    offsets = np.concatenate([o for _, o in walked])
    if len(walked) > 1:  # walks from several states may find one row twice
        keys = distinct(tokens << 16 | offsets)
        tokens, offsets = keys >> 16, keys & 0xFFFF
    keep = ~bits_set(stays, tokens)
    if candidates is not None:
        keep &= ~bits_set(candidates, tokens)
    return tokens[keep], offsets[keep]


def offset_rows(tokens: np.ndarray, where: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Escape rows of tokens from their offset bits (bit k: escapes before byte k, for k =
    1..WIDTH-1): rows by offset, then tokens in their order."""
    if len(tokens) < FEW_ROWS:
        pairs = [
            (t, w & _OFFSET_BITS)
            for t, w in zip(tokens.tolist(), where.tolist(), strict=True)
            if w & _OFFSET_BITS
        ]
        if not pairs:
            return []
        every = 0
        for _, bits in pairs:
            every |= bits
        found: list[int] = []
        offsets: list[int] = []
        while every:
            low = every & -every
            every ^= low
            at = low.bit_length() - 1
            for token, bits in pairs:
                if bits & low:
                    found.append(token)
                    offsets.append(at)
        return [(np.array(found, dtype=np.int64), np.array(offsets, dtype=np.int64))]
    escaping = where.nonzero()[0]  # most candidates only stay or are dead: no bits
    if not len(escaping):
        return []
    tokens, where = tokens[escaping], where[escaping]
    # bit k of each token's `where` (k = 1..WIDTH-1), offset major: rows by offset, then
    # tokens in their order (one flat nonzero of bools: a 2-D one of int64 is ~3x slower)
    size = len(tokens)
    found_at = (((where[None, :] >> _OFFSETS[:, None]) & 1).astype(bool).ravel()).nonzero()[0]
    rows = found_at // size
    return [(tokens[found_at - rows * size], _OFFSETS[rows])]


def ids_of_words(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """The token ids whose bits are set in packed words (only non-zero words unpacked),
    ascending. Both searches run over bools: numpy's nonzero of a bool array is ~5x faster
    than of uint32 words or unpacked uint8 bits (4,748 words: ~2.5 us, not ~13). Up to
    `FEW_WORDS` non-zero words are unpacked in Python (numpy's five calls cost ~3 us warm,
    ~15 cold)."""
    nonzero = (words != 0).nonzero()[0]
    if len(nonzero) <= FEW_WORDS:
        if not len(nonzero):
            return NO_IDS
        found: list[int] = []
        for index, word in zip(nonzero.tolist(), words[nonzero].tolist(), strict=True):
            base, word = index << 5, word & 0xFFFFFFFF  # (int32 words: bit 31 negative)
            while word:
                low = word & -word
                found.append(base | low.bit_length() - 1)
                word ^= low
        ids = np.array(found, dtype=np.int64)
    else:
        bits = np.unpackbits(words[nonzero].view(np.uint8), bitorder="little").view(bool)
        bits = bits.nonzero()[0]
        ids = nonzero[bits >> 5] * 32 + (bits & 31)
    return ids if ids[-1] < vocab_size else ids[ids < vocab_size]


def ids_not_in(ids: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The token `ids` (int64) whose bits are clear in packed `words`, in their order
    (fewer than `FEW_ROWS` read through a memoryview: no numpy call but the result's)."""
    if len(ids) < FEW_ROWS:
        view = memoryview(words)
        kept = [t for t in ids.tolist() if not view[t >> 5] >> (t & 31) & 1]
        return np.array(kept, dtype=np.int64)
    return ids[~bits_set(words, ids)]


Rows = list[tuple[np.ndarray, np.ndarray]]  # escapes as (token ids, offsets) arrays


def escape_rows(sorted_: SortedTokens, escapes: list[tuple[int, int, int]]) -> Rows:
    """A walk's escapes (ranges of the sorted tokens and where they escape) as rows."""
    ids = sorted_.ids
    return [(ids[lo:hi], np.full(hi - lo, depth, np.int64)) for lo, hi, depth in escapes]


def split_words(
    sorted_: SortedTokens, split: Split, words: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """The packed words of a split's tokens read by bytes, and of its candidates (less
    those read by bytes; None when it has none)."""
    ids = sorted_.ids
    if len(split.stays) <= _FEW:  # a literal's few tokens: no array ops
        stays = np.zeros(words, dtype="<u4")
        for position in split.stays:
            token = int(ids[position])
            stays[token >> 5] |= 1 << (token & 31)
    else:
        stays = _words(ids[np.asarray(split.stays, dtype=np.int64)], words)
    if sum(hi - lo for lo, hi in split.ranges) + len(split.singles) < FEW_ROWS:
        return stays, _few_candidates(ids, split, words)
    parts = [ids[lo:hi] for lo, hi in split.ranges]
    if split.singles:
        parts.append(ids[np.asarray(split.singles, dtype=np.int64)])
    if not parts:
        return stays, None
    candidates = _words(np.concatenate(parts), words)
    candidates &= ~stays
    return stays, candidates


def _few_candidates(ids: np.ndarray, split: Split, words: int) -> np.ndarray | None:
    """`split_words`' candidates where they are few, by positions (a value's start on a
    32k vocabulary: ~12, whose array form costs ~8 numpy calls)."""
    if not split.ranges and not split.singles:
        return None
    stays = set(split.stays)  # (positions and ids match one to one)
    positions = [p for lo, hi in split.ranges for p in range(lo, hi) if p not in stays]
    positions += [p for p in split.singles if p not in stays]
    candidates = np.zeros(words, dtype="<u4")
    if positions:
        view = memoryview(candidates)
        for token in ids[np.asarray(positions, dtype=np.int64)].tolist():
            view[token >> 5] |= 1 << (token & 31)
    return candidates


def _words(ids: np.ndarray, words: int) -> np.ndarray:
    """Packed words with the bits of token `ids` set."""
    if len(ids) > 512:  # many: through a bool array (ufunc.at is slow per element)
        bits = np.zeros(words * 32, dtype=bool)
        bits[ids] = True
        return np.packbits(bits, bitorder="little").view("<u4")
    out = np.zeros(words, dtype="<u4")
    set_bits(out, ids)
    return out
