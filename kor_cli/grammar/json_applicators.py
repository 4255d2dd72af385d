"""The applicators of a conjunction (`anyOf`, `oneOf`, `not`, `if`/`then`/`else`, exclusive
cases) resolved one at a time, by cases, for `json_schema.SchemaCompiler`.

`anyOf` is a union of the conjunction with each branch; `oneOf` goes to `json_disjoint`
(or `json_factor` when one member's product says it all). In positive mode `not` and
`if`/`else` are exact subtractions on canonical text: the kept side, compiled to a DFA,
minus an over-approximation (negative mode) of the subtracted schema. In negative mode
only what certainly fails is subtracted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kor_cli.grammar.ast import Node, alt, difference
from kor_cli.grammar.json_disjoint import complement_types, one_of
from kor_cli.grammar.json_keywords import Facts, Part
from kor_cli.grammar.json_location import Location

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler


def distribute(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    """Resolve the first pending applicator (anyOf, oneOf, not, if) of `facts` by cases."""
    kind, index, value = facts.pending[0]
    base = [replace(p, ref=False) for p in facts.parts]  # their refs are counted already
    holder = base[index]
    tag, cases = value if kind == "cases" else (kind, [])
    base[index] = replace(holder, skip=holder.skip | {tag})
    owner = id(holder.schema)

    def sub(schema: Any, *where: str | int) -> Part:
        return Part(schema, holder.at(*where), parent=owner)

    def branch(*extra: Part) -> Node:
        return c.conj(base + list(extra), loc, pos)

    if kind == "cases":  # exclusive cases (e.g. a dependency's trigger absent / present)
        return alt(*(branch(*parts) for parts in cases))
    if kind == "not" and (types := complement_types(value)) is not None:
        return branch(Part({"type": types}, holder.at("not"), parent=owner, synthetic=True))
    if kind == "oneOf":
        if (factored := c.factor.factored(value)) is not None:  # one member's product
            return branch(Part(factored, holder.at(kind), parent=owner))
        options = [sub(s, kind, k) for k, s in enumerate(value)]
        return one_of(c, options, branch, loc, pos, facts)
    if not pos:  # over-approximate: subtract only what certainly fails
        if kind == "not":
            return difference(branch(), c.under(Part(value, holder.at("not")), loc))
        if kind == "if":
            cond, then, other = _conditional(holder, sub)
            return alt(branch(*then), difference(branch(*other), c.under(cond, loc)))
        return alt(*(branch(sub(s, kind, k)) for k, s in enumerate(value)))
    settled = _settled(facts)
    if kind == "if" and (fails := c.factor.failed_if(holder.schema, settled)) is not None:
        cond, then, other = _conditional(holder, sub)  # `else`: a product on one member
        failed = Part(fails, holder.at("if"), parent=owner, synthetic=True)
        return alt(branch(cond, *then), branch(*other, failed))
    if kind == "if" and (sides := c.factor.negated_if(holder.schema, settled)) is not None:
        _, then, other = _conditional(holder, sub)  # `if: {not: T}`, T on one member
        holds, fails = (Part(s, holder.at("if"), parent=owner, synthetic=True) for s in sides)
        return alt(branch(holds, *then), branch(*other, fails))
    if kind in ("not", "if"):
        c.subtracted.append((kind, holder.pointer))
    if kind == "not":
        with c.exactly():
            return c.minus(branch(), Part(value, holder.at("not")), loc)
    if kind == "if":
        cond, then, other = _conditional(holder, sub)
        chosen = branch(cond, *then)
        with c.exactly():
            return alt(chosen, c.minus(branch(*other), cond, loc))
    return alt(*(branch(sub(s, kind, k)) for k, s in enumerate(value)))  # anyOf


def _settled(facts: Facts) -> Callable[[str], bool]:
    """Whether the conjunction decides if a member may be present whatever made-up parts
    say (it declares the member, or an `additionalProperties: false` closes the object)."""
    names = {n for o in facts.objects for n in [*o.props, *o.required]}
    closed = any(o.additional is False for o in facts.objects)
    return lambda name: closed or name in names


def _conditional(holder: Part, sub: Any) -> tuple[Part, list[Part], list[Part]]:
    """The `if`, `then` and `else` parts of `holder` (then/else lists may be empty)."""
    schema = holder.schema
    then = [sub(schema["then"], "then")] if "then" in schema else []
    other = [sub(schema["else"], "else")] if "else" in schema else []
    return sub(schema["if"], "if"), then, other
