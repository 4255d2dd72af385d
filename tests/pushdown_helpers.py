"""A reference byte-level simulation of a RuleSet, independent of `kor_cli.grammar.stacks`.

Stacks are plain tuples of (rule, state) frames, bottom first; no interning, no tail
calls, no eager pops; memos of steps, closures and table rows only. Rule tables are read
raw (the test rules are minimal DFAs, so every state but 0 can complete). A configuration
is viable iff it is non-empty: `allowed` is then the brute-force set of allowed tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kor_cli.grammar.rules import RuleSet

Stack = tuple[tuple[int, int], ...]
ROOT_DONE: Stack = ()


class Reference:
    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._memo: dict[tuple[frozenset[Stack], int], frozenset[Stack]] = {}
        self._closures: dict[Stack, frozenset[Stack]] = {}
        self._rows: dict[tuple[int, int], list[int]] = {}
        self._closed: dict[frozenset[Stack], frozenset[Stack]] = {}

    def start(self) -> frozenset[Stack]:
        rule = self.rules.rule(self.rules.start)
        return frozenset({((self.rules.start, rule.dfa.start),)})

    def closure(self, stack: Stack) -> frozenset[Stack]:
        found = self._closures.get(stack)
        if found is None:
            found = self._closures[stack] = frozenset(self._closure(stack))
        return found

    def closed(self, config: frozenset[Stack]) -> frozenset[Stack]:
        """The union of the closures of `config`'s stacks (stacks popped to a common
        stack below are stepped once)."""
        found = self._closed.get(config)
        if found is None:
            found = self._closed[config] = frozenset().union(*map(self.closure, config))
        return found

    def _closure(self, stack: Stack) -> set[Stack]:
        seen = {stack}
        todo = [stack]
        while todo:
            at = todo.pop()
            if not at:
                continue
            rule_id, state = at[-1]
            rule = self.rules.rule(rule_id)
            nexts = []
            for callee, ret in rule.calls.get(state, ()):
                nexts.append(
                    at[:-1] + ((rule_id, ret), (callee, self.rules.rule(callee).dfa.start))
                )
            if rule.dfa.accepting[state]:
                nexts.append(at[:-1])
            for nxt in nexts:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def _row(self, rule_id: int, state: int) -> list[int]:
        """The rule DFA's transitions from `state`, by byte."""
        found = self._rows.get((rule_id, state))
        if found is None:
            table = self.rules.rule(rule_id).dfa.transitions
            found = self._rows[rule_id, state] = table[state].tolist()
        return found

    def step(self, config: frozenset[Stack], byte: int) -> frozenset[Stack]:
        key = (config, byte)
        found = self._memo.get(key)
        if found is None:
            out = set()
            for at in self.closed(config):
                if not at:
                    continue
                rule_id, state = at[-1]
                nxt = self._row(rule_id, state)[byte]
                if nxt:
                    out.add(at[:-1] + ((rule_id, nxt),))
            found = self._memo[key] = frozenset(out)
        return found

    def walk(self, config: frozenset[Stack], data: bytes) -> frozenset[Stack]:
        for byte in data:
            config = self.step(config, byte)
            if not config:
                break
        return config

    def accepting(self, config: frozenset[Stack]) -> bool:
        return any(() in self.closure(stack) for stack in config)

    def next_bytes(self, config: frozenset[Stack]) -> list[int]:
        return [b for b in range(256) if self.step(config, b)]

    def allowed(
        self, config: frozenset[Stack], token_bytes: Sequence[bytes | None], stops: Sequence[int]
    ) -> np.ndarray:
        """Brute force over every token, sharing work along sorted common prefixes."""
        out = np.zeros(len(token_bytes), dtype=bool)
        order = sorted((b, i) for i, b in enumerate(token_bytes) if b)
        path: list[frozenset[Stack]] = [config]
        previous = b""
        for data, token in order:
            common = 0
            limit = min(len(previous), len(data), len(path) - 1)
            while common < limit and previous[common] == data[common]:
                common += 1
            del path[common + 1 :]
            for byte in data[common:]:
                current = path[-1]
                path.append(self.step(current, byte) if current else current)
            out[token] = bool(path[-1])
            previous = data
        if self.accepting(config):
            out[list(stops)] = True
        return out

    def random_string(
        self, rng: np.random.Generator, max_len: int = 40, max_stacks: int = 64
    ) -> bytes:
        """A random string of the language (a random walk that heads for the end).

        The walk also stops, at a prefix, once the configuration's closure holds more than
        `max_stacks` stacks: in an ambiguous grammar they can double with every byte, and
        this simulation (and `allowed` over it) would grow with them.
        """
        config = self.start()
        out = bytearray()
        while True:
            if self.accepting(config) and (len(out) >= max_len or rng.random() < 0.15):
                return bytes(out)
            options = self.next_bytes(config)
            if not options:
                return bytes(out)
            if len(out) >= max_len:  # prefer closing bytes
                closers = [b for b in options if b in b']})"']
                options = closers or options
            byte = int(rng.choice(options))
            out.append(byte)
            config = self.step(config, byte)
            if len(out) > 4 * max_len or len(self.closed(config)) > max_stacks:
                return bytes(out)
