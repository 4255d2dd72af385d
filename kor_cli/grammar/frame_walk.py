"""A frame's token split by a pruned walk of the sorted token list (structural states).

`frame_masks` needs, per rule position, the tokens read by bytes alone (they stay) and the
*candidates*: tokens that meet a crossing state (a call, or an accepting state) after at
least one byte and die by bytes later (the stack simulation decides them). `TokenIndex`
gets both from two walks of the whole byte trie (vectorised, 0.1-2 ms each on Qwen and
memory-bound). Most rule positions of a JSON grammar allow a few bytes (keys, punctuation,
digits), so their allowed tokens lie in a few narrow ranges of the sorted token list; this
module walks only those.

The walk is a depth-first search over prefixes: the tokens sharing a prefix of length d are
one range lo..hi of the sorted list (the prefix itself, when it is a token, first); from
the state the prefix leads to, each byte the state reads narrows the range by two
bisections. A range no wider than about the number of bytes to try is walked token by token
instead. Once a prefix is at a crossing state (after at least one byte), the longer tokens
under it whose next byte can be read there (`follow`: any byte where the frame can end, else
the bytes its calls and own edges read) are candidates unless read by bytes: their ranges
are recorded whole and the tokens read by bytes are taken out afterwards. A token whose
next byte cannot be read there is dead on every stack, so it is no candidate.

The walk costs the bisections it makes, so a start state reading more than `DENSE_BYTES`
bytes, or a walk past its `budget` of steps, falls back to walking every token that starts
with a byte the state reads as one array (rows of a padded matrix of the sorted tokens:
UTF-8 continuations, escapes, character-class loops of patterns) when at most `START_LIMIT`
do; else (string bodies, free text) it returns None and is left to `TokenIndex`, whose
string-body fast paths beat any walk there. Such a state's candidates come from
`crossing_candidates`: a candidate must hold a byte that enters a crossing state (a string
body: its closing quote) before its last byte, and few tokens do (Qwen: 1,178 of 151,643
hold a quote), so only they are walked, as one array. `RuleWalker` holds a rule's table in
the forms these walks read (each state's bytes, the follow sets of its crossing states,
found on first reach).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

import numpy as np

from kor_cli.grammar.index import token_trie
from kor_cli.grammar.stacks import CONTEXT, REACHES_CONTEXT, RuleTable, Stacks
from kor_cli.grammar.vocab import TokenizerInfo

DENSE_BYTES = 40  # a start state reading more bytes is left to TokenIndex
ANY = (1 << 256) - 1  # `follow` of a state where the frame can end: any byte
UNKNOWN = -1  # `follow` not found yet (`resolve` finds it; as bits, every byte)
BUDGET = 1500  # bisections and token bytes walked before giving up (about 1 ms)
VECTOR_MIN = 24  # fewer tokens under a dense state are walked one by one
VECTOR_MAX = 1024  # more: the walk gives up (the caller uses TokenIndex)
CANDIDATE_LIMIT = 20_000  # tokens walked at once for a dense state's candidates
START_LIMIT = 24_000  # at most this many tokens under a start state are walked as arrays
WIDTH = 16  # bytes per token in the padded matrix (longer tokens finish in Python)
_ONE = [bytes((b,)) for b in range(256)]


class SortedTokens:
    """The walkable tokens of one tokenizer (stop ids left out), sorted by their bytes, and
    their ids (the byte trie's order)."""

    def __init__(self, info: TokenizerInfo) -> None:
        trie = token_trie(info)
        tokens = trie.tokens
        self.tokens: list[bytes] = tokens if isinstance(tokens, list) else _as_list(tokens)
        self.ids: np.ndarray = np.asarray(trie.token_ids, dtype=np.int64)
        self._holding: dict[int, np.ndarray] = {}
        self._buffer: tuple[np.ndarray, np.ndarray] | None = None
        self._starts: list[int] | None = None
        self._matrix: tuple[np.ndarray, np.ndarray] | None = None

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


class RuleWalker:
    """A rule's table as `frame_walk` reads it: each state's bytes and, at a crossing
    state, the bytes that can follow there (any where the frame can end)."""

    def __init__(self, stacks: Stacks, rule_id: int, table: RuleTable) -> None:
        rows, cols = np.nonzero(table.table)
        bounds = np.searchsorted(rows, np.arange(len(table.table) + 1)).tolist()
        cols_list = cols.tolist()
        self.reads = [cols_list[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        self.follow = [ANY if a else 0 for a in table.accepting]
        for state in table.calls:
            if not table.accepting[state]:
                self.follow[state] = UNKNOWN  # found when a walk gets there (`resolve`)
        self._stacks, self._rule_id, self._table = stacks, rule_id, table
        self._crossing: np.ndarray | None = None

    def crossing_table(self) -> np.ndarray:
        """Bool [states, 256]: byte b may be read next at crossing state s (a call state
        not resolved yet: any byte, which only adds candidates)."""
        if self._crossing is None:
            rows = np.zeros((len(self.follow), 256), dtype=bool)
            for state, bits in enumerate(self.follow):
                if bits == UNKNOWN:
                    bits = ANY
                if bits:
                    raw = np.frombuffer(bits.to_bytes(32, "little"), dtype=np.uint8)
                    rows[state] = np.unpackbits(raw, bitorder="little").astype(bool)
            self._crossing = rows
        return self._crossing

    def entries(self, state: int) -> list[int]:
        """The bytes into a crossing state from the states `state` reaches by bytes."""
        table = self._table.table
        seen = np.zeros(len(table), dtype=bool)
        seen[state] = True
        todo = [state]
        while todo:
            rows = np.unique(table[todo])
            todo = [int(s) for s in rows[~seen[rows]] if s]
            seen[todo] = True
        crossing = np.asarray(self.follow, dtype=object) != 0
        into = crossing[table[seen]]
        return np.flatnonzero(into.any(axis=0)).tolist()

    def resolve(self, state: int) -> int:
        """The bytes that can follow at call state `state` (its callees' first bytes and
        its own edges; ANY where the frame can end there)."""
        stacks = self._stacks
        base = stacks.push(CONTEXT, self._rule_id, state)
        ends = stacks.closure(base)[1] & REACHES_CONTEXT
        found = self.follow[state] = ANY if ends else stacks.next_bytes((base,))
        return found


class Split:
    """What a walk from one state found, as positions in the sorted token list."""

    __slots__ = ("stays", "ranges", "singles", "escapes")

    def __init__(self) -> None:
        self.stays: list[int] = []  # tokens read by bytes alone
        self.ranges: list[tuple[int, int]] = []  # candidates, less those in `stays`
        self.singles: list[int] = []  # candidates found one by one
        # (lo, hi, depth): tokens that reach a final state after `depth` bytes, meeting no
        # crossing state before it: each escapes there and only there (no simulation)
        self.escapes: list[tuple[int, int, int]] = []


def walk_state(
    sorted_: SortedTokens,
    flat: Sequence[int],
    reads: Sequence[Sequence[int]],
    follow: Sequence[int],
    state: int,
    resolve: Callable[[int], int] | None = None,
    arrays: tuple[np.ndarray, np.ndarray] | None = None,
    budget: int = BUDGET,
    dense: int = DENSE_BYTES,
    final: Sequence[bool] | None = None,
) -> Split | None:
    """Split the tokens from `state` of a rule: `flat[s << 8 | b]` is the rule's pruned
    table (0: dead), `reads[s]` the bytes state s reads (ascending), `follow[s]` 0 where s
    neither calls nor accepts, else the bytes that can be read next there as a 256-bit int
    (ANY where the frame can end; UNKNOWN: `resolve(s)` finds it, else ANY is assumed).
    None when the start state reads more than `dense` bytes or the walk runs past `budget`
    steps (the caller uses `TokenIndex`). `arrays` (optional): the table as int32
    [states, 256] and `follow` as bool [states, 256] (may hold more bits): with them, the
    tokens under a prefix that leads to a state reading more than `dense` bytes (an escape
    inside a string, then its body) are walked as one array, and so are the tokens under
    a start state that reads many bytes or makes the walk run past its budget, when at most
    START_LIMIT tokens start with a byte it reads (a UTF-8 continuation, an escape).
    `final` (optional): the states that accept and neither read nor call: the tokens that
    reach one are `escapes` instead of candidates, unless a crossing state came first."""
    split = None
    if len(reads[state]) <= dense:
        split = _walk(sorted_, flat, reads, follow, state, resolve, arrays, budget, dense, final)
    if split is None and arrays is not None:
        split = _walk_start(sorted_, reads[state], state, *arrays)
    return split


def _walk(
    sorted_: SortedTokens,
    flat: Sequence[int],
    reads: Sequence[Sequence[int]],
    follow: Sequence[int],
    state: int,
    resolve: Callable[[int], int] | None,
    arrays: tuple[np.ndarray, np.ndarray] | None,
    budget: int,
    dense: int,
    final: Sequence[bool] | None = None,
) -> Split | None:
    """`walk_state`'s pruned walk (None past `budget` or at an opening quote)."""
    tokens = sorted_.tokens
    out = Split()
    stays, singles = out.stays, out.singles
    todo = [(0, len(tokens), 0, state, False)]  # ..., inside a range of candidates
    while todo:
        lo, hi, depth, at, inside = todo.pop()
        cover = ANY if inside else 0  # the next bytes that keep the tokens candidates
        if depth:
            while lo < hi and len(tokens[lo]) == depth:  # the prefix is a token: by bytes
                stays.append(lo)
                lo += 1
            if lo == hi:
                continue
            bits = follow[at]
            if bits == UNKNOWN:
                bits = resolve(at) if resolve is not None else ANY
            if bits == ANY and not inside and final is not None and final[at]:
                out.escapes.append((lo, hi, depth))
                continue
            if bits == ANY:
                out.ranges.append((lo, hi))
                cover = ANY
            elif bits:
                budget -= _ranges_after(tokens, lo, hi, depth, bits, out.ranges)
                cover |= bits
        nexts = reads[at]
        if depth and arrays is not None and len(nexts) > dense and hi - lo > VECTOR_MIN:
            if hi - lo > VECTOR_MAX:  # an opening quote: TokenIndex's quote path is faster
                return None
            stay, crossed = _walk_range(sorted_, lo, hi, depth, at, *arrays)
            stays += stay
            singles += crossed
            budget -= (hi - lo) >> 4
            if budget < 0:
                return None
            continue
        if hi - lo <= 2 * len(nexts):  # few tokens: walk each
            for position in range(lo, hi):
                data = tokens[position]
                now, crossed = at, False
                for offset in range(depth, len(data)):
                    byte = data[offset]
                    if offset and follow[now]:
                        bits = follow[now]
                        if bits == UNKNOWN and resolve is not None:
                            bits = resolve(now)
                        crossed |= bool(bits >> byte & 1)
                    now = flat[now << 8 | byte]
                    if not now:
                        break
                budget -= len(data) - depth
                if now:
                    stays.append(position)
                elif crossed:
                    singles.append(position)
            if budget < 0:
                return None
            continue
        budget -= len(nexts)
        if budget < 0:
            return None
        prefix = tokens[lo][:depth]
        for byte in nexts:
            first = bisect_left(tokens, prefix + _ONE[byte], lo, hi)
            if first == hi:
                break
            last = bisect_left(tokens, prefix + _ONE[byte + 1], first, hi) if byte < 255 else hi
            if first < last:
                todo.append((first, last, depth + 1, flat[at << 8 | byte], cover >> byte & 1))
            lo = last
    return out


def _walk_start(
    sorted_: SortedTokens, nexts: Sequence[int], state: int, table: np.ndarray, crossing: np.ndarray
) -> Split | None:
    """The split from `state` with every token that starts with a byte it reads walked
    as arrays, one range of the sorted list per run of consecutive bytes (None when more
    than START_LIMIT tokens do)."""
    starts = sorted_.starts()
    ranges: list[tuple[int, int]] = []
    for byte in nexts:
        lo, hi = starts[byte], starts[byte + 1]
        if ranges and ranges[-1][1] == lo:
            ranges[-1] = (ranges[-1][0], hi)
        elif lo < hi:
            ranges.append((lo, hi))
    if sum(hi - lo for lo, hi in ranges) > START_LIMIT:
        return None
    out = Split()
    for lo, hi in ranges:
        stay, crossed = _walk_range(sorted_, lo, hi, 0, state, table, crossing)
        out.stays += stay
        out.singles += crossed
    return out


def _walk_range(
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
    now, crossed = _walk_positions(sorted_, positions, depth, state, table, crossing, depth > 0)
    return positions[now != 0].tolist(), positions[crossed & (now == 0)].tolist()


def _walk_positions(
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


def _ranges_after(
    tokens: list[bytes], lo: int, hi: int, depth: int, bits: int, out: list[tuple[int, int]]
) -> int:
    """Add the ranges of the tokens in lo..hi (sharing a prefix of length `depth`, none of
    that length) whose byte at `depth` is in `bits`; returns the bisections made."""
    prefix = tokens[lo][:depth]
    made = 0
    while bits and lo < hi:
        byte = (bits & -bits).bit_length() - 1
        bits &= bits - 1
        made += 1
        first = bisect_left(tokens, prefix + _ONE[byte], lo, hi)
        if first == hi:
            break
        last = bisect_left(tokens, prefix + _ONE[byte + 1], first, hi) if byte < 255 else hi
        if first < last:
            out.append((first, last))
        lo = last
    return made


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
    now, crossed = _walk_positions(sorted_, positions, 0, state, table, crossing, False)
    return sorted_.ids[positions[crossed & (now == 0)]]


def split_words(sorted_: SortedTokens, split: Split, words: int) -> tuple[np.ndarray, np.ndarray]:
    """The packed words of a split's tokens read by bytes, and of its candidates (less
    those read by bytes)."""
    ids = sorted_.ids
    stays = _words(ids[np.asarray(split.stays, dtype=np.int64)], words)
    parts = [ids[lo:hi] for lo, hi in split.ranges]
    if split.singles:
        parts.append(ids[np.asarray(split.singles, dtype=np.int64)])
    candidates = _words(np.concatenate(parts), words) if parts else np.zeros(words, "<u4")
    candidates &= ~stays
    return stays, candidates


def _words(ids: np.ndarray, words: int) -> np.ndarray:
    """Packed words with the bits of token `ids` set."""
    if len(ids) > 512:  # many: through a bool array (ufunc.at is slow per element)
        bits = np.zeros(words * 32, dtype=bool)
        bits[ids] = True
        return np.packbits(bits, bitorder="little").view("<u4")
    out = np.zeros(words, dtype="<u4")
    if len(ids):
        np.bitwise_or.at(out, ids >> 5, np.left_shift(1, ids & 31).astype("<u4"))
    return out
