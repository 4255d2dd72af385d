"""Witness keys for `patternProperties` key cases: a cheap lower bound on their number.

`json_objects` splits the keys beyond the named ones into one case per set of patterns
they certainly match (a DFA product per pattern and case). Unanchored patterns that all
overlap (drupal-recipe's nine `block.block.*`, `field.field.*.*.*`, ...) realise nearly
every set: 2^9 cases, refused past `MAX_CASES` only after seconds of products on ever
larger key languages. Here, before that, each pattern's shortest certain key is found on
its small DFA, and keys made of several of them joined are checked on the patterns' own
DFAs: a joined key that certainly matches its patterns, maybe matches none of the others
and is not a named key realises that set, so once more sets than the limit are realised
the refusal is certain and said at once (the same one the products would reach).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from kor_cli.grammar.byte_dfa import ByteDFA

MAX_TRIES = 4096  # joined keys checked at most


BYTE_ORDER = np.arange(256, dtype=np.int64)


def shortest(dfa: ByteDFA, order: np.ndarray = BYTE_ORDER) -> bytes | None:
    """A shortest string `dfa` accepts (None if none): breadth first, each state's targets
    queued in the order of their first byte in `order` (a permutation of the 256 bytes),
    so among the shortest strings the first in that order byte by byte wins."""
    table = dfa.transitions
    back: dict[int, tuple[int, int]] = {dfa.start: (-1, -1)}
    queue = deque([dfa.start])
    while queue:
        state = queue.popleft()
        if dfa.accepting[state]:
            text = bytearray()
            while back[state][0] >= 0:
                state, byte = back[state]
                text.append(byte)
            return bytes(reversed(text))
        row = table[state]
        firsts = order[np.sort(np.unique(row[order], return_index=True)[1])]
        for target, byte in zip(row[firsts].tolist(), firsts.tolist(), strict=True):
            if target and target not in back:
                back[target] = (state, byte)
                queue.append(target)
    return None


def witnesses(
    strict: list[ByteDFA], loose: list[ByteDFA], allowed: Callable[[bytes], bool]
) -> Iterator[tuple[int, bytes]]:
    """(bit set of patterns, key) for joined witness keys (JSON string texts: quotes kept
    around the joined contents) that certainly match the patterns of the set, maybe match
    none of the others and are `allowed` (a key the extras may have); at most `MAX_TRIES`
    keys are tried, smaller sets first."""
    inner = []
    for dfa in strict:
        found = shortest(dfa)
        if found is None or len(found) < 2:
            return
        inner.append(found[1:-1])
    sets = (c for size in range(1, len(inner) + 1)
            for c in itertools.combinations(range(len(inner)), size))  # fmt: skip
    for chosen in itertools.islice(sets, MAX_TRIES):
        key = b'"' + b"".join(inner[i] for i in chosen) + b'"'
        if not allowed(key) or not all(strict[i].accepts(key) for i in chosen):
            continue
        if not any(loose[j].accepts(key) for j in range(len(inner)) if j not in chosen):
            yield sum(1 << i for i in chosen), key


def realised_over(
    strict: list[ByteDFA], loose: list[ByteDFA], allowed: Callable[[bytes], bool], limit: int
) -> bool:
    """True if witness keys realise more than `limit` sets of patterns (False when that
    cannot be shown cheaply)."""
    realised: set[int] = set()
    for mask, _ in witnesses(strict, loose, allowed):
        realised.add(mask)
        if len(realised) > limit:
            return True
    return False
