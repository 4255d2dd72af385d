"""The rules of a JSON Schema grammar: recursive `$ref`s become calls, not unrolled copies.

The compiler (`json_schema`) builds every conjunction (`conj`: parts at a location) as a
regex AST. When it re-enters a conjunction that it is still building (same parts at the
same location, positive mode, outside products), the inner occurrence becomes a `Call`
leaf to a rule whose body is that conjunction, and the outer occurrence refers to the rule
too. So recursion costs one rule, not copies, and nests to any depth on the pushdown
matcher (`rules.RuleSet`). Non-recursive schemas keep one rule: the very AST (and so the
very DFA) of the whole-DFA engine.

Under products (`not`, `oneOf`, `if`/`else`, `contains`, `uniqueItems`, `enum` beside
constraints, `propertyNames`: whatever is compiled to a DFA and intersected or
subtracted mid-compile) no call may appear: there the compiler unrolls recursion to
`max_recursion_depth`, as the whole-DFA engine did (a sound under-approximation).

Productivity: the matcher assumes that every rule it is offered generates at least one
string. `RuleBook.finish` computes which rules are productive (a least fixpoint over the
rule graph, evaluated on the ASTs; a product's emptiness is decided by compiling it, once)
and `resolved` replaces every call to an unproductive rule by the empty language, so such
calls are never offered. A start rule that is not productive is an empty grammar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
    alt,
    join,
    repeat,
    seq,
)
from kor_cli.grammar.fsm import ByteDFA, compile_ast
from kor_cli.grammar.json_keywords import Part
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.rules import call

Key = tuple[tuple[tuple[int, frozenset[str], int, bool], ...], int]


@dataclass(frozen=True, eq=False)
class Call(Node):
    """Placeholder leaf: a call to rule `rule` (becomes `rules.call` or NOTHING when built)."""

    rule: int


class RuleBook:
    """The rules found while compiling one schema, their bodies and productivity."""

    def __init__(self, max_states: int) -> None:
        self.max_states = max_states
        self.bodies: dict[int, Node] = {}
        self.names: dict[int, str] = {}
        self.start = 0
        self.productive: set[int] = set()
        self._rule_of: dict[Key, int] = {}
        self._open: dict[Key, list[Any]] = {}  # key -> [rule id or None, parts (kept alive)]
        self._keep: list[list[Part]] = []  # parts of finished rules (their ids are keys)
        self._settled: dict[int, Node] = {}  # product node id -> its automaton (or NOTHING)

    def conj(self, parts: list[Part], loc: Location, build: Callable[[], Node]) -> Node:
        """`build()`, or a call to the rule of this conjunction if it recurses."""
        key: Key = (tuple((id(p.schema), p.skip, p.parent, p.synthetic) for p in parts), id(loc))
        found = self._rule_of.get(key)
        if found is not None:
            return Call(found)
        entry = self._open.get(key)
        if entry is not None:  # re-entered while still being built: a recursive rule
            if entry[0] is None:
                entry[0] = self._new(_name(parts))
            return Call(entry[0])
        self._open[key] = [None, parts]
        try:
            node = build()
        finally:
            rule = self._open.pop(key)[0]
        if rule is None:
            return node
        self.bodies[rule] = node
        self._rule_of[key] = rule
        self._keep.append(parts)
        return Call(rule)

    def _new(self, name: str) -> int:
        rule = len(self.names) + 1  # 0 is kept for a start rule that is not recursive
        self.names[rule] = name
        return rule

    @property
    def recursive(self) -> bool:
        """True once some conjunction recursed (more than the one start rule)."""
        return bool(self._rule_of)

    def finish(self, root: Node) -> bool:
        """Fix the start rule (`root`'s) and productivity; False if the start is not productive."""
        recursive = self.recursive
        if isinstance(root, Call):
            self.start = root.rule
        else:
            self.start = 0
            self.bodies[0] = root
            self.names[0] = "#"
        if not recursive:  # one rule: its DFA (built anyway) tells whether it is empty
            self.productive = {0}
            return True
        productive: set[int] = set()
        changed = True
        while changed:
            changed = False
            memo: dict[int, bool] = {}
            for rule, body in self.bodies.items():
                if rule not in productive and self._nonempty(body, productive, memo):
                    productive.add(rule)
                    changed = True
        self.productive = productive
        return self.start in productive

    def unproductive(self) -> list[str]:
        """Names of the rules that generate nothing (recursion without a way out)."""
        rules = sorted(self.bodies, key=lambda r: (r == 0, r))  # recursive rules first
        return [self.names[r] for r in rules if r not in self.productive]

    def _nonempty(self, node: Node, productive: set[int], memo: dict[int, bool]) -> bool:
        """Whether `node` generates a string when only `productive` rules may be called."""
        found = memo.get(id(node))
        if found is not None:
            return found
        out: bool
        if isinstance(node, Call):
            out = node.rule in productive
        elif isinstance(node, Bytes):
            out = node.mask != 0
        elif isinstance(node, Seq):
            out = all(self._nonempty(x, productive, memo) for x in node.items)
        elif isinstance(node, Alt):
            out = any(self._nonempty(x, productive, memo) for x in node.items)
        elif isinstance(node, Repeat):
            out = node.min == 0 or (
                self._nonempty(node.item, productive, memo)
                and (node.min < 2 or node.sep is None or self._nonempty(node.sep, productive, memo))
            )
        elif isinstance(node, Join):
            out = self._join(node, productive, memo)
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

    def _join(self, node: Join, productive: set[int], memo: dict[int, bool]) -> bool:
        """Some choice of items (required ones all there) and tail copies, with a count
        in min_count..max_count, generates a string."""
        need = avail = 0
        for item, required in node.items:
            if self._nonempty(item, productive, memo):
                need += required
                avail += not required
            elif required:
                return False
        tail = node.tail is not None and self._nonempty(node.tail, productive, memo)
        most: float = float("inf") if tail else need + avail
        if not self._nonempty(node.sep, productive, memo):
            most = min(most, 1)  # no two items can be separated
        high = most if node.max_count is None else min(most, node.max_count)
        return max(need, node.min_count) <= high

    def resolved(self, rule: int) -> Node:
        """The body of `rule` with calls to productive rules as call markers, others removed."""

        def leaf(c: Call) -> Node:
            return call(c.rule) if c.rule in self.productive else NOTHING

        return substitute(self.bodies[rule], leaf, self._settled)

    def build(self, rule: int) -> ByteDFA:
        """The DFA (with call markers) of `rule`, for `rules.RuleSet`."""
        return compile_ast(self.resolved(rule), self.max_states)

    def inlined(self, depth: int) -> Node:
        """The start rule with calls inlined `depth` deep (deeper ones removed): the
        bounded DFA view of a recursive grammar."""
        memo: dict[tuple[int, int], Node] = {}

        def expand(rule: int, left: int) -> Node:
            found = memo.get((rule, left))
            if found is None:
                found = memo[(rule, left)] = substitute(
                    self.bodies[rule],
                    lambda c: (
                        expand(c.rule, left - 1)
                        if left > 0 and c.rule in self.productive
                        else NOTHING
                    ),
                    self._settled,
                )
            return found

        return expand(self.start, depth)


def substitute(
    node: Node, leaf: Callable[[Call], Node], settled: dict[int, Node] | None = None
) -> Node:
    """`node` with every `Call` replaced by `leaf(call)` and products already compiled
    replaced by their automata (`settled`); shared subtrees stay shared. Products and
    automata hold no calls."""
    memo: dict[int, Node] = {}

    def visit(n: Node) -> Node:
        done = memo.get(id(n))
        if done is not None:
            return done
        out: Node
        if isinstance(n, Call):
            out = leaf(n)
        elif isinstance(n, (Seq, Alt)):
            items = [visit(x) for x in n.items]
            same = all(a is b for a, b in zip(items, n.items, strict=True))
            out = n if same else seq(*items) if isinstance(n, Seq) else alt(*items)
        elif isinstance(n, Repeat):
            item, sep = visit(n.item), None if n.sep is None else visit(n.sep)
            same = item is n.item and sep is n.sep
            out = n if same else repeat(item, n.min, n.max, sep)
        elif isinstance(n, Join):
            out = _join_of(n, [(visit(x), r) for x, r in n.items], visit)
        elif isinstance(n, Product) and settled:
            out = settled.get(id(n), n)
        else:
            out = n
        memo[id(n)] = out
        return out

    return visit(node)


def _join_of(n: Join, items: Sequence[tuple[Node, bool]], visit: Callable[[Node], Node]) -> Node:
    sep, tail = visit(n.sep), None if n.tail is None else visit(n.tail)
    same = sep is n.sep and tail is n.tail
    if same and all(a is b for (a, _), (b, _) in zip(items, n.items, strict=True)):
        return n
    return join(items, sep, tail, n.min_count, n.max_count)


def _name(parts: list[Part]) -> str:
    """A readable rule name: the schema pointer of the conjunction's first part."""
    pointer = parts[0].pointer if parts else ""
    return pointer if "#" in pointer else "#" + pointer
