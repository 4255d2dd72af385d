"""Minimisation of small DFAs given as sparse rows, by worklist partition refinement.

The subset construction yields each state's live transitions as (class mask, target)
triples; most states of a schema's rule have a handful of them out of dozens of byte
classes, so refining on those rows costs far less than Moore's rounds over dense rows
(one round per state of the longest chain, each round reading every cell).

The first partition is by the length of the shortest accepted word and by the classes
that lead anywhere live (equivalent states agree on both; the lengths come free with the
backward search for live states, and they cut the long chains of equal first signatures,
such as key tries, that would otherwise split one state per round). Then only states whose
successors changed block are re-examined, against one unchanged member of their block
(`_refine`); only Nerode-inequivalent states are ever separated, and at the end every
block is stable: the partition is exactly Nerode's. The numbering is the canonical BFS
order of `minimize._canonical` (classes scanned in order), so the table is the same as
the dense paths give.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kor_cli.grammar.limits import check


def sparse_rows(num_states: int, triples: Iterable[tuple[int, int, int]]) -> list[dict[int, int]]:
    """For each state, its live transitions as {target: class mask}."""
    rows: list[dict[int, int]] = [{} for _ in range(num_states)]
    for state, mask, target in triples:
        row = rows[state]
        row[target] = row.get(target, 0) | mask
    return rows


def canonical_blocks(
    rows: list[dict[int, int]], accepting: Sequence[bool], start: int
) -> tuple[list[int], list[int]] | None:
    """(new number of each state, 0 for dead ones; one representative state per new
    number 1.., in order) of the minimal DFA, or None if `start` cannot accept."""
    found = live_blocks(rows, accepting, start)
    if found is None:
        return None
    rows, block = found
    number = {block[start]: 1}
    reps = [start]
    for s in reps:
        row = rows[s]
        if len(row) > 1:  # targets by their lowest class (the masks are disjoint)
            for _, t in sorted([(m & -m, t) for t, m in row.items()]):
                if block[t] not in number:
                    number[block[t]] = len(reps) + 1
                    reps.append(t)
        else:
            for t in row:
                if block[t] not in number:
                    number[block[t]] = len(reps) + 1
                    reps.append(t)
    get = number.get
    return [get(b, 0) if b >= 0 else 0 for b in block], reps


def live_blocks(
    rows: list[dict[int, int]], accepting: Sequence[bool], start: int
) -> tuple[list[dict[int, int]], list[int]] | None:
    """(the rows without transitions into dead states, the Nerode block of each state,
    -1 for dead ones), or None if `start` cannot accept."""
    n = len(rows)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(rows):
        for t in row:
            preds[t].append(s)
    depth = [-1] * n  # the length of the shortest accepted word from each state
    level = [s for s in range(1, n) if accepting[s]]
    for s in level:
        depth[s] = 0
    d = 0
    while level:
        d += 1
        nxt = []
        for s in level:
            for p in preds[s]:
                if depth[p] < 0:
                    depth[p] = d
                    nxt.append(p)
        level = nxt
    depth[0] = -1
    live = [x >= 0 for x in depth]
    if not live[start]:
        return None
    if preds[0] or not all(live[1:]):  # transitions into dead states are dropped
        rows = [{t: m for t, m in row.items() if live[t]} for row in rows]
    return rows, _refine(rows, preds, depth)


def _refine(rows: list[dict[int, int]], preds: list[list[int]], depth: list[int]) -> list[int]:
    """Block of each live state (-1: dead, `depth` -1) in the coarsest stable partition.
    The first partition is by `depth` and by the classes that lead anywhere live (the
    rows' masks are disjoint: their sum is their union); every state starts dirty.

    Invariant: the clean members of a block share one signature (class mask by successor
    block). A state turns dirty when a successor changes block; a block with dirty members
    recomputes their signatures only, against one clean member's, and splits off those
    that differ. The largest part keeps the block's id (only the others' predecessors turn
    dirty), so a state moves at most log2(n) times, as in Hopcroft's algorithm.
    """
    block = [-1] * len(rows)
    members: list[set[int]] = []
    first: dict[tuple[int, int], int] = {}
    for s, d in enumerate(depth):
        if d >= 0:
            key = (d, sum(rows[s].values()))  # the masks are disjoint
            found = first.get(key)
            if found is None:
                found = first[key] = len(members)
                members.append(set())
            members[found].add(s)
            block[s] = found
    dirty = {b: set(group) for b, group in enumerate(members) if len(group) > 1}
    rounds = 0
    while dirty:
        rounds += 1
        if not rounds & 255:
            check()
        b, changed = dirty.popitem()
        group = members[b]
        if len(group) < 2:
            continue
        split: dict[object, list[int]] = {}
        for s in changed:
            found = split.get(key := _signature(rows[s], block))
            if found is None:
                split[key] = [s]
            else:
                found.append(s)
        clean = len(group) - len(changed)
        if clean:
            same = next(s for s in group if s not in changed)
            kept = split.pop(_signature(rows[same], block), [])
            if not split:
                continue
            parts = list(split.values())
            biggest = max(parts, key=len)
            if len(biggest) > clean + len(kept):  # the clean ones move out instead
                parts.remove(biggest)
                parts.append(list(group.difference(biggest, *parts)))
        else:
            if len(split) == 1:
                continue
            parts = sorted(split.values(), key=len)
            parts.pop()
        for part in parts:
            new = len(members)
            moved = set(part)
            group -= moved
            members.append(moved)
            for s in part:
                block[s] = new
        for part in parts:
            for s in part:
                for p in preds[s]:
                    q = block[p]
                    if q >= 0 and len(members[q]) > 1:
                        found_set = dirty.get(q)
                        if found_set is None:
                            dirty[q] = {p}
                        else:
                            found_set.add(p)
    return block


def _signature(row: dict[int, int], block: list[int]) -> object:
    """The classes of `row` by successor block (a hashable key)."""
    if len(row) == 1:
        for t, m in row.items():
            return (block[t], m)
    if not row:
        return ()
    merged: dict[int, int] = {}
    for t, m in row.items():
        bt = block[t]
        merged[bt] = merged.get(bt, 0) | m
    return tuple(sorted(merged.items())) if len(merged) > 1 else merged.popitem()
