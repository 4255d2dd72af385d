"""Regex AST over bytes: the common language every grammar front end compiles to.

Leaves match one byte out of a set (`Bytes`, a 256-bit mask) or embed a finished
automaton (`Automaton`). Inner nodes: `Seq`, `Alt`, `Repeat` (optionally with a
separator between repetitions), `Join` (an ordered list of possibly-absent items with
separators, e.g. the members of a JSON object) and `Product` (intersection or difference
of two languages, computed on DFAs by `fsm`).

Build nodes with the smart constructors below (`seq`, `alt`, `repeat`, `join`, ...): they
flatten, simplify, and propagate `NOTHING` (the empty language) so that every node of a
finished tree can reach the end of a match. Nodes compare by identity and may be shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kor_cli.grammar.byte_dfa import ByteDFA

ALL_BYTES = (1 << 256) - 1


class Node:
    """Base class of AST nodes."""

    __slots__ = ()


@dataclass(frozen=True, eq=False)
class Bytes(Node):
    """One byte whose value b has bit b set in `mask`."""

    mask: int


@dataclass(frozen=True, eq=False)
class Seq(Node):
    """Concatenation; `Seq(())` matches the empty string."""

    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Alt(Node):
    """Alternation; `Alt(())` matches nothing."""

    items: tuple[Node, ...]


@dataclass(frozen=True, eq=False)
class Repeat(Node):
    """`item` repeated `min`..`max` times (`max` None: unbounded), `sep` between copies."""

    item: Node
    min: int
    max: int | None
    sep: Node | None = None


@dataclass(frozen=True, eq=False)
class Join(Node):
    """Items in order, each `(node, required)`; optional ones may be left out.

    `sep` goes between present items; `tail` (if any) may repeat any number of times
    after them. The number of present items (tail copies included) lies in
    `min_count`..`max_count` (`max_count` None: unbounded).
    """

    items: tuple[tuple[Node, bool], ...]
    sep: Node
    tail: Node | None
    min_count: int
    max_count: int | None


@dataclass(frozen=True, eq=False)
class Product(Node):
    """`op` "and": strings in both languages; "diff": in `left` but not in `right`."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, eq=False)
class Automaton(Node):
    """The language of a finished byte DFA."""

    dfa: ByteDFA


EMPTY: Node = Seq(())
NOTHING: Node = Alt(())
ANYTHING: Node = Repeat(Bytes(ALL_BYTES), 0, None)  # every byte string


def children(node: Node) -> tuple[Node, ...]:
    """The direct subtrees of `node` (both sides of a `Product` too); leaves have none."""
    if isinstance(node, (Seq, Alt)):
        return node.items
    if isinstance(node, Repeat):
        return (node.item,) if node.sep is None else (node.item, node.sep)
    if isinstance(node, Join):
        tail = () if node.tail is None else (node.tail,)
        return (*(item for item, _ in node.items), node.sep, *tail)
    if isinstance(node, Product):
        return (node.left, node.right)
    return ()


def is_nothing(node: Node) -> bool:
    """True for the empty language."""
    return isinstance(node, Alt) and not node.items


def is_empty(node: Node) -> bool:
    """True for the language holding only the empty string."""
    return isinstance(node, Seq) and not node.items


def byteset(mask: int) -> Node:
    """One byte out of `mask`."""
    return Bytes(mask) if mask else NOTHING


def byte_range(lo: int, hi: int) -> Node:
    """One byte in lo..hi (inclusive)."""
    return byteset(((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)) if lo <= hi else NOTHING


def literal(data: bytes | str) -> Node:
    """Exactly `data` (str is UTF-8 encoded)."""
    raw = data.encode() if isinstance(data, str) else data
    items = tuple([Bytes(1 << b) for b in raw])  # fresh leaves: sizes count them apart
    return items[0] if len(items) == 1 else Seq(items)


def seq(*items: Node) -> Node:
    """Concatenation of `items`."""
    out: list[Node] = []
    for item in items:
        if isinstance(item, Seq):
            out.extend(item.items)
        elif isinstance(item, Alt) and not item.items:
            return NOTHING
        else:
            out.append(item)
    return out[0] if len(out) == 1 else Seq(tuple(out))


def alt(*items: Node) -> Node:
    """Alternation of `items` (single-byte alternatives are merged)."""
    out: list[Node] = []
    seen: set[int] = set()
    mask = 0
    for item in items:
        for sub in item.items if isinstance(item, Alt) else (item,):
            if isinstance(sub, Bytes):
                mask |= sub.mask
            elif id(sub) not in seen:
                seen.add(id(sub))
                out.append(sub)
    if mask:
        out.insert(0, Bytes(mask))
    return out[0] if len(out) == 1 else Alt(tuple(out))


def alts(items: Iterable[Node]) -> Node:
    """`alt` over an iterable."""
    return alt(*items)


def repeat(item: Node, lo: int, hi: int | None, sep: Node | None = None) -> Node:
    """`item` repeated lo..hi times (hi None: unbounded), `sep` between copies."""
    if lo < 0 or (hi is not None and hi < lo):
        return NOTHING
    if is_nothing(item) or (sep is not None and is_nothing(sep) and lo > 1):
        return EMPTY if lo == 0 else NOTHING
    if sep is not None and is_nothing(sep):
        sep, hi = None, 1 if hi is None else min(hi, 1)
    if hi == 0 or (is_empty(item) and (sep is None or is_empty(sep))):
        return EMPTY
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi, None if sep is None or is_empty(sep) else sep)


def opt(item: Node) -> Node:
    """`item` or nothing."""
    return repeat(item, 0, 1)


def join(
    items: Sequence[tuple[Node, bool]],
    sep: Node,
    tail: Node | None = None,
    min_count: int = 0,
    max_count: int | None = None,
) -> Node:
    """Ordered, separated, possibly-absent items (see `Join`)."""
    kept: list[tuple[Node, bool]] = []
    for node, required in items:
        if is_nothing(node):
            if required:
                return NOTHING
            continue
        kept.append((node, required))
    if tail is not None and is_nothing(tail):
        tail = None
    need = sum(required for _, required in kept)
    most = None if tail is not None else len(kept)
    if (max_count is not None and need > max_count) or (most is not None and most < min_count):
        return NOTHING
    if not kept and tail is None:
        return EMPTY
    return Join(tuple(kept), sep, tail, min_count, max_count)


def intersect(left: Node, right: Node) -> Node:
    """Strings in both languages."""
    if is_nothing(left) or is_nothing(right):
        return NOTHING
    return Product("and", left, right)


def difference(left: Node, right: Node) -> Node:
    """Strings of `left` that are not in `right`."""
    if is_nothing(left) or is_nothing(right):
        return left
    return Product("diff", left, right)
