"""The byte paths of a frame's candidate tokens, walked in Python where they are few.

`byte_offsets` tells, for each candidate, whether its byte path from a state is settled
(it dies, escaping at the accepting states before) and where it escapes. It stops at a
call state met after the first byte, unless every way into the callees there is told by
their bytes alone (`_calls_read`): all die (`[name`, `[],` at a JSON value's start: the
walk goes on) or one reads the token to its end (`[n`, `":"`: the token stays).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.token_arrays import WIDTH, SortedTokens, escape_offsets


def byte_offsets(
    sorted_: SortedTokens,
    ids: np.ndarray,
    state: int,
    table: RuleTable,
    kinds: tuple[np.ndarray, np.ndarray] | Callable[[], tuple[np.ndarray, np.ndarray]],
    tables: Callable[[int], RuleTable] | None = None,
    staying: list[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """`token_arrays.escape_offsets` (`settled`, `where`), each token walked in Python
    when there are few (`PYTHON_ROWS`): the array walk pays ~5 us of numpy calls per
    byte offset however few rows it holds (15 tokens: ~80 us). With the callees'
    `tables` (and a `staying` list), the Python walk goes on past a call state whose
    every way dies in its callee (`_calls_read`: `[name`, `[],` at a JSON value's
    start), and a token a callee reads to its end by bytes (`[n`, `":"`) stays: its row
    is settled without offsets and appended to `staying`. `kinds` (the rule's accepting and
    call states as bools) may be the function that makes them: the array walk reads them."""
    if len(ids) > PYTHON_ROWS:
        made = kinds() if callable(kinds) else kinds
        return escape_offsets(sorted_, ids, state, table.table, *made)
    token_bytes = sorted_.tokens
    flat, accepting, calls = table.flat, table.accepting, table.calls
    starts: dict[int, _Plain | None] = {}
    back = (flat, accepting, calls) if RETURNS else None
    positions = sorted_.position(ids).tolist()
    settled = np.zeros(len(ids), dtype=bool)
    where = np.zeros(len(ids), dtype=np.int64)
    for row, position in enumerate(positions):
        if position < 0:
            continue
        data = token_bytes[position]
        if len(data) > WIDTH:
            continue
        q, bits = state, 0
        for k, byte in enumerate(data):
            if k:
                pairs = calls.get(q)
                if pairs is not None:
                    if tables is None or staying is None:
                        break  # a call met: the simulation decides
                    way = _calls_read(tables, starts, pairs, data, k, back=back)
                    if way == STAYING:
                        settled[row] = True
                        staying.append(row)
                        break
                    if way == OPEN:
                        break
                if accepting[q]:
                    bits |= 1 << k
            q = flat[q << 8 | byte]
            if not q:
                settled[row] = True
                where[row] = bits
                break
    return settled, where


_Plain = tuple[memoryview, list[bool], dict, int, list[bool]]  # flat, accepting, calls,
# start, final of a plain start's table
_Back = tuple[memoryview, list[bool], dict]  # the calling table's flat, accepting, calls


def _calls_read(
    tables: Callable[[int], RuleTable],
    starts: dict[int, _Plain | None],
    pairs: tuple[tuple[int, int], ...],
    data: bytes,
    k: int,
    depth: int = 0,
    back: _Back | None = None,
) -> int:
    """How the calls of `pairs` read `data[k:]` by their callees' bytes: STAYING when a
    callee whose start is plain (neither accepts nor calls: it cannot end before a byte)
    reads it to its end, DEAD when every callee's start is plain and its bytes die before
    an accepting state (the way adds nothing to the token's reading), else OPEN. A call
    state in a callee is read the same way, `depth` calls deep (`":["` at rpc's params:
    `[` into the value's array, `"` into its item). `starts`: the callees' plain starts,
    filled on use. With the calling table (`back`, `pairs` being its own calls), a callee
    that reaches a final state before the token's end returns: the rest is read from the
    return state by that table (`_returned`: `":"","` in a key's body on Qwen stays, its
    value `""` read by the callee; `":"",\n` dies), where the frame would else leave the
    token to `frame_returns.read_calls` (~70-130 us cold per frame)."""
    n, found = len(data), DEAD
    for callee, ret in pairs:
        if callee in starts:
            plain = starts[callee]
        else:
            table = tables(callee)
            start = table.start
            plain = starts[callee] = (
                None
                if table.accepting[start] or start in table.calls
                else (table.flat, table.accepting, table.calls, start, table.final)
            )
        if plain is None:
            found = OPEN
            continue
        flat, accepting, calls, q, final = plain
        at = k
        while True:
            q = flat[q << 8 | data[at]]
            at += 1
            if not q:
                break  # this way dies
            if at == n:
                return STAYING
            if accepting[q]:
                way = OPEN if back is None or not final[q] else _returned(back, ret, data, at)
                if way == STAYING:
                    return STAYING
                if way == OPEN:
                    found = OPEN
                break
            inner = calls.get(q)
            if inner is not None:  # the callee's callees, then its own bytes
                way = (
                    OPEN
                    if depth == _DEPTH
                    else _calls_read(tables, starts, inner, data, at, depth + 1)
                )
                if way == STAYING:
                    return STAYING
                if way == OPEN:
                    found = OPEN
                    break
    return found


def _returned(back: _Back, q: int, data: bytes, at: int) -> int:
    """How the calling table (`back`) reads `data[at:]` (at least a byte) from return state
    `q`: STAYING when its bytes read it to the end (the frame lives), DEAD when they die
    first, OPEN when they meet an accepting or a call state before its end (the frame may
    end there, or a call reads on: `read_calls` decides)."""
    flat, accepting, calls = back
    n = len(data)
    while at < n:
        if accepting[q] or q in calls:
            return OPEN
        q = flat[q << 8 | data[at]]
        at += 1
        if not q:
            return DEAD
    return STAYING


STAYING, DEAD, OPEN = 1, 0, -1  # `_calls_read`'s codes
RETURNS = True  # `_calls_read` follows a callee's return (False: leaves it to `read_calls`)
_DEPTH = 16  # nested calls read before giving up


PYTHON_ROWS = 96  # `byte_offsets` walks up to this many tokens in Python (~0.4 us each)
