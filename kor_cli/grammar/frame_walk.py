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
bytes (unless at most `VECTOR_MAX` tokens start with one: UTF-8 continuations, which the
walk splits ~100 µs faster), or a walk past its `budget` of steps, falls back to walking
every token that starts with a byte the state reads as one array (rows of a padded matrix of
the sorted tokens: UTF-8 continuations, escapes, character-class loops of patterns) when at
most `START_LIMIT` do; else (string bodies, free text) it returns None and is left to
`TokenIndex`, whose string-body fast paths beat any walk there. Such a state's candidates
come from `token_arrays.crossing_candidates`: a candidate must hold a byte that enters a
crossing state (a string body: its closing quote) before its last byte, and few tokens do
(Qwen: 1,178 of 151,643 hold a quote), so only they are walked, as one array. `RuleWalker` holds a
rule's table in the forms these walks read (each state's bytes, the follow sets of its
crossing states, found on first reach).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from kor_cli.grammar.stacks import CONTEXT, REACHES_CONTEXT, RuleTable, Stacks
from kor_cli.grammar.token_arrays import SortedTokens, walk_positions

DENSE_BYTES = 40  # a start state reading more bytes is left to TokenIndex
ANY = (1 << 256) - 1  # `follow` of a state where the frame can end: any byte
UNKNOWN = -1  # `follow` not found yet (`resolve` finds it; as bits, every byte)
BUDGET = 1500  # bisections and token bytes walked before giving up (about 1 ms)
VECTOR_MIN = 24  # fewer tokens under a dense state are walked one by one
VECTOR_MAX = 1024  # more: the walk gives up (the caller uses TokenIndex)
START_LIMIT = 24_000  # at most this many tokens under a start state are walked as arrays
_ONE = [bytes((b,)) for b in range(256)]
_CHAIN_MAX = 64  # the longest chain of forced states walked at once (`_walk_forced`)
Arrays = tuple[np.ndarray, np.ndarray]  # a rule's table, bool [states, 256] of what follows


class RuleWalker:
    """A rule's table as `frame_walk` reads it: each state's bytes and, at a crossing
    state, the bytes that can follow there (any where the frame can end)."""

    def __init__(self, stacks: Stacks, rule_id: int, table: RuleTable) -> None:
        live = (table.table.ravel() != 0).nonzero()[0]  # s << 8 | b (2-D nonzero: 3x slower)
        bounds = live.searchsorted(np.arange(0, (len(table.table) + 1) << 8, 256)).tolist()
        cols = (live & 255).tolist()
        self.reads = [cols[a:b] for a, b in pairwise(bounds)]
        self._live = live
        self._next: list[list[int]] | None = None  # each state's live targets (`entries`)
        self.follow = [ANY if a else 0 for a in table.accepting]
        for state in table.calls:
            if not table.accepting[state]:
                self.follow[state] = UNKNOWN  # found when a walk gets there (`resolve`)
        self._stacks, self._rule_id, self._table = stacks, rule_id, table
        self._crossing: np.ndarray | None = None
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._finals: np.ndarray | None = None
        self.free: frozenset[int] | None = None  # free strings' bodies (`free_string`)
        self.splits: dict[tuple[int, int], Any] = {}  # `frame_indexes.free_split`'s

    def finals(self) -> np.ndarray:
        """Bool per state: accepting, neither reading nor calling (only popped)."""
        if self._finals is None:
            self._finals = np.asarray(self._table.final, dtype=bool)
        return self._finals

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The rule's pruned table, raveled, and bool per state: it calls or accepts
        (what `free_string` reads; made once per rule)."""
        if self._arrays is None:
            table = self._table
            crossing = np.asarray(table.accepting, dtype=bool)
            crossing[list(table.calls)] = True
            crossing[0] = False
            self._arrays = table.table.ravel(), crossing
        return self._arrays

    def crossing_table(self) -> np.ndarray:
        """Bool [states, 256]: byte b may be read next at crossing state s (a call state
        not resolved yet: any byte, which only adds candidates)."""
        if self._crossing is None:  # most states: no byte or any (one fancy set)
            follow = self.follow
            rows = np.zeros((len(follow), 256), dtype=bool)
            rows[[s for s, bits in enumerate(follow) if bits in (ANY, UNKNOWN)]] = True
            for state, bits in enumerate(follow):
                if bits not in (0, ANY, UNKNOWN):  # a resolved call state: its bytes
                    raw = np.frombuffer(bits.to_bytes(32, "little"), np.uint8)
                    rows[state] = np.unpackbits(raw, bitorder="little").view(bool)
            self._crossing = rows
        return self._crossing

    def walk_arrays(self) -> Arrays:
        """`walk_state`'s `arrays` of this rule: its table and `crossing_table` (pass the
        method: a walk makes them only where it walks tokens as arrays, which most never do)."""
        return self._table.table, self.crossing_table()

    def entries(self, state: int) -> list[int]:
        """The bytes into a crossing state from the states `state` reaches by bytes."""
        table = self._table.table
        nexts = self._targets()
        seen = bytearray(len(table))
        seen[state] = 1
        reached = [state]
        for at in reached:  # breadth first over the live targets
            for to in nexts[at]:
                if not seen[to]:
                    seen[to] = 1
                    reached.append(to)
        crossing = np.fromiter((bits != 0 for bits in self.follow), bool, len(self.follow))
        into = crossing[table[np.sort(np.asarray(reached))]]
        return np.flatnonzero(into.any(axis=0)).tolist()

    def _targets(self) -> list[list[int]]:
        """Each state's distinct live targets (found once per rule)."""
        if self._next is None:
            size = len(self._table.table)
            live = self._live
            pairs = np.unique((live >> 8) * size + self._table.table.ravel()[live])
            bounds = np.searchsorted(pairs // size, np.arange(size + 1)).tolist()
            targets = (pairs % size).tolist()
            self._next = [targets[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        return self._next

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
    arrays: Arrays | Callable[[], Arrays] | None = None,
    budget: int = BUDGET,
    dense: int = DENSE_BYTES,
    final: Sequence[bool] | None = None,
    first: Sequence[int] | None = None,
) -> Split | None:
    """Split the tokens from `state` of a rule: `flat[s << 8 | b]` is the rule's pruned
    table (0: dead), `reads[s]` the bytes state s reads (ascending), `follow[s]` 0 where s
    neither calls nor accepts, else the bytes that can be read next there as a 256-bit int
    (ANY where the frame can end; UNKNOWN: `resolve(s)` finds it, else ANY is assumed).
    None when the start state reads more than `dense` bytes (and more than VECTOR_MAX tokens
    start with one) or the walk runs past `budget` steps (the caller uses `TokenIndex`).
    `arrays` (optional): the table as int32 [states, 256] and `follow` as bool [states, 256]
    (may hold more bits), or a function that makes them (called where they are read;
    `RuleWalker.walk_arrays`): with them, the tokens under a prefix that leads to a state
    reading more than `dense` bytes (an escape inside a string, then its body) are walked as one
    array, and so are the tokens under a start state that reads many bytes or makes the walk
    run past its budget, when at most START_LIMIT tokens start with a byte it reads (a UTF-8
    continuation, an escape).
    `final` (optional): the states that accept and neither read nor call: the tokens that
    reach one are `escapes` instead of candidates, unless a crossing state came first.
    `first` (optional): only the tokens that start with these bytes (some `state` reads,
    ascending) are split."""
    split = None
    nexts = reads[state] if first is None else first
    walk_args = (sorted_, flat, reads, follow, state, resolve, arrays)
    if first is None and len(nexts) == 1:  # a literal's byte: its forced chain at once
        split = Split()
        lo, hi, depth, at = _chain(sorted_, flat, reads, follow, state, split.stays)
        budget -= depth  # a step per byte, as in the pruned walk
        if budget < 0:
            split = None
        elif lo < hi:  # the tokens that hold the whole chain, from where it ends
            start = (lo, hi, depth, at, False)
            split = _walk(*walk_args, budget, dense, final, start=start, out=split)
    elif len(nexts) <= dense or _few_start(sorted_.starts(), nexts):
        split = _walk(*walk_args, budget, dense, final, nexts)
    if split is None and arrays is not None:
        split = _walk_start(sorted_, nexts, state, *_made(arrays))
    return split


def _made(arrays: Arrays | Callable[[], Arrays]) -> Arrays:
    """`walk_state`'s arrays, made now when given as the function that makes them."""
    return arrays() if callable(arrays) else arrays


def _few_start(starts: Sequence[int], nexts: Sequence[int]) -> bool:
    """True when at most VECTOR_MAX tokens start with a byte of `nexts`."""
    count = 0
    for byte in nexts:
        count += starts[byte + 1] - starts[byte]
        if count > VECTOR_MAX:
            return False
    return True


def _chain(
    sorted_: SortedTokens,
    flat: Sequence[int],
    reads: Sequence[Sequence[int]],
    follow: Sequence[int],
    state: int,
    stays: list[int],
) -> tuple[int, int, int, int]:
    """The tokens from a state that reads one byte, along the chain of forced states it
    starts (each reads one byte, neither calls nor accepts: a key literal): a token that
    is a prefix of the chain's text is read by bytes (added to `stays`), one that leaves
    it inside is dead (no crossing state on the way). Returns (lo, hi, depth, at): the
    tokens that hold the first `depth` bytes of the text, which lead to `at`, where the
    chain ends or no token goes on (lo == hi). One bisection per byte (the pruned walk
    makes two, and a step of its loop)."""
    tokens = sorted_.tokens
    starts = sorted_.starts()
    byte = reads[state][0]
    lo, hi = starts[byte], starts[byte + 1]
    text, at = _ONE[byte], flat[state << 8 | byte]
    while len(reads[at]) == 1 and not follow[at] and len(text) < _CHAIN_MAX:
        lo = bisect_left(tokens, text, lo, hi)  # the tokens that start with `text`
        while lo < hi and tokens[lo] == text:  # (spelled by several tokens: all)
            stays.append(lo)
            lo += 1
        if lo == hi or not tokens[lo].startswith(text):
            return lo, lo, len(text), at  # none goes on: the rest is not needed
        byte = reads[at][0]
        text += _ONE[byte]
        at = flat[at << 8 | byte]
    lo = bisect_left(tokens, text, lo, hi)
    if byte < 255:
        hi = bisect_left(tokens, text[:-1] + _ONE[byte + 1], lo, hi)
    return lo, hi, len(text), at


def _walk(
    sorted_: SortedTokens,
    flat: Sequence[int],
    reads: Sequence[Sequence[int]],
    follow: Sequence[int],
    state: int,
    resolve: Callable[[int], int] | None,
    arrays: Arrays | Callable[[], Arrays] | None,
    budget: int,
    dense: int,
    final: Sequence[bool] | None = None,
    first: Sequence[int] | None = None,
    start: tuple[int, int, int, int, bool] | None = None,
    out: Split | None = None,
) -> Split | None:
    """`walk_state`'s pruned walk (None past `budget` or at an opening quote); `first`:
    the bytes read from `state` (default: all it reads); `start` (optional): walk only
    the tokens lo..hi sharing a prefix of that depth that leads to that state (none
    crossing), adding to `out`."""
    tokens = sorted_.tokens
    starts = sorted_.starts()
    heads = reads[state] if first is None else first
    if out is None:
        out = Split()
    stays, singles = out.stays, out.singles
    todo = [start or (0, len(tokens), 0, state, False)]  # ..., inside a range of candidates
    # ranges under dense states, walked as arrays once the walk is done: one array per
    # (depth, state), so the bytes of an escape that lead back into a string body share
    # one walk
    dense_ranges: dict[tuple[int, int], list[tuple[int, int]]] = {}
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
            dense_ranges.setdefault((depth, at), []).append((lo, hi))
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
        if not depth:  # the first byte's ranges are known: no bisection of the whole list
            for byte in heads:
                head, end = starts[byte], starts[byte + 1]
                if head < end:
                    todo.append((head, end, 1, flat[at << 8 | byte], 0))
            continue
        prefix = tokens[lo][:depth]
        after = -1  # the byte past the last one bisected: its tokens start at `lo`
        for byte in nexts:
            first = lo if byte == after else bisect_left(tokens, prefix + _ONE[byte], lo, hi)
            after = byte + 1
            if first == hi:
                break
            last = bisect_left(tokens, prefix + _ONE[byte + 1], first, hi) if byte < 255 else hi
            if first < last:
                todo.append((first, last, depth + 1, flat[at << 8 | byte], cover >> byte & 1))
            lo = last
    for (depth, at), ranges in dense_ranges.items():
        assert arrays is not None  # only with them are ranges put off
        stay, crossed = walk_ranges(sorted_, sorted(ranges), depth, at, *_made(arrays))
        stays += stay
        singles += crossed
    return out


def _walk_start(
    sorted_: SortedTokens, nexts: Sequence[int], state: int, table: np.ndarray, crossing: np.ndarray
) -> Split | None:
    """The split from `state` with every token that starts with a byte it reads walked
    as arrays, one range of the sorted list per run of consecutive bytes (None when more
    than START_LIMIT tokens do)."""
    starts = sorted_.starts()
    ranges: list[tuple[int, int]] = []
    count = 0
    for byte in nexts:
        lo, hi = starts[byte], starts[byte + 1]
        count += hi - lo
        if count > START_LIMIT:  # a string body: given up at once
            return None
        if ranges and ranges[-1][1] == lo:
            ranges[-1] = (ranges[-1][0], hi)
        elif lo < hi:
            ranges.append((lo, hi))
    out = Split()
    out.stays, out.singles = walk_ranges(sorted_, ranges, 0, state, table, crossing)
    return out


def walk_ranges(
    sorted_: SortedTokens,
    ranges: list[tuple[int, int]],
    depth: int,
    state: int,
    table: np.ndarray,
    crossing: np.ndarray,
) -> tuple[list[int], list[int]]:
    """The tokens of `ranges` (ascending, disjoint; each shares a prefix of length `depth`
    that leads to `state`, none of that length) read by bytes, and those that meet a
    crossing state (after their first byte) then die, walked as one array."""
    if not ranges:
        return [], []
    if len(ranges) == 1:
        positions = np.arange(*ranges[0])
    else:
        positions = np.concatenate([np.arange(lo, hi) for lo, hi in ranges])
    now, crossed = walk_positions(sorted_, positions, depth, state, table, crossing, depth > 0)
    return positions[now != 0].tolist(), positions[crossed & (now == 0)].tolist()


def _ranges_after(
    tokens: list[bytes], lo: int, hi: int, depth: int, bits: int, out: list[tuple[int, int]]
) -> int:
    """Add the ranges of the tokens in lo..hi (sharing a prefix of length `depth`, none of
    that length) whose byte at `depth` is in `bits`, one range per run of consecutive bytes
    of `bits` (a value's digits, `\\t\\n`: two bisections a run, not a byte); returns the
    runs bisected."""
    prefix = tokens[lo][:depth]
    made = 0
    while bits and lo < hi:
        low = (bits & -bits).bit_length() - 1
        run = bits >> low
        high = low + (run ^ (run + 1)).bit_length() - 1  # past the run's last byte
        bits &= -1 << high
        made += 1
        first = bisect_left(tokens, prefix + _ONE[low], lo, hi)
        if first == hi:
            break
        last = bisect_left(tokens, prefix + _ONE[high], first, hi) if high < 256 else hi
        if first < last:
            out.append((first, last))
        lo = last
    return made
