"""Stacks: the exact byte-level simulation of a `RuleSet` as a pushdown automaton.

A frame is (rule, state): a position in one rule's byte DFA. A stack is a chain of frames
(top first); stacks are interned (`Stacks.intern`), so a stack is an int and pushing,
popping, hashing and comparing cost O(1) however deep the recursion. Two sentinels end
every chain: `EMPTY` (below the root frame: reaching it means the whole grammar has
matched) and `CONTEXT` (below a *base* frame whose caller is unknown: the frame masks of
`frame_masks` simulate one rule position without its context; reaching `CONTEXT` means the
rest is read by whoever called).

A configuration is a frozenset of stacks (the engine is non-deterministic: a byte may be
read by the top rule, by a rule it calls at that point, or, when the top rule can end there,
by its caller). Moves without a byte (`closure`): at a state with calls, push the callee's
start frame above the frame moved to the call's return state; at an accepting state, pop.
Left recursion is refused when rules are built (`RuleSet.rule`), so a closure is finite.

Canonical forms keep stacks short and caches hot: a frame at a *final* state (accepting,
with no byte edge and no call) is popped as soon as it is reached, and a call whose return
state is final does not keep its caller's frame (a tail call: returning would pop it at
once). Both are exact: such a frame can only be popped.

Rule tables here are pruned: a state that can reach neither an accepting state nor a call
state by bytes is dead (every rule generates a string, so a call always completes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kor_cli.grammar.live import live_states
from kor_cli.grammar.rules import Rule, RuleSet

EMPTY = 0  # below the root frame
CONTEXT = 1  # below a base frame of unknown caller
REACHES_EMPTY = 1  # closure flags
REACHES_CONTEXT = 2
_MAX_CONFIG_STEPS = 1 << 18  # cached configuration steps (cleared when full)

Config = frozenset[int]


@dataclass(frozen=True)
class RuleTable:
    """One rule's pruned tables, in the plain Python forms the simulation reads fastest."""

    rule: Rule
    table: np.ndarray  # int32 [num_states, 256], dead ends pruned to 0
    flat: memoryview  # table.ravel(): state << 8 | byte → next state
    accepting: list[bool]
    final: list[bool]  # accepting, no byte edge, no call: only popped
    reads: list[bool]  # has a byte edge
    calls: dict[int, tuple[tuple[int, int], ...]]
    start: int
    byte_sets: dict[int, int]  # state → bit b set when byte b has an edge (filled on use)
    packed: list[bytes]  # every state's byte set, 32 bytes each (made on the first use)

    def byte_set(self, state: int) -> int:
        """The bytes `state` reads, as a 256-bit int. Every state's are packed at the first
        call (one compare and one packbits: a cold walk asks for ~8 states of a rule, and
        a row's own compare and packbits cost ~10 us each cold, ~1 us a slice here)."""
        found = self.byte_sets.get(state)
        if found is None:
            if not self.packed:
                self.packed.append(np.packbits(self.table != 0, 1, "little").tobytes())
            row = self.packed[0][state << 5 : (state + 1) << 5]
            found = self.byte_sets[state] = int.from_bytes(row, "little")
        return found


def rule_table(rule: Rule) -> RuleTable:
    """Prune `rule`'s DFA (call states count as live) and tabulate it."""
    table = np.require(rule.dfa.transitions, np.int32, ("C", "A"))  # a plain-int memoryview
    accepting = np.asarray(rule.dfa.accepting, dtype=bool)
    if rule.pruned:  # split off a minimal DFA: every state accepts, calls or leads on
        live = np.ones(len(table), dtype=bool)
        live[0] = False
    else:
        live = live_states(table, accepting | rule.call_states)
    if not live[1:].all():
        table = np.ascontiguousarray(np.where(live[table], table, 0), dtype=np.int32)
        table[~live] = 0
    accepting = accepting & live
    reads = (table != 0).any(axis=1)
    calls = {s: pairs for s, pairs in rule.calls.items() if live[s]}
    has_call = np.zeros(len(table), dtype=bool)
    has_call[list(calls)] = True
    final = accepting & ~reads & ~has_call
    start = int(rule.dfa.start) if live[int(rule.dfa.start)] else 0
    return RuleTable(
        rule, table, memoryview(table.ravel()), accepting.tolist(), final.tolist(),
        reads.tolist(), calls, start, {}, [],
    )  # fmt: skip


class Stacks:
    """Interned stacks over a `RuleSet`, their closures and byte steps (all cached)."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._tables: dict[int, RuleTable] = {}
        self.tables = self._tables  # read-only: a frame's rule always has its table (`push`)
        self._frames: list[tuple[int, int, int]] = [(-1, 0, EMPTY), (-1, 0, CONTEXT)]
        self._ids: dict[tuple[int, int, int], int] = {}
        self._closures: dict[int, tuple[tuple[int, ...], int]] = {
            EMPTY: ((), REACHES_EMPTY),
            CONTEXT: ((), REACHES_CONTEXT),
        }
        self._steps: dict[int, Config] = {}
        self._singles: dict[int, Config] = {}  # stack → frozenset((stack,)), shared
        self._config_steps: dict[tuple[Config, int], Config] = {}  # `classify`'s walks
        self._context_ends: dict[Config, bool] = {}

    def table(self, rule_id: int) -> RuleTable:
        """The pruned tables of a rule (built on first use)."""
        found = self._tables.get(rule_id)
        if found is None:
            found = self._tables[rule_id] = rule_table(self.rules.rule(rule_id))
        return found

    @property
    def size(self) -> int:
        """How many stacks are interned."""
        return len(self._frames)

    def frame(self, stack: int) -> tuple[int, int, int]:
        """(rule, state, rest of the stack) of a stack's top frame."""
        return self._frames[stack]

    def push(self, below: int, rule_id: int, state: int) -> int:
        """The stack `below` with frame (rule, state) on top (a final state: `below`)."""
        if self.table(rule_id).final[state]:
            return below
        key = (rule_id, state, below)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self._frames)
            self._frames.append(key)
        return found

    def start(self, below: int, rule_id: int) -> int:
        """A fresh frame of rule `rule_id` at its start, above `below`."""
        return self.push(below, rule_id, self.table(rule_id).start)

    def closure(self, stack: int) -> tuple[tuple[int, ...], int]:
        """The stacks reachable without reading a byte whose top frame reads bytes, and
        flags: REACHES_EMPTY (the grammar can end), REACHES_CONTEXT (the base frame can
        end)."""
        found = self._closures.get(stack)
        if found is not None:
            return found
        seen = {stack}
        todo = [stack]
        tops: list[int] = []
        flags = 0
        while todo:
            at = todo.pop()
            if at <= CONTEXT:
                flags |= REACHES_EMPTY if at == EMPTY else REACHES_CONTEXT
                continue
            rule_id, state, below = self._frames[at]
            table = self._tables[rule_id]
            if table.reads[state]:
                tops.append(at)
            for callee, ret in table.calls.get(state, ()):
                nxt = self.start(self.push(below, rule_id, ret), callee)
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
            if table.accepting[state] and below not in seen:
                seen.add(below)
                todo.append(below)
        found = self._closures[stack] = (tuple(sorted(tops)), flags)
        return found

    def step(self, stack: int, byte: int) -> Config:
        """The stacks after reading `byte` from `stack` (empty: it cannot be read there)."""
        key = stack << 8 | byte
        found = self._steps.get(key)
        if found is None:
            out = set()
            for top in self.closure(stack)[0]:
                rule_id, state, below = self._frames[top]
                nxt = self._tables[rule_id].flat[state << 8 | byte]
                if nxt:
                    out.add(self.push(below, rule_id, nxt))
            if len(out) == 1:  # one shared set per stack: fewer objects for the collector
                (only,) = out
                found = self._singles.get(only)
                if found is None:
                    found = self._singles[only] = frozenset(out)
            else:
                found = frozenset(out)
            self._steps[key] = found
        return found

    def walk(self, config: Iterable[int], data: bytes) -> Config:
        """The configuration after reading `data` (empty: it cannot be read)."""
        current = frozenset(config)
        steps = self._steps
        for byte in data:
            if len(current) == 1:  # `step_config` and `step`'s cache read inline: a token's
                (only,) = current  # walk, a decode step's accept, makes two calls less a byte
                found = steps.get(only << 8 | byte)
                current = self.step(only, byte) if found is None else found
            else:
                current = self.step_config(current, byte)
            if not current:
                break
        return current

    def step_config(self, config: Config, byte: int) -> Config:
        """One byte from a configuration (cached per configuration and byte)."""
        if len(config) == 1:  # cached by `step` (no key tuple kept)
            (only,) = config
            return self.step(only, byte)
        key = (config, byte)
        found = self._config_steps.get(key)
        if found is None:
            found = frozenset().union(*(self.step(s, byte) for s in config))
            if len(self._config_steps) >= _MAX_CONFIG_STEPS:
                self._config_steps.clear()
            self._config_steps[key] = found
        return found

    def _ends_context(self, config: Config) -> bool:
        """True when some stack of `config` can end its base frame (reach CONTEXT)."""
        found = self._context_ends.get(config)
        if found is None:
            found = any(self.closure(s)[1] & REACHES_CONTEXT for s in config)
            if len(self._context_ends) >= _MAX_CONFIG_STEPS:
                self._context_ends.clear()
            self._context_ends[config] = found
        return found

    def accepting(self, config: Iterable[int]) -> bool:
        """True when the grammar can end here (a stop token is allowed)."""
        return any(self.closure(s)[1] & REACHES_EMPTY for s in config)

    def next_bytes(self, config: Iterable[int]) -> int:
        """The bytes that can come next, as a 256-bit int (bit b: byte b)."""
        out = 0
        for stack in config:
            for top in self.closure(stack)[0]:
                rule_id, state, _ = self._frames[top]
                out |= self._tables[rule_id].byte_set(state)
        return out

    def classify(self, base: int, tokens: list[bytes]) -> list[tuple[int, int]]:
        """How each byte string reads from the base stack `base` (its bottom is CONTEXT):
        STAYS (some way keeps the base frame), ESCAPES (only by ending the base frame after
        at least one byte, the caller reading the rest), or 0 (not at all); with ESCAPES,
        where the caller would start reading (bit k: before byte k). Ending the base frame before
        the first byte is left out: the caller's own mask covers that. Strings sharing a
        prefix share its walk (they are visited in sorted order)."""
        out = [(0, 0)] * len(tokens)
        # path[i]: (configuration, escape offsets so far) after the first i bytes of `previous`
        path: list[tuple[Config, int]] = [(frozenset((base,)), 0)]
        previous = b""
        for index in sorted(range(len(tokens)), key=tokens.__getitem__):
            data = tokens[index]
            common = 0
            limit = min(len(previous), len(data), len(path) - 1)
            while common < limit and previous[common] == data[common]:
                common += 1
            del path[common + 1 :]
            current, follow = path[-1]
            for at in range(common, len(data)):
                if not current:
                    break
                if at and self._ends_context(current):
                    follow |= 1 << at
                current = self.step_config(current, data[at])
                path.append((current, follow))
            previous = data[: len(path) - 1]
            if current:
                out[index] = (STAYS, 0)
            elif follow:
                out[index] = (ESCAPES, follow)
        return out


STAYS = 1
ESCAPES = 2
