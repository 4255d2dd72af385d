"""Rules: byte DFAs with call edges, the grammar of the pushdown engine (`pushdown`).

A grammar is a set of numbered rules; each rule's body is a regex AST whose leaves may be
`call(k)`, "a string of rule k here". A call is spelled in bytes that UTF-8 never uses
(0xF8-0xFF, never in any UTF-8 text, so never in a grammar's output): the lead byte 0xF8
(`MARK`) and then `WIDTH` base-7 digits in 0xF9..0xFF, most significant first. So the whole
regex AST → NFA → minimal DFA pipeline (`fsm.compile_ast`, minimisation included) runs
unchanged over rule bodies with calls, and `split_calls` reads the calls back off the
minimal DFA: from each state, each marker path (0xF8 d1 .. d6) is a call to rule
d1..d6 returning to the state the path ends in. The marker transitions are removed and the
marker states dropped, leaving a `Rule`: a byte DFA plus `calls: state -> ((callee,
return_state), ...)`. A minimal DFA is deterministic over markers too, so a state calls each
callee at most once (alternatives after a call share their return state).

Why six digits: 7**6 = 117,649 rules, far beyond any schema, and a call costs only seven
NFA states (a schema with more rules than that is refused with `GrammarError`).

Contracts:
- **Every rule generates at least one string** (the compiler guarantees it; an empty rule
  is a `GrammarError` when built). So a call always completes: a state whose only way to
  acceptance runs through a call is live, though it cannot reach acceptance by bytes alone
  (`TokenIndex`'s dead-state pruning must count call states as live; `Rule.call_states`).
- **Rule bodies admit no raw byte 0xF8-0xFF** (none is UTF-8); `split_calls` refuses a body
  whose 0xF8 edge does not start a clean marker path, rather than guess.
- **Calls never occur under products** (`not`, `oneOf` exclusivity, intersections): the
  compiler inlines there; a product's DFA has no markers.
- **No left recursion**: a rule that can reach a call to itself without reading a byte
  (through calls at its start and calls of rules that generate the empty string) would make
  the pushdown matcher push forever. It is found when the rule is built
  (`RuleSet.rule`) and is a `GrammarError` naming the rules on the cycle.

Rules are built lazily: `RuleSet.rule(k)` builds rule k on first request (and, to check for
left recursion and to know which rules generate the empty string, the rules it calls before
reading a byte).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, literal
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.call_markers import BASE, DIGIT0, MARK, WIDTH
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.shared_rules import shared_rule

MAX_RULES = BASE**WIDTH  # rule ids are 0 .. MAX_RULES - 1
_FORMAT = "kor-rules-v1"
_RAW_HIGH = (
    "a rule body admits bytes 0xF8-0xFF outside a call marker "
    "(rule bodies must hold UTF-8 text only)"
)

_NO_CALLS: Mapping[int, tuple[tuple[int, int], ...]] = MappingProxyType({})


def marker(rule_id: int) -> bytes:
    """The bytes that spell a call to `rule_id`."""
    if not 0 <= rule_id < MAX_RULES:
        raise GrammarError(f"rule id {rule_id} is out of range (at most {MAX_RULES - 1} rules)")
    digits = []
    for _ in range(WIDTH):
        rule_id, digit = divmod(rule_id, BASE)
        digits.append(DIGIT0 + digit)
    return bytes([MARK, *reversed(digits)])


def call(rule_id: int) -> Node:
    """AST leaf: a string of rule `rule_id` here (a call)."""
    return literal(marker(rule_id))


@dataclass(frozen=True)
class Rule:
    """One rule: a byte DFA (no marker bytes) and its calls.

    `calls[state]`: the (callee, return_state) pairs of `state`, callees ascending. Reading
    a string of the callee from `state` leads to `return_state`.
    """

    dfa: Any  # a ByteDFA (or any object with its contract)
    calls: Mapping[int, tuple[tuple[int, int], ...]] = field(default_factory=lambda: _NO_CALLS)
    # every state but 0 reaches an accepting or a calling state (split off a trimmed DFA):
    # the pushdown tables need not prune it
    pruned: bool = False

    @cached_property
    def call_states(self) -> np.ndarray:
        """Bool [num_states]: the states with at least one call."""
        out = np.zeros(len(self.dfa.transitions), dtype=bool)
        out[list(self.calls)] = True
        return out


def split_calls(dfa: ByteDFA) -> Rule:
    """The rule a minimal DFA over bytes and call markers spells (see the module docstring).

    The result keeps the states reachable from the start by bytes and returns from calls,
    renumbered in order (0 stays the dead state). A DFA split before (the same object: two
    rules of one schema whose bodies `fsm.compile_ast` found structurally equal, e.g. the
    root and a `$ref: "#"` item built later) gives the same `Rule` again.
    """
    found = _split_memo.get(dfa) if isinstance(dfa, ByteDFA) else None
    if found is None:
        found = _split(dfa)
        if isinstance(dfa, ByteDFA):
            _split_memo[dfa] = found  # the rule holds its own DFA, never this key
    return found


_split_memo: weakref.WeakKeyDictionary[ByteDFA, Rule] = weakref.WeakKeyDictionary()


def _split(dfa: ByteDFA) -> Rule:
    split = getattr(dfa, "split", None)  # the builder's (`byte_dfa.ByteDFA`): made so
    if split is not None:
        rows, accepting, calls = split()
        if not accepting.any():
            raise GrammarError("a rule matches nothing")
        return Rule(ByteDFA.made(rows, accepting, 1), MappingProxyType(calls), pruned=True)
    table = np.asarray(dfa.transitions, dtype=np.int32)
    marks = getattr(dfa, "marks", None)  # the builder's (`byte_dfa.ByteDFA`), or read here
    found, inside, reads_digits = (*marks, ()) if marks is not None else _markers(table)
    if getattr(dfa, "trimmed", False):
        # minimal: every state is reachable, so by bytes and returns all but the markers'
        keep = [s for s in range(1, len(table)) if s not in inside]
    else:
        bytes_only = table.copy()
        bytes_only[:, MARK:] = 0
        keep = _reachable(bytes_only, dfa.start, found)
    if not keep:
        raise GrammarError("a rule matches nothing")
    renumber = [-1] * len(table)  # -1: a state not kept (inside a marker, unreachable)
    renumber[0] = 0
    for number, state in enumerate(keep, 1):
        renumber[state] = number
    if renumber[dfa.start] < 1 or any(renumber[s] > 0 for s in reads_digits):
        raise GrammarError(_RAW_HIGH)  # the start inside a marker, a kept state reads a digit
    keep.insert(0, 0)  # row 0 (dead) stays row 0
    if len(keep) == len(table):  # every state kept: the numbers stay
        rows = table.copy()
        rows[:, MARK:] = 0  # calls are read off; marker bytes leave the table
    else:
        rows = np.asarray(renumber, dtype=np.int32).take(table.take(keep, axis=0))
        rows[:, MARK:] = 0
        if rows.min() < 0:  # a byte into a marker's inside
            raise GrammarError(_RAW_HIGH)
    accepting = np.asarray(dfa.accepting, dtype=bool)[keep]
    if not accepting.any():
        raise GrammarError("a rule matches nothing")
    calls = {
        renumber[s]: tuple((callee, renumber[t]) for callee, t in pairs)
        for s, pairs in found.items()
        if renumber[s] > 0
    }
    out = ByteDFA.made(rows, accepting, renumber[dfa.start])
    # a kept state led to acceptance in `dfa`: by bytes alone, or by bytes to a call
    return Rule(out, MappingProxyType(calls), pruned=getattr(dfa, "trimmed", False))


def _markers(
    table: np.ndarray,
) -> tuple[dict[int, tuple[tuple[int, int], ...]], set[int], list[int]]:
    """Each state's calls (callee, return state) read off its marker paths, the states
    inside marker paths, and the states that read a digit byte (the high columns' few
    transitions are listed at once: a rule has few)."""
    found: dict[int, tuple[tuple[int, int], ...]] = {}
    inside: set[int] = set()
    high = table[:, MARK:]
    sources, columns = np.nonzero(high != 0)
    if not len(sources):
        return found, inside, []
    marks: dict[int, int] = {}  # state -> its MARK target
    digits: dict[int, list[int]] = {}  # state -> its digit targets
    for state, column, target in zip(
        sources.tolist(), columns.tolist(), high[sources, columns].tolist(), strict=True
    ):
        if column:
            digits.setdefault(state, [0] * BASE)[column - 1] = target
        else:
            marks[state] = target
    for state, first in marks.items():  # ascending: np.nonzero lists rows in order
        frontier = [(first, 0)]
        for _ in range(WIDTH):
            step = []
            for inner, value in frontier:
                row = digits.get(inner)
                if row is None or inner == state:
                    raise GrammarError(_RAW_HIGH)
                inside.add(inner)
                step += [(t, value * BASE + d) for d, t in enumerate(row) if t]
            frontier = step
        found[state] = tuple(sorted((value, target) for target, value in frontier))
    if inside and table[sorted(inside), :DIGIT0].any():  # inside a marker, another byte
        raise GrammarError(_RAW_HIGH)
    return found, inside, list(digits)


def _reachable(
    table: np.ndarray, start: int, calls: Mapping[int, tuple[tuple[int, int], ...]]
) -> list[int]:
    """Non-dead states reachable from `start` by bytes and call returns, ascending."""
    rows = np.sort(table, axis=1)  # each state's distinct successors, via sorted rows
    distinct = np.ones(rows.shape, dtype=bool)
    distinct[:, 1:] = rows[:, 1:] != rows[:, :-1]
    distinct &= rows != 0
    successors = rows[distinct].tolist()
    bounds = np.concatenate(([0], np.cumsum(distinct.sum(axis=1)))).tolist()
    seen = {start}
    todo = [start]
    while todo:
        state = todo.pop()
        nexts = successors[bounds[state] : bounds[state + 1]]
        nexts += [t for _, t in calls.get(state, ())]
        for nxt in nexts:
            if nxt and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return sorted(seen)


class RuleSet:
    """A grammar as numbered rules, built lazily; `start` is the root rule.

    `build(k)` returns the minimal DFA of rule k's body (calls spelled by `call`); it runs
    once per rule, on the first `rule(k)`. `names` (optional) names rules in messages.
    `key` (optional): a stable description of the whole grammar (e.g. the schema's canonical
    JSON and the options); without it `key()` builds every reachable rule to hash them.
    `shared` (optional, read when a rule is built, so the caller may add to it later):
    rule id -> a process-wide key of a schema-independent rule (`shared_rules`): built once
    per process, then taken from the memo.
    """

    def __init__(
        self,
        start: int,
        build: Callable[[int], ByteDFA],
        names: Mapping[int, str] = MappingProxyType({}),
        key: str | None = None,
        checked: Mapping[int, int] = MappingProxyType({}),
        shared: Mapping[int, Hashable] = MappingProxyType({}),
    ) -> None:
        """`checked`: array rule → item rule of the `uniqueItems` arrays the matcher checks
        at run time (`unique_check`)."""
        if not 0 <= start < MAX_RULES:
            raise GrammarError(f"rule id {start} is out of range (at most {MAX_RULES - 1} rules)")
        self.start = start
        self._build = build
        self.names = dict(names)
        self._key = key
        self.checked = dict(checked)
        self.shared = shared  # not copied: see the class docstring
        self._rules: dict[int, Rule] = {}
        self._nullable: dict[int, bool] = {}
        self._visiting: list[int] = []
        self.free = MAX_RULES - 1  # the id `rooted` gives a new root rule (counting down)

    @classmethod
    def from_dfa(cls, dfa: Any, key: str | None = None) -> RuleSet:
        """A grammar of one rule without calls: exactly `dfa`'s language."""
        rules = cls(0, lambda _: dfa, key=key if key is not None else dfa.fingerprint())
        rules._rules[0] = Rule(dfa, pruned=getattr(dfa, "trimmed", False))
        rules._nullable[0] = bool(dfa.accepting[dfa.start])
        return rules

    def rooted(self, root: Callable[[Node], Node], name: str = "root") -> RuleSet:
        """The same rules under a new root rule `root(call(self.start))` (e.g. an output
        format's wrapper around a record's grammar). Built rules are shared; the new
        root is built now (its DFA's fingerprint goes into the key)."""
        new_id = self.free
        if new_id == self.start or new_id < 0:
            raise GrammarError("no rule id left for a new root rule")
        parent_build, start = self._build, self.start

        def build(rule_id: int) -> ByteDFA:
            return compile_ast(root(call(start))) if rule_id == new_id else parent_build(rule_id)

        names = {**self.names, new_id: name}
        out = RuleSet(new_id, build, names, checked=self.checked, shared=self.shared)
        out._rules, out._nullable, out.free = dict(self._rules), dict(self._nullable), new_id - 1
        root_rule = out.rule(new_id)
        out._key = (
            f"{self.key()} rooted {root_rule.dfa.fingerprint()} {sorted(root_rule.calls.items())}"
        )
        return out

    def name(self, rule_id: int) -> str:
        """The rule's name for messages (its id when unnamed)."""
        return self.names.get(rule_id, f"rule {rule_id}")

    @property
    def built(self) -> int:
        """How many rules are built so far."""
        return len(self._rules)

    @property
    def has_calls(self) -> bool:
        """True when the root calls a rule (else it is the only rule)."""
        return bool(self.rule(self.start).calls)

    def rule(self, rule_id: int) -> Rule:
        """Rule `rule_id`, built on first request (GrammarError: empty, left-recursive)."""
        found = self._rules.get(rule_id)
        if found is not None:
            return found
        if not 0 <= rule_id < MAX_RULES:
            raise GrammarError(f"rule id {rule_id} is out of range (at most {MAX_RULES - 1} rules)")
        rule = self._make(rule_id)
        self._rules[rule_id] = rule
        try:
            self._nullable[rule_id] = self._epsilon_scan(rule_id, rule)
        except BaseException:
            del self._rules[rule_id]
            raise
        return rule

    def _make(self, rule_id: int) -> Rule:
        """Build rule `rule_id` (a subclass may find it elsewhere, e.g. a disk cache); a
        schema-independent one comes from the process-wide memo (`shared`)."""
        key = self.shared.get(rule_id)
        if key is not None:
            return shared_rule(key, lambda: self._split(rule_id))
        return self._split(rule_id)

    def _split(self, rule_id: int) -> Rule:
        dfa = self.body(rule_id)
        if dfa.is_empty():
            raise GrammarError(f"{self.name(rule_id)} matches nothing")
        return split_calls(dfa)

    def body(self, rule_id: int) -> ByteDFA:
        """The minimal DFA of rule `rule_id`'s body, calls spelled as markers (built anew
        on each call: `rule` keeps the split form)."""
        return self._build(rule_id)

    @property
    def keyed(self) -> bool:
        """True when the grammar has a stable description (`key()` builds nothing)."""
        return self._key is not None

    def built_rules(self) -> list[tuple[int, Rule, bool]]:
        """(rule id, rule, generates the empty string) of every rule built so far, in the
        order they were first requested (a rule before the rules it calls first)."""
        return [
            (k, rule, self._nullable[k]) for k, rule in self._rules.items() if k in self._nullable
        ]

    def seed(self, rule_id: int, rule: Rule, nullable: bool) -> None:
        """Take rule `rule_id` as built (e.g. read back from a disk cache of this grammar)."""
        self._rules[rule_id] = rule
        self._nullable[rule_id] = nullable

    def nullable(self, rule_id: int) -> bool:
        """True when the rule generates the empty string."""
        self.rule(rule_id)
        return self._nullable[rule_id]

    def epsilon_states(self, rule_id: int, state: int) -> list[int]:
        """The states of the rule reachable from `state` without reading a byte (through
        calls of rules that generate the empty string), `state` first."""
        rule = self.rule(rule_id)
        seen = [state]
        for at in seen:
            for callee, ret in rule.calls.get(at, ()):
                if ret not in seen and self.nullable(callee):
                    seen.append(ret)
        return seen

    def _epsilon_scan(self, rule_id: int, rule: Rule) -> bool:
        """Build the rules called before a byte is read, refuse left recursion, and tell
        whether the rule generates the empty string."""
        self._visiting.append(rule_id)
        try:
            seen = [rule.dfa.start]
            for at in seen:
                for callee, ret in rule.calls.get(at, ()):
                    if callee in self._visiting:
                        cycle = self._visiting[self._visiting.index(callee) :] + [callee]
                        path = " -> ".join(self.name(k) for k in cycle)
                        raise GrammarError(
                            f"left recursion: {path} calls itself without reading a byte"
                        )
                    self.rule(callee)
                    if self._nullable[callee] and ret not in seen:
                        seen.append(ret)
            return bool(np.asarray(rule.dfa.accepting)[seen].any())
        finally:
            self._visiting.pop()

    def reachable_rules(self) -> list[int]:
        """Every rule reachable from the root through calls (builds them all), ascending."""
        seen = {self.start}
        todo = [self.start]
        while todo:
            for pairs in self.rule(todo.pop()).calls.values():
                for callee, _ in pairs:
                    if callee not in seen:
                        seen.add(callee)
                        todo.append(callee)
        return sorted(seen)

    def key(self) -> str:
        """A stable fingerprint of the grammar (for caches)."""
        digest = hashlib.sha256(f"{_FORMAT} {self.start}".encode())
        if self.checked:
            digest.update(f" checked {sorted(self.checked.items())}".encode())
        if self._key is not None:
            digest.update(b" key " + self._key.encode())
            return digest.hexdigest()
        for rule_id in self.reachable_rules():
            rule = self._rules[rule_id]
            calls = sorted((s, pairs) for s, pairs in rule.calls.items())
            digest.update(f" {rule_id} {rule.dfa.fingerprint()} {calls}".encode())
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"RuleSet(start={self.start}, built={self.built})"
