"""The byte sets an AST reads, and the coarsest partition of 0..255 refining them: the
alphabet of the NFA (`nfa.NFA`) built over byte classes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Node, Product, Seq, children


def automaton_byte_sets(node: Automaton) -> list[int]:
    """The byte masks of the embedded DFA's columns classes."""
    _, masks, _ = node.dfa.compressed()
    return masks


def leaf_masks(
    root: Node,
    automata: set[int] | None = None,
    partition: list[int] | None = None,
    stop: int = 0,
) -> set[int]:
    """Every distinct byte mask used by the leaves of `root` (those of embedded automata'
    classes in `automata` instead, if given; `partition`, if given, gets the classes of
    the automaton with the most, a partition of the bytes for `byte_classes` to start
    from). With `stop` (a mask), the walk ends at the first leaf or automaton class equal
    to it: the sets are then partial (`stop` in one of them)."""
    masks: set[int] = set()
    automata = masks if automata is None else automata
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if type(node) is Bytes:  # most nodes: a leaf met twice adds its mask twice, harmlessly
            masks.add(node.mask)
            if node.mask == stop:
                break
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, (Seq, Alt)):
            stack.extend(node.items)
        elif isinstance(node, Automaton):
            columns = automaton_byte_sets(node)
            automata.update(columns)
            if partition is not None and len(columns) > len(partition):
                partition[:] = columns
            if stop and stop in columns:
                break
        else:
            stack.extend(_children(node))
    return masks


def _children(node: Node) -> Iterable[Node]:
    if isinstance(node, Product):
        raise TypeError("Product nodes must be lowered before building an NFA")
    return children(node)


def byte_classes(masks: Iterable[int], start: Sequence[int] = ()) -> tuple[np.ndarray, list[int]]:
    """Coarsest partition of bytes refining every mask and the partition `start` (if
    given: an embedded automaton's classes, refined as a whole instead of mask by mask):
    (class of each byte, class masks).

    One-byte masks (most of them: literal text) only cut their byte out of its class, so
    they are applied last, all at once, instead of each one scanning every class."""
    classes = list(start) if start else [(1 << 256) - 1]
    singles = 0
    for mask in masks:
        if not mask & (mask - 1):
            singles |= mask
            continue
        nxt: list[int] = []
        for cls in classes:
            inside = cls & mask
            if inside and inside != cls:
                nxt += (inside, cls ^ inside)
            else:
                nxt.append(cls)
        classes = nxt
    if singles:
        cut: list[int] = []
        for cls in classes:
            alone = cls & singles
            if alone == cls and not cls & (cls - 1):
                cut.append(cls)
                continue
            rest = cls ^ alone
            while alone:
                low = alone & -alone
                cut.append(low)
                alone ^= low
            if rest:
                cut.append(rest)
        classes = cut
    classes.sort(key=lambda c: c & -c)  # by lowest byte
    raw = np.frombuffer(b"".join(c.to_bytes(32, "little") for c in classes), dtype=np.uint8)
    bits = np.unpackbits(raw.reshape(len(classes), 32), axis=1, bitorder="little")
    return bits.argmax(axis=0).astype(np.int64, copy=False), classes
