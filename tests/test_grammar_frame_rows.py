"""frame_rows: the Python paths for few rows give the array paths' rows, in their order."""

from __future__ import annotations

import numpy as np
import pytest

from kor_cli.grammar import frame_rows
from kor_cli.grammar.frame_rows import ids_of_words, less_rows, offset_rows


def _words(ids: list[int], size: int = 40) -> np.ndarray:
    out = np.zeros(size, dtype="<u4")
    for token in ids:
        out[token >> 5] |= np.uint32(1 << (token & 31))
    return out


def _both(function, *args):
    """`function(*args)` by its Python path and by its array path."""
    small = function(*args)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_rows, "FEW_ROWS", 0)
        patch.setattr(frame_rows, "FEW_WORDS", -1)
        large = function(*args)
    return small, large


@pytest.mark.parametrize("seed", range(20))
def test_less_rows_paths_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    parts = int(rng.integers(1, 4))
    walked = []
    for _ in range(parts):
        size = int(rng.integers(0, 12))
        tokens = rng.integers(0, 1280, size).astype(np.int64)
        offsets = rng.integers(1, 16, size).astype(np.int64)
        walked.append((tokens, offsets))
    every = np.concatenate([t for t, _ in walked]).tolist()
    stays = _words(every[::3])
    candidates = _words(every[1::4]) if seed % 2 else None
    small, large = _both(less_rows, walked, stays, candidates)
    assert small[0].tolist() == large[0].tolist()
    assert small[1].tolist() == large[1].tolist()


@pytest.mark.parametrize("seed", range(20))
def test_offset_rows_paths_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(0, 20))
    tokens = np.sort(rng.choice(5000, size, replace=False)).astype(np.int64)
    where = rng.integers(0, 1 << 17, size).astype(np.int64)  # bits 0 and 16 are no offsets
    where[rng.random(size) < 0.5] = 0
    small, large = _both(offset_rows, tokens, where)
    assert len(small) == len(large)
    for (t1, o1), (t2, o2) in zip(small, large, strict=True):
        assert t1.tolist() == t2.tolist()
        assert o1.tolist() == o2.tolist()


@pytest.mark.parametrize("count", [1, 5, 40, 200])
def test_ids_of_words_paths_agree(count: int) -> None:
    rng = np.random.default_rng(count)
    ids = sorted(set(rng.integers(0, 1270, count).tolist()) | {31, 63})
    words = _words(ids)
    small, large = _both(ids_of_words, words, 1270)
    assert small.tolist() == large.tolist() == [t for t in ids if t < 1270]
    signed = ids_of_words(words.view(np.int32), 1270)  # bit 31 of int32 words
    assert signed.tolist() == small.tolist()
    assert not len(ids_of_words(np.zeros(40, dtype="<u4"), 1270))


@pytest.mark.parametrize("count", [0, 1, 7, 30, 47, 120])
def test_ids_not_in_paths_agree(count: int) -> None:
    rng = np.random.default_rng(count)
    ids = rng.choice(1270, count, replace=False).astype(np.int64)  # any order
    words = _words(rng.integers(0, 1270, 300).tolist() + ids[::2].tolist())
    small, large = _both(frame_rows.ids_not_in, ids, words)
    want = [t for t in ids.tolist() if not words[t >> 5] >> (t & 31) & 1]
    assert small.dtype == large.dtype == np.int64
    assert small.tolist() == large.tolist() == want
