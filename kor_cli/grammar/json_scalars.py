"""Numbers for the JSON Schema compiler: bounds, steps and the spellings of each mode.

Positive mode accepts the canonical text plus trailing fraction zeros for `number`
(`4.0`), and exponent forms (bounds exact on them) where no step applies; `integer` is
digits only.
Negative mode (what `not`/`oneOf`/`if` subtract) includes every spelling of its values, so
no spelling of a value survives a subtraction that should remove it (see `json_numbers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, alt, intersect, literal, seq
from kor_cli.grammar.json_keywords import Facts
from kor_cli.grammar.json_numbers import (
    FRACTIONAL,
    NUMBER,
    any_number,
    int_range,
    integer_bounds,
    multiple_of,
    number_range,
    scientific_range,
    settled_spellings,
    value_spellings,
)
from kor_cli.grammar.json_values import dumps

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler


def number(c: SchemaCompiler, facts: Facts, pos: bool, types: frozenset[str]) -> Node:
    """Numbers within the conjunction's bounds and steps, in the spellings of this mode."""
    lower = max(facts.lower, default=None)
    upper = min(facts.upper, key=lambda b: (b[0], not b[1]), default=None)
    if "fraction" not in types:
        node = int_range(*integer_bounds(lower, upper))
    else:
        node = number_range(lower, upper) if lower or upper else NUMBER
        if "integer" not in types:
            node = intersect(node, FRACTIONAL)
    for step, pointer in facts.multiples:
        try:
            node = intersect(node, multiple_of(step, c.max_states))
        except GrammarError as error:
            if pos:
                c.fail("multipleOf", pointer, error.message)
    # negative mode: every exponent form; `integer` stays digits only
    scientific = not pos or (not facts.lower and not facts.upper and not facts.multiples)
    scientific &= not pos or {"integer", "fraction"} <= types
    if node is NUMBER and scientific:
        node = any_number()  # every number: one automaton per process
    elif "fraction" in types or not pos:
        node = settled_spellings(node, scientific)
    if pos and not scientific and not facts.multiples and {"integer", "fraction"} <= types:
        node = alt(node, scientific_range(lower, upper))  # bounds are exact on exponents too
    return node


def spelled(c: SchemaCompiler, value: Any) -> Node:
    """`value`'s text with every spelling of the numbers in it (negative mode)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, dict, list)):
        return literal(dumps(value, c.whitespace))
    if isinstance(value, (int, float)):
        return value_spellings(value)
    if isinstance(value, list):
        return seq(literal("["), *_joined(c, [spelled(c, v) for v in value]), literal("]"))
    members = [seq(c.name(k), c.key_sep, spelled(c, v)) for k, v in value.items()]
    return seq(literal("{"), *_joined(c, members), literal("}"))


def _joined(c: SchemaCompiler, nodes: list[Node]) -> list[Node]:
    out: list[Node] = []
    for node in nodes:
        out += [c.item_sep, node] if out else [node]
    return out


def has_number(value: Any) -> bool:
    """True if `value` is or holds a number."""
    if isinstance(value, dict):
        return any(has_number(v) for v in value.values())
    if isinstance(value, list):
        return any(has_number(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)
