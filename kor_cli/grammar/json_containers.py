"""Arrays and "any value" for the JSON Schema compiler (objects: `json_objects`).

Functions take the `SchemaCompiler` (`c`), the collected `Facts` of the conjunction, the
instance `Location`, and the polarity `pos` (False: over-approximate, see
`json_schema`).

"Any value" (`{}`, `true`, an array's free items, an object's free members) nests without
bound: outside products it is a call to a recursive rule (`any_call`) whose body is one
level of value (scalars, `[` items `]`, `{` members `}`) calling the rule again for what
it holds. Every location that orders no member names anywhere below (`name_free`: the
usual case) shares ONE such rule per grammar, so its DFA and frame masks are built once
(and its DFA once per process: the structural DFA cache). A location that names members
(an `anyOf` branch declares them) gets a rule of its own, named members first, as
everywhere at that place; rules of locations below it are calls again.

Under products (`not`, `oneOf` exclusivity, `if`/`else`, `contains`, `uniqueItems`, `enum`
beside constraints, `propertyNames`: whatever the compiler turns into one DFA mid-compile)
no call may appear, so there "any value" is unrolled `max_any_depth` containers deep
(`any_value`; deeper values are unavailable there, a sound under-approximation). The DFA
view of a grammar (`Grammar.dfa`, for DFA-only consumers) inlines the same bounded value
at each call, so a call-free consumer sees exactly the former bounded language.

Why a rule even in a grammar that would otherwise be one DFA (measured by
`benchmarks/any_value.py`, figures in the README): values nest to any depth, and the first
mask comes sooner (the root DFA no longer holds three unrolled levels of every value: on
the test suite p50 / p90 / p99 about 2× / 4× / 1.6× faster) while warm masks are equal; the
cost is the pushdown path's first visits of rule positions (about 2× the cold mean along
instances). `GrammarOptions.bounded_any` keeps such a grammar one DFA at bounded depth.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

from kor_cli.grammar.ast import (
    EMPTY,
    NOTHING,
    Automaton,
    Node,
    alt,
    intersect,
    is_nothing,
    join,
    literal,
    opt,
    repeat,
    seq,
)
from kor_cli.grammar.json_keywords import ArrayPart, Facts, Part
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.json_numbers import any_number
from kor_cli.grammar.json_rules import Call
from kor_cli.grammar.json_unique import (
    MAX_VALUES,
    deferred_unique,
    distinct_array,
    distinct_sequence,
    finite_texts,
    surely_many,
)
from kor_cli.grammar.json_values import BOOLEAN, NULL, string_node
from kor_cli.grammar.unique_items import item_language

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

ANY_RULE = "(any value)"  # the name of "any value" rules (messages, tests)
OPEN_BRACKET, CLOSE_BRACKET = literal("["), literal("]")
OPEN_BRACE, CLOSE_BRACE = literal("{"), literal("}")


def any_call(c: SchemaCompiler, loc: Location, depth: int) -> Node:
    """Any JSON value, any depth: a call to the "any value" rule of `loc` (shared by every
    name-free location); the DFA view inlines `any_value(loc, depth)` there instead."""
    free = name_free(loc)
    shared = c.space.at([]) if free else loc
    memo = memo_key(c) if free else None  # the same rule for every schema: built once
    rule = c.rules.recursive(("any", id(shared)), ANY_RULE, lambda: any_value(c, shared, 1), memo)

    def view() -> Node:
        with c.exactly():
            return c.any_value(loc, depth)

    return Call(rule, view)


def memo_key(c: SchemaCompiler) -> tuple[object, ...]:
    """The process-wide key (`shared_rules`) of the name-free "any value" rule: every
    option of the compiler but the schema, its loader and the state limit (which
    `RuleBook` adds), whether or not it shapes the rule today."""
    options = (c.whitespace, c.lenient, c.open_objects, c.max_recursion_depth, c.max_any_depth)
    return (ANY_RULE, *options)


def name_free(loc: Location) -> bool:
    """True when no object at or below `loc` (through free members and items) has member
    names to put first: "any value" there is the same as at the empty location."""
    seen: set[int] = set()
    todo = [loc]
    while todo:
        at = todo.pop()
        if id(at) in seen:
            continue
        if at.names:
            return False
        seen.add(id(at))
        todo += [at.child(None), at.item()]
    return True


def any_value(c: SchemaCompiler, loc: Location, depth: int) -> Node:
    """Any JSON value nested at most `depth` containers deep (under products; elsewhere
    the values it holds are calls of `any_call`, `c.any_value`)."""
    scalars = alt(NULL, BOOLEAN, any_number(), string_node())
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
    if facts.contains or (pos and facts.unique and c.exact):  # intersected: without calls
        with c.exactly():
            return _array(c, facts, loc, pos)
    return _array(c, facts, loc, pos)


def _array(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    lo, hi = facts.min_items, facts.max_items
    parts = facts.arrays + (_unevaluated_items(facts) if pos else [])
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
    if pos and facts.unique and not c.exact and not width:  # large items: built when reached
        if (lazy := deferred_unique(c, tail_parts, item_loc, lo, hi, facts.unique[0])) is not None:
            return lazy
    with c.exactly() if pos and facts.unique else nullcontext():  # items: one DFA each
        if not parts:
            tail = c.any_value(item_loc, c.max_any_depth - 1) if pos else c.loose()
        else:
            tail = c.member(tail_parts, item_loc, pos)
        elements = [c.member(_at(parts, j), item_loc, pos) for j in range(width)]
    node = seq(OPEN_BRACKET, _sequence(c, elements, tail, lo, hi), CLOSE_BRACKET)
    if facts.contains:
        node = _containing(c, facts, node, tail_parts, item_loc, pos)
    if pos and facts.unique and (hi is None or hi > 1):
        node = _unique(c, facts, node, tail, bool(width), lo, hi)
    return node


def _unique(
    c: SchemaCompiler, facts: Facts, node: Node, item: Node, prefix: bool, lo: int, hi: int | None
) -> Node:
    """`node` ∩ arrays whose items are distinct: a DFA when items have few possible values,
    else an array rule checked at run time (`unique_check`; not under products)."""
    pointer = facts.unique[0]
    if prefix:
        c.fail("uniqueItems", pointer, "'uniqueItems' with prefixItems is not supported")
        return node
    name = pointer if "#" in pointer else "#" + pointer
    if not c.exact and lo <= 1 and surely_many(item):  # checked; item DFA built when reached
        return _checked(c, item, lo, hi, name)
    settled = c.settle(item)[0]
    if is_nothing(settled):  # no item can exist: only the empty array
        return intersect(node, seq(OPEN_BRACKET, CLOSE_BRACKET))
    texts = finite_texts(settled.dfa)
    if texts is not None:
        if not facts.contains and lo == 0 and (hi is None or hi >= len(texts)):
            return distinct_array(c, texts, pointer)  # `node` adds nothing: no product
        content = Automaton(distinct_sequence(texts, c.item_sep_text.encode()))
        return intersect(node, seq(OPEN_BRACKET, content, CLOSE_BRACKET))
    if c.exact:
        message = (
            f"'uniqueItems' under not/oneOf/if/contains needs items with at most {MAX_VALUES} "
            "possible values (elsewhere it is checked at run time)"
        )
        c.fail("uniqueItems", pointer, message)
        return node
    if lo > 1 and not item_language(settled.dfa).at_least(lo):  # an item exists: lo <= 1 holds
        return NOTHING  # fewer distinct values than minItems
    return _checked(c, settled, lo, hi, name)


def _checked(c: SchemaCompiler, item: Node, lo: int, hi: int | None, name: str) -> Node:
    """A `uniqueItems` array rule over the item rule `item` (call-free), checked at run time
    (`RuleBook.checked_array`): the item's DFA is built when the rule first is."""

    def array(call: Node) -> Node:
        return seq(OPEN_BRACKET, repeat(call, lo, hi, c.item_sep), CLOSE_BRACKET)

    # the DFA view (for DFA-only consumers) under-approximates: at most one item
    view = seq(OPEN_BRACKET, repeat(item, lo, 1), CLOSE_BRACKET)
    return c.rules.checked_array(item, array, lambda _: view if lo <= 1 else NOTHING, name)


def _containing(
    c: SchemaCompiler, facts: Facts, node: Node, items: list[Part], loc: Location, pos: bool
) -> Node:
    """`node` ∩ arrays with minContains..maxContains items matching each `contains`
    (negative mode: at least minContains items that may match)."""
    for part, least, most, pointer in facts.contains:
        if any(a.prefix for a in facts.arrays):
            if pos:
                c.fail("contains", pointer, "'contains' with prefixItems is not supported")
        elif least and not pos:
            node = intersect(node, _counted(c, items, part, least, None, loc, pos))
        elif least or most is not None:
            node = intersect(node, _counted(c, items, part, least, most, loc, pos))
    return node


def _counted(
    c: SchemaCompiler,
    items: list[Part],
    part: Part,
    least: int,
    most: int | None,
    loc: Location,
    pos: bool,
) -> Node:
    """Arrays of `items` with least..most of them matching `part`.

    Positive mode sorts items into matching ones and certainly-not-matching ones (an item
    that may or may not match is in neither, which only ever rejects); negative mode
    counts only matches, over any items.
    """
    matching = c.conj([*items, part], loc, pos)
    every = c.member(items, loc, pos)
    other = c.minus(every, part, loc) if pos else every
    sep_other = repeat(seq(c.item_sep, other), 0, None)

    def rest(lo: int, hi: int | None) -> Node:  # after the first item: lo..hi more matches
        return seq(sep_other, repeat(seq(c.item_sep, matching, sep_other), max(lo, 0), hi))

    first_other = seq(other, rest(least, most))
    first_match = seq(matching, rest(least - 1, None if most is None else most - 1))
    content = alt(
        first_other, first_match if most != 0 else NOTHING, EMPTY if least == 0 else NOTHING
    )
    return seq(OPEN_BRACKET, content, CLOSE_BRACKET)


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
        contained = [p.schema["contains"] for p in parts if "contains" in p.schema]
        if contained:  # items matching a `contains` are evaluated too
            schema = value.schema if isinstance(value, Part) else value
            value = Part({"anyOf": [schema, *contained]}, facts.parts[0].pointer, synthetic=True)
        out.append(ArrayPart([Part(True, "")] * width, value))
    return out


def _arrays_of(part: Part) -> list[ArrayPart]:
    schema = part.schema
    if not isinstance(schema, dict) or not any(k in schema for k in ("prefixItems", "items")):
        return []
    prefix = schema.get("prefixItems", [])
    items = schema.get("items")
    if isinstance(items, list):  # before 2020-12
        prefix, items = items, schema.get("additionalItems")
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
