"""Minimisation of small DFAs given as sparse rows, by worklist partition refinement.

The subset construction yields each state's live transitions as (class mask, target)
triples; most states of a schema's rule have a handful of them out of dozens of byte
classes, so refining on those rows costs far less than Moore's rounds over dense rows
(one round per state of the longest chain, each round reading every cell).

A block is re-examined only when one of its states has a successor that moved to a new
block; a block splits by the states' signatures (class mask by successor block). Starting
from {dead}, {live accepting}, {live rejecting}, only Nerode-inequivalent states are ever
separated, and at the end every block is stable: the partition is exactly Nerode's. The
numbering is the canonical BFS order of `minimize._canonical` (classes scanned in
order), so the table is the same as the dense paths give.
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
    n = len(rows)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, row in enumerate(rows):
        for t in row:
            preds[t].append(s)
    live = [False] * n
    stack = [s for s in range(1, n) if accepting[s]]
    for s in stack:
        live[s] = True
    while stack:
        for p in preds[stack.pop()]:
            if not live[p]:
                live[p] = True
                stack.append(p)
    live[0] = False
    if not live[start]:
        return None
    if preds[0] or not all(live[1:]):  # transitions into dead states are dropped
        rows = [{t: m for t, m in row.items() if live[t]} for row in rows]
    block = _refine(rows, preds, accepting, live)
    number = {block[start]: 1}
    reps = [start]
    for s in reps:
        row = rows[s]
        targets = sorted(row, key=lambda t: row[t] & -row[t]) if len(row) > 1 else row
        for t in targets:
            if block[t] not in number:
                number[block[t]] = len(reps) + 1
                reps.append(t)
    get = number.get
    return [get(b, 0) if b >= 0 else 0 for b in block], reps


def _refine(
    rows: list[dict[int, int]], preds: list[list[int]], accepting: Sequence[bool], live: list[bool]
) -> list[int]:
    """Block of each live state (-1: dead) in the coarsest stable partition. The first
    partition is by acceptance and by the classes that lead anywhere live (equivalent
    live states agree on both)."""
    block = [-1] * len(rows)
    members: list[list[int]] = []
    first: dict[tuple[bool, int], int] = {}
    for s, ok in enumerate(live):
        if ok:
            key = (bool(accepting[s]), sum(rows[s].values()))  # the masks are disjoint
            found = first.get(key)
            if found is None:
                found = first[key] = len(members)
                members.append([])
            members[found].append(s)
            block[s] = found
    work = {b for b, group in enumerate(members) if len(group) > 1}
    rounds = 0
    while work:
        rounds += 1
        if not rounds & 255:
            check()
        b = work.pop()
        group = members[b]
        if len(group) < 2:
            continue
        split: dict[object, list[int]] = {}
        for s in group:
            row = rows[s]
            if len(row) == 1:
                for t, m in row.items():
                    key: object = (block[t], m)
            elif not row:
                key = ()
            else:
                merged: dict[int, int] = {}
                for t, m in row.items():
                    bt = block[t]
                    merged[bt] = merged.get(bt, 0) | m
                key = tuple(sorted(merged.items())) if len(merged) > 1 else merged.popitem()
            found = split.get(key)
            if found is None:
                split[key] = [s]
            else:
                found.append(s)
        if len(split) == 1:
            continue
        parts = sorted(split.values(), key=len, reverse=True)
        members[b] = parts[0]
        for part in parts[1:]:
            new = len(members)
            members.append(part)
            for s in part:
                block[s] = new
        for part in parts[1:]:
            for s in part:
                for p in preds[s]:
                    if block[p] >= 0:
                        work.add(block[p])
    return block
