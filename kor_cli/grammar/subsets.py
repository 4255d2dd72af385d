"""Subset construction of an NFA over byte classes (`subsets`).

The NFA's states list their consuming edges as (class mask, target) and their epsilon
edges; the DFA's states come out numbered in discovery order, each with its live
transitions as a sparse row ({target: class mask}, as `refine.sparse_rows`), ready for
`minimize.minimal_rows`. State 0 is the dead state (the empty subset), state 1 the start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice

from kor_cli.errors import GrammarError
from kor_cli.grammar.limits import check


def subsets(
    edges: Sequence[Sequence[tuple[int, int]]],
    eps: Sequence[Sequence[int]],
    start: int,
    accept: int,
    num_classes: int,
    max_states: int,
) -> tuple[list[bool], list[dict[int, int]]]:
    """Subset construction of an NFA over byte classes: (accepting, each state's live
    transitions as {target: class mask}, as `refine.sparse_rows`); see `minimal_rows`.

    A subset of one NFA state is that state's number (most subsets are), a larger one a
    frozenset; a transition into one NFA state without epsilon edges needs no closure.
    """
    empty: frozenset[int] = frozenset()
    closures: dict[int, int | frozenset[int]] = {}

    def closure(state: int) -> int | frozenset[int]:
        """The consuming (or accepting) states of `state`'s epsilon closure."""
        found = closures.get(state)
        if found is None:
            seen, stack, out = {state}, [state], []
            while stack:
                x = stack.pop()
                if edges[x] or x == accept:
                    out.append(x)
                for y in eps[x]:
                    if y not in seen:
                        seen.add(y)
                        stack.append(y)
            found = closures[state] = out[0] if len(out) == 1 else frozenset(out)
        return found

    def members(state: int) -> Iterable[int]:
        if not eps[state] and edges[state]:
            return (state,)
        found = closure(state)
        return (found,) if type(found) is int else found

    full = (1 << num_classes) - 1
    sets: list[int | frozenset[int]] = [empty, closure(start)]
    ids = {sets[0]: 0, sets[1]: 1}
    unions: dict[frozenset[int], int] = {}
    by_target = [0] * len(edges)  # the subset reached on a transition into one NFA state
    rows: list[dict[int, int]] = [{}]
    for i, subset in enumerate(islice(sets, 1, None), 1):  # (`sets` grows meanwhile)
        if not i & 255:
            check()
        row: dict[int, int] = {}
        rows.append(row)
        if type(subset) is int:  # most: one NFA state, its edges disjoint (targets: states)
            parts = edges[subset]
            if len(parts) < 2 or _disjoint(parts):
                for mask, t in parts:
                    target = by_target[t]
                    if not target:  # (`_number` inline: most targets are new singletons)
                        sub = t if not eps[t] and edges[t] else closure(t)
                        target = ids.get(sub)
                        if target is None:
                            target = ids[sub] = len(sets)
                            if target >= max_states:
                                raise GrammarError(_too_many(max_states))
                            sets.append(sub)
                        by_target[t] = target
                    if target in row:
                        row[target] |= mask
                    else:
                        row[target] = mask
                continue
            split = _split((subset,), edges, full)
        else:
            split = _split(subset, edges, full)
        for mask, targets in split:
            if len(targets) == 1:
                (t,) = targets
                target = by_target[t]
                if not target:
                    target = _number(
                        t if not eps[t] and edges[t] else closure(t), ids, sets, max_states
                    )
                    by_target[t] = target
            else:
                key = frozenset(targets)
                target = unions.get(key)
                if target is None:
                    union = empty.union(*map(members, key))
                    sub = next(iter(union)) if len(union) == 1 else union
                    target = unions[key] = _number(sub, ids, sets, max_states)
            if target in row:
                row[target] |= mask
            else:
                row[target] = mask
    return [s == accept if type(s) is int else accept in s for s in sets], rows


def _number(
    subset: int | frozenset[int],
    ids: dict[int | frozenset[int], int],
    sets: list[int | frozenset[int]],
    max_states: int,
) -> int:
    """The DFA state of `subset`, numbered next if new."""
    found = ids.get(subset)
    if found is None:
        if len(sets) >= max_states:
            raise GrammarError(_too_many(max_states))
        found = ids[subset] = len(sets)
        sets.append(subset)
    return found


def _disjoint(edges: Sequence[tuple[int, int]]) -> bool:
    """True if no two of `edges` share a class."""
    seen = 0
    for mask, _ in edges:
        if seen & mask:
            return False
        seen |= mask
    return True


def _too_many(max_states: int) -> str:
    return (
        f"grammar too large: more than {max_states} DFA states (raise max_states, or "
        "reduce lengths, repetition bounds, enum sizes or recursion depth)"
    )


def _split(
    subset: Iterable[int], edges: Sequence[Sequence[tuple[int, int]]], full: int
) -> list[tuple[int, tuple[int, ...]]]:
    """Partition the classes by the set of NFA targets they lead to from `subset`.

    Edges are grouped by class mask first (NFA states built from one AST leaf or one
    embedded DFA share masks), so the refinement runs once per distinct mask; when the
    distinct masks are disjoint no refinement is needed at all.
    """
    by_mask: dict[int, list[int]] = {}
    for s in subset:
        for mask, target in edges[s]:
            found = by_mask.get(mask)
            if found is None:
                by_mask[mask] = [target]
            else:
                found.append(target)
    seen = 0
    for mask in by_mask:
        if seen & mask:
            break
        seen |= mask
    else:
        return [(mask, tuple(targets)) for mask, targets in by_mask.items()]
    parts: list[tuple[int, tuple[int, ...]]] = [(full, ())]
    for mask, targets in by_mask.items():
        nxt = []
        for part, held in parts:
            inside = part & mask
            if not inside:
                nxt.append((part, held))
                continue
            nxt.append((inside, (*held, *targets)))
            if inside != part:
                nxt.append((part ^ inside, held))
        parts = nxt
    return [(part, targets) for part, targets in parts if targets]
