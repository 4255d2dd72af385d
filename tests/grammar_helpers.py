"""Hand-made byte DFAs (duck-typed to the ByteDFA contract) and brute-force oracles.

They let the token-level engine be tested independently of the schema compiler.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pytest

from kor_cli.grammar import index as index_module
from kor_cli.grammar import trie as trie_module

STRING = "STRING"  # '"' (UTF-8 text without '"', '\\', controls | '\\' escape)* '"'
DIGITS = "DIGITS"  # [0-9]+


# Each way a trie walk can go, forced: whole levels (dense); only the live nodes, level by
# level; only the live nodes, depth first, each node's children as one array; depth
# first handing over to level steps and back every two nodes; the index's plain-Python
# walk of every state (`TokenTrie.walk_few`, bisecting for the bytes a state reads where
# that reads fewer), and that walk giving up at once (then `walk`). The first four switch
# the plain-Python walk off.
_WALKS = {
    "dense": {"_DENSE_SHARE": 0.0, "index.FEW_WORK": 0},
    "levels": {"_DENSE_SHARE": 2.0, "_DEPTH_FIRST": -1, "index.FEW_WORK": 0},
    "depth-first": {
        "_DENSE_SHARE": 2.0, "_DEPTH_FIRST": 1 << 30, "_BUDGET": 1 << 30, "_WIDE": 0,
        "index.FEW_WORK": 0,
    },
    "hand-over": {"_DENSE_SHARE": 2.0, "_DEPTH_FIRST": 3, "_BUDGET": 2, "index.FEW_WORK": 0},
    "few": {"index.FEW_WORK": 1 << 30, "index._FEW_READS": 256, "_WIDE": 0},
    "few-gives-up": {"index.FEW_WORK": 1, "index._FEW_READS": 256},
}  # fmt: skip
WALKS = pytest.mark.parametrize("walk", list(_WALKS))


@contextmanager
def walk_mode(walk: str) -> Iterator[None]:
    """Force the trie walk named `walk` (one of `WALKS`) inside the block."""
    with ExitStack() as stack:
        for name, value in _WALKS[walk].items():
            module, attr = (
                (index_module, name[6:]) if name.startswith("index.") else (trie_module, name)
            )
            stack.enter_context(mock.patch.object(module, attr, value))
        yield


class ToyDFA:
    """transitions int32 [n, 256] (state 0 dead), accepting bool [n], start, fingerprint()."""

    def __init__(self, rows: Sequence[Sequence[int]], accepting: Iterable[int], start: int = 1):
        self.transitions = np.asarray(rows, dtype=np.int32).reshape(-1, 256)
        self.accepting = np.zeros(len(self.transitions), dtype=bool)
        self.accepting[list(accepting)] = True
        self.start = start

    @property
    def num_states(self) -> int:
        return len(self.transitions)

    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.transitions.tobytes() + self.accepting.tobytes())
        return f"{digest.hexdigest()}:{self.start}"

    def walk(self, state: int, data: bytes) -> int:
        for byte in data:
            state = int(self.transitions[state, byte])
        return state

    def matches(self, data: bytes) -> bool:
        return bool(self.accepting[self.walk(self.start, data)])


class _Builder:
    def __init__(self) -> None:
        self.rows: list[list[int]] = [[0] * 256]

    def new(self) -> int:
        self.rows.append([0] * 256)
        return len(self.rows) - 1

    def literal(self, state: int, data: bytes) -> int:
        for byte in data:
            nxt = self.rows[state][byte] or self.new()
            self.rows[state][byte] = nxt
            state = nxt
        return state

    def utf8_loop(self, body: int) -> None:
        """Every valid multi-byte UTF-8 character leads from `body` back to `body`."""
        tail1, tail2, tail3 = self.new(), self.new(), self.new()
        for state, nxt in ((tail1, body), (tail2, tail1), (tail3, tail2)):
            self.rows[state][0x80:0xC0] = [nxt] * 64
        leads = [
            (range(0xC2, 0xE0), tail1, None),
            (range(0xE1, 0xED), tail2, None),
            (range(0xEE, 0xF0), tail2, None),
            (range(0xF1, 0xF4), tail3, None),
            ([0xE0], tail1, range(0xA0, 0xC0)),
            ([0xED], tail1, range(0x80, 0xA0)),
            ([0xF0], tail2, range(0x90, 0xC0)),
            ([0xF4], tail2, range(0x80, 0x90)),
        ]
        for lead_bytes, tail, narrow in leads:
            if narrow is None:
                for lead in lead_bytes:
                    self.rows[body][lead] = tail
            else:
                first = self.new()
                self.rows[body][lead_bytes[0]] = first
                for byte in narrow:
                    self.rows[first][byte] = tail

    def string(self, state: int) -> int:
        body, escape, end = self.new(), self.new(), self.new()
        self.rows[state][ord('"')] = body
        for byte in range(0x20, 0x80):
            self.rows[body][byte] = body
        self.rows[body][ord('"')] = end
        self.rows[body][ord("\\")] = escape
        for byte in b'"\\/bfnrt':
            self.rows[escape][byte] = body
        self.utf8_loop(body)
        return end

    def digits(self, state: int) -> int:
        loop = self.new()
        for byte in b"0123456789":
            self.rows[state][byte] = loop
            self.rows[loop][byte] = loop
        return loop


def literal_dfa(words: Iterable[bytes]) -> ToyDFA:
    """A trie DFA accepting exactly `words` (not minimised; every state can accept)."""
    build = _Builder()
    start = build.new()
    ends = {build.literal(start, word) for word in words}
    return ToyDFA(build.rows, ends, start)


def chain_dfa(*parts: bytes | str) -> ToyDFA:
    """Literals, STRING and DIGITS one after another (a DIGITS part must not be followed
    by a literal starting with a digit)."""
    build = _Builder()
    state = start = build.new()
    for part in parts:
        if isinstance(part, bytes):
            state = build.literal(state, part)
        elif part == STRING:
            state = build.string(state)
        elif part == DIGITS:
            state = build.digits(state)
        else:
            raise ValueError(part)
    return ToyDFA(build.rows, [state], start)


def person_dfa() -> ToyDFA:
    """A JSON-object-like DFA: {"name": <string>, "age": <digits>}."""
    return chain_dfa(b'{"name": ', STRING, b', "age": ', DIGITS, b"}")


def live_states(dfa: ToyDFA) -> set[int]:
    """States that can reach an accepting state (plain fixpoint, the oracle's own)."""
    live = {s for s in range(dfa.num_states) if dfa.accepting[s] and s}
    rows = dfa.transitions.tolist()
    changed = True
    while changed:
        changed = False
        for state, row in enumerate(rows):
            if state and state not in live and any(t in live for t in row):
                live.add(state)
                changed = True
    return live


def brute_next(dfa: ToyDFA, live: set[int], state: int, data: bytes | None) -> int:
    """The state after `data` from `state`, 0 if any step leaves the live states."""
    if not data:
        return 0
    rows = dfa.transitions
    for byte in data:
        state = int(rows[state, byte])
        if state not in live:
            return 0
    return state


def brute_allowed(
    dfa: ToyDFA, token_bytes: Sequence[bytes | None], stop_ids: Iterable[int], state: int
) -> np.ndarray:
    """The allowed-token mask of `state`, one Python walk per token."""
    live = live_states(dfa)
    rows = dfa.transitions.tolist()
    stops = set(stop_ids)
    mask = np.zeros(len(token_bytes), dtype=bool)
    if state not in live:
        return mask
    for token, data in enumerate(token_bytes):
        if token in stops or not data:
            continue
        current = state
        for byte in data:
            current = rows[current][byte]
            if current not in live:
                break
        else:
            mask[token] = True
    for stop in stops:
        mask[stop] = bool(dfa.accepting[state])
    return mask


def reachable(dfa: ToyDFA) -> list[int]:
    """States reachable from the start (breadth first)."""
    order, seen = [dfa.start], {dfa.start}
    for state in order:
        for nxt in set(dfa.transitions[state].tolist()):
            if nxt and nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
    return order


def brute_masks(
    dfa: ToyDFA, token_bytes: Sequence[bytes | None], stop_ids: Iterable[int], states: list[int]
) -> dict[int, np.ndarray]:
    """The allowed-token masks of `states`, by walking every token's bytes column by column
    as arrays (no trie; for real vocabularies, where `brute_allowed` is too slow)."""
    live = np.zeros(dfa.num_states, dtype=bool)
    live[list(live_states(dfa))] = True
    table = np.where(live[dfa.transitions], dfa.transitions, 0)
    stops = set(stop_ids)
    ids = np.asarray([i for i, b in enumerate(token_bytes) if b and i not in stops], dtype=int)
    lens = np.asarray([len(token_bytes[i] or b"") for i in ids], dtype=int)
    columns = np.zeros((int(lens.max(initial=0)), len(ids)), dtype=np.uint8)
    for k, i in enumerate(ids):
        data = token_bytes[i] or b""
        columns[: len(data), k] = np.frombuffer(data, dtype=np.uint8)
    out = {}
    for state in states:
        mask = np.zeros(len(token_bytes), dtype=bool)
        alive = np.arange(len(ids)) if live[state] else np.zeros(0, dtype=int)
        current = np.full(len(alive), state)
        for depth, column in enumerate(columns):
            going = lens[alive] > depth
            mask[ids[alive[~going]]] = True  # ended alive
            alive, current = alive[going], current[going]
            current = table[current, column[alive]]
            alive, current = alive[current != 0], current[current != 0]
        mask[ids[alive]] = True
        mask[list(stops)] = bool(dfa.accepting[state]) and live[state]
        out[state] = mask
    return out


def token_walk(compiled: Any, info: Any, tokens: Sequence[int]) -> bool:
    """Whether `GrammarMatcher(compiled)`'s masks allow every token of `tokens` in turn and
    then a stop token (each allowed token accepted)."""
    from kor_cli.grammar.surface import GrammarMatcher

    matcher = GrammarMatcher(compiled)
    buf = np.zeros((1, compiled.words), dtype=np.int32)

    def allowed(token: int) -> bool:
        buf[:] = 0
        matcher.fill_next_token_bitmask(buf, 0)
        return bool(int(buf[0, token >> 5]) >> (token & 31) & 1)

    for token in tokens:
        if not allowed(token):
            return False
        assert matcher.accept_token(token)
    return any(allowed(stop) for stop in info.stop_ids)
