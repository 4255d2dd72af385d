"""Cheap proofs that two schemas share no instance, so products can be skipped exactly.

`oneOf` subtracts every other option from each option (DFA products, recursion unrolled);
when two options can never hold at once (different types, different `const`/`enum` values,
objects whose required discriminator property takes different constant values or, as a
string, matches patterns no string matches together (`json_member_values`), or a member
one requires that the other, closed by `additionalProperties: false`, cannot have) the
subtraction removes nothing and is left out; when no option overlaps another, `oneOf` is
exactly `anyOf`. `not` of a schema that only says `type` is the complementary `type`.

A `Shape` over-approximates a conjunction's instances from its merged keywords (applicators
still pending only narrow them further), so "disjoint shapes" is a sound proof.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kor_cli.errors import GrammarError
from kor_cli.grammar import json_member_values as members
from kor_cli.grammar import json_memberwise as memberwise
from kor_cli.grammar.ast import Node, alt, difference
from kor_cli.grammar.json_canonical import canonical_key, value_type
from kor_cli.grammar.json_keywords import ANNOTATIONS, TYPES, Collector, Facts, Part

if TYPE_CHECKING:
    from kor_cli.grammar.json_location import Location
    from kor_cli.grammar.json_schema import SchemaCompiler


@dataclass(frozen=True)
class Shape:
    """Possible types; possible values (canonical keys; None: any); for objects, the names
    that must be present, the values a member may take when present (name -> keys) and
    the types and patterns its own schemas say (name -> `json_member_values.Member`)."""

    types: frozenset[str]
    values: frozenset[str] | None = None
    required: frozenset[str] = frozenset()
    tags: dict[str, frozenset[str]] = field(default_factory=dict)
    closed: frozenset[str] | None = None  # the only names an object may have (None: any)
    members: dict[str, members.Member] = field(default_factory=dict)

    def meet(self, other: Shape) -> Shape:
        """Instances of both."""
        values = other.values if self.values is None else self.values
        if self.values is not None and other.values is not None:
            values = self.values & other.values
        tags = dict(self.tags)
        for name, keys in other.tags.items():
            tags[name] = tags[name] & keys if name in tags else keys
        closed = other.closed if self.closed is None else self.closed
        if self.closed is not None and other.closed is not None:
            closed = self.closed & other.closed
        required = self.required | other.required
        said = dict(self.members)
        for name, member in other.members.items():
            said[name] = members.meet(said[name], member) if name in said else member
        return Shape(self.types & other.types, values, required, tags, closed, said)

    def join(self, other: Shape) -> Shape:
        """Instances of either (over-approximated)."""
        values = None
        if self.values is not None and other.values is not None:
            values = self.values | other.values
        tags = {n: k | other.tags[n] for n, k in self.tags.items() if n in other.tags}
        required = self.required & other.required
        closed = None
        if self.closed is not None and other.closed is not None:
            closed = self.closed | other.closed
        said = {n: members.join(m, other.members[n]) for n, m in self.members.items()
                if n in other.members}  # fmt: skip
        return Shape(self.types | other.types, values, required, tags, closed, said)


ANYTHING = Shape(TYPES)
NOTHING_SHAPE = Shape(frozenset(), frozenset())
MAX_NESTING = 4  # anyOf/oneOf levels looked into


def shape(collector: Collector, parts: list[Part], nesting: int = 0) -> Shape:
    """The shape of the conjunction of `parts` (ANYTHING where it cannot be told cheaply).
    Recursion is not unrolled here: the unbounded language's shape covers any unrolling."""
    key = tuple((id(p.schema), p.skip) for p in parts)
    found = collector.shapes.get(key)
    if found is not None:
        return found[0]
    bounded, collector.bounded = collector.bounded, False
    try:
        facts = collector.collect(parts)
    except GrammarError:
        facts = None
    finally:
        collector.bounded = bounded
    if facts is None:
        result = ANYTHING
    elif facts.false:
        result = NOTHING_SHAPE
    else:
        result = _of(facts, _applied(collector))
        for kind, index, value in facts.pending if nesting < MAX_NESTING else ():
            holder = facts.parts[index]
            if kind == "cases":  # lists of parts (json_conditions)
                options = [shape(collector, parts, nesting + 1) for parts in value[1]]
            elif kind in ("anyOf", "oneOf") and isinstance(value, list) and value:
                options = [shape(collector, [Part(s, holder.at(kind, k))], nesting + 1)
                           for k, s in enumerate(value)]  # fmt: skip
            else:
                continue
            if options:
                either = options[0]
                for other in options[1:]:
                    either = either.join(other)
                result = result.meet(either)
    collector.shapes[key] = (result, parts)
    return result


def _applied(collector: Collector) -> Callable[[dict[str, Any]], list[str]]:
    return lambda s: collector.resolver.draft_for(s).applied(s)


def _of(facts: Facts, applied: Callable[[dict[str, Any]], list[str]]) -> Shape:
    types, values = facts.types, None
    if facts.enums:
        allowed = [{canonical_key(v): value_type(v) for v in e} for e in facts.enums]
        keys = set(allowed[0]).intersection(*allowed[1:])
        values = frozenset(k for k in keys if allowed[0][k] in types)
        types = frozenset(allowed[0][k] for k in values)
    required = frozenset(n for o in facts.objects for n in o.required)
    tags: dict[str, frozenset[str]] = {}
    said: dict[str, members.Member] = {}
    for o in facts.objects:
        for name, part in o.props.items():
            known = _constants(part.schema)
            if known is not None:
                tags[name] = tags[name] & known if name in tags else known
            member = members.member(part.schema, applied)
            if member != members.ANY_MEMBER:
                said[name] = members.meet(said[name], member) if name in said else member
    closed = None
    for o in facts.objects:  # `additionalProperties: false` (without patterns) only
        if o.additional is False and not o.patterns:
            names = frozenset(o.props)
            closed = names if closed is None else closed & names
    return Shape(types, values, required, tags, closed, said)


def _constants(schema: Any) -> frozenset[str] | None:
    """Canonical keys of the values a property schema allows, if it lists them itself
    (`false`: none, the member is absent)."""

    if schema is False:
        return frozenset()
    if not isinstance(schema, dict):
        return None
    found: frozenset[str] | None = None
    if "const" in schema:
        found = frozenset({canonical_key(schema["const"])})
    if isinstance(schema.get("enum"), list):
        listed = frozenset(canonical_key(v) for v in schema["enum"])
        found = listed if found is None else found & listed
    return found


def disjoint(a: Shape, b: Shape, patterns: Callable[[str, str], bool] | None = None) -> bool:
    """True if no instance can have both shapes (`patterns(p, q)`: no string matches both,
    `json_member_values.PatternsApart`; None: patterns tell nothing apart)."""
    common = a.types & b.types
    if not common:
        return True
    if a.values is not None and b.values is not None and not a.values & b.values:
        return True
    if common <= {"object"}:
        if any(_apart(a.tags.get(n), b.tags.get(n)) for n in a.required | b.required):
            return True
        if patterns is not None and any(
            members.apart(a.members[n], b.members[n], patterns)
            for n in a.required | b.required
            if n in a.members and n in b.members
        ):
            return True
        return _excluded(a.required, b.closed) or _excluded(b.required, a.closed)
    return False


def _excluded(required: frozenset[str], closed: frozenset[str] | None) -> bool:
    """A required member is one the other side's closed object cannot have."""
    return closed is not None and not required <= closed


def _apart(mine: frozenset[str] | None, theirs: frozenset[str] | None) -> bool:
    """A member one side requires cannot take a value both sides allow (an empty set: the
    member is absent there)."""
    if mine is not None and theirs is not None:
        return not mine & theirs
    return mine == frozenset() or theirs == frozenset()


def rivals(
    collector: Collector,
    options: list[Part],
    base: Shape = ANYTHING,
    patterns: Callable[[str, str], bool] | None = None,
) -> list[set[int]]:
    """For each option, the other options it may share an instance with (within `base`,
    the shape of the conjunction around: a `type: object` there makes options without a
    `type` disjoint by their members, as the non-objects they all accept are not there)."""
    shapes = [base.meet(shape(collector, [p])) for p in options]
    return [
        {j for j, other in enumerate(shapes) if j != k and not disjoint(mine, other, patterns)}
        for k, mine in enumerate(shapes)
    ]


def one_of(
    c: SchemaCompiler,
    options: list[Part],
    branch: Callable[..., Node],
    loc: Location,
    pos: bool,
    facts: Facts,
) -> Node:
    """`oneOf`: each option minus the others it may overlap (none: it is `anyOf`)."""
    cases = closed_singles(c, options)
    if cases is not None:  # exclusive cases, exact: no product
        return alt(*(branch(*case) for case in cases))
    if (objects := _objects_apart(c, options, facts)) is not None:
        return alt(*(branch(objects, p) for p in options))
    overlaps = rivals(c.collector, options, _of(facts, _applied(c.collector)), c.patterns_apart)
    nodes = {k: branch(p) for k, p in enumerate(options) if not overlaps[k]}
    tied = [k for k in range(len(options)) if overlaps[k]]
    if tied and pos:  # rivals that fail member by member: products on member values only
        applied = lambda s: c.resolver.draft_for(s).applied(s)  # noqa: E731
        split = memberwise.cases(facts, options, overlaps, applied, c.defer.safe, c.same)
        for k, parts in split.items():
            nodes[k] = alt(*(branch(*p) for p in parts))
        tied = [k for k in tied if k not in split]
    if tied and not pos:  # over-approximate: subtract only what certainly fails
        unders = {k: c.under(options[k], loc) for k in tied}
        for k in tied:
            nodes[k] = difference(branch(options[k]), alt(*(unders[j] for j in overlaps[k])))
    elif tied:
        c.subtracted.append(("oneOf", options[0].pointer.rsplit("/", 2)[0]))
        needed = sorted(set().union(*(overlaps[k] for k in tied)))
        with c.exactly():
            kept = {k: c.settle(branch(options[k])) for k in tied}
            with c.subtracting(max(depth for _, depth in kept.values())):
                negs = {j: c.conj([options[j]], loc, False) for j in needed}
        for k in tied:
            nodes[k] = difference(kept[k][0], alt(*(negs[j] for j in overlaps[k])))
    return alt(*(nodes[k] for k in range(len(options))))


OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "patternProperties", "minProperties",
    "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames",
})  # fmt: skip


def _objects_apart(c: SchemaCompiler, options: list[Part], facts: Facts) -> Part | None:
    """A synthetic `type: object` part when the options share no object (their shapes
    under the conjunction's, made an object, are disjoint) and two or more of them say
    only object keywords: those pass every non-object, which so fails `oneOf`, and on
    objects `oneOf` is `anyOf` (compilerconfig: seven options told apart by `inputFile`
    patterns, no `type` anywhere). None otherwise."""
    if "object" not in facts.types or sum(_object_only(c, p.schema) for p in options) < 2:
        return None
    base = _of(facts, _applied(c.collector)).meet(Shape(frozenset({"object"})))
    if any(rivals(c.collector, options, base, c.patterns_apart)):
        return None
    return Part({"type": "object"}, options[0].pointer.rsplit("/", 1)[0], synthetic=True)


def _object_only(c: SchemaCompiler, schema: Any, depth: int = 0) -> bool:
    """True if `schema` passes every value that is not an object: `true`, or only object
    keywords and annotations (through `$ref`s, a few deep)."""
    if schema is True:
        return True
    if not isinstance(schema, dict) or depth > MAX_NESTING:
        return False
    keys = set(c.resolver.draft_for(schema).applied(schema)) - ANNOTATIONS
    if "$ref" in keys:
        target = c.factor.resolve(schema) if c.factor.resolve else None
        if target is None or not _object_only(c, target, depth + 1):
            return False
        keys.discard("$ref")
    return keys <= OBJECT_KEYWORDS


_SINGLE_KEYS = frozenset({"properties", "additionalProperties", "required", "type"})
NON_OBJECT = ["null", "boolean", "number", "string", "array"]


def closed_singles(c: SchemaCompiler, options: list[Part]) -> list[list[Part]] | None:
    """`oneOf` whose options are each a closed object of one member, a different one each
    (`{properties: {a_k: S_k}, additionalProperties: false}`, maybe `required: [a_k]`,
    `type: object`; traefik's middlewares, ~25 options), as exclusive cases, or None.

    An object with one member a_k passes option k alone (the others are closed to it): it
    is valid iff its value passes S_k. An object with two members passes none. The empty
    object passes the options that do not require their member, a non-object those that do
    not say `type`: valid iff exactly one does. So the cases are option k with a_k required,
    plus the empty object and the non-objects where exactly one option lets them through."""
    names: list[str] = []
    for part in options:
        schema = part.schema
        if not isinstance(schema, dict) or schema.get("additionalProperties", True) is not False:
            return None
        keys = set(c.resolver.draft_for(schema).applied(schema)) - ANNOTATIONS
        props, required = schema.get("properties"), schema.get("required", [])
        if not keys <= _SINGLE_KEYS or not isinstance(props, dict) or len(props) != 1:
            return None
        if schema.get("type", "object") not in ("object", ["object"]):
            return None
        (name,) = props
        if not isinstance(required, list) or not set(required) <= {name}:
            return None
        names.append(name)
    if len(options) < 2 or len(set(names)) != len(names):
        return None

    def made(schema: dict[str, Any]) -> Part:
        return Part(schema, options[0].pointer.rsplit("/", 1)[0], synthetic=True)

    pairs = zip(options, names, strict=True)
    cases = [[p, made({"type": "object", "required": [n]})] for p, n in pairs]
    if sum("required" not in p.schema or not p.schema["required"] for p in options) == 1:
        cases.append([made({"type": "object", "maxProperties": 0})])
    if sum("type" not in p.schema for p in options) == 1:
        cases.append([made({"type": NON_OBJECT})])
    return cases


_JSON_TYPES = {"null": "null", "boolean": "boolean", "object": "object", "array": "array",
               "string": "string"}  # fmt: skip


def complement_types(schema: Any) -> list[str] | None:
    """`type` names of exactly the values that fail `schema`, if it only says `type`
    (None otherwise, or when the complement has no `type` spelling)."""
    if not isinstance(schema, dict) or "type" not in schema:
        return None
    if any(k not in ANNOTATIONS and k != "type" for k in schema):
        return None
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not all(isinstance(n, str) for n in names):
        return None
    said = set()
    for n in names:
        said |= {"integer", "fraction"} if n == "number" else {n}
    if not said <= TYPES:
        return None
    rest = TYPES - said
    if "fraction" in rest and "integer" not in rest:
        return None  # "a number that is not an integer" has no `type`
    out = [_JSON_TYPES[t] for t in sorted(rest) if t in _JSON_TYPES]
    return out + (["number"] if "fraction" in rest else ["integer"] if "integer" in rest else [])
