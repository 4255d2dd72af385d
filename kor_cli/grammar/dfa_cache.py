"""Structural identity of AST nodes and a bounded cache of their compiled DFAs.

AST nodes compare by identity, so two subschemas that compile to the same tree (the same
`$ref` target reached twice, the same `oneOf` of free-form values in 24 places) would be
determinised and minimised once per occurrence. `structure(node)` gives every node a
small integer that is equal for structurally equal trees (leaf masks, shapes, bounds,
embedded automata by their fingerprint), so `fsm` compiles each distinct tree once.

Ids come from a counter and are never reused, so an id never makes a wrong hit. A node
keeps its id in its own `__dict__` (nodes are immutable; a weak table's reads and writes
cost far more); AST nodes are never pickled, so an id never reaches another process's
counter. A node outlives the intern table (`shared_rules` nodes, `copy.deepcopy`, which
copies the `__dict__`): ids below `_floor`, given before the table was last forgotten, are
stale and renumbered on their next use, so equal trees get equal ids again.

A lookup keys a tree by its structure only when a DFA held has its shape (`_shape`: its
kind and a few facts about its children, read off the node alone), and a DFA is held by
that shape, unkeyed, until a tree of the same shape is looked up: most trees compiled in
a cold compile (a rule's body) are never met again, and their structure is never walked.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Join, Node, Product, Repeat, Seq, children

if TYPE_CHECKING:
    from kor_cli.grammar.byte_dfa import ByteDFA

_MAX_INTERNED = 2_000_000  # structural keys remembered (then forgotten all at once)
_MAX_CACHED_STATES = 400_000  # DFA states kept by the cache (about 1 KiB each)

_ID = "_structure"  # the attribute (in its __dict__) that holds a node's id
_interned: dict[tuple[Any, ...], int] = {}
_bytes_ids: dict[int, int] = {}  # byte leaves' ids, by mask
_counter = itertools.count(1)
_floor = 1  # ids below it were given before the intern table was last forgotten
_dfas: OrderedDict[tuple[int, int], ByteDFA] = OrderedDict()
_shape_of: dict[tuple[int, int], tuple[Any, ...]] = {}  # each key's shape (`_shape`)
_unkeyed: dict[tuple[Any, ...], list[tuple[Node, ByteDFA]]] = {}  # remembered, not keyed
_shapes: dict[tuple[Any, ...], int] = {}  # how many held DFAs have each shape
_cached_states = 0


def _byte_id(mask: int) -> int:
    """The id of a byte leaf of `mask` (leaves are numbered by mask, never marked)."""
    number = _bytes_ids.get(mask)
    if number is None:
        number = _bytes_ids[mask] = next(_counter)
    return number


def _key(node: Node, known: dict[int, int]) -> tuple[Any, ...]:
    """The structural key of `node` (not a `Seq` nor an `Alt`: `structure` keys those),
    its children numbered in `known` (by `id`)."""
    if isinstance(node, Bytes):
        return ("B", node.mask)
    if isinstance(node, Automaton):
        return ("A", node.dfa.fingerprint())
    if isinstance(node, Repeat):
        sep = 0 if node.sep is None else known[id(node.sep)]
        return ("R", known[id(node.item)], node.min, node.max, sep)
    if isinstance(node, Join):
        items = tuple((known[id(x)], required) for x, required in node.items)
        tail = 0 if node.tail is None else known[id(node.tail)]
        return ("J", items, known[id(node.sep)], tail, node.min_count, node.max_count)
    if isinstance(node, Product):
        return ("P", node.op, known[id(node.left)], known[id(node.right)])
    raise TypeError(f"unknown AST node {type(node).__name__}")


def structure(root: Node) -> int:
    """An id equal for structurally equal trees (iterative: trees nest deeply). Nodes met
    in this call are numbered by `id` (the root keeps them alive); a node numbered before
    holds its id (`_ID`) unless it is stale (below `_floor`); byte leaves (most nodes) are
    interned by their mask, never marked."""
    found = root.__dict__.get(_ID)
    if found is not None and found >= _floor:
        return found
    if len(_interned) + len(_bytes_ids) > _MAX_INTERNED:
        _forget()
    known: dict[int, int] = {}
    bytes_ids = _bytes_ids
    stack = [root]
    while stack:
        node = stack[-1]
        if id(node) in known:
            stack.pop()
            continue
        kind = type(node)
        if kind is Seq or kind is Alt:  # most inner nodes: the key built here
            numbers = [kind.__name__]
            for child in node.items:
                if type(child) is Bytes:
                    number = bytes_ids.get(child.mask)
                    if number is None:
                        number = bytes_ids[child.mask] = next(_counter)
                else:
                    number = known.get(id(child)) or child.__dict__.get(_ID)
                    if number is None or number < _floor:
                        stack.append(child)
                        continue
                numbers.append(number)
            if stack[-1] is not node:  # children to number first
                continue
            key: tuple[Any, ...] = tuple(numbers)
        else:
            pending = False
            for child in children(node):
                if id(child) in known:
                    continue
                if type(child) is Bytes:
                    known[id(child)] = _byte_id(child.mask)
                else:
                    number = child.__dict__.get(_ID)
                    if number is None or number < _floor:
                        stack.append(child)
                        pending = True
                    else:
                        known[id(child)] = number
            if pending:
                continue
            key = _key(node, known)
        stack.pop()
        number = _interned.get(key)
        if number is None:
            number = _interned[key] = next(_counter)
        known[id(node)] = node.__dict__[_ID] = number
    return known[id(root)]


def _shape(node: Node, max_states: int) -> tuple[Any, ...]:
    """A key that structurally equal trees share, read in a few steps (the node's kind,
    how many children, the first and last one's mask or kind): a tree whose shape no
    DFA held has cannot hit, and is not keyed."""
    kind = type(node)
    if kind is Bytes:
        return (max_states, kind, node.mask)  # type: ignore[attr-defined]
    items = node.items if kind is Seq or kind is Alt else children(node)  # type: ignore[attr-defined]
    if not items:
        return (max_states, kind)
    first, last = items[0], items[-1]
    return (
        max_states,
        kind,
        len(items),
        first.mask if type(first) is Bytes else type(first),
        last.mask if type(last) is Bytes else type(last),
    )


def cached(node: Node, max_states: int) -> ByteDFA | None:
    """The DFA compiled earlier for a tree like `node` under the same state limit (its
    structure is keyed only when something remembered has its shape)."""
    shape = _shape(node, max_states)
    if shape not in _shapes:
        return None
    _settle(shape)
    key = (structure(node), max_states)
    found = _dfas.get(key)
    if found is not None:
        _dfas.move_to_end(key)
    return found


def remember(node: Node, max_states: int, dfa: ByteDFA) -> ByteDFA:
    """Keep `dfa` as the compiled form of `node` (least recently used ones go first):
    keyed by its structure when a tree of its shape is remembered, else by its shape
    alone until a tree of that shape is looked up (`_settle`)."""
    global _cached_states
    if dfa.num_states > _MAX_CACHED_STATES // 4:
        return dfa
    shape = _shape(node, max_states)
    if shape in _shapes:
        _settle(shape)
        key = (structure(node), max_states)
        if key in _dfas:
            return dfa
        _dfas[key] = dfa
        _shape_of[key] = shape
    else:
        _unkeyed[shape] = [(node, dfa)]
    _shapes[shape] = _shapes.get(shape, 0) + 1
    _cached_states += dfa.num_states
    if _cached_states > _MAX_CACHED_STATES:
        for pending in list(_unkeyed):
            _settle(pending)
        while _cached_states > _MAX_CACHED_STATES:
            key, old = _dfas.popitem(last=False)
            _drop(_shape_of.pop(key), old)
    return dfa


def _settle(shape: tuple[Any, ...]) -> None:
    """Key the trees of `shape` remembered unkeyed by their structure."""
    for node, dfa in _unkeyed.pop(shape, ()):
        key = (structure(node), shape[0])
        if key in _dfas:  # (two equal trees remembered unkeyed)
            _drop(shape, dfa)
        else:
            _dfas[key] = dfa
            _shape_of[key] = shape


def _drop(shape: tuple[Any, ...], dfa: ByteDFA) -> None:
    """Count out a DFA the cache no longer holds."""
    global _cached_states
    _cached_states -= dfa.num_states
    left = _shapes[shape] - 1
    if left:
        _shapes[shape] = left
    else:
        del _shapes[shape]


def _forget() -> None:
    """Forget the structural keys; every id given so far becomes stale."""
    global _floor
    _interned.clear()
    _bytes_ids.clear()
    _floor = next(_counter)


def clear() -> None:
    """Forget every compiled DFA and structural key (a benchmark's cold compile)."""
    global _cached_states
    _dfas.clear()
    _shape_of.clear()
    _unkeyed.clear()
    _shapes.clear()
    _forget()
    _cached_states = 0
