"""Frame masks through call states, decided from the callees' frames (no stack simulation).

At a state that calls rules, a token that ends a callee's start frame after k bytes (an
escape row of that frame) goes on at the call's return state in this rule. Where the rest
of the token is read there by bytes alone, how the token reads from this frame follows
without the stack simulation (`Stacks.classify`): `]` after a nested value, `},` after an
object member, and so on. `read_calls` does the same for a call met after some bytes
(`,"` at an array's `,`, `":"` after a key), entering the callee's start frame with the
rest of the token when that rest is itself a token, else reading it by the callee's table
(a recursive rule's start, whose frame is still being built: `[[`, `["` into `value`).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

import numpy as np

from kor_cli.grammar.bitmask import bits_set, set_bits
from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_rows import offset_rows
from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.token_arrays import SortedTokens

if TYPE_CHECKING:
    from kor_cli.grammar.frame_masks import FrameMasks


def twin_frame(frames: FrameMasks, rule_id: int, table: RuleTable, state: int) -> FrameMask | None:
    """The frame of a call `state` whose byte edges all lead to final states (an array's
    `[`: `]`, or its first item), from the frame of its *twin*: a state with the same calls
    that reads no byte, accepts not and reaches no other state without a byte (after the
    array's `,`). A token's ways from `state` are the twin's (the same calls and returns)
    and one byte into a final state: that byte alone stays, a longer token escapes after
    it unless it stays in the twin. None when there is no twin (or it is being built)."""
    pairs = table.calls.get(state)
    if pairs is None or not table.reads[state]:
        return None
    final, flat, base = table.final, table.flat, state << 8
    edges, bits = [], table.byte_set(state)
    while bits:
        byte = (bits & -bits).bit_length() - 1
        bits &= bits - 1
        if not final[flat[base | byte]]:
            return None
        edges.append(byte)
    twin = _twins(frames, rule_id, table).get(pairs)
    same = frames.same_rule(rule_id)
    if twin is None or (same, twin) in frames.building:
        return None
    if frames.stacks.rules.epsilon_states(rule_id, state) != [state]:
        return None
    inner = frames.get(rule_id, twin)
    sorted_ = frames._sorted
    starts, (alone, bounds) = sorted_.starts(), sorted_.alone()
    stays = inner.stays.copy()
    set_bits(stays, np.concatenate([alone[bounds[b] : bounds[b + 1]] for b in edges]))
    spans = [(starts[b] + bounds[b + 1] - bounds[b], starts[b + 1]) for b in edges]
    spans = [(lo, hi) for lo, hi in spans if lo < hi]  # tokens going on past the byte
    if sum(hi - lo for lo, hi in spans) < _FEW_LONGER:
        escaping, firsts, escape_bytes = _few_longer(sorted_, inner, spans)
    else:
        escaping, firsts, escape_bytes = _longer(sorted_, inner, spans)
    return FrameMask(
        stays,
        table.accepting[state],
        np.concatenate([inner.tokens, escaping]),
        np.concatenate([inner.offsets, np.ones(len(escaping), dtype=np.int64)]),
        np.concatenate([inner.firsts.astype(np.uint8, copy=False), firsts]),
        frames.info.token_bytes,
        escape_bytes,
    )


def _longer(
    sorted_: SortedTokens, inner: FrameMask, spans: list[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, int]:
    """`twin_frame`'s escapes after the edge byte (`_few_longer`) as arrays."""
    ids = sorted_.ids
    longer = np.concatenate([ids[lo:hi] for lo, hi in spans]) if spans else _NONE
    padded = sorted_.matrix()[1] if spans else None  # two columns at least then
    seconds_byte = (  # the first byte of each suffix
        np.concatenate([padded[lo:hi, 1] for lo, hi in spans]) if padded is not None else _BYTES
    )
    keep = ~bits_set(inner.stays, longer)
    if len(inner.tokens):  # a row (token, 1) the twin has already
        seconds = np.zeros(len(inner.stays), dtype="<u4")
        set_bits(seconds, inner.tokens[inner.offsets == 1])
        keep &= ~bits_set(seconds, longer)
    escaping, firsts = longer[keep], seconds_byte[keep]
    escape_bytes = inner.escape_bytes
    for byte in distinct(firsts).tolist():
        escape_bytes |= 1 << byte
    return escaping, firsts, escape_bytes


def _few_longer(
    sorted_: SortedTokens, inner: FrameMask, spans: list[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, int]:
    """`twin_frame`'s escapes after the edge byte where few tokens go on past it (sorted
    positions `spans`): those neither staying in the twin nor escaping it after one byte,
    their second bytes, and the twin's `escape_bytes` with those bytes (in Python: ~10
    numpy calls less than the array form, which more tokens take)."""
    tokens, ids = sorted_.tokens, sorted_.ids
    view = memoryview(inner.stays)
    rows = zip(inner.tokens.tolist(), inner.offsets.tolist(), strict=True)
    after_one = {token for token, offset in rows if offset == 1}
    escaping: list[int] = []
    firsts: list[int] = []
    escape_bytes = inner.escape_bytes
    for lo, hi in spans:
        for position, token in enumerate(ids[lo:hi].tolist(), lo):
            if view[token >> 5] >> (token & 31) & 1 or token in after_one:
                continue
            byte = tokens[position][1]
            escaping.append(token)
            firsts.append(byte)
            escape_bytes |= 1 << byte
    return np.array(escaping, dtype=np.int64), np.array(firsts, dtype=np.uint8), escape_bytes


_FEW_LONGER = 64  # `twin_frame` reads fewer tokens past the edge byte in Python


def _twins(frames: FrameMasks, rule_id: int, table: RuleTable) -> dict[tuple, int]:
    """A rule's call states that read no byte, accept not and reach no other state without
    a byte, by their calls (the first of each; made once per rule)."""
    found = frames.twins.get(rule_id)
    if found is None or found[0] is not table:
        epsilon = frames.stacks.rules.epsilon_states
        out: dict[tuple, int] = {}
        for at, pairs in table.calls.items():
            if table.reads[at] or table.accepting[at] or pairs in out:
                continue
            if epsilon(rule_id, at) == [at]:
                out[pairs] = at
        found = frames.twins[rule_id] = (table, out)
    return found[1]


def decide_returns(
    frames: FrameMasks,
    table: RuleTable,
    state: int,
    ids: np.ndarray,
    through: np.ndarray,
    settled: np.ndarray,
    where: np.ndarray,
    stays: np.ndarray,
) -> np.ndarray:
    """Decide the candidates `ids[through]` (escapes of the callees' start frames at a
    call `state`; `ids` ascending) from the return states, without the stack simulation.
    Such a token is read by bytes from `state` (`settled`/`where`: `escape_offsets`), or
    by a callee that ends after k bytes (its escape row (token, k)), the rest read from the return
    state by this rule's bytes: it stays if some way reads it to its end, else it
    escapes wherever some way stood at an accepting state before a byte. A way that
    meets a call state with bytes left (the return state's own calls too) is left to
    the simulation, as is a token whose byte path from `state` is not settled.
    Updates `settled` and `where` in place and sets the tokens that stay in `stays`;
    returns which of `ids` the simulation must read."""
    open_ = through & settled
    settled[through] = False  # decided below, or left to the simulation
    if not open_.any():
        return ~settled
    outcome = _outcome(frames, table, state)
    settled[open_] = True  # a token `outcome` lacks ends or dies with no offset bits
    told = [(token, code) for token, code in outcome.items() if code]
    staying: list[int] = []  # rows that stay
    if told:  # the few tokens a way reads on from the return state (`ids` ascending)
        listed = ids.tolist()  # (a few dozen: bisected in Python, no numpy scalars)
        is_open = open_.tolist()
        size = len(listed)
        for token, code in told:
            row = bisect_left(listed, token)
            if row == size or listed[row] != token or not is_open[row]:
                continue
            if code > 0:
                where[row] |= code
            else:
                settled[row] = False
                if code == STAYING:
                    staying.append(row)
    slow = ~settled
    if staying:
        slow[staying] = False
        set_bits(stays, ids[staying])
    return slow


def called_rows(
    frames: FrameMasks, table: RuleTable, state: int, ids: np.ndarray, stays: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """`decide_returns` for a call `state` that reads no byte, its candidates `ids`
    (ascending, a few) all its callees' escapes, read as lists: ~15 numpy calls on a dozen
    rows less (rpc's array and object items). Sets the tokens that stay in `stays`;
    returns the escape rows the return states tell and the ids left to `read_calls`."""
    outcome = _outcome(frames, table, state)
    told: list[int] = []  # escape offset bits by the return states
    bits: list[int] = []
    slow: list[int] = []
    staying: list[int] = []
    for token in ids.tolist():
        code = outcome.get(token, 0)
        if code > 0:
            told.append(token)
            bits.append(code)
        elif code == UNDECIDED:
            slow.append(token)
        elif code == STAYING:
            staying.append(token)
    if staying:
        set_bits(stays, np.asarray(staying, dtype=np.int64))
    rows = offset_rows(np.asarray(told, dtype=np.int64), np.asarray(bits, dtype=np.int64))
    return rows, np.asarray(slow, dtype=np.int64)


def _outcome(frames: FrameMasks, table: RuleTable, state: int) -> dict[int, int]:
    """`returns_of` over the calls of `state`: a token's first deciding way wins, as the
    callees are read in order."""
    pairs = table.calls[state]
    outcome = returns_of(frames, table, *pairs[0])
    if len(pairs) > 1:
        outcome = dict(outcome)
        for callee, ret in pairs[1:]:
            for token, found in returns_of(frames, table, callee, ret).items():
                known = outcome.get(token, 0)
                if known >= 0:
                    outcome[token] = found if found < 0 else known | found
    return outcome


UNDECIDED, STAYING = -1, -2  # `returns_of`'s codes other than escape offset bits


def returns_of(frames: FrameMasks, table: RuleTable, callee: int, ret: int) -> dict[int, int]:
    """How each escaping token of `callee`'s start frame reads on from `ret` by this rule's
    bytes (`decide_returns`): UNDECIDED (a way meets a call with bytes left), STAYING (some
    way reads it to its end), else the bits of the offsets where a way stood at an
    accepting state before a byte. Depends on the callee's frame and (table, ret) alone:
    kept per `frames` (the call states of an array's first and later items share it)."""
    key = (id(table), callee, ret)
    known = frames.returns.get(key)
    if known is not None and known[0] is table:
        return known[1]
    out: dict[int, int]
    token_bytes = frames.info.token_bytes
    flat, accepting, calls = table.flat, table.accepting, table.calls
    inner = frames.get(callee, frames.stacks.table(callee).start)
    if ret in calls:  # every row has bytes left at `ret`: the simulation decides
        out = dict.fromkeys(inner.tokens.tolist(), UNDECIDED)
        frames.returns[key] = (table, out)
        return out
    out = {}
    at_ret = 1 if accepting[ret] else 0
    tokens, offsets, firsts = inner.tokens, inner.offsets, inner.firsts
    if not at_ret:  # a row that dies at its first byte adds nothing: its code stays 0
        live = table.table[ret].take(firsts).nonzero()[0]
        tokens, offsets, firsts = tokens[live], offsets[live], firsts[live]
    rows = zip(tokens.tolist(), offsets.tolist(), firsts.tolist(), strict=True)
    for token, k, byte in rows:  # the first byte from `ret` is the row's `firsts` byte
        found = out.get(token, 0)
        if found < 0:
            continue
        found |= at_ret << k
        q = flat[ret << 8 | byte]
        if q:  # most rows die at their first byte: their bytes are not read
            data = token_bytes[token] or b""
            k, n = k + 1, len(data)
            while k < n:
                if q in calls:  # a call with bytes left: the simulation decides
                    found = UNDECIDED
                    break
                if accepting[q]:
                    found |= 1 << k
                q = flat[q << 8 | data[k]]
                k += 1
                if not q:
                    break
            else:
                found = STAYING
        out[token] = found
    frames.returns[key] = (table, out)
    return out


def read_calls(
    frames: FrameMasks, table: RuleTable, state: int, ids: np.ndarray, stays: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Decide the candidates `ids` from `state` with a `CallReader`: set those that stay in
    `stays`; return the escape rows of the others it decided, and the ids left to the
    simulation."""
    read = CallReader(frames, table).read
    token_bytes = frames.info.token_bytes
    tokens: list[int] = []
    offsets: list[int] = []
    slow: list[int] = []
    staying: list[int] = []
    for token in ids.tolist():
        found = read(state, token_bytes[token] or b"", 0, 0)
        if found is None:
            slow.append(token)
        elif found[0]:
            staying.append(token)
        else:
            bits = found[1]
            while bits:
                at = (bits & -bits).bit_length() - 1
                bits &= bits - 1
                tokens.append(token)
                offsets.append(at)
    if staying:
        set_bits(stays, np.asarray(staying, dtype=np.int64))
    rows = np.asarray(tokens, dtype=np.int64), np.asarray(offsets, dtype=np.int64)
    return rows, np.asarray(slow, dtype=np.int64)


class CallReader:
    """Decides candidates that meet call states after their first byte from the callees'
    frame masks, without the stack simulation: a way into callee C at a call state, the
    rest of the token being itself a token R, stays when C's start frame keeps R, and goes
    on at the return state after each escape of R (its offset k: C ended after k bytes of
    R), read again by bytes (and further calls). Where C's start frame cannot be read (it
    is being built: a recursive rule's start) or the rest is no token, the rest is read by
    C's own table the same way (`_through`). A token is decided only when every way is:
    deep chains of calls and empty rules leave it to the simulation. One per frame build
    (it reads one rule's table; the callees' readers are made on use)."""

    def __init__(
        self,
        frames: FrameMasks,
        table: RuleTable,
        readers: dict[int, CallReader] | None = None,
        rule_id: int = -1,
    ) -> None:
        """`readers`: the callees' readers (shared by nested ones); `rule_id`: the rule of
        `table` (a callee's reader: see `start_ends`)."""
        self._frames = frames
        self._rule_id = rule_id
        self._table = table
        self._flat, self._accepting, self._calls = table.flat, table.accepting, table.calls
        sorted_ = frames._sorted
        self._sorted, self._ids = sorted_.tokens, sorted_.ids
        self._known = frames.spelled
        self._readers: dict[int, CallReader] = {} if readers is None else readers
        self._ends: bool | None = None  # the start frame can end before a byte (`ends`)
        self._starts: dict[int, _Start] = {}  # the callees' start frames (`_callee_frame`)

    def read(self, q: int, data: bytes, k: int, depth: int) -> tuple[bool, int] | None:
        """How `data[k:]` reads from state `q` (calls there count; a pop before byte k does
        not), `depth` ways deep: (stays, escape offset bits), or None when undecided."""
        flat, accepting, calls = self._flat, self._accepting, self._calls
        stays, bits, n = False, 0, len(data)
        while k < n:
            if k and accepting[q]:
                bits |= 1 << k
            pairs = calls.get(q)
            if pairs is not None:
                for callee, ret in pairs:
                    found = self._via(callee, ret, data, k, depth)
                    if found is None:
                        return None
                    stays = stays or found[0]
                    bits |= found[1]
            q = flat[q << 8 | data[k]]
            k += 1
            if not q:
                return stays, bits
        return True, bits  # read to its end by bytes: the frame lives (or just ended)

    def _via(
        self, callee: int, ret: int, data: bytes, k: int, depth: int
    ) -> tuple[bool, int] | None:
        if depth > _DEPTH:
            return None
        start = self._starts.get(callee)
        if start is None:
            start = self._callee_frame(callee)
        frame, stays_words, table = start
        if table is not None:  # read by the callee's bytes up to its first call or end
            flat, accepting, calls = table.flat, table.accepting, table.calls
            q, at, n = table.start, k, len(data)
            while True:  # (a plain start cannot end before a byte: no way on from `ret`)
                q = flat[q << 8 | data[at]]
                at += 1
                if not q:  # no way through the callee (its escape rows say so too)
                    return False, 0
                if at == n:  # the callee's frame lives: the rest stays in it
                    return True, 0
                if accepting[q] or q in calls:
                    break  # other ways: the callee's frame (or its reader) tells
        if frame is None:
            return self._through(callee, ret, data, k, depth)
        rest = data[k:]
        token = self._known.get(rest)
        if token is None:
            token = self._token(rest)
        if token < 0:
            return self._through(callee, ret, data, k, depth)
        stays, bits = False, 0
        if frame.ends:  # the callee can end before a byte: the return state reads on
            found = self.read(ret, data, k, depth + 1)
            if found is None:
                return None
            stays, bits = found
        if stays_words[token >> 5] >> (token & 31) & 1:
            return True, bits
        ends = frame.offset_bits().get(token, 0)  # where the callee's frame ends in it
        while ends:
            at = (ends & -ends).bit_length() - 1
            ends &= ends - 1
            found = self.read(ret, data, k + at, depth + 1)
            if found is None:
                return None
            stays = stays or found[0]
            bits |= found[1]
        return stays, bits

    def _through(
        self, callee: int, ret: int, data: bytes, k: int, depth: int
    ) -> tuple[bool, int] | None:
        """`_via` without the callee's start frame: the rest read from the callee's start
        by its own reader (staying in it, or the offsets after byte k where it can end,
        each read on from `ret`), and from `ret` at once where it can end before a byte."""
        reader = self._readers.get(callee)
        if reader is None:
            table = self._frames.stacks.table(callee)
            reader = CallReader(self._frames, table, self._readers, callee)
            self._readers[callee] = reader
        inner = reader.read(reader._table.start, data, k, depth + 1)
        if inner is None:
            return None
        if inner[0]:
            return True, 0
        stays, bits = False, 0
        ends = inner[1] & ~(1 << k)  # ending before a byte: `start_ends` below
        if reader.start_ends():
            ends |= 1 << k
        while ends:
            at = (ends & -ends).bit_length() - 1
            ends &= ends - 1
            found = self.read(ret, data, at, depth + 1)
            if found is None:
                return None
            stays = stays or found[0]
            bits |= found[1]
        return stays, bits

    def start_ends(self) -> bool:
        """True when this rule can end before a byte from its start (its start frame's
        `ends`: an accepting state among those reached without a byte)."""
        if self._ends is None:
            table, rules = self._table, self._frames.stacks.rules
            here = rules.epsilon_states(self._rule_id, table.start)
            self._ends = any(table.accepting[at] for at in here)
        return self._ends

    def _token(self, data: bytes) -> int:
        """The id of the token spelled `data` (-1: none), remembered per grammar (the
        frames at each copy of an array's `,` look up the same rests: `"`, `true`, `{"`)."""
        found = self._known.get(data)
        if found is None:
            tokens = self._sorted
            at = bisect_left(tokens, data)
            found = int(self._ids[at]) if at < len(tokens) and tokens[at] == data else -1
            self._known[data] = found
        return found

    def _callee_frame(self, callee: int) -> _Start:
        """The start frame of `callee` (built here unless it is being built: then None),
        and its `stays` words as a memoryview (a bit test on it is a fraction of one on
        numpy words, and nothing is copied; its escape offsets by token are made on use);
        looked up once per reader: a frame being built is one of the frames whose build
        runs this reader, so it stays unfinished while the reader lives."""
        frames = self._frames
        table = frames.stacks.table(callee)
        start = table.start
        plain = not (table.accepting[start] or start in table.calls)  # one way in
        found: _Start = (None, _NO_WORDS, table if plain else None)
        if (frames.same_rule(callee), start) not in frames.building:
            frame = frames.get(callee, start)
            found = (frame, memoryview(frame.stays), found[2])
        self._starts[callee] = found
        return found


_Start = tuple["FrameMask | None", memoryview, RuleTable | None]
_NO_WORDS = memoryview(np.zeros(0, dtype="<u4"))


_NONE = np.zeros(0, dtype=np.int64)
_BYTES = np.zeros(0, dtype=np.uint8)
_DEPTH = 16  # nested ways (empty callees, escapes read on) followed before giving up
