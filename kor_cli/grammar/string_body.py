"""String bodies: DFA states whose token masks follow from character counts.

A *body character* is one a JSON string carries unescaped: any but `"`, `\\` and the
controls below U+0020, as valid UTF-8. In a state from which every body character leads to
one common state, and so on from there, the states form a chain: a loop (a free string) or
a countdown that dies after r more characters (maxLength). From a chain state a token that
starts with k body characters is at the chain's k-th state after them (dead if k > r), so:

- a *body token* (nothing but body characters) is allowed iff its count is at most r;
- any other token is walked from the k-th chain state over the rest of its bytes. These
  rests (a quote and what follows, an escape, a partial UTF-8 character, ...) are short,
  so the trie of all other tokens keyed by (k, rest) is small and shallow.

Soundness rests on checking every body character at the byte level, stage by stage: all
lead bytes of one UTF-8 length class (RFC 3629: no overlongs, surrogates or code points
above U+10FFFF) must reach one state, from which every allowed continuation byte reaches
one state, and so on, ending in the chain's next state. That is sufficient (every body
character takes the chain's step) and, in a minimal DFA, also necessary.
"""

from __future__ import annotations

import re
import weakref
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kor_cli.grammar.trie import TokenTrie, expand_spans, token_ranges

NOT_BODY = np.iinfo(np.int32).max  # the character count of tokens that are not body tokens
_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what a JSON string may not hold unescaped
_ESCAPED_BYTES = re.compile(_ESCAPED.pattern.encode())
_PROBE = ord("a")  # a body character that spells the chain
_MAX_LEAD = 255  # leading body characters split off a token (its first trie byte)
_LEADS = np.arange(_MAX_LEAD + 1)

_ASCII = tuple(b for b in range(0x20, 0x80) if b not in b'"\\')
_ASCII_BYTES = np.asarray(_ASCII)
_CONT = range(0x80, 0xC0)
# lead bytes → the ranges of the bytes that follow them, per UTF-8 length class
_GROUPS: tuple[tuple[Sequence[int], tuple[range, ...]], ...] = (
    (_ASCII, ()),
    (range(0xC2, 0xE0), (_CONT,)),
    ((0xE0,), (range(0xA0, 0xC0), _CONT)),
    ((*range(0xE1, 0xED), 0xEE, 0xEF), (_CONT, _CONT)),
    ((0xED,), (range(0x80, 0xA0), _CONT)),
    ((0xF0,), (range(0x90, 0xC0), _CONT, _CONT)),
    ((0xF1, 0xF2, 0xF3), (_CONT, _CONT, _CONT)),
    ((0xF4,), (range(0x80, 0x90), _CONT, _CONT)),
)


class BodyTokens:
    """Per tokenizer: each token's body-character count (body tokens) and a trie of the
    other tokens, each keyed by bytes([k]) + its bytes after its first k body characters."""

    def __init__(self, token_bytes: Sequence[bytes | None], exclude: Sequence[int] = ()) -> None:
        skip = set(exclude)
        width = -(-len(token_bytes) // 32) * 32  # whole packed words
        body: list[int] = []
        counts: list[int] = []
        keyed: list[bytes | None] = [None] * len(token_bytes)
        longest = 0
        for token, data in enumerate(token_bytes):
            if not data or token in skip:
                continue
            chars, size = _body_lead(data)
            if size == len(data):
                body.append(token)
                counts.append(chars)
            else:
                keyed[token] = bytes([chars]) + data[size:]
                longest = max(longest, chars)
        self.counts = np.full(width, NOT_BODY, dtype=np.int32)  # padded
        self.counts[body] = counts  # token id → characters (NOT_BODY: not a body token)
        # no token starts with more body characters
        self.longest = max(longest, max(counts, default=0))
        self.rest = TokenTrie(keyed)

    @property
    def nbytes(self) -> int:
        """Memory held by the counts and the trie of the other tokens."""
        return self.counts.nbytes + self.rest.nbytes

    def mask(self, remaining: int) -> np.ndarray:
        """Bool [padded width]: the body tokens of at most `remaining` characters."""
        return self.counts <= remaining


def _body_lead(data: bytes) -> tuple[int, int]:
    """How many body characters `data` starts with (at most _MAX_LEAD), and their bytes."""
    if data.isascii():
        found = _ESCAPED_BYTES.search(data, 0, _MAX_LEAD)
        size = found.start() if found else min(len(data), _MAX_LEAD)
        return size, size
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        text = data[: error.start].decode("utf-8")
    found = _ESCAPED.search(text, 0, _MAX_LEAD)
    lead = text[: found.start() if found else _MAX_LEAD]
    return len(lead), len(lead.encode("utf-8"))


class BodyChains:
    """Per DFA: the chain of body steps through each state, for the states on one."""

    def __init__(self, table: np.ndarray, longest: int) -> None:
        """`table`: the [num_states, 256] transitions (dead state 0, dead ends pruned);
        `longest`: no token starts with more body characters (counts are capped there)."""
        self._table = table
        self._walker = memoryview(np.ascontiguousarray(table).ravel())
        self._cap = longest
        # state → (chain, its position, loop start or -1, body characters left)
        self._on: dict[int, tuple[np.ndarray, int, int, int] | None] = {}

    def ahead(self, state: int) -> tuple[int, np.ndarray] | None:
        """For a state on a chain: how many more body characters it takes (at most
        `longest`) and the states after k = 0..255 of them (0: dead); else None. A chain
        starts with a live step (its last state, where every body character dies, is only
        known as part of it: on its own a trie walk serves it as fast)."""
        if state not in self._on:
            self._follow(state)
        found = self._on[state]
        if found is None:
            return None
        chain, at, loop, remaining = found
        steps = at + _LEADS
        if loop >= 0:
            steps = np.where(steps < len(chain), steps, loop + (steps - loop) % (len(chain) - loop))
        return remaining, chain[np.minimum(steps, len(chain) - 1)]

    def _follow(self, state: int) -> None:
        """Follow and check the chain from `state`; remember what it tells."""
        nxt = self._walker[(state << 8) | _PROBE]
        row = self._table[state, _ASCII_BYTES] if nxt else None
        if row is None or (row != nxt).any():  # a chain's first step is a live one
            self._on[state] = None
            return
        chain, seen = [state], {state: 0}
        while nxt and nxt not in seen and len(chain) <= 2 * self._cap:
            seen[nxt] = len(chain)
            chain.append(nxt)
            nxt = self._walker[(nxt << 8) | _PROBE]
        if not _steps_hold(self._table, np.asarray(chain), np.asarray([*chain[1:], nxt])):
            self._on[state] = None
        elif not nxt:  # a countdown: exact for every state on it
            ends = np.asarray([*chain, 0])
            for at, on in enumerate(chain):
                self._on[on] = (ends, at, -1, min(len(chain) - 1 - at, self._cap))
        elif nxt in seen:  # a loop, maybe after a lead-in
            loop = np.asarray(chain)
            for at, on in enumerate(chain):
                self._on[on] = (loop, at, seen[nxt], self._cap)
        else:  # at least `longest` more: known for the states that many steps from its end
            ahead = np.asarray(chain)
            for at in range(len(chain) - self._cap):
                self._on[chain[at]] = (ahead, at, -1, self._cap)


@dataclass(frozen=True)
class _Stage:
    """One byte position of the body characters, for every UTF-8 length class still reading."""

    source: np.ndarray  # probe column → the column of its class's state so far
    probe: np.ndarray  # probe column → the byte read
    expect: np.ndarray  # probe column → the column it must equal (-1: the chain's next state)
    going: np.ndarray  # the first probe column of each class that reads on


def _stages() -> tuple[_Stage, ...]:
    stages = []
    active = list(_GROUPS)  # the classes still reading, in the order of their columns
    for depth in range(max(len(follow) for _, follow in _GROUPS) + 1):
        source: list[int] = []
        probe: list[int] = []
        expect: list[int] = []
        going: list[int] = []
        reading = []
        for column, (leads, follow) in enumerate(active):
            data = follow[depth - 1] if depth else leads
            head, ends = len(probe), len(follow) == depth
            source += [column if depth else 0] * len(data)
            probe += data
            expect += [-1 if ends else head] * len(data)
            if not ends:
                going.append(head)
                reading.append((leads, follow))
        columns = (source, probe, expect, going)
        stages.append(_Stage(*(np.asarray(c, dtype=np.intp) for c in columns)))
        active = reading
    return tuple(stages)


_STAGES = _stages()


def _steps_hold(table: np.ndarray, states: np.ndarray, targets: np.ndarray) -> bool:
    """True when every body character leads from `states[i]` to `targets[i]`, for all i."""
    current = states[:, None]
    for stage in _STAGES:
        reached = np.column_stack((table[current[:, stage.source], stage.probe], targets))
        if not (reached[:, :-1] == reached[:, stage.expect]).all():
            return False
        current = reached[:, stage.going]
        if current.size and not current.any():  # all dead: what follows must end dead
            return not targets.any()
    return True


def crossing_table(table: np.ndarray, crossing: np.ndarray) -> np.ndarray:
    """A rule's [n, 256] table (dead state 0) made to tell both fates of a walk at once:
    states 0..n-1 the rule's, until a byte reaches a `crossing` state s (a call, accepting):
    then n + s, the same state *crossed*, whose dead ends go to X = 2n, which reads every
    byte back to itself. A walk alive and not at X lives by bytes alone; at X it died by
    bytes after crossing."""
    size = len(table)
    cross = 2 * size
    out = np.empty((2 * size + 1, 256), dtype=np.int32)
    ids = np.arange(size, dtype=np.int32)
    entering = np.where(crossing, ids + size, ids).astype(np.int32)  # target t -> t or n + t
    entering[0] = 0
    crossed = ids + size  # from a crossed state: target t -> n + t, dead -> X
    crossed[0] = cross
    targets = table.astype(np.intp, copy=False)  # two lookups per entry, no masks
    np.take(entering, targets, out=out[:size])
    np.take(crossed, targets, out=out[size:cross])
    out[cross] = cross
    return out


def split_body(
    body: BodyTokens,
    ahead: tuple[int, np.ndarray],
    crossing: np.ndarray,
    both: np.ndarray,
    keep: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """From a string-body state (`ahead`: what `BodyChains.ahead` tells of it) of a rule
    with crossing states `crossing` and `crossing_table` `both` (flattened; its rule
    table's dead ends pruned): the packed words of the tokens that live by bytes
    alone, and of those that reach a crossing state after a byte and die by bytes later.
    One walk of the rest trie for both; None when a body character itself reaches a
    crossing state (then the body counts do not tell the second set). `keep` (optional,
    bool per padded token id): only those tokens (`beside_body`)."""
    remaining, after = ahead
    if crossing[after[1:]].any():
        return None
    size = len(crossing)
    cross = 2 * size
    trie = body.rest
    out = _count_mask(body, remaining)
    first, last = _ranges(trie)
    offsets = trie.offsets
    states = np.zeros(trie.num_nodes, dtype=np.int32)  # level by level: 0 dead, or at X
    states[: offsets[1] if trie.depth else 0] = after.astype(np.int32).take(
        trie.byte[: offsets[1] if trie.depth else 0]
    )
    lows: list[np.ndarray] = []
    highs: list[np.ndarray] = []
    for level in range(trie.depth):
        lo, hi = offsets[level], offsets[level + 1]
        here = states[lo:hi]
        if level:
            index = states.take(trie.parent[lo:hi])
            np.left_shift(index, 8, out=index)
            np.bitwise_or(index, trie.byte[lo:hi], out=index)
            both.take(index, out=here)
        at_x = np.flatnonzero(here == cross)
        if len(at_x):  # the whole subtree dies by bytes after crossing: sorted-token spans
            at_x += lo
            lows.append(first.take(at_x))
            highs.append(last.take(at_x))
            states[at_x] = 0
        elif not here.any():
            break
    out[trie.token_ids[states.take(trie.token_node) != 0]] = True
    crossing_out = np.zeros(len(out), dtype=bool)
    if lows:
        spans = expand_spans(np.concatenate(lows), np.concatenate(highs))
        crossing_out[trie.token_ids.take(spans)] = True
    if keep is not None:
        out &= keep
        crossing_out &= keep
    return (
        np.packbits(out, bitorder="little").view("<u4"),
        np.packbits(crossing_out, bitorder="little").view("<u4"),
    )


_MASKS: weakref.WeakKeyDictionary[BodyTokens, dict[int, np.ndarray]] = weakref.WeakKeyDictionary()
_MAX_MASKS = 8  # count masks kept per tokenizer's body tables
_RANGES: weakref.WeakKeyDictionary[TokenTrie, tuple[np.ndarray, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def _count_mask(body: BodyTokens, remaining: int) -> np.ndarray:
    """A fresh copy of `body.mask(remaining)` (the few distinct counts are kept)."""
    kept = _MASKS.setdefault(body, {})
    found = kept.get(remaining)
    if found is None:
        found = body.mask(remaining)
        if len(kept) >= _MAX_MASKS:
            kept.pop(next(iter(kept)))
        kept[remaining] = found
    return found.copy()


def _ranges(trie: TokenTrie) -> tuple[np.ndarray, np.ndarray]:
    """Per node of `trie`: the range first..last (exclusive) of the sorted tokens under it
    (made once per trie)."""
    found = _RANGES.get(trie)
    if found is None:
        first, last = token_ranges(trie)
        found = _RANGES[trie] = first, last + 1
    return found


def beside_body(
    body: BodyTokens,
    state: int,
    ahead: tuple[int, np.ndarray] | None,
    shifted: Sequence[int],
    starts: Sequence[int],
    ids: np.ndarray,
) -> tuple[tuple[int, np.ndarray], np.ndarray | None]:
    """What `split_body` reads to split the tokens from a state one byte before a string
    body (an escape after its backslash, an opening quote, a UTF-8 continuation): the
    tokens whose rest trie key starts with 0 body characters (their whole bytes) are walked
    from `state` itself; where the bytes `shifted` (ASCII body characters, ascending) lead
    from `state` to the chain state that `ahead` tells of, a token that starts with one of
    them and k body characters in all is at that state's (k - 1)-th chain state after them.
    Returns the `ahead` to pass and its `keep` (None: no shifted bytes, every token kept):
    the tokens of 0 body characters, and those that start with a shifted byte (`starts`,
    `ids`: the sorted tokens' first-byte ranges and token ids). Tokens that start with
    another body character are left out: the caller walks those its state reads."""
    after = np.zeros(_MAX_LEAD + 1, dtype=np.int64)
    after[0] = state
    if not shifted or ahead is None:
        return (-1, after), None
    remaining, chain = ahead
    after[1:] = chain[:-1]
    trie = body.rest
    keep = np.zeros(len(body.counts), dtype=bool)
    keep[trie.token_ids[: bisect_left(trie.tokens, b"\x01")]] = True  # 0 body characters
    for byte in shifted:
        keep[ids[starts[byte] : starts[byte + 1]]] = True
    return (remaining + 1, after), keep
