"""Collect the keywords of a conjunction of schemas into `Facts`.

A conjunction is a list of `Part`s (schema objects that must all hold at one instance
location: the schema, its `$ref` targets, its `allOf` branches, the chosen `anyOf`
alternative, ...). `collect` walks them once, merging scalar keywords (type sets, bounds,
lengths, patterns, enums), keeping per-part object and array keywords, and listing the
applicators (`anyOf`, `oneOf`, `not`, `if`) that the compiler distributes afterwards.

Keywords that cannot be enforced are recorded as refusals for the types they apply to;
the compiler raises them only when such a type is still possible (so `uniqueItems` on a
string schema is harmless). Keywords no supported draft defines are annotations and
are skipped (see `json_drafts`; `ignored_keywords` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.json_conditions import (
    group_conditions,
    group_dependencies,
    presence_cases,
    presence_if,
)
from kor_cli.grammar.json_drafts import FORMATS
from kor_cli.grammar.json_refs import Resolver, escape_pointer
from kor_cli.grammar.limits import current, too_many

TYPES = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
_TYPE_NAMES = {
    "null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
    "string": {"string"}, "integer": {"integer"}, "number": {"integer", "fraction"},
}  # fmt: skip
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "readOnly",
    "writeOnly", "deprecated", "$anchor", "$dynamicAnchor", "$defs", "definitions",
    "$vocabulary", "contentEncoding", "contentMediaType", "contentSchema", "discriminator",
    "minContains", "maxContains", "then", "else", "id", "$recursiveAnchor", "additionalItems",
})  # fmt: skip
_ARRAY_KEYS = ("prefixItems", "items")  # additionalItems is read with array-form items
_OBJECT_KEYS = ("properties", "required", "additionalProperties", "patternProperties")
_UNSUPPORTED = {
    "$dynamicRef": (TYPES, "'$dynamicRef' is not supported"),
    "$recursiveRef": (TYPES, "'$recursiveRef' is not supported (draft 2019-09)"),
}

Bound = tuple[Decimal, bool]
_EXPANDED = frozenset({"$ref", "allOf"})  # keywords whose subschemas become parts at once


@dataclass(frozen=True)
class Part:
    """One schema of a conjunction; `skip` lists keywords already handled elsewhere."""

    schema: Any
    pointer: str
    skip: frozenset[str] = frozenset()
    ref: bool = False  # reached through $ref (counts towards recursion depth)
    parent: int = 0  # id of the schema whose in-place applicator brought this part in
    synthetic: bool = False  # made up by the compiler: never closes an object by default

    def at(self, *tokens: str | int) -> str:
        return self.pointer + "".join("/" + escape_pointer(str(t)) for t in tokens)


@dataclass
class ArrayPart:
    """`prefixItems`/`items` of one part (items: None absent, False, or a schema part)."""

    prefix: list[Part]
    items: Part | bool | None


@dataclass
class ObjectPart:
    """`properties`/`required`/`additionalProperties` of one part."""

    props: dict[str, Part]
    required: list[str]
    additional: Part | bool | None
    declares: bool = True  # its names close the object by default (see json_objects)
    patterns: dict[str, Part] = field(default_factory=dict)  # patternProperties
    pointer: str = ""


@dataclass
class Facts:
    """Merged keywords of a conjunction."""

    parts: list[Part] = field(default_factory=list)
    false: bool = False
    types: frozenset[str] = TYPES
    enums: list[list[Any]] = field(default_factory=list)
    lower: list[Bound] = field(default_factory=list)
    upper: list[Bound] = field(default_factory=list)
    multiples: list[tuple[Decimal, str]] = field(default_factory=list)
    min_length: int = 0
    max_length: int | None = None
    patterns: list[tuple[str, str]] = field(default_factory=list)
    formats: list[tuple[str, str]] = field(default_factory=list)
    arrays: list[ArrayPart] = field(default_factory=list)
    min_items: int = 0
    max_items: int | None = None
    unique: list[str] = field(default_factory=list)
    contains: list[tuple[Part, int, int | None, str]] = field(default_factory=list)
    unevaluated_items: list[tuple[int, Part | bool]] = field(default_factory=list)
    objects: list[ObjectPart] = field(default_factory=list)
    min_props: int = 0
    max_props: int | None = None
    property_names: list[Part] = field(default_factory=list)
    unevaluated_props: list[tuple[int, Part | bool]] = field(default_factory=list)
    refusals: list[tuple[frozenset[str], str, str, str]] = field(default_factory=list)
    pending: list[tuple[str, int, Any]] = field(default_factory=list)
    refs: list[int] = field(default_factory=list)

    def subtree(self, owner: int) -> list[Part]:
        """Parts brought in by schema `owner` (itself included) through in-place applicators."""
        parent = {id(p.schema): p.parent for p in self.parts}
        out = []
        for part in self.parts:
            node = id(part.schema)
            while node and node != owner:
                node = parent.get(node, 0)
            if node:
                out.append(part)
        return out

    def scalar_constraints(self) -> bool:
        """True if anything but `type` and `enum` constrains the values."""
        return bool(
            self.lower or self.upper or self.multiples or self.min_length
            or self.max_length is not None or self.patterns or self.formats or self.arrays
            or self.min_items or self.max_items is not None or self.contains
            or self.objects or self.min_props
            or self.max_props is not None or self.property_names or self.unevaluated_items
            or self.unevaluated_props
        )  # fmt: skip


def _number(value: Any, keyword: str, pointer: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GrammarError(f"'{keyword}' must be a number", keyword=keyword, pointer=pointer)
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _count(value: Any, keyword: str, pointer: str) -> int:
    number = _number(value, keyword, pointer)
    if number < 0 or number != int(number):
        raise GrammarError(f"'{keyword}' must be a non-negative integer", keyword, pointer)
    return int(number)


def _schema_list(value: Any, keyword: str, pointer: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise GrammarError(f"'{keyword}' must be a non-empty array", keyword, pointer)
    return value


class Collector:
    """Walks a conjunction into `Facts` (see module docstring)."""

    def __init__(self, resolver: Resolver, active_refs: dict[int, int], max_depth: int) -> None:
        self.resolver = resolver
        self.active = active_refs
        self.max_depth = max_depth
        self.bounded = False  # unroll (cut at max_depth) only under products, see json_rules
        self.cut_pointers: list[str] = []
        self.shapes: dict[Any, Any] = {}  # json_disjoint's cache

    def collect(self, parts: list[Part]) -> Facts | None:
        """Facts of `parts`, or None when a recursive $ref is cut off at this depth (only
        while `bounded`: elsewhere recursion becomes rules)."""
        facts = Facts()
        queue = list(parts)
        seen: dict[int, frozenset[str]] = {}
        while queue:
            part = queue.pop(0)
            schema = part.schema
            if schema is True:
                continue
            if schema is False:
                facts.false = True
                continue
            if not isinstance(schema, dict):
                message = "a schema must be an object or a boolean"
                raise GrammarError(message, "schema", part.pointer)
            skip = part.skip | _EXPANDED
            if id(schema) in seen:
                if seen[id(schema)] != skip:
                    raise GrammarError("reference cycle that never descends", "$ref", part.pointer)
                continue
            seen[id(schema)] = skip
            if part.ref:
                if self.bounded and self.active.get(id(schema), 0) >= self.max_depth:
                    self.cut_pointers.append(part.pointer)
                    return None
                facts.refs.append(id(schema))
            facts.parts.append(
                Part(schema, part.pointer, skip, part.ref, part.parent, part.synthetic)
            )
            self._keywords(facts, part, queue, len(facts.parts) - 1)
        if not (facts.unevaluated_props or facts.unevaluated_items):  # no annotations read
            facts.pending = [p for p in facts.pending if not self._vacuous(p)]
            group_conditions(facts)
            group_dependencies(facts)
        return facts

    def _vacuous(self, pending: tuple[str, int, Any]) -> bool:
        """An `anyOf` with an always-true option (`"anyOf": [{"oneOf": [...]}, {}]`)."""
        return pending[0] == "anyOf" and any(_holds_always(self, s) for s in pending[2])

    def _keywords(self, facts: Facts, part: Part, queue: list[Part], index: int) -> None:
        schema: dict[str, Any] = part.schema
        keys = self.resolver.draft_for(schema).applied(schema)
        for key in keys:
            if key in part.skip or key in ANNOTATIONS:
                continue
            handler = _HANDLERS.get(key)
            if handler is not None:
                handler(self, facts, part, schema[key], queue, index)
            elif key in _UNSUPPORTED:
                types, message = _UNSUPPORTED[key]
                facts.refusals.append((frozenset(types), key, part.pointer, message))
        if any(k in keys for k in _ARRAY_KEYS):
            facts.arrays.append(_array_part(part))
        if any(k in keys for k in _OBJECT_KEYS):
            facts.objects.append(_object_part(part))
        if "if" in keys and "if" not in part.skip:
            cases = presence_if(facts.parts[index])
            if cases is not None:  # only which members are present: no product
                facts.pending.append(("cases", index, ("if", cases)))
            else:
                facts.pending.append(("if", index, schema["if"]))

    def ref(self, facts: Facts, part: Part, value: Any, queue: list[Part], index: int) -> None:
        if not isinstance(value, str):
            raise GrammarError("'$ref' must be a string", "$ref", part.pointer)
        target, pointer = self.resolver.resolve(value, part.schema, part.pointer)
        queue.append(Part(target, pointer, ref=True, parent=id(part.schema)))


def _array_part(part: Part) -> ArrayPart:
    schema = part.schema
    prefix = schema.get("prefixItems", [])
    if not isinstance(prefix, list):
        raise GrammarError("'prefixItems' must be an array", "prefixItems", part.pointer)
    items, where = schema.get("items"), part.at("items")
    prefixes = [Part(s, part.at("prefixItems", i)) for i, s in enumerate(prefix)]
    if isinstance(items, list):  # before 2020-12: items as prefixItems, additionalItems as items
        if prefix:
            raise GrammarError("array-form 'items' beside 'prefixItems'", "items", part.pointer)
        prefixes = [Part(s, part.at("items", i)) for i, s in enumerate(items)]
        items, where = schema.get("additionalItems"), part.at("additionalItems")
    item_part = items if items is None or items is False else Part(items, where)
    return ArrayPart(prefixes, item_part)


def _object_part(part: Part) -> ObjectPart:
    schema = part.schema
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict):
        raise GrammarError("'properties' must be an object", "properties", part.pointer)
    limit = current().max_properties
    too_many("properties", len(props), limit, "max_properties", "properties", part.pointer)
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise GrammarError("'required' must be an array of strings", "required", part.pointer)
    patterns = schema.get("patternProperties", {})
    if not isinstance(patterns, dict):
        message = "'patternProperties' must be an object"
        raise GrammarError(message, "patternProperties", part.pointer)
    additional = schema.get("additionalProperties")
    if additional is not None and additional is not False:
        additional = Part(additional, part.at("additionalProperties"))
    return ObjectPart(
        {name: Part(sub, part.at("properties", name)) for name, sub in props.items()},
        list(dict.fromkeys(required)),
        additional,
        declares=not part.synthetic,
        patterns={p: Part(s, part.at("patternProperties", p)) for p, s in patterns.items()},
        pointer=part.pointer,
    )


def _type(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(n in _TYPE_NAMES for n in names):
        raise GrammarError(f"invalid type {value!r}", "type", part.pointer)
    facts.types &= frozenset(t for n in names for t in _TYPE_NAMES[n])


def _enum(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    if not isinstance(value, list):
        raise GrammarError("'enum' must be an array", "enum", part.pointer)
    too_many("enum values", len(value), current().max_enum, "max_enum", "enum", part.pointer)
    facts.enums.append(value)


def _const(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    facts.enums.append([value])


def _bound(keyword: str):  # type: ignore[no-untyped-def]
    """minimum/maximum/exclusive*; a boolean exclusive* (draft-04) modifies its sibling."""
    lower = "Min" in keyword or keyword == "minimum"
    sibling = "exclusiveMinimum" if lower else "exclusiveMaximum"

    def handler(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
        if isinstance(value, bool) and keyword.startswith("exclusive"):
            return  # read by the sibling minimum/maximum
        number = _number(value, keyword, part.pointer)
        exclusive = keyword.startswith("exclusive") or part.schema.get(sibling) is True
        (facts.lower if lower else facts.upper).append((number, exclusive))

    return handler


def _multiple(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    step = _number(value, "multipleOf", part.pointer)
    if step <= 0:
        raise GrammarError("'multipleOf' must be positive", "multipleOf", part.pointer)
    facts.multiples.append((step, part.pointer))


def _set_count(attr: str, keyword: str, take_max: bool):  # type: ignore[no-untyped-def]
    def handler(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
        count = _count(value, keyword, part.pointer)
        old = getattr(facts, attr)
        if take_max:
            setattr(facts, attr, max(old, count))
        else:
            setattr(facts, attr, count if old is None else min(old, count))

    return handler


def _pattern(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    if not isinstance(value, str):
        raise GrammarError("'pattern' must be a string", "pattern", part.pointer)
    facts.patterns.append((value, part.pointer))


def _format(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    if not isinstance(value, str):
        raise GrammarError("'format' must be a string", "format", part.pointer)
    if value in FORMATS:  # any other format is only an annotation
        facts.formats.append((value, part.pointer))


def _unique(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    if value is True:
        facts.unique.append(part.pointer)


def _contains(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    schema = part.schema
    least = _count(schema.get("minContains", 1), "minContains", part.pointer)
    most = schema.get("maxContains")
    most = None if most is None else _count(most, "maxContains", part.pointer)
    facts.contains.append((Part(value, part.at("contains")), least, most, part.pointer))


def _names(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    facts.property_names.append(Part(value, part.at("propertyNames")))


def _dependent(keyword: str):  # type: ignore[no-untyped-def]
    """dependentRequired/dependentSchemas/dependencies: per trigger, the cases "absent" and
    "present"."""

    def handler(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
        if not isinstance(value, dict):
            raise GrammarError(f"'{keyword}' must be an object", keyword, part.pointer)
        for trigger, then in value.items():
            tag = f"{keyword}:{trigger}"
            if tag in part.skip:
                continue
            where = part.at(keyword, trigger)
            names = keyword == "dependentRequired" or (
                keyword == "dependencies" and isinstance(then, list)
            )  # draft-07 `dependencies` holds both forms
            if names:
                if not isinstance(then, list) or not all(isinstance(n, str) for n in then):
                    raise GrammarError("names must be an array of strings", keyword, where)
                then = {"required": then}
            absent = [Part({"properties": {trigger: False}}, where, synthetic=True)]
            present = [
                Part({"required": [trigger]}, where, synthetic=True),
                Part(then, where, parent=id(part.schema), synthetic=names),
            ]
            facts.pending.append(("cases", i, (tag, [absent, present])))

    return handler


def _unevaluated(attr: str, keyword: str):  # type: ignore[no-untyped-def]
    def handler(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
        target = value if isinstance(value, bool) else Part(value, part.at(keyword))
        getattr(facts, attr).append((id(part.schema), target))

    return handler


def _all_of(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    branches = _schema_list(value, "allOf", part.pointer)
    owner = id(part.schema)
    q.extend(Part(s, part.at("allOf", k), parent=owner) for k, s in enumerate(branches))


def _pending(keyword: str):  # type: ignore[no-untyped-def]
    def handler(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
        if keyword != "not":
            _schema_list(value, keyword, part.pointer)
        cases = presence_cases(keyword, value, part)
        if cases is not None:  # only which members are present: no product
            facts.pending.append(("cases", i, (keyword, cases)))
            return
        facts.pending.append((keyword, i, value))

    return handler


def _holds_always(c: Collector, schema: Any) -> bool:
    """`true`, or a schema of annotations only."""
    if schema is True:
        return True
    keys = c.resolver.draft_for(schema).applied(schema) if isinstance(schema, dict) else [0]
    return all(k in ANNOTATIONS for k in keys)


def _ignore(c: Collector, facts: Facts, part: Part, value: Any, q: list[Part], i: int) -> None:
    """`if` is queued by `_keywords` (with then/else, which are read from there)."""


_HANDLERS = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound("minimum"),
    "exclusiveMinimum": _bound("exclusiveMinimum"),
    "maximum": _bound("maximum"),
    "exclusiveMaximum": _bound("exclusiveMaximum"),
    "multipleOf": _multiple,
    "minLength": _set_count("min_length", "minLength", True),
    "maxLength": _set_count("max_length", "maxLength", False),
    "minItems": _set_count("min_items", "minItems", True),
    "maxItems": _set_count("max_items", "maxItems", False),
    "minProperties": _set_count("min_props", "minProperties", True),
    "maxProperties": _set_count("max_props", "maxProperties", False),
    "pattern": _pattern,
    "format": _format,
    "uniqueItems": _unique,
    "propertyNames": _names,
    "contains": _contains,
    "dependentRequired": _dependent("dependentRequired"),
    "dependentSchemas": _dependent("dependentSchemas"),
    "dependencies": _dependent("dependencies"),
    "unevaluatedItems": _unevaluated("unevaluated_items", "unevaluatedItems"),
    "unevaluatedProperties": _unevaluated("unevaluated_props", "unevaluatedProperties"),
    "$ref": Collector.ref,
    "allOf": _all_of,
    "anyOf": _pending("anyOf"),
    "oneOf": _pending("oneOf"),
    "not": _pending("not"),
    "if": _ignore,
}
