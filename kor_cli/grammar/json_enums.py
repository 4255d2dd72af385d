"""`enum`/`const` for the JSON Schema compiler: the listed values the rest of a
conjunction admits, as canonical texts (every spelling in negative mode)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kor_cli.errors import GrammarError
from kor_cli.grammar import json_scalars as scalars
from kor_cli.grammar.ast import Node, alt, intersect, literal
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_canonical import canonical_key, value_type
from kor_cli.grammar.json_keywords import Facts
from kor_cli.grammar.json_location import Location, reorder
from kor_cli.grammar.json_values import dumps, loose_container

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

SCALAR_TYPES = frozenset({"null", "boolean", "integer", "fraction", "string"})


def enum(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    """The values of `enum`/`const` that the rest of the conjunction admits, as texts
    (negative mode: every spelling, any order of unordered members)."""
    keys = [{canonical_key(v) for v in values} for values in facts.enums[1:]]
    texts: list[Node] = []
    plain = True  # every text one literal
    kinds: set[str] = set()  # their types
    spelled: list[bytes] = []  # the literals' texts
    for value in facts.enums[0]:
        if value_type(value) not in facts.types:
            continue
        if not all(canonical_key(value) in k for k in keys):
            continue
        if not pos and _unordered(value, loc):  # any container of its kind
            brackets = "{}" if isinstance(value, dict) else "[]"
            texts.append(loose_container(brackets, max(c.loose_depth, 1)))
            plain = False
            continue
        if not pos and scalars.has_number(value):  # every spelling of its numbers
            texts.append(scalars.spelled(c, reorder(value, loc)))
            plain = False
            continue
        spelled.append(dumps(reorder(value, loc), c.whitespace).encode())
        texts.append(literal(spelled[-1]))
        kinds.add(value_type(value))
    node = alt(*texts)
    if facts.scalar_constraints():
        scalar = plain and kinds <= SCALAR_TYPES
        types = frozenset(kinds) if scalar else facts.types  # a scalar literal: its type's
        with c.exactly():
            constraint = c.union(facts, loc, pos, types)
        if scalar:
            return _within(c, texts, spelled, constraint)
        node = intersect(node, constraint)
    return node


def _within(c: SchemaCompiler, texts: list[Node], spelled: list[bytes], constraint: Node) -> Node:
    """The literals `texts` (spelled `spelled`, scalars) that `constraint` accepts,
    decided now on its DFA (built once per distinct constraint, `dfa_cache`): a `const`
    beside a large `pattern` in each of utcm-monitor's 270 `if` cases was a product
    each, each rebuilding the pattern's DFA when the rule was built. Where the
    constraint goes past a limit the product stays (refused when reached, as before)."""
    try:
        dfa = compile_ast(constraint, c.max_states)
    except GrammarError:
        return intersect(alt(*texts), constraint)
    return alt(*(t for t, b in zip(texts, spelled, strict=True) if dfa.accepts(b)))


def _unordered(value: Any, loc: Location) -> bool:
    """True if some object in `value` has two keys the location does not order."""
    if isinstance(value, list):
        return any(_unordered(v, loc.item()) for v in value)
    if not isinstance(value, dict):
        return False
    if sum(k not in loc.names for k in value) >= 2:
        return True
    return any(_unordered(v, loc.child(k if k in loc.names else None)) for k, v in value.items())
