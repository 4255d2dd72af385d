"""The types a conjunction leaves unconstrained, as one call to a shared rule.

Most small schemas constrain one type and leave the others free: `{"maxLength": 2}` is
any null, boolean, number, array or object, or a string of at most 2 characters. Spelled
out in the conjunction's own rule, the free types (every number spelling, any string, the
shells of arrays and objects) are most of its DFA, rebuilt for every schema: about 60
states. Here, outside products, they are a call to a rule whose body is those types'
values (containers calling the shared "any value" rule, as `json_containers.any_value`
one level deep; objects only at a name-free location, arrays only where their items
are). That rule does not depend on the schema, so its DFA comes from the process-wide memo
(`shared_rules`, keyed by the set of types, every compiler option, the "any value" rule's
id, its own id and the state limit), and the conjunction's rule keeps only the
constrained types.

A call's DFA view (`Grammar.dfa`) is those types' bounded values, as the inline branches
were (`max_any_depth` containers deep). Only sets of at least `MIN_GROUPS` groups, one
of them numbers or containers (`BIG`), are shared: for null, boolean and string alone (as
in a JSON-RPC value whose arrays and objects are constrained) the call would cost more at
run time (a push and pop per scalar) than the few states it saves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kor_cli.grammar.ast import Node, alt
from kor_cli.grammar.json_containers import (
    ANY_RULE,
    any_array,
    any_call,
    any_object,
    memo_key,
    name_free,
)
from kor_cli.grammar.json_keywords import Facts
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.json_numbers import any_number
from kor_cli.grammar.json_rule_walk import Call
from kor_cli.grammar.json_values import BOOLEAN, NULL, string_node

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

MIN_GROUPS = 3  # null, boolean, number, string, array, object: the fewest worth a rule
GROUPS = ("null", "boolean", "number", "string", "array", "object")
BIG = {"number", "array", "object"}  # most of the states: one of them makes a call pay


def free_groups(facts: Facts, types: frozenset[str]) -> tuple[str, ...]:
    """The groups of `types` whose values the conjunction does not constrain (`number`:
    integers and fractions both, without bounds or steps), in `GROUPS` order."""
    free = {"null", "boolean"} & types
    if {"integer", "fraction"} <= types and not (facts.lower or facts.upper or facts.multiples):
        free.add("number")
    if "string" in types and not (
        facts.min_length or facts.max_length is not None or facts.patterns or facts.formats
    ):
        free.add("string")
    if "array" in types and not (
        facts.arrays or facts.min_items or facts.max_items is not None or facts.unique
        or facts.contains or facts.unevaluated_items
    ):  # fmt: skip
        free.add("array")
    if "object" in types and not (
        facts.objects or facts.min_props or facts.max_props is not None
        or facts.property_names or facts.unevaluated_props
    ):  # fmt: skip
        free.add("object")
    return tuple(g for g in GROUPS if g in free)


def shared_types(
    c: SchemaCompiler, facts: Facts, loc: Location, pos: bool, types: frozenset[str]
) -> tuple[Node, frozenset[str]] | None:
    """(a call to the shared rule of the free types, the types left to spell), or None
    when they are not shared here (see the module docstring)."""
    if not pos or c.exact:
        return None
    groups = free_groups(facts, types)
    if not _worth_a_rule(groups):  # (the name-free test below only drops groups)
        return None
    if not name_free(loc):  # objects here put names first; items may be name-free
        named = {"object"} if name_free(loc.item()) else {"object", "array"}
        groups = tuple(g for g in groups if g not in named)
    if not _worth_a_rule(groups):
        return None
    shared = c.space.at([])
    any_rule = any_call(c, shared, 0)
    assert isinstance(any_rule, Call)
    key = (*memo_key(c), "types", groups, any_rule.rule)
    name = f"{ANY_RULE[:-1]}: {', '.join(groups)})"
    rule = c.rules.recursive(key, name, lambda: values(c, shared, groups, 0), key)

    def view() -> Node:
        with c.exactly():
            return values(c, loc, groups, c.max_any_depth - 1)

    taken = {"number": {"integer", "fraction"}}
    left = types - {t for g in groups for t in taken.get(g, {g})}
    return Call(rule, view), left


def _worth_a_rule(groups: tuple[str, ...]) -> bool:
    return len(groups) >= MIN_GROUPS and bool(BIG & set(groups))


def values(c: SchemaCompiler, loc: Location, groups: tuple[str, ...], depth: int) -> Node:
    """Any value of `groups`, containers holding values `depth` deep (calls to the "any
    value" rule outside products)."""
    spelled = {
        "null": lambda: NULL,
        "boolean": lambda: BOOLEAN,
        "number": any_number,
        "string": string_node,
        "array": lambda: any_array(c, loc, depth),
        "object": lambda: any_object(c, loc, depth),
    }
    return alt(*(spelled[g]() for g in groups))
