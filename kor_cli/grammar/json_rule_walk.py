"""Walks over rule ASTs (`json_rules`): the `Call` leaf, which rules a body calls, calls
substituted, and the size and container tests that decide which values become rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kor_cli.grammar.ast import (
    Alt,
    Automaton,
    Bytes,
    Join,
    Node,
    Product,
    Repeat,
    Seq,
    alt,
    children,
    join,
    repeat,
    seq,
)


@dataclass(frozen=True, eq=False)
class Call(Node):
    """Placeholder leaf: a call to rule `rule` (becomes `rules.call` or NOTHING when built).
    `view` (optional): builds the call-free node the DFA view inlines here instead.
    `free`: a call from outside the rule's recursion (the DFA view spends no level of
    recursion depth on it, as on the copy that `json_rules` once inlined there)."""

    rule: int
    view: Callable[[], Node] | None = None
    free: bool = False


def callees(node: Node) -> set[int]:
    """The rules `node` calls (products hold no calls)."""
    out: set[int] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) not in seen and not isinstance(n, Product):
            seen.add(id(n))
            if isinstance(n, Call):
                out.add(n.rule)
            stack += children(n)
    return out


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
        kind = type(n)
        if kind is Seq or kind is Alt:  # leaves (most items) kept without a visit
            items = n.items
            for k, x in enumerate(items):
                if type(x) not in _LEAVES and visit(x) is not x:  # a changed item: rebuild
                    rest = [y if type(y) in _LEAVES else visit(y) for y in items[k:]]
                    items = [*items[:k], *rest]
                    out = seq(*items) if kind is Seq else alt(*items)
                    break
            else:
                out = n
        elif kind is Call:
            out = leaf(n)
        elif kind is Repeat:
            item, sep = visit(n.item), None if n.sep is None else visit(n.sep)
            same = item is n.item and sep is n.sep
            out = n if same else repeat(item, n.min, n.max, sep)
        elif kind is Join:
            out = _join_of(n, [(visit(x), r) for x, r in n.items], visit)
        elif kind is Product and settled:
            out = settled.get(id(n), n)
        else:
            out = n
        memo[id(n)] = out
        return out

    return visit(node)


_LEAVES = frozenset([Bytes, Automaton])  # no calls, never replaced


def _join_of(n: Join, items: Sequence[tuple[Node, bool]], visit: Callable[[Node], Node]) -> Node:
    sep, tail = visit(n.sep), None if n.tail is None else visit(n.tail)
    same = sep is n.sep and tail is n.tail
    if same and all(a is b for (a, _), (b, _) in zip(items, n.items, strict=True)):
        return n
    return join(items, sep, tail, n.min_count, n.max_count)


def large(root: Node, limit: int) -> bool:
    """Whether `root` has at least `limit` AST nodes (automaton states), shared ones once."""
    return size(root, limit) >= limit


def size(root: Node, limit: int) -> int:
    """How many AST nodes (automaton states) `root` has, shared ones once, capped at
    `limit` (calls and products count one node each, their operands too)."""
    seen: set[int] = set()
    stack = [root]
    count = 0
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        count += node.dfa.num_states if isinstance(node, Automaton) else 1
        if count >= limit:
            return limit
        if isinstance(node, (Seq, Alt)):
            stack += node.items
        elif isinstance(node, Repeat):
            stack += [node.item] if node.sep is None else [node.item, node.sep]
        elif isinstance(node, Join):
            stack += [x for x, _ in node.items] + [node.sep]
            stack += [] if node.tail is None else [node.tail]
        elif isinstance(node, Product):
            stack += [node.left, node.right]
    return count


_BRACKETS = (1 << ord("[")) | (1 << ord("{"))


def container(node: Node) -> bool:
    """Whether `node` may be an array or object (its first byte may be `[` or `{`): only
    those are worth a rule; scalars stay inside their parent (terminals)."""
    while True:
        if isinstance(node, Bytes):
            return bool(node.mask & _BRACKETS)
        if isinstance(node, Seq) and node.items:
            node = node.items[0]
        elif isinstance(node, Alt):
            return any(container(x) for x in node.items)
        elif isinstance(node, Repeat):
            node = node.item
        elif isinstance(node, Product):
            node = node.left
        elif isinstance(node, Automaton):
            row = node.dfa.transitions[node.dfa.start]  # two scalars: no fancy index
            return bool(row[0x5B] or row[0x7B])  # `[`, `{`
        else:
            return True  # a call, or anything else: keep the size rule alone
