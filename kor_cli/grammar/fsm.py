"""AST → byte NFA → DFA → minimal byte DFA (`ByteDFA`), plus DFA products.

Construction works on byte classes (the coarsest partition of 0..255 that the grammar
cannot tell apart) and expands to 256 columns only at the end. Results are minimal and
canonically numbered, so `fingerprint()` identifies the language.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kor_cli.errors import GrammarError
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
    children,
    is_nothing,
    join,
    repeat,
    seq,
)
from kor_cli.grammar.byte_dfa import (
    ByteDFA,
    column_classes,
    empty_dfa,
    expanded,
    from_class_table,
)
from kor_cli.grammar.byte_sets import byte_classes, leaf_masks
from kor_cli.grammar.call_classes import EMPTY, build_with_calls
from kor_cli.grammar.call_markers import MARK
from kor_cli.grammar.dfa_cache import cached, remember
from kor_cli.grammar.distinct import distinct
from kor_cli.grammar.limits import check
from kor_cli.grammar.minimize import minimal_rows
from kor_cli.grammar.nfa import NFA
from kor_cli.grammar.subsets import subsets

DEFAULT_MAX_STATES = 50_000
_SHARED_SIZE = 64  # shared subtrees at least this big are compiled once
_AS_IS = _SHARED_SIZE  # smaller subtrees without a `Product` below are left as they are
_UNION_SIZE = 512  # an Alt of automata this big is their union by products, not an NFA


def compile_ast(node: Node, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """The minimal byte DFA of `node` (an empty DFA for the empty language); a tree
    structurally equal to one compiled before is not compiled again (`dfa_cache`)."""
    if isinstance(node, Automaton):
        return node.dfa
    found = cached(node, max_states)
    if found is None:
        lowered = node if _as_is(node) else _lower(node, max_states)
        found = remember(node, max_states, _build(lowered, max_states))
    return found


def _as_is(node: Node) -> bool:
    """Whether `_lower` would give `node` back unchanged, told without its census: when
    `node` is not a product (nor compiled before: the caller looked) and its children are
    each small and `Product`-free (`_unfolded`), `_lower` rebuilds it from its children,
    each left as it is (a small tree is such a node too)."""
    if isinstance(node, (Product, Automaton)):
        return False
    return all(type(c) is Bytes or _unfolded(c, _AS_IS) < _AS_IS for c in children(node))


def _unfolded(node: Node, limit: int) -> int:
    """The unfolded size of `node` (as `_census` counts it) if it is below `limit` and
    the tree has no `Product`; else at least `limit`. Each level down gets a smaller
    limit (every inner node counts 1), so the walk recurses at most `limit` deep."""
    if isinstance(node, Bytes):
        return 1
    if isinstance(node, Automaton):
        return node.dfa.num_states
    if limit <= 1 or isinstance(node, Product):
        return max(limit, 1)
    if isinstance(node, Repeat):
        total = _unfolded(node.item, limit - 1)
        if node.sep is not None and total < limit - 1:
            total += _unfolded(node.sep, limit - 1 - total)
        total = 1 + _copies(node) * total if total < limit - 1 else limit
        return min(total, limit)
    total = 1
    for child in children(node):
        total += 1 if type(child) is Bytes else _unfolded(child, limit - total)
        if total >= limit:
            return limit
    return total


def _build(node: Node, max_states: int) -> ByteDFA:
    """NFA → DFA → minimal DFA of a node without `Product`s. An alternation of large
    automata is their union pair by pair (vectorised products over reachable pairs, each
    minimised): never more pairs than the subset construction's tuples, far fewer steps."""
    if isinstance(node, Automaton):
        return node.dfa
    if is_nothing(node):
        return empty_dfa()
    if isinstance(node, Alt):
        dfas = [x.dfa for x in node.items if isinstance(x, Automaton)]
        if len(dfas) > 1 and sum(dfa.num_states for dfa in dfas) >= _UNION_SIZE:
            rest = [x for x in node.items if not isinstance(x, Automaton)]
            union = _build(alt(*rest), max_states) if rest else dfas.pop()
            for dfa in dfas:
                union = product(union, dfa, "or", max_states)
            return union
    automata: set[int] = set()
    partition: list[int] = []
    masks = leaf_masks(node, automata, partition, 1 << MARK)  # (up to the first marker)
    if 1 << MARK in masks or 1 << MARK in automata:  # call markers: each call one symbol
        built = build_with_calls(node, masks, max_states)
        if built is not None:
            if built is EMPTY:
                return empty_dfa()
            return ByteDFA.lazy(built)
        automata.clear()
        partition.clear()
        masks = leaf_masks(node, automata, partition)
    class_of, class_masks = byte_classes((masks | automata).difference(partition), partition)
    nfa = NFA(class_masks, 10 * max_states, class_of.tolist())
    start = nfa.new()
    accept = nfa.build(node, start)
    accepting, rows = subsets(nfa.edges, nfa.eps, start, accept, len(class_masks), max_states)
    minimal = minimal_rows(len(class_masks), np.array(accepting), 1, rows)
    return expanded(minimal, class_of)


def _lower(root: Node, max_states: int) -> Node:
    """Replace `Product` nodes, and large subtrees used more than once, by automata.

    A shared subtree is compiled (and minimised) once, then embedded as a small DFA
    wherever it occurs, instead of being rebuilt as NFA states at every occurrence; so
    is a large subtree structurally equal to one compiled before (`dfa_cache`).
    """
    counts, sizes, below = _census(root)
    memo: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        done = memo.get(id(node))
        if done is not None:
            return done
        size = sizes.get(id(node))  # None: a byte leaf, or a node only under products
        if (
            size < _AS_IS and id(node) not in below
            if size is not None
            else _unfolded(node, _AS_IS) < _AS_IS
        ):
            return node  # small and no Product below: nothing to lower
        if isinstance(node, Product):
            dfa = cached(node, max_states)
            if dfa is None:
                left = _operand(node.left, visit, max_states)
                right = _operand(node.right, visit, max_states)
                dfa = remember(node, max_states, product(left, right, node.op, max_states))
            out = _automaton(dfa)
        elif sizes.get(id(node), 0) >= _SHARED_SIZE and (
            counts.get(id(node), 0) > 1 or cached(node, max_states) is not None
        ):
            dfa = cached(node, max_states)
            if dfa is None:
                dfa = remember(node, max_states, _build(_rebuild(node, visit), max_states))
            out = _automaton(dfa)
        else:
            out = _rebuild(node, visit)
        memo[id(node)] = out
        return out

    return visit(root)


def _operand(node: Node, visit: Callable[[Node], Node], max_states: int) -> ByteDFA:
    """The DFA of one side of a product, through `dfa_cache`: a side shared by several
    products (one pattern's key language split by two lookups, one string minus several
    key sets) is built once."""
    if isinstance(node, Automaton):
        return node.dfa
    found = cached(node, max_states)
    if found is None:
        found = remember(node, max_states, _build(visit(node), max_states))
    return found


def _automaton(dfa: ByteDFA) -> Node:
    return NOTHING if dfa.is_empty() else Automaton(dfa)


def _census(root: Node) -> tuple[dict[int, int], dict[int, int], set[int]]:
    """How many parents reference each node, how big each subtree is once unfolded, and
    which nodes have a `Product` at or below them. Byte leaves below the root (most
    nodes: size 1, never lowered) are not listed."""
    counts: dict[int, int] = {}
    sizes: dict[int, int] = {}
    below: set[int] = set()
    seen = {id(root)}
    stack = [(root, iter(_children(root)))]
    while stack:
        node, pending = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            sizes[id(node)] = _size(node, sizes)
            if isinstance(node, Product):
                below.add(id(node))
            if stack and id(node) in below:
                below.add(id(stack[-1][0]))
            continue
        if type(child) is Bytes:
            continue
        counts[id(child)] = counts.get(id(child), 0) + _copies(node)
        if id(child) not in seen:
            seen.add(id(child))
            stack.append((child, iter(_children(child))))
        elif id(child) in below:  # met before (a DAG: finished), so its flag is known
            below.add(id(node))
    return counts, sizes, below


def _copies(node: Node) -> int:
    """How many times the NFA builds each child of `node`."""
    if isinstance(node, Repeat):
        return node.max if node.max is not None else node.min + 1
    return 1


def _children(node: Node) -> tuple[Node, ...]:
    """Children as the NFA unfolds them: a `Product` is compiled apart (see _lower)."""
    return () if isinstance(node, Product) else children(node)


def _size(node: Node, sizes: dict[int, int]) -> int:
    """Unfolded size: roughly the NFA states the subtree costs."""
    if isinstance(node, Automaton):
        return node.dfa.num_states
    if isinstance(node, Repeat):
        sep = 0 if node.sep is None else sizes.get(id(node.sep), 1)
        return 1 + _copies(node) * (sizes.get(id(node.item), 1) + sep)
    return 1 + sum(sizes.get(id(child), 1) for child in _children(node))


def _rebuild(node: Node, fn: Callable[[Node], Node]) -> Node:
    if isinstance(node, (Seq, Alt)):
        items = [fn(x) for x in node.items]
        if all(a is b for a, b in zip(items, node.items, strict=True)):
            return node
        return seq(*items) if isinstance(node, Seq) else alt(*items)
    if isinstance(node, Repeat):
        sep = None if node.sep is None else fn(node.sep)
        item = fn(node.item)
        if item is node.item and sep is node.sep:
            return node
        return repeat(item, node.min, node.max, sep)
    if isinstance(node, Join):
        items = [(fn(x), req) for x, req in node.items]
        tail = None if node.tail is None else fn(node.tail)
        sep = fn(node.sep)
        if (
            sep is node.sep
            and tail is node.tail
            and all(a is b for (a, _), (b, _) in zip(items, node.items, strict=True))
        ):
            return node
        return join(items, sep, tail, node.min_count, node.max_count)
    return node


def product(a: ByteDFA, b: ByteDFA, op: str, max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """Minimal DFA of a ∩ b (`op` "and"), a ∖ b ("diff") or a ∪ b ("or")."""
    ca, _, ta = a.compressed()
    cb, _, tb = b.compressed()
    joint = ca * tb.shape[1] + cb
    class_of, reps = column_classes(joint[None, :])
    ta, tb = ta[:, ca[reps]], tb[:, cb[reps]]
    nb = len(tb)
    codes = {a.start * nb + b.start: 1}
    order = [a.start * nb + b.start]
    frontier = np.array(order, dtype=np.int64)
    rows: list[np.ndarray] = []
    while len(frontier):
        check()
        xa, yb = frontier // nb, frontier % nb
        nxt = ta[xa].astype(np.int64) * nb + tb[yb]
        dead = ta[xa] == 0
        if op == "and":
            dead |= tb[yb] == 0
        elif op == "or":
            dead &= tb[yb] == 0
        nxt[dead] = -1
        rows.append(nxt)
        fresh = []
        for code in distinct(nxt[nxt >= 0]).tolist():  # np.unique: slower in numpy 2.3
            if code not in codes:
                codes[code] = len(order) + 1
                order.append(code)
                fresh.append(code)
        if len(order) >= max_states:
            raise GrammarError(
                f"grammar too large: more than {max_states} DFA states in an intersection "
                "(simplify patterns, lengths or allOf/oneOf/not combinations)"
            )
        frontier = np.array(fresh, dtype=np.int64)
    allcodes = np.array(order, dtype=np.int64)
    sorter = np.argsort(allcodes)
    raw = np.concatenate(rows) if rows else np.zeros((0, len(reps)), dtype=np.int64)
    pos = np.searchsorted(allcodes, raw, sorter=sorter)
    pos = np.minimum(pos, len(allcodes) - 1)
    ids = np.where(raw >= 0, sorter[pos] + 1, 0)
    table = np.zeros((len(order) + 1, len(reps)), dtype=np.int32)
    table[1:] = ids
    xs, ys = allcodes // nb, allcodes % nb
    if op == "or":
        acc = a.accepting[xs] | b.accepting[ys]
    else:
        acc = a.accepting[xs] & (b.accepting[ys] if op == "and" else ~b.accepting[ys])
    accepting = np.concatenate(([False], acc))
    return from_class_table(table, accepting, 1, class_of)
