"""Minimisation of class-compressed DFA tables.

Tables are int32 [num_states, num_classes] with state 0 the dead state. The subset
construction (`subsets`) lists each state's live transitions as a sparse row ({target:
class mask}); up to `SPARSE_STATES` states they are minimised on those rows (`refine`,
`minimal_rows`), never filled into a table. Otherwise minimisation is Moore's refinement
vectorised with numpy (each round hashes every state's block and its successors' blocks;
the result is verified exact, see `_moore`), falling back to Hopcroft's algorithm for
partial DFAs (transitions to the dead state count as undefined, so only live transitions
are ever scanned) when Moore would need too many rounds (long chains). A canonical BFS
numbering follows: two grammars with the same language get the same table."""

from __future__ import annotations

import array

import numpy as np

from kor_cli.grammar.limits import check
from kor_cli.grammar.refine import canonical_blocks, sparse_rows


def fill_table(
    num_states: int, num_classes: int, triples: list[tuple[int, int, int]]
) -> np.ndarray:
    """The table of (state, class mask, target) triples. A few cells (most rules) are set
    one by one; else each distinct mask is unpacked to its classes once, and a few
    triples select their cells from a triples x classes matrix of bools, many have each
    mask's classes repeated per triple instead (no such matrix)."""
    if not triples:
        return np.zeros((num_states, num_classes), dtype=np.int32)
    states, cells, targets = zip(*triples, strict=True)
    few = len(cells) <= _LOOP_FILL and sum(map(int.bit_count, cells)) <= _LOOP_FILL
    if few:  # few cells (most rules): set one by one
        flat = array.array("i", bytes(4 * num_states * num_classes))
        for state, mask, target in triples:
            row = state * num_classes - 1
            while mask:
                low = mask & -mask
                flat[row + low.bit_length()] = target
                mask ^= low
        return np.frombuffer(flat, dtype=np.int32).reshape(num_states, num_classes)
    table = np.zeros((num_states, num_classes), dtype=np.int32)
    masks = list(dict.fromkeys(cells))
    where = {m: k for k, m in enumerate(masks)}
    width = (num_classes + 7) // 8
    raw = np.frombuffer(b"".join(m.to_bytes(width, "little") for m in masks), dtype=np.uint8)
    bits = np.unpackbits(
        raw.reshape(len(masks), width), axis=1, count=num_classes, bitorder="little"
    )
    which = np.fromiter(map(where.__getitem__, cells), dtype=np.intp, count=len(cells))
    if len(cells) * num_classes <= _DENSE_FILL:
        picked, cols = np.nonzero(bits.view(bool)[which])
        table[np.array(states, dtype=np.intp)[picked], cols] = np.array(targets)[picked]
        return table
    mask_of, class_of = np.nonzero(bits.view(bool))  # by mask, classes ascending
    count = np.bincount(mask_of, minlength=len(masks))
    first = np.cumsum(count) - count  # where each mask's classes begin in class_of
    repeats = count[which]
    offsets = np.arange(int(repeats.sum())) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    cols = class_of[np.repeat(first[which], repeats) + offsets]
    table[np.repeat(np.array(states, dtype=np.int64), repeats), cols] = np.repeat(targets, repeats)
    return table


def fill_bytes(num_states: int, triples: list[tuple[int, int, int]]) -> np.ndarray:
    """The table [num_states, 256] of (state, byte mask, target) triples: a one-byte mask's
    cell set alone, another's runs of consecutive bytes as slices (byte sets are few
    ranges: a handful of slices where a cell-by-cell fill would set hundreds)."""
    flat = array.array("i", bytes(1024 * num_states))
    runs: dict[int, list[tuple[int, int]]] = {}
    for state, mask, target in triples:
        row = state << 8
        if not mask & (mask - 1):
            flat[row + mask.bit_length() - 1] = target
            continue
        found = runs.get(mask)
        if found is None:
            found = runs[mask] = _runs(mask)
        one = array.array("i", (target,))
        for lo, hi in found:
            flat[row + lo : row + hi] = one * (hi - lo)
    return np.frombuffer(flat, dtype=np.int32).reshape(num_states, 256)


def _runs(mask: int) -> list[tuple[int, int]]:
    """The runs of consecutive set bits of `mask`, as [lo, hi) pairs."""
    out = []
    while mask:
        low = mask & -mask
        rest = mask & (mask + low)  # the lowest run cleared
        out.append((low.bit_length() - 1, (mask ^ rest).bit_length()))
        mask = rest
    return out


_LOOP_FILL = 512  # `fill_table` sets up to this many cells one by one (no numpy calls)
_DENSE_FILL = 1 << 16  # `fill_table` selects from a triples x classes matrix up to this size


def _inverse(table: np.ndarray) -> list[list[tuple[int, int]]]:
    """For each state t, the (source, class mask) pairs of live transitions into t."""
    n, k = table.shape
    src, cls = np.nonzero(table != 0)  # of bools: numpy 2.3 is slower on ints
    key = table[src, cls].astype(np.int64) * n + src
    order = np.argsort(key, kind="stable")
    key, cls = key[order], cls[order]
    inv: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    if not len(key):
        return inv
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    masks = np.zeros(len(starts), dtype=object)
    for word in range(0, k, 62):  # classes word..word+61 as int64 bits, then joined
        inside = (cls >= word) & (cls < word + 62)
        bits = np.where(inside, np.left_shift(1, np.clip(cls - word, 0, 61)), 0).astype(np.int64)
        masks = masks + np.bitwise_or.reduceat(bits, starts).astype(object) * (1 << word)
    for pair, mask in zip((key[starts]).tolist(), masks.tolist(), strict=True):
        inv[pair // n].append((pair % n, mask))
    return inv


def trim(table: np.ndarray, accepting: np.ndarray, start: int) -> np.ndarray:
    """Redirect transitions into states that cannot reach acceptance to the dead state."""
    inv = _inverse(table)
    live = np.zeros(len(table), dtype=bool)
    stack = [s for s in np.flatnonzero(accepting).tolist() if s]
    live[stack] = True
    while stack:
        for s, _ in inv[stack.pop()]:
            if not live[s]:
                live[s] = True
                stack.append(s)
    live[0] = False
    if live[1:].all():
        return table
    return np.where(live[table], table, 0).astype(np.int32)


def minimal_triples(
    count: int,
    num_classes: int,
    accepting: np.ndarray,
    start: int,
    triples: list[tuple[int, int, int]],
) -> tuple[np.ndarray, np.ndarray, int]:
    """`minimize` of the table of `count` states whose live transitions are `triples`
    (state, class mask, target): up to `SPARSE_STATES` states refined on those sparse rows
    (`refine`), never building the whole table; larger ones filled in and minimised."""
    if count > SPARSE_STATES:
        return minimize(fill_table(count, num_classes, triples), accepting, start)
    return minimal_rows(num_classes, accepting, start, sparse_rows(count, triples))


def minimal_rows(
    num_classes: int, accepting: np.ndarray, start: int, rows: list[dict[int, int]]
) -> tuple[np.ndarray, np.ndarray, int]:
    """`minimal_triples` of the states' live transitions given as {target: class mask}
    rows (`refine.sparse_rows`; `subsets` gives them so)."""
    if len(rows) > SPARSE_STATES:
        triples = [(s, m, t) for s, row in enumerate(rows) for t, m in row.items()]
        return minimize(fill_table(len(rows), num_classes, triples), accepting, start)
    found = canonical_blocks(rows, accepting.tolist(), start)
    if found is None:
        return np.zeros((1, num_classes), dtype=np.int32), np.zeros(1, dtype=bool), 0
    number, reps = found
    if (len(reps) + 1) * num_classes >= _LIST_FILL:
        kept = [(i, m, number[t]) for i, s in enumerate(reps, 1) for t, m in rows[s].items()]
        out = fill_table(len(reps) + 1, num_classes, [x for x in kept if x[2]])
        return out, np.concatenate(([False], accepting[reps])), 1
    flat = [0] * (num_classes * (len(reps) + 1))
    columns: dict[int, list[int]] = {}
    base = 0
    for s in reps:
        base += num_classes
        for t, mask in rows[s].items():
            value = number[t]
            if value:
                cols = columns.get(mask)
                if cols is None:
                    cols = columns[mask] = [c for c in range(num_classes) if mask >> c & 1]
                for c in cols:
                    flat[base + c] = value
    out = np.array(flat, dtype=np.int32).reshape(len(reps) + 1, num_classes)
    acc = np.zeros(len(reps) + 1, dtype=bool)
    acc[1:] = accepting[reps]
    return out, acc, 1


def minimize(
    table: np.ndarray, accepting: np.ndarray, start: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Minimal canonical DFA: (table, accepting, start); start is 1, or 0 if empty."""
    if len(table) <= _SMALL:
        return _small(table, accepting, start)
    blocks = _moore(table, accepting)
    if blocks is not None:  # states equivalent to the dead one cannot reach acceptance
        block_of: np.ndarray | list[int] = np.where(blocks == blocks[0], -1, blocks)
    else:
        table = trim(table, accepting, start)
        block_of = _hopcroft(table, accepting)
    if block_of[start] < 0:
        return np.zeros((1, table.shape[1]), dtype=np.int32), np.zeros(1, dtype=bool), 0
    return _canonical(table, accepting, start, block_of)


_SMALL = 48  # tables this small are minimised in plain Python (numpy calls cost more)
SPARSE_STATES = 4096  # `minimal_triples` refines tables up to this size on sparse rows
_LIST_FILL = 512  # and fills minimal tables of fewer cells than this in plain Python


def _small(
    table: np.ndarray, accepting: np.ndarray, start: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """`minimize` in plain Python: Moore's refinement on row tuples, then BFS numbering
    (the same canonical order as `_canonical`)."""
    rows = table.tolist()
    acc = accepting.tolist()
    block = [int(a) for a in acc]
    count = len(set(block))
    while True:
        get = block.__getitem__
        ids: dict[tuple[int, ...], int] = {}
        block = [ids.setdefault((block[s], *map(get, row)), len(ids)) for s, row in enumerate(rows)]
        if len(ids) == count:
            break
        count = len(ids)
    dead = block[0]
    if block[start] == dead:
        return np.zeros((1, table.shape[1]), dtype=np.int32), np.zeros(1, dtype=bool), 0
    number = {dead: 0, block[start]: 1}
    queue = [start]
    out = [[0] * table.shape[1]]
    for s in queue:
        numbered = []
        for t in rows[s]:
            found = number.get(block[t])
            if found is None:
                found = number[block[t]] = len(number)
                queue.append(t)
            numbered.append(found)
        out.append(numbered)
    return np.array(out, dtype=np.int32), np.array([False] + [acc[s] for s in queue]), 1


_MOORE_ROUNDS = 128  # past this many rounds (long chains) Hopcroft is cheaper
_WEIGHTS = np.random.default_rng(20261201).integers(0, 2**62, size=4097, dtype=np.uint64) * 2 + 1
_VALUES = np.zeros(0, dtype=np.uint64)


def _values(n: int) -> np.ndarray:
    """At least `n` random 64-bit values (the hash of block ids 0..n-1)."""
    global _VALUES
    if len(_VALUES) < n:
        size = max(1024, 1 << (n - 1).bit_length())
        _VALUES = np.random.default_rng(size).integers(0, 2**63, size=size, dtype=np.uint64)
    return _VALUES


def _moore(table: np.ndarray, accepting: np.ndarray) -> np.ndarray | None:
    """Nerode classes of the complete DFA (state 0's class: states that cannot accept).

    Each round a state's new block is a hash of its block and of (class, successor's
    block) over its live transitions (a transition into the dead state's block adds 0, as
    one into state 0 does). Equal signatures give equal hashes, so every round's partition
    is at most as fine as Moore's exact one, hence as the Nerode classes; the final one is
    then checked to be stable and to separate accepting states, which makes it at least as
    fine: it is exact. None when it fails that check (a hash collision) or needs more than
    `_MOORE_ROUNDS` rounds.
    """
    n, k = table.shape
    src, cls = np.nonzero(table != 0)
    tgt = table[src, cls]
    weight = _WEIGHTS[cls]
    if len(src) > 2 * n:  # parallel edges (same source and target) as one, weights summed
        key = src.astype(np.int64) * n + tgt
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        weight = np.add.reduceat(weight[order], first)
        src, tgt = np.divmod(key[first], n)
    ends = np.cumsum(np.bincount(src, minlength=n))
    starts = np.concatenate(([0], ends[:-1]))
    blocks = accepting.astype(np.int64)
    count = len(np.unique(blocks))
    values = _values(n)
    sums = np.zeros(len(tgt) + 1, dtype=np.uint64)
    step = np.zeros(n, dtype=np.int64)
    with np.errstate(over="ignore"):
        for _ in range(_MOORE_ROUNDS):
            check()
            mixed = values[blocks]
            mixed -= mixed[0]
            np.cumsum(weight * mixed[tgt], out=sums[1:])
            signature = sums[ends] - sums[starts] + mixed * _WEIGHTS[-1]
            order = np.argsort(signature)
            ordered = signature[order]
            np.not_equal(ordered[1:], ordered[:-1], out=step[1:])
            blocks = np.empty(n, dtype=np.int64)
            blocks[order] = np.cumsum(step)
            if int(blocks[order[-1]]) + 1 == count:
                break
            count = int(blocks[order[-1]]) + 1
        else:
            return None
    rep = np.zeros(count, dtype=np.int64)
    rep[blocks[::-1]] = np.arange(n - 1, -1, -1)  # the first state of each block
    same = rep[blocks]
    stable = np.array_equal(blocks[table], blocks[table[same]])
    return blocks if stable and np.array_equal(accepting, accepting[same]) else None


def _hopcroft(table: np.ndarray, accepting: np.ndarray) -> list[int]:
    """Block of each state (-1 for the dead state and states with no live path)."""
    n = len(table)
    inv = _inverse(table)
    has_out = (table != 0).any(axis=1)
    block_of = [-1] * n
    blocks: list[set[int]] = []
    for group in (accepting, ~accepting & has_out):
        members = {s for s in np.flatnonzero(group).tolist() if s}
        if members:
            for s in members:
                block_of[s] = len(blocks)
            blocks.append(members)
    waiting = set(range(len(blocks)))
    while waiting:
        check()
        signature: dict[int, int] = {}  # source -> classes leading into the splitter
        for t in list(blocks[waiting.pop()]):
            for s, mask in inv[t]:
                signature[s] = signature.get(s, 0) | mask
        touched: dict[int, dict[int, list[int]]] = {}
        for s, mask in signature.items():
            touched.setdefault(block_of[s], {}).setdefault(mask, []).append(s)
        for b, groups in touched.items():
            _split_block(b, list(groups.values()), blocks, block_of, waiting)
    return block_of


def _split_block(
    b: int, groups: list[list[int]], blocks: list[set[int]], block_of: list[int], waiting: set[int]
) -> None:
    """Split block b into `groups` (+ its untouched rest); the largest part keeps id b."""
    rest = len(blocks[b]) - sum(map(len, groups))
    if not rest and len(groups) == 1:
        return
    if not rest:
        groups.remove(max(groups, key=len))
    elif rest < max(map(len, groups)):
        biggest = max(groups, key=len)
        groups.remove(biggest)
        groups.append(list(blocks[b].difference(*map(set, groups), biggest)))
    for group in groups:
        new = len(blocks)
        moved = set(group)
        blocks[b] -= moved
        blocks.append(moved)
        for s in group:
            block_of[s] = new
        waiting.add(new)


def _canonical(
    table: np.ndarray, accepting: np.ndarray, start: int, block_of: np.ndarray | list[int]
) -> tuple[np.ndarray, np.ndarray, int]:
    """Quotient table numbered in BFS order from the start (classes scanned in order)."""
    blocks = np.asarray(block_of, dtype=np.int64)
    nblocks = int(blocks.max()) + 1
    rep = np.zeros(nblocks, dtype=np.int64)
    rep[blocks[blocks >= 0]] = np.flatnonzero(blocks >= 0)
    btable = blocks[table[rep]]  # block ids, -1 for dead
    new_id = np.zeros(nblocks + 1, dtype=np.int32)  # index by block + 1; 0: not yet numbered
    frontier = np.array([blocks[start]])
    new_id[frontier + 1] = 1
    order = [frontier]
    count = 1
    while True:  # one BFS level at a time: first occurrences in row-major order
        found = btable[frontier].ravel()
        found = found[(found >= 0) & (new_id[found + 1] == 0)]
        if not len(found):
            break
        by = np.argsort(found, kind="stable")  # first occurrences (np.unique: slower)
        ordered = found[by]
        keep = np.empty(len(by), dtype=bool)
        keep[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
        frontier = found[np.sort(by[keep])]
        new_id[frontier + 1] = np.arange(count + 1, count + 1 + len(frontier))
        count += len(frontier)
        order.append(frontier)
    reached = np.concatenate(order)
    out = np.zeros((count + 1, table.shape[1]), dtype=np.int32)
    out[1:] = new_id[btable[reached] + 1]
    acc = np.zeros(count + 1, dtype=bool)
    acc[1:] = accepting[rep[reached]]
    return out, acc, 1
