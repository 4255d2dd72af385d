"""Arrays, objects and "any value" for the JSON Schema compiler.

Functions take the `SchemaCompiler` (`c`), the collected `Facts` of the conjunction, the
instance `Location`, and the polarity `pos` (False: over-approximate, see
`json_schema`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kor_cli.grammar.ast import (
    EMPTY,
    NOTHING,
    Node,
    alt,
    intersect,
    join,
    literal,
    opt,
    repeat,
    seq,
)
from kor_cli.grammar.json_keywords import ArrayPart, Facts, ObjectPart, Part
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.json_numbers import NUMBER
from kor_cli.grammar.json_values import BOOLEAN, NULL, string_node

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

OPEN_BRACKET, CLOSE_BRACKET = literal("["), literal("]")
OPEN_BRACE, CLOSE_BRACE = literal("{"), literal("}")


def any_value(c: SchemaCompiler, loc: Location, depth: int) -> Node:
    """Any JSON value nested at most `depth` containers deep."""
    scalars = alt(NULL, BOOLEAN, NUMBER, string_node())
    if depth <= 0:
        return scalars
    return alt(scalars, any_array(c, loc, depth - 1), any_object(c, loc, depth - 1))


def any_array(c: SchemaCompiler, loc: Location, depth: int) -> Node:
    """An array of any values `depth` deep."""
    item = c.any_value(loc.item(), depth)
    return seq(OPEN_BRACKET, repeat(item, 0, None, c.item_sep), CLOSE_BRACKET)


def any_object(c: SchemaCompiler, loc: Location, depth: int) -> Node:
    """An object of any members with values `depth` deep (declared names first)."""
    slots = [(_member(c, n, c.any_value(loc.child(n), depth)), False) for n in loc.names]
    tail = seq(c.other_key(loc.names), c.key_sep, c.any_value(loc.child(None), depth))
    return seq(OPEN_BRACE, join(slots, c.item_sep, tail), CLOSE_BRACE)


def _member(c: SchemaCompiler, name: str, value: Node) -> Node:
    return seq(c.name(name), c.key_sep, value)


def array(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    """Arrays satisfying the conjunction's array keywords."""
    lo, hi = facts.min_items, facts.max_items
    parts = facts.arrays + (_unevaluated_items(facts) if pos else [])
    if pos and facts.unique and (hi is None or hi > 1):
        c.fail("uniqueItems", facts.unique[0], "'uniqueItems' cannot be enforced")
    width = max((len(a.prefix) for a in parts), default=0)
    for a in parts:
        if a.items is False:
            hi = len(a.prefix) if hi is None else min(hi, len(a.prefix))
    if hi is not None:
        if lo > hi:
            return NOTHING
        width = min(width, hi)
    item_loc = loc.item()
    tail_parts = [a.items for a in parts if isinstance(a.items, Part)]
    if not parts:
        tail = c.any_value(item_loc, c.max_any_depth - 1) if pos else c.loose()
    else:
        tail = c.member(tail_parts, item_loc, pos)
    elements = [c.member(_at(parts, j), item_loc, pos) for j in range(width)]
    node = seq(OPEN_BRACKET, _sequence(c, elements, tail, lo, hi), CLOSE_BRACKET)
    if pos and facts.contains:
        return _containing(c, facts, node, tail_parts, item_loc)
    return node


def _containing(
    c: SchemaCompiler, facts: Facts, node: Node, items: list[Part], loc: Location
) -> Node:
    """`node` ∩ arrays with minContains..maxContains items matching `contains`.

    Items are sorted into Y (valid and matching) and X (valid and certainly not matching);
    an item that may or may not match is in neither, which only ever rejects.
    """
    (part, least, most, pointer), *more = facts.contains
    if more or any(a.prefix for a in facts.arrays):
        c.fail("contains", pointer, "only one 'contains' without prefixItems is supported")
        return node
    if least == 0 and most is None:
        return node
    matching = c.conj([*items, part], loc, True)
    other = c.minus(c.member(items, loc, True), part, loc)
    sep_other = repeat(seq(c.item_sep, other), 0, None)

    def rest(lo: int, hi: int | None) -> Node:  # after the first item: lo..hi more matches
        return seq(sep_other, repeat(seq(c.item_sep, matching, sep_other), max(lo, 0), hi))

    first_other = seq(other, rest(least, most))
    first_match = seq(matching, rest(least - 1, None if most is None else most - 1))
    content = alt(
        first_other, first_match if most != 0 else NOTHING, EMPTY if least == 0 else NOTHING
    )
    return intersect(node, seq(OPEN_BRACKET, content, CLOSE_BRACKET))


def _unevaluated_items(facts: Facts) -> list[ArrayPart]:
    """`unevaluatedItems` as items after the prefixes evaluated in its owner's subtree."""
    out = []
    for owner, value in facts.unevaluated_items:
        if value is True:
            continue
        parts = facts.subtree(owner)
        if any("unevaluatedItems" in p.schema for p in parts if id(p.schema) != owner):
            continue  # a nested unevaluatedItems that holds leaves nothing unevaluated
        subtree = [a for p in parts for a in _arrays_of(p)]
        if any(a.items is not None for a in subtree):
            continue  # `items` evaluates everything
        width = max((len(a.prefix) for a in subtree), default=0)
        out.append(ArrayPart([Part(True, "")] * width, value))
    return out


def _arrays_of(part: Part) -> list[ArrayPart]:
    schema = part.schema
    if not isinstance(schema, dict) or not any(k in schema for k in ("prefixItems", "items")):
        return []
    prefix = schema.get("prefixItems", [])
    items = schema.get("items")
    return [ArrayPart([Part(True, "")] * len(prefix), None if items is None else True)]


def _at(parts: list[ArrayPart], j: int) -> list[Part]:
    out = []
    for a in parts:
        if j < len(a.prefix):
            out.append(a.prefix[j])
        elif isinstance(a.items, Part):
            out.append(a.items)
    return out


def _sequence(c: SchemaCompiler, elements: list[Node], tail: Node, lo: int, hi: int | None) -> Node:
    """Elements in order (first `lo` required), then tail copies, item count lo..hi."""
    width = len(elements)
    if not elements:
        return repeat(tail, lo, hi, c.item_sep)
    rest_hi = None if hi is None else hi - width
    node = repeat(seq(c.item_sep, tail), max(lo - width, 0), rest_hi)
    for j in range(width - 1, -1, -1):
        here = seq(c.item_sep if j else EMPTY, elements[j], node)
        node = here if j < lo else opt(here)
    return node


def obj(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    """Objects satisfying the conjunction's object keywords."""
    objs = facts.objects + (_unevaluated_props(facts) if pos else [])
    counted = pos and (facts.min_props or facts.max_props is not None)
    if not (objs or facts.property_names or counted):
        return any_object(c, loc, c.max_any_depth - 1) if pos else c.loose_object()
    shape = _Shape(objs, facts, pos)
    names_node = [c.conj([p], c.space.at([]), pos) for p in facts.property_names]
    required = shape.required()
    if required is None:
        return NOTHING
    slots: list[tuple[Node, bool]] = []
    names = loc.names + tuple(n for n in shape.declared + required if n not in loc.names)
    for name in dict.fromkeys(names):
        if not shape.possible(name) or not all(c.accepts(n, _quoted(name)) for n in names_node):
            if name in required:
                return NOTHING
            continue
        value = c.member(shape.value_parts(name), loc.child(name), pos)
        slots.append((_member(c, name, value), name in required))
    tail = None
    if shape.open:
        key = c.other_key(loc.names)  # canonical text never has these names in the tail
        for n in names_node:
            key = intersect(key, n)
        value = c.member(shape.extra, loc.child(None), pos) if pos else c.loose()
        tail = seq(key, c.key_sep, value)
    lo, hi = (facts.min_props, facts.max_props) if pos else (0, None)
    return seq(OPEN_BRACE, join(slots, c.item_sep, tail, lo, hi), CLOSE_BRACE)


def _unevaluated_props(facts: Facts) -> list[ObjectPart]:
    """`unevaluatedProperties` as additionalProperties beyond its owner subtree's names."""
    out = []
    for owner, value in facts.unevaluated_props:
        subtree = [p.schema for p in facts.subtree(owner) if isinstance(p.schema, dict)]
        nested = [s for s in subtree if id(s) != owner and "unevaluatedProperties" in s]
        if value is True or nested or any("additionalProperties" in s for s in subtree):
            if value is not False:  # explicitly open: no default closure
                out.append(ObjectPart({}, [], Part(True, "")))
            continue  # every member is evaluated already
        names = [n for s in subtree for n in s.get("properties", {})]
        out.append(ObjectPart({n: Part(True, "") for n in names}, [], value))
    return out


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


class _Shape:
    """Which member names an object may have, and the schemas of their values.

    In positive mode an object that declares `properties` or `required` is closed unless
    some part opens it (`additionalProperties` true or a schema).
    """

    def __init__(self, objs: list[ObjectPart], facts: Facts, pos: bool) -> None:
        self.objs = objs
        self.facts = facts
        self.pos = pos
        self.declared = list(dict.fromkeys(n for o in objs for n in o.props))
        self.closers = [o for o in objs if o.additional is False]
        self.extra = [o.additional for o in objs if isinstance(o.additional, Part)]
        declared = any((o.props or o.required) and o.declares for o in objs)
        closed = pos and not self.extra and declared
        self.open = not self.closers and not closed

    def required(self) -> list[str] | None:
        """The required names, or None if one of them cannot be present."""
        required = list(dict.fromkeys(n for o in self.objs for n in o.required))
        if any(not self.possible(n) for n in required):
            return None
        return required

    def possible(self, name: str) -> bool:
        if any(name not in o.props for o in self.closers):
            return False
        declared = name in self.declared or any(name in o.required for o in self.objs)
        return declared or self.open

    def value_parts(self, name: str) -> list[Part]:
        parts = [o.props[name] for o in self.objs if name in o.props]
        parts += [
            o.additional
            for o in self.objs
            if isinstance(o.additional, Part) and name not in o.props
        ]
        return parts
