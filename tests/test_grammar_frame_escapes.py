"""frame_escapes: escape rows grouped by the first byte of their suffix, on use."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.frame_escapes import Escape, frame_mask, stored_rows
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.grammar.vocab import TokenizerInfo

TOKENS = [b"}", b"},", b"}]", b"},{", b"}}", b"a}", b"a},", None]


def rows(pairs: list[tuple[int, int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(np.asarray([t for t, _ in pairs]), np.asarray([o for _, o in pairs]))]


def test_escapes_are_grouped_by_the_byte_the_caller_reads() -> None:
    # token 6 (a},) escapes after `a` and after `a}`
    pairs = [(1, 1), (2, 1), (3, 1), (4, 1), (6, 1), (6, 2)]
    mask = frame_mask(np.zeros(1, dtype="<u4"), False, TOKENS, rows(pairs))
    assert mask.escape_bytes == 1 << ord(",") | 1 << ord("]") | 1 << ord("}")
    assert mask.escapes_at(ord(",")) == (Escape(b",", (1, 6)), Escape(b",{", (3,)))
    assert mask.escapes_at(ord("}")) == (Escape(b"}", (4,)), Escape(b"},", (6,)))
    assert mask.escapes_at(ord("x")) == ()
    assert mask.escape_tokens.tolist() == [1, 2, 3, 4, 6]
    grouped = mask.escapes()
    assert sorted(grouped) == [ord(","), ord("]"), ord("}")]
    stored = [(e.suffix, e.tokens) for group in grouped.values() for e in group]
    again = frame_mask(mask.stays, False, TOKENS, stored_rows(stored, TOKENS))
    assert again.escapes() == grouped


def test_a_frame_without_escapes() -> None:
    mask = frame_mask(np.zeros(1, dtype="<u4"), True, TOKENS)
    assert mask.ends and mask.escape_bytes == 0 and mask.escapes() == {}
    assert mask.escape_tokens.tolist() == []


@given(
    st.lists(st.binary(min_size=1, max_size=24), min_size=70, max_size=120, unique=True),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=30, deadline=None)
def test_bytes_at_escape_offsets_read_off_the_matrix_equal_byte_by_byte(
    vocab: list[bytes], seed: int
) -> None:
    # a frame with many escape rows reads the byte at each offset off the sorted tokens'
    # padded matrix (tokens past its WIDTH, and ids it lacks, one by one): same groups
    token_bytes: list[bytes | None] = [*vocab, None]
    info = TokenizerInfo(token_bytes, stop_ids=[len(vocab)])
    rng = np.random.default_rng(seed)
    pairs = sorted(
        {(t, int(rng.integers(0, len(vocab[t])))) for t in rng.integers(0, len(vocab), 90)}
    )
    pairs.append((len(vocab), 0))  # the stop id: no bytes, not among the sorted tokens
    stays = np.zeros(-(-len(token_bytes) // 32), dtype="<u4")
    fast = frame_mask(stays, False, token_bytes, rows(pairs), sorted_tokens(info))
    slow = frame_mask(stays, False, token_bytes, rows(pairs))
    assert fast.firsts.tolist() == slow.firsts.tolist()
    assert fast.escape_bytes == slow.escape_bytes
    assert fast.escapes() == slow.escapes()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1 << 40), max_size=40), st.integers(1, 1 << 40))
def test_distinct_is_numpys_unique(values: list[int], high: int) -> None:
    array = np.asarray([v % high for v in values], dtype=np.int64)
    got, want = distinct(array), np.unique(array)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 70), st.integers(0, 7)), max_size=150))
def test_escape_tokens_are_the_rows_distinct_tokens(pairs: list[tuple[int, int]]) -> None:
    # fewer rows than the matrix threshold are sorted in Python, more by `distinct`
    token_bytes: list[bytes | None] = [bytes([65 + t % 26]) * 8 for t in range(71)]
    stays = np.zeros(3, dtype="<u4")
    rows = [(np.array([t for t, _ in pairs], np.int64), np.array([o for _, o in pairs], np.int64))]
    mask = frame_mask(stays, False, token_bytes, rows)
    got = mask.escape_tokens
    assert got.dtype == np.int64 and got.tolist() == sorted({t for t, _ in pairs})
