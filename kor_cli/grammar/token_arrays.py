"""The sorted tokens of a tokenizer, and walks of many of them at once as arrays.

`SortedTokens` keeps a tokenizer's walkable tokens sorted by their bytes (the tokens sharing
a prefix are one range), their ids, where each first byte starts, the positions of the
tokens holding a byte before their end, and a padded matrix of their first `WIDTH` bytes
(built on first use). `walk_range` / `walk_positions` run a rule's table over rows of that
matrix (the bytes past `WIDTH` one by one), telling per token where it ends and whether it
met a crossing state on the way; `crossing_candidates` uses them for a dense state's
candidates (`frame_walk`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from kor_cli.grammar.index import token_trie
from kor_cli.grammar.vocab import TokenizerInfo

CANDIDATE_LIMIT = 20_000  # tokens walked at once for a dense state's candidates
WIDTH = 16  # bytes per token in the padded matrix (longer tokens finish in Python)
_ONE = [bytes((b,)) for b in range(256)]


class SortedTokens:
    """The walkable tokens of one tokenizer (stop ids left out), sorted by their bytes, and
    their ids (the byte trie's order)."""

    def __init__(self, info: TokenizerInfo) -> None:
        trie = token_trie(info)
        self._source: Sequence[bytes] = trie.tokens
        self._tokens: list[bytes] | None = self._source if isinstance(self._source, list) else None
        self.ids: np.ndarray = np.asarray(trie.token_ids, dtype=np.int64)
        self._holding: dict[int, np.ndarray] = {}
        self._buffer: tuple[np.ndarray, np.ndarray] | None = None
        self._starts: list[int] | None = None
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None
        self._positions: np.ndarray | None = None

    @property
    def tokens(self) -> list[bytes]:
        """The sorted token bytes as a plain list (from a trie restored from the disk cache,
        made on first use: ~25 ms for Qwen, which a matcher whose masks all come from the
        cache never pays)."""
        if self._tokens is None:
            self._tokens = _as_list(self._source)
        return self._tokens

    def starts(self) -> list[int]:
        """257 positions: where the tokens whose first byte is b begin (b = 0..256)."""
        if self._starts is None:
            tokens = self.tokens
            self._starts = [bisect_left(tokens, _ONE[b]) for b in range(256)] + [len(tokens)]
        return self._starts

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token's length and its first WIDTH bytes as a zero-padded uint8 matrix
        (made once per tokenizer, on the first array walk)."""
        if self._matrix is None:
            padded = _padded([data[:WIDTH] for data in self.tokens])[1]
            lengths = np.fromiter(map(len, self.tokens), np.int64, count=len(self.tokens))
            self._matrix = lengths, padded
        return self._matrix

    def position(self, ids: np.ndarray) -> np.ndarray:
        """The positions in the sorted list of token `ids` (-1: not walkable)."""
        if self._positions is None:
            self._positions = np.full(int(self.ids.max(initial=0)) + 1, -1, dtype=np.int64)
            self._positions[self.ids] = np.arange(len(self.ids))
        inside = ids < len(self._positions)
        return np.where(inside, self._positions[np.where(inside, ids, 0)], -1)

    def holding(self, byte: int) -> np.ndarray:
        """The positions (ascending) of the tokens that hold `byte` before their last
        byte (found once per byte, by one scan of all token bytes)."""
        found = self._holding.get(byte)
        if found is None:
            if self._buffer is None:
                lengths = np.fromiter(map(len, self.tokens), np.int64, count=len(self.tokens))
                joined = np.frombuffer(b"".join(self.tokens), dtype=np.uint8)
                self._buffer = joined, np.cumsum(lengths)
            joined, ends = self._buffer
            at = np.flatnonzero(joined == byte)
            owner = np.searchsorted(ends, at, side="right")
            found = self._holding[byte] = np.unique(owner[at + 1 < ends[owner]])
        return found


_SORTED: dict[str, SortedTokens] = {}


def sorted_tokens(info: TokenizerInfo) -> SortedTokens:
    """The `SortedTokens` of `info` (made once per tokenizer; the latest few are kept)."""
    found = _SORTED.get(info.fingerprint)
    if found is None:
        if len(_SORTED) >= 4:
            _SORTED.pop(next(iter(_SORTED)))
        found = _SORTED[info.fingerprint] = SortedTokens(info)
    return found


def _as_list(tokens: Sequence[bytes]) -> list[bytes]:
    """A plain list of a token sequence restored from the disk cache (bisection compares
    list items in C; a `PackedBytes` would run Python per comparison)."""
    ends = getattr(tokens, "_ends", None)
    data = getattr(tokens, "_data", None)
    if ends is None or data is None:
        return list(tokens)
    stops = ends.tolist()
    return [data[a:b] for a, b in zip([0, *stops[:-1]], stops, strict=True)]


def walk_range(
    sorted_: SortedTokens,
    lo: int,
    hi: int,
    depth: int,
    state: int,
    table: np.ndarray,
    crossing: np.ndarray,
) -> tuple[list[int], list[int]]:
    """The tokens lo..hi (sharing a prefix of length `depth` that leads to `state`, none of
    that length) read by bytes, and those that meet a crossing state (after their first
    byte) then die, walked as one array."""
    positions = np.arange(lo, hi)
    now, crossed = walk_positions(sorted_, positions, depth, state, table, crossing, depth > 0)
    return positions[now != 0].tolist(), positions[crossed & (now == 0)].tolist()


def walk_positions(
    sorted_: SortedTokens,
    positions: np.ndarray,
    depth: int,
    state: int,
    table: np.ndarray,
    crossing: np.ndarray,
    started: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """`_walk_padded` over the tokens at `positions` (ascending) from byte `depth` on: the
    rows of the tokenizer's padded matrix, and the bytes past WIDTH one by one."""
    if depth >= WIDTH:
        lengths, padded = _padded([sorted_.tokens[p][depth:] for p in positions.tolist()])
        return _walk_padded(lengths, padded, state, table, crossing, started)
    all_lengths, matrix = sorted_.matrix()
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        rows = slice(int(positions[0]), int(positions[-1]) + 1)  # a range: views, no copy
        lengths, padded = all_lengths[rows] - depth, matrix[rows, depth:]
    else:
        lengths, padded = all_lengths[positions] - depth, matrix[positions, depth:]
    now, crossed = _walk_padded(lengths, padded, state, table, crossing, started)
    width = WIDTH - depth
    for row in np.flatnonzero((lengths > width) & (now != 0)).tolist():
        at, met = int(now[row]), bool(crossed[row])
        for byte in sorted_.tokens[int(positions[row])][WIDTH:]:
            met |= bool(crossing[at, byte])
            at = int(table[at, byte])
            if not at:
                break
        now[row], crossed[row] = at, met
    return now, crossed


def _padded(chosen: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The lengths of byte strings and the strings as a zero-padded uint8 matrix."""
    lengths = np.fromiter(map(len, chosen), np.int64, count=len(chosen))
    flat = np.frombuffer(b"".join(chosen), dtype=np.uint8)
    padded = np.zeros((len(chosen), int(lengths.max(initial=0))), dtype=np.uint8)
    rows = np.repeat(np.arange(len(chosen)), lengths)
    padded[rows, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    return lengths, padded


def _walk_padded(
    lengths: np.ndarray,
    padded: np.ndarray,
    state: int,
    table: np.ndarray,
    crossing: np.ndarray,
    started: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's state after its bytes from `state` (0: died), and whether it met a
    crossing state that can read its next byte (from the first byte on when `started`,
    else from the second). Rows that died or ended are dropped every few bytes, so a long
    token costs only its own steps."""
    now = np.full(len(lengths), state, dtype=np.int64)
    crossed = np.zeros(len(lengths), dtype=bool)
    steps, cross = np.ravel(table), np.ravel(crossing)
    rows, at, left = np.arange(len(lengths)), now, lengths
    for offset in range(padded.shape[1]):
        if offset:
            going = (left > offset) & (at != 0)
            if not going.all():
                now[rows[~going]] = at[~going]
                rows, at, left = rows[going], at[going], left[going]
                if not len(rows):
                    break
        index = at * 256 + padded[:, offset].take(rows)
        if offset or started:
            met = cross.take(index)
            if met.any():
                crossed[rows[met]] = True
        at = steps.take(index)
    else:
        now[rows] = at
    return now, crossed


def crossing_candidates(
    sorted_: SortedTokens,
    table: np.ndarray,
    crossing: np.ndarray,
    state: int,
    entries: Sequence[int],
    limit: int = CANDIDATE_LIMIT,
) -> np.ndarray | None:
    """The candidates from `state` of a rule that reads many bytes (a string body): token
    ids whose byte path meets, after a byte, a crossing state that can read the next byte
    (`crossing[s, b]`), and dies by bytes later. Only tokens holding one of `entries` (the
    bytes into a crossing state from the states `state` reaches) before their last byte
    can, so only those are walked, all at once. None when more than `limit` do."""
    parts = [sorted_.holding(byte) for byte in entries]
    positions = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    if len(positions) > limit:
        return None
    if not len(positions):
        return positions
    now, crossed = walk_positions(sorted_, positions, 0, state, table, crossing, False)
    return sorted_.ids[positions[crossed & (now == 0)]]


def escape_offsets(
    sorted_: SortedTokens,
    ids: np.ndarray,
    state: int,
    table: np.ndarray,
    accepting: np.ndarray,
    calls: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """How each token of `ids` reads from `state` of a rule by bytes, as arrays: `settled`
    (its byte path dies, meeting no call state after its first byte) and, for those, the
    offsets k >= 1 where the path stood at an accepting state before byte k (bit k: there
    the token can escape, the caller reading the rest; none: the token is dead). Others
    (a call met, or read to the end by bytes) need the stack simulation. Tokens longer
    than WIDTH bytes are left to it too."""
    lengths, matrix = sorted_.matrix()
    positions = sorted_.position(ids)
    known = positions >= 0
    positions = np.where(known, positions, 0)
    lengths = lengths[positions]
    padded = matrix[positions]
    settled = known & (lengths <= WIDTH)
    where = np.zeros(len(ids), dtype=np.int64)
    steps = np.ravel(table)
    now = np.full(len(ids), state, dtype=np.int64)
    rows = np.flatnonzero(settled)
    at, left = now[rows], lengths[rows]
    for offset in range(WIDTH):
        if offset:
            going = (left > offset) & (at != 0)
            stop = calls[at] & going
            if stop.any():  # a call met: the simulation decides
                settled[rows[stop]] = False
                going &= ~stop
            if not going.all():
                now[rows[~going]] = at[~going]
                rows, at, left = rows[going], at[going], left[going]
                if not len(rows):
                    break
            hit = accepting[at]
            if hit.any():
                where[rows[hit]] |= 1 << offset
        at = steps.take(at * 256 + padded[:, offset].take(rows))
    else:
        now[rows] = at
    settled &= now == 0  # read to their end by bytes: the simulation decides
    return settled, where
