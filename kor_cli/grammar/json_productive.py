"""Productivity of a grammar's rules: whether each generates at least one string.

The matcher assumes that every rule it is offered generates at least one string.
`Productivity.productive` decides it on demand (a least fixpoint over the rules the answer
needs, evaluated on the ASTs; a product's emptiness is decided by compiling it, once, and
the automaton is reused when the rule is built) and `RuleBook.resolved` replaces every call
to a rule that generates nothing by the empty language, so such calls are never offered. A
deferred rule whose schemas surely have a value (`json_witness`: an object of its required
members, a string, ...) is productive without building its body: utcm-monitor's item rule
no longer builds 235 resource objects to learn that each has a value. A start rule that
generates nothing is an empty grammar (`GrammarError`).
"""

from __future__ import annotations

from collections.abc import Callable

from kor_cli.grammar.ast import (
    NOTHING,
    Alt,
    Automaton,
    Bytes,
    Join,
    Node,
    Product,
    Repeat,
    Seq,
)
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_rule_walk import Call


class Productivity:
    """The productivity half of `json_rules.RuleBook` (its base): answers decided so far,
    cheap proofs of deferred rules, and the automata of products settled on the way."""

    max_states: int
    _pending: dict[int, Callable[[], Node]]  # deferred rule -> its builder (`RuleBook`)

    def __init__(self, max_states: int) -> None:
        self.max_states = max_states
        self._decided: dict[int, bool] = {}  # rule -> whether it generates a string
        self._settled: dict[int, Node] = {}  # product node id -> its automaton (or NOTHING)
        self._proofs: dict[int, Callable[[], bool]] = {}  # deferred rule -> cheap productivity

    def body(self, rule: int) -> Node:
        """The AST of `rule` (`RuleBook.body`)."""
        raise NotImplementedError

    def productive(self, rule: int) -> bool:
        """Whether `rule` generates a string, decided on demand and once: the least fixpoint
        over the rules its answer needs (rounds from "no" upwards until nothing changes;
        alternatives stop at the first that generates, so the products of other branches
        and of rules never reached are not compiled)."""
        found = self._decided.get(rule)
        if found is not None:
            return found
        if self._proved(rule):
            return True
        known: dict[int, bool] = {}
        while True:
            done, changed, assumed = self._round(rule, known)
            if not changed or not assumed:  # no recursion met: the first round is exact
                self._decided.update(done)
                return done[rule]

    def _round(self, rule: int, known: dict[int, bool]) -> tuple[dict[int, bool], bool, bool]:
        """One round of `productive`: the answers it needed, whether any of them differs
        from `known` (what the last round found, updated), and whether an answer assumed
        one of `known`'s (a rule met again while deciding it)."""
        done: dict[int, bool] = {}
        visiting: set[int] = set()
        memo: dict[int, bool] = {}
        changed = assumed = False

        def ask(r: int) -> bool:
            nonlocal changed, assumed
            answer = self._decided.get(r, done.get(r))
            if answer is not None:
                return answer
            if self._proved(r):
                return True
            if r in visiting:  # recursion: assume what the last round found
                assumed = True
                return known.get(r, False)
            visiting.add(r)
            answer = done[r] = self._nonempty(self.body(r), ask, memo)
            visiting.discard(r)
            changed |= answer != known.get(r, False)
            known[r] = answer
            return answer

        ask(rule)
        return done, changed, assumed

    def _proved(self, rule: int) -> bool:
        """Whether a deferred rule not built yet surely generates a string by its cheap
        proof (then decided, and its body still not built)."""
        proof = self._proofs.pop(rule, None)
        if proof is None or rule not in self._pending or not proof():
            return False
        self._decided[rule] = True
        return True

    def _nonempty(self, node: Node, ask: Callable[[int], bool], memo: dict[int, bool]) -> bool:
        """Whether `node` generates a string, `ask(rule)` telling which calls can return."""
        found = memo.get(id(node))
        if found is not None:
            return found
        out: bool
        if isinstance(node, Call):
            out = ask(node.rule)
        elif isinstance(node, Bytes):
            out = node.mask != 0
        elif isinstance(node, Seq):
            out = all(self._nonempty(x, ask, memo) for x in node.items)
        elif isinstance(node, Alt):
            out = any(self._nonempty(x, ask, memo) for x in node.items)
        elif isinstance(node, Repeat):
            out = node.min == 0 or (
                self._nonempty(node.item, ask, memo)
                and (node.min < 2 or node.sep is None or self._nonempty(node.sep, ask, memo))
            )
        elif isinstance(node, Join):
            out = self._join(node, ask, memo)
        elif isinstance(node, Automaton):
            out = not node.dfa.is_empty()
        elif isinstance(node, Product):  # no calls inside: decided on its DFA, built once
            settled = self._settled.get(id(node))
            if settled is None:
                dfa = compile_ast(node, self.max_states)
                settled = self._settled[id(node)] = NOTHING if dfa.is_empty() else Automaton(dfa)
            out = settled is not NOTHING
        else:
            raise TypeError(f"unknown AST node {node!r}")
        memo[id(node)] = out
        return out

    def _join(self, node: Join, ask: Callable[[int], bool], memo: dict[int, bool]) -> bool:
        """Some choice of items (required ones all there) and tail copies, with a count
        in min_count..max_count, generates a string (optional items looked at only when
        the count needs them)."""
        required = [x for x, needed in node.items if needed]
        if not all(self._nonempty(x, ask, memo) for x in required):
            return False
        need, low = len(required), node.min_count
        high = node.max_count if node.max_count is not None else float("inf")
        if need > high or (need > 1 and not self._nonempty(node.sep, ask, memo)):
            return False
        if need >= low:
            return True
        if low > high or (low > 1 and not self._nonempty(node.sep, ask, memo)):
            return False
        if node.tail is not None and self._nonempty(node.tail, ask, memo):
            return True
        return need + sum(self._nonempty(x, ask, memo) for x, r in node.items if not r) >= low
