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

from kor_cli.grammar.free_string import FreeTokens, free_states
from kor_cli.grammar.string_body import BodyTokens
from kor_cli.grammar.token_tables import body_tables, token_trie
from kor_cli.grammar.vocab import TokenizerInfo

CANDIDATE_LIMIT = 20_000  # tokens walked at once for a dense state's candidates
WIDTH = 16  # bytes per token in the padded matrix (longer tokens finish in Python)
_ONE = [bytes((b,)) for b in range(256)]
_BACKSLASH = ord("\\")
# the first bytes (runs) of `free_strings`' tables less the body's: quote, continuations, `\\`
_FIRST_BYTES = ((0x22, 0x23), (0x80, 0xC0), (0x5C, 0x5D))
_PROBE = ord("a")  # a body character: a free string's body reads it back to itself
_PLAIN = np.zeros(256, dtype=bool)  # printable ASCII but `"` and `\`: a string's plain bytes
_PLAIN[0x20:0x7F] = True
_PLAIN[[ord('"'), ord("\\")]] = False
_PLAIN_BYTES = np.flatnonzero(_PLAIN)
_ODD = (~_PLAIN).astype(np.uint8)
LOOP_ROWS = 256  # walks of fewer rows do not look for plain tails in loop states
_LOOPS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


class SortedTokens:
    """The walkable tokens of one tokenizer (stop ids left out), sorted by their bytes, and
    their ids (the byte trie's order)."""

    def __init__(self, info: TokenizerInfo) -> None:
        trie = token_trie(info)
        self._info = info
        self._free: tuple[FreeTokens, FreeTokens, FreeTokens, FreeTokens] | None = None
        self._lead: np.ndarray | None = None
        self._source: Sequence[bytes] = trie.tokens
        self._tokens: list[bytes] | None = self._source if isinstance(self._source, list) else None
        self.ids: np.ndarray = np.asarray(trie.token_ids, dtype=np.int64)
        self._holding: dict[int, np.ndarray] = {}
        self._buffer: tuple[np.ndarray, np.ndarray] | None = None
        self._starts: list[int] | None = None
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None
        self._positions: np.ndarray | None = None
        self._plain: np.ndarray | None = None
        self._alone: tuple[np.ndarray, list[int]] | None = None

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

    def alone(self) -> tuple[np.ndarray, list[int]]:
        """The ids of the one-byte tokens, by byte, and 257 positions into them: where
        those of byte b begin (made once per tokenizer)."""
        if self._alone is None:
            starts, tokens = self.starts(), self.tokens
            found: list[int] = []  # sorted positions: a byte's one-byte tokens come first
            bounds = [0]
            for byte in range(256):
                at = starts[byte]
                while at < starts[byte + 1] and len(tokens[at]) == 1:
                    found.append(at)
                    at += 1
                bounds.append(len(found))
            self._alone = self.ids[np.asarray(found, dtype=np.int64)], bounds
        return self._alone

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token's length and its first WIDTH bytes as a zero-padded uint8 matrix
        (made once per tokenizer, on the first array walk)."""
        if self._matrix is None:
            padded = _padded([data[:WIDTH] for data in self.tokens])[1]
            lengths = np.fromiter(map(len, self.tokens), np.int64, count=len(self.tokens))
            self._matrix = lengths, padded
        return self._matrix

    def plain_from(self) -> np.ndarray:
        """Per sorted token: the offset from which its bytes up to WIDTH are all printable
        ASCII other than `"` and `\\` (plain characters of a JSON string): one past the
        last other byte there, 0 when there is none. Made once per tokenizer."""
        if self._plain is None:
            lengths, padded = self.matrix()
            width = padded.shape[1]
            odd = _ODD.take(padded)  # bytes past a token's end are 0 here: odd, cleared
            odd[np.arange(width, dtype=np.int64) >= lengths[:, None]] = 0
            odd *= np.arange(1, width + 1, dtype=np.uint8)  # odd byte at j: j + 1
            self._plain = odd.max(axis=1).astype(np.int64)
        return self._plain

    def free_strings(self) -> tuple[FreeTokens, FreeTokens, FreeTokens, FreeTokens]:
        """The tokenizer's free-string tables (`free_string`): of the tokens from a
        string's body; of those that start with a quote, a UTF-8 continuation byte, a
        backslash, less it (made once per tokenizer)."""
        if self._free is None:
            info = self._info
            slashed = [t[1:] if t and t[0] == _BACKSLASH else None for t in info.token_bytes]
            tables = (*body_tables(info), BodyTokens(slashed, exclude=info.stop_ids))
            lengths = np.zeros(len(tables[0].counts), dtype=np.int64)  # by token id
            lengths[self.ids] = self.matrix()[0]
            ids, bounds = self.alone()  # the first byte alone: into the body by bytes
            alone = [ids[bounds[lo] : bounds[hi]] for lo, hi in _FIRST_BYTES]
            body, quoted, continued, slashed_ = (
                FreeTokens(t, lengths, a) for t, a in zip(tables, [None, *alone], strict=True)
            )
            self._free = body, quoted, continued, slashed_
        return self._free

    def free_made(self) -> tuple[FreeTokens, FreeTokens, FreeTokens, FreeTokens] | None:
        """`free_strings` where made already, else None (nothing made)."""
        return self._free

    def body_lead(self) -> np.ndarray:
        """Per sorted token: the bytes of its leading body characters (`string_body`;
        all of it for a body token; made once per tokenizer, with `free_strings`)."""
        if self._lead is None:
            body = body_tables(self._info)[0]
            lead = self.matrix()[0].copy()  # body tokens: their length
            rest = body.rest
            keys = np.fromiter(map(len, rest.tokens), np.int64, count=len(rest.token_ids))
            at = self.position(rest.token_ids.astype(np.int64))
            lead[at] -= keys - 1  # the rest key: its count byte, then the bytes past them
            self._lead = lead
        return self._lead

    def prepare(self) -> None:
        """Make what the array walks read (the padded matrix, the plain offsets, the
        free-string tables) now: a tokenizer's setup, so no first mask pays them (~0.1 s
        for Qwen)."""
        self.plain_from()
        self.free_strings()
        self.body_lead()

    def position(self, ids: np.ndarray) -> np.ndarray:
        """The positions in the sorted list of token `ids` (-1: not walkable). One take:
        the table ends in a -1 that every id past the walkable ones is clipped to."""
        if self._positions is None:
            self._positions = np.full(int(self.ids.max(initial=0)) + 2, -1, dtype=np.int64)
            self._positions[self.ids] = np.arange(len(self.ids))
        return self._positions.take(ids, mode="clip")

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
    plain = sorted_.plain_from() if len(positions) >= LOOP_ROWS else None
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        rows = slice(int(positions[0]), int(positions[-1]) + 1)  # a range: views, no copy
        lengths, padded = all_lengths[rows] - depth, matrix[rows, depth:]
        plain = None if plain is None else plain[rows] - depth
    else:
        lengths, padded = all_lengths[positions] - depth, matrix[positions, depth:]
        plain = None if plain is None else plain[positions] - depth
    now, crossed = _walk_padded(lengths, padded, state, table, crossing, started, plain)
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


def _loop_states(table: np.ndarray, crossing: np.ndarray) -> np.ndarray:
    """Bool per state: every plain byte (`_PLAIN`) leads back to it and none is read there
    as a crossing (a free string's body). Kept for the latest tables walked."""
    found = _LOOPS.get(id(table))
    if found is not None and found[0] is table and found[1] is crossing:
        return found[2]
    states = np.arange(len(table))
    loops = (table[:, _PLAIN_BYTES] == states[:, None]).all(axis=1)
    loops &= ~crossing[:, _PLAIN_BYTES].any(axis=1)
    loops[0] = False
    if len(_LOOPS) >= 64:
        _LOOPS.pop(next(iter(_LOOPS)))
    _LOOPS[id(table)] = (table, crossing, loops)
    return loops


def _walk_padded(
    lengths: np.ndarray,
    padded: np.ndarray,
    state: int,
    table: np.ndarray,
    crossing: np.ndarray,
    started: bool,
    plain: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's state after its bytes from `state` (0: died), and whether it met a
    crossing state that can read its next byte (from the first byte on when `started`,
    else from the second). Rows that died or ended are dropped every few bytes, so a long
    token costs only its own steps. With `plain` (per row: the offset from which its bytes
    are all plain, `SortedTokens.plain_from`), a row standing in a loop state
    (`_loop_states`: a string body) at or past that offset stays there to its end meeting
    no crossing, so it ends there at once."""
    now = np.full(len(lengths), state, dtype=np.int64)
    crossed = np.zeros(len(lengths), dtype=bool)
    steps, cross = np.ravel(table), np.ravel(crossing)
    rows, at, left = np.arange(len(lengths)), now, lengths
    loops = _loop_states(table, crossing) if plain is not None else None
    for offset in range(padded.shape[1]):
        if offset:
            going = (left > offset) & (at != 0)
            if loops is not None:
                going &= ~(loops.take(at) & (plain.take(rows) <= offset))
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
    than WIDTH bytes are left to it too. From a free string's body (`free_string`), where
    body characters lead back to it past no crossing state, each token starts after its
    leading body characters (a string value's candidates, `hello",`: at their quote)."""
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
    offset = np.zeros(len(rows), dtype=np.int64)  # each row's next byte
    if table[state, _PROBE] == state and free_states(steps, accepting | calls, state):
        offset = np.minimum(sorted_.body_lead()[positions[rows]], left)
    while len(rows):
        started = offset > 0
        going = (left > offset) & (at != 0)
        stop = calls[at] & going & started
        if stop.any():  # a call met: the simulation decides
            settled[rows[stop]] = False
            going &= ~stop
        if not going.all():
            now[rows[~going]] = at[~going]
            rows, at, left, offset = rows[going], at[going], left[going], offset[going]
            started = started[going]
            if not len(rows):
                break
        hit = accepting[at] & started
        if hit.any():
            where[rows[hit]] |= np.left_shift(1, offset[hit])
        at = steps.take(at * 256 + padded[rows, offset])
        offset += 1
    settled &= now == 0  # read to their end by bytes: the simulation decides
    return settled, where
