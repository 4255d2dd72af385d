"""Frames of punctuation states read off the frames of the states their bytes lead to.

A state that neither calls nor accepts and reads a few bytes (an array's `,` or `]` after an
item) reads each token `bR` by its byte `b` into the state t it leads to, then reads the
rest R from t: exactly as t's frame reads R. So where t's frame is at hand (t final, or a
call state that reads no byte), `bR` stays when R stays in t's frame, and escapes one byte
later than R does there (and after `b` itself when t's frame can end before a byte).
Tokens whose rest R is itself a token (most of them) are decided by bit tests on t's frame,
the rest of the token list's ids looked up once per tokenizer (`tails`); the few others by
the callees' frames or the stack simulation, as the general build does.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

import numpy as np

from kor_cli.grammar.bitmask import bits_set, set_bits
from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.frame_chain import _reads
from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_returns import read_calls
from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.token_arrays import SortedTokens

if TYPE_CHECKING:
    from kor_cli.grammar.frame_masks import FrameMasks

_EDGES = 4  # states reading more bytes are left to the general build


def next_frame(frames: FrameMasks, rule_id: int, table: RuleTable, state: int) -> FrameMask | None:
    """The frame of `state` from the frames its byte edges lead to (see the module), or
    None when a byte leads elsewhere (a string body, a state that accepts...)."""
    if not _chained(frames, rule_id, table, state):
        return None
    sorted_ = frames._sorted
    starts, (alone, bounds), ids = sorted_.starts(), sorted_.alone(), sorted_.ids
    padded = sorted_.matrix()[1]
    final, flat, base = table.final, table.flat, state << 8
    stays = np.zeros(frames.words, dtype="<u4")
    tokens: list[np.ndarray] = []
    offsets: list[np.ndarray] = []
    firsts: list[np.ndarray] = []
    open_: list[np.ndarray] = []  # tokens whose rest is no token
    loose: list[np.ndarray] = []  # the escape bytes not in `escape_bytes` yet
    escape_bytes = 0
    for byte in _bytes(table.byte_set(state)):
        set_bits(stays, alone[bounds[byte] : bounds[byte + 1]])
        lo, hi = starts[byte] + bounds[byte + 1] - bounds[byte], starts[byte + 1]
        if lo >= hi:
            continue
        at = int(flat[base | byte])
        if final[at]:  # the frame ends after the byte: every longer token escapes there
            rows = _reads(frames.info).escaping(byte, frames.info)  # (the tokenizer's)
            tokens.append(rows[0])
            offsets.append(rows[1])
            firsts.append(rows[2])
            escape_bytes |= rows[3]
            continue
        longer = ids[lo:hi]
        inner = frames.get(rule_id, at)
        rest = tails(sorted_, byte)
        known = rest >= 0
        rest_ids = np.where(known, rest, 0)
        staying = known & bits_set(inner.stays, rest_ids)
        set_bits(stays, longer[staying])
        open_.append(longer[~known])
        left = ~staying & known
        if inner.ends:  # escapes after the byte itself
            tokens.append(longer[left])
            offsets.append(np.ones(int(left.sum()), dtype=np.int64))
            firsts.append(padded[lo:hi, 1][left])
            loose.append(firsts[-1])
        if len(inner.tokens):
            shifted = _shifted(inner, longer[left], rest_ids[left])
            if shifted is not None:
                tokens.append(shifted[0])
                offsets.append(shifted[1])
                firsts.append(shifted[2])
                loose.append(firsts[-1])
    undecided = np.concatenate(open_) if open_ else _NONE
    if len(undecided):
        decided, slow = read_calls(frames, table, state, undecided, stays)
        slow_rows = [frames._simulate(rule_id, state, slow.tolist(), stays)] if len(slow) else []
        for found, where in [decided, *slow_rows]:
            if len(found):
                tokens.append(found)
                offsets.append(where)
                firsts.append(_bytes_at(frames, found, where))
                loose.append(firsts[-1])
    if not tokens:
        return FrameMask(stays, False, token_bytes=frames.info.token_bytes)
    every_first = np.concatenate(firsts).astype(np.uint8, copy=False)
    if loose:
        for byte in distinct(np.concatenate(loose)).tolist():
            escape_bytes |= 1 << byte
    return FrameMask(
        stays,
        False,
        np.concatenate(tokens).astype(np.int64, copy=False),
        np.concatenate(offsets).astype(np.int64, copy=False),
        every_first,
        frames.info.token_bytes,
        escape_bytes,
    )


def _chained(frames: FrameMasks, rule_id: int, table: RuleTable, state: int) -> bool:
    """True when `state` neither calls nor accepts, reads up to `_EDGES` bytes and each
    leads to a final state or to a call state that reads no byte, its frame not being built
    (`,` before an array's next item: the `[` state's twin has built it). Not through
    states whose frames are built already: the rests of `"` into a string body that are
    no token (~26 on Qwen) cost more by `read_calls` than the general build."""
    if state in table.calls or table.accepting[state]:
        return False
    edges = frames._walker(rule_id, table).reads[state]  # (a list: no byte set made)
    if not edges or len(edges) > _EDGES:
        return False
    flat, final, reads, base = table.flat, table.final, table.reads, state << 8
    same = frames.same_rule(rule_id)
    for byte in edges:
        at = flat[base | byte]
        if final[at]:
            continue
        if at not in table.calls or reads[at] or (same, at) in frames.building:
            return False
    return True


def _shifted(
    inner: FrameMask, longer: np.ndarray, rest: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The escape rows of tokens `longer` one byte after those of their rests `rest` in
    `inner` (the byte there is the rest's)."""
    escaping = np.zeros(len(inner.stays), dtype="<u4")
    set_bits(escaping, inner.tokens)
    hit = bits_set(escaping, rest).nonzero()[0]
    if not len(hit):
        return None
    by_rest: dict[int, list[int]] = {}  # tokens spelled alike share a rest
    for key, outer in zip(rest[hit].tolist(), longer[hit].tolist(), strict=True):
        by_rest.setdefault(key, []).append(outer)
    tokens, offsets, firsts = [], [], []
    rows = zip(inner.tokens.tolist(), inner.offsets.tolist(), inner.firsts.tolist(), strict=True)
    for token, at, byte in rows:
        for outer in by_rest.get(token, ()):
            tokens.append(outer)
            offsets.append(at + 1)
            firsts.append(byte)
    return (
        np.asarray(tokens, dtype=np.int64),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(firsts, dtype=np.uint8),
    )


def _bytes_at(frames: FrameMasks, tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    token_bytes = frames.info.token_bytes
    pairs = zip(tokens.tolist(), offsets.tolist(), strict=True)
    return np.fromiter(
        ((token_bytes[t] or b"\0")[o] for t, o in pairs), dtype=np.uint8, count=len(tokens)
    )


def _bytes(bits: int) -> list[int]:
    out = []
    while bits:
        out.append((bits & -bits).bit_length() - 1)
        bits &= bits - 1
    return out


def tails(sorted_: SortedTokens, byte: int) -> np.ndarray:
    """Per token of two bytes or more whose first byte is `byte` (sorted order): the id of
    the token spelled by its bytes after the first, or -1. Depends on the tokenizer alone:
    made once per tokenizer and byte (their rests are sorted too: one forward search)."""
    found = _TAILS.get(id(sorted_))
    if found is None or found[0] is not sorted_:
        if len(_TAILS) >= 4:
            _TAILS.pop(next(iter(_TAILS)))
        found = _TAILS[id(sorted_)] = (sorted_, {})
    known = found[1].get(byte)
    if known is None:
        tokens, ids = sorted_.tokens, sorted_.ids
        starts, (_, bounds) = sorted_.starts(), sorted_.alone()
        lo, hi = starts[byte] + bounds[byte + 1] - bounds[byte], starts[byte + 1]
        out: list[int] = []
        at, size = 0, len(tokens)
        for data in tokens[lo:hi]:
            rest = data[1:]
            at = bisect_left(tokens, rest, at)
            out.append(int(ids[at]) if at < size and tokens[at] == rest else -1)
        known = found[1][byte] = np.asarray(out, dtype=np.int64)
    return known


_TAILS: dict[int, tuple[SortedTokens, dict[int, np.ndarray]]] = {}
_NONE = np.zeros(0, dtype=np.int64)
