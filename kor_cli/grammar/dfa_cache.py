"""Structural identity of AST nodes and a bounded cache of their compiled DFAs.

AST nodes compare by identity, so two subschemas that compile to the same tree (the same
`$ref` target reached twice, the same `oneOf` of free-form values in 24 places) would be
determinised and minimised once per occurrence. `structure(node)` gives every node a
small integer that is equal for structurally equal trees (leaf masks, shapes, bounds,
embedded automata by their fingerprint), so `fsm` compiles each distinct tree once.

Ids come from a counter and are never reused: forgetting the intern table (when it grows
past its bound) only costs cache misses, never a wrong hit.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Join, Node, Product, Repeat, Seq, children

if TYPE_CHECKING:
    from kor_cli.grammar.fsm import ByteDFA

_MAX_INTERNED = 2_000_000  # structural keys remembered (then forgotten all at once)
_MAX_CACHED_STATES = 400_000  # DFA states kept by the cache (about 1 KiB each)

_ids: weakref.WeakKeyDictionary[Node, int] = weakref.WeakKeyDictionary()
_interned: dict[tuple[Any, ...], int] = {}
_counter = itertools.count(1)
_dfas: OrderedDict[tuple[int, int], ByteDFA] = OrderedDict()
_cached_states = 0


def _key(node: Node) -> tuple[Any, ...]:
    """The structural key of `node`, its children already numbered."""
    if isinstance(node, Bytes):
        return ("B", node.mask)
    if isinstance(node, Automaton):
        return ("A", node.dfa.fingerprint())
    if isinstance(node, (Seq, Alt)):
        return (type(node).__name__, *(_ids[x] for x in node.items))
    if isinstance(node, Repeat):
        sep = 0 if node.sep is None else _ids[node.sep]
        return ("R", _ids[node.item], node.min, node.max, sep)
    if isinstance(node, Join):
        items = tuple((_ids[x], required) for x, required in node.items)
        tail = 0 if node.tail is None else _ids[node.tail]
        return ("J", items, _ids[node.sep], tail, node.min_count, node.max_count)
    if isinstance(node, Product):
        return ("P", node.op, _ids[node.left], _ids[node.right])
    raise TypeError(f"unknown AST node {type(node).__name__}")


def structure(root: Node) -> int:
    """An id equal for structurally equal trees (iterative: trees nest deeply)."""
    found = _ids.get(root)
    if found is not None:
        return found
    if len(_interned) > _MAX_INTERNED:
        _interned.clear()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in _ids:
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in children(node) if child not in _ids)
            continue
        key = _key(node)
        number = _interned.get(key)
        if number is None:
            number = _interned[key] = next(_counter)
        _ids[node] = number
    return _ids[root]


def cached(node: Node, max_states: int) -> ByteDFA | None:
    """The DFA compiled earlier for a tree like `node` under the same state limit."""
    key = (structure(node), max_states)
    found = _dfas.get(key)
    if found is not None:
        _dfas.move_to_end(key)
    return found


def remember(node: Node, max_states: int, dfa: ByteDFA) -> ByteDFA:
    """Keep `dfa` as the compiled form of `node` (least recently used ones go first)."""
    global _cached_states
    key = (structure(node), max_states)
    if key not in _dfas and dfa.num_states <= _MAX_CACHED_STATES // 4:
        _dfas[key] = dfa
        _cached_states += dfa.num_states
        while _cached_states > _MAX_CACHED_STATES:
            _, old = _dfas.popitem(last=False)
            _cached_states -= old.num_states
    return dfa


def clear() -> None:
    """Forget every compiled DFA and structural key (a benchmark's cold compile)."""
    global _cached_states
    _dfas.clear()
    _interned.clear()
    _cached_states = 0
