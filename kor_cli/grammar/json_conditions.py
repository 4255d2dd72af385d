"""`if`s that test one member's value, resolved together by cases of that value.

Real-world schemas select an object's variant with a list of conditionals on one
discriminator member:

    "allOf": [{"if": {"properties": {"type": {"const": "a"}}, "required": ["type"]},
               "then": {...}}, {"if": {"properties": {"type": {"const": "b"}}}, ...}, ...]

Resolving each `if` on its own costs two cases (and a DFA product) per conditional, 2^n
for n of them. Their conditions only ask which value the member has, so the instance
falls into one of a few exclusive cases, in each of which every condition is decided:

- not an object (`properties`/`required` hold vacuously; a condition saying
  `"type": "object"` fails);
- an object without the member (a condition that requires it fails, the others hold);
- an object whose member is one of the values some condition lists (one case a value);
- an object whose member is none of them (every condition fails).

Each case conjoins the `then` of the conditions that hold and the `else` of the others:
`len(values) + 3` cases, exact, and no product but the last case's `not` `enum` on the
member's value.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from kor_cli.grammar.json_canonical import canonical_key, value_type

if TYPE_CHECKING:
    from kor_cli.grammar.json_keywords import Facts, Part

NON_OBJECT = ["null", "boolean", "number", "string", "array"]
_SKIPPED = frozenset({"title", "description", "$comment", "examples", "default"})


@dataclass
class _Test:
    """One conditional: its holder (index in `facts.parts`), the values the member must
    take (canonical key -> value), whether it requires the member / an object."""

    index: int
    values: dict[str, Any]
    requires: bool
    typed: bool


def group_conditions(facts: Facts) -> None:
    """Replace pending `if`s that test the same one member (two or more) by its cases
    (not beside `unevaluated*`: a successful `if` evaluates members, the caller checks)."""
    by_name: dict[str, list[tuple[int, _Test]]] = {}
    for n, (kind, index, value) in enumerate(facts.pending):
        found = _test(value, index) if kind == "if" else None
        if found is not None:
            by_name.setdefault(found[0], []).append((n, found[1]))
    for name, tests in by_name.items():
        if len(tests) < 2:
            continue
        cases = _cases(facts, name, [t for _, t in tests])
        dropped = {n for n, _ in tests}
        facts.pending = [p for n, p in enumerate(facts.pending) if n not in dropped]
        for _, test in tests:
            part = facts.parts[test.index]
            facts.parts[test.index] = replace(part, skip=part.skip | {"if"})
        facts.pending.append(("cases", tests[0][1].index, (f"if:{name}", cases)))


def group_dependencies(facts: Facts) -> None:
    """Replace pending dependencies (`dependencies`/`dependentSchemas`, two or more) whose
    schemas only ask for one member's value by cases of that value, as `group_conditions`
    does for `if`s: a trigger whose condition fails in a case is absent there. n such
    dependencies cost `len(values) + 3` cases instead of 2^n (mongodb-atlas-search-index's
    18 dependencies on `type`)."""
    by_name: dict[str, list[tuple[int, str, str, _Test]]] = {}
    for n, (kind, index, value) in enumerate(facts.pending):
        tag, cases = value if kind == "cases" else ("", [])
        if not tag.startswith(_DEPENDENT) or len(cases) != 2 or len(cases[1]) != 2:
            continue
        found = _test(cases[1][1].schema, index)
        if found is not None:
            by_name.setdefault(found[0], []).append((n, tag, tag.split(":", 1)[1], found[1]))
    for name, deps in by_name.items():
        if len(deps) < 2:
            continue
        dropped = {n for n, *_ in deps}
        facts.pending = [p for n, p in enumerate(facts.pending) if n not in dropped]
        for _, tag, _, test in deps:
            part = facts.parts[test.index]
            facts.parts[test.index] = replace(part, skip=part.skip | {tag})
        cases = _dependency_cases(facts, name, [(trigger, t) for _, _, trigger, t in deps])
        facts.pending.append(("cases", deps[0][3].index, (f"dependencies@{name}", cases)))


_DEPENDENT = ("dependencies:", "dependentSchemas:")


def _dependency_cases(facts: Facts, name: str, deps: list[tuple[str, _Test]]) -> list[list[Part]]:
    """Exclusive cases of `name`'s value; in each, the triggers whose condition fails are
    absent (a non-object triggers nothing)."""
    every: dict[str, Any] = {}
    for _, test in deps:
        every.update(test.values)
    anchor = facts.parts[deps[0][1].index]

    def case(schema: dict[str, Any], holds: Any) -> list[Part]:
        if schema.get("type") == "object":
            absent = {trigger: False for trigger, test in deps if not holds(test)}
            schema = {**schema, "properties": {**schema["properties"], **absent}}
        return [replace(anchor, schema=schema, pointer=anchor.pointer, skip=frozenset(),
                        ref=False, parent=0, synthetic=True)]  # fmt: skip

    cases = [
        case({"type": NON_OBJECT}, None),
        case({"type": "object", "properties": {name: False}}, lambda t: not t.requires),
    ]
    for key, value in every.items():
        member = {"type": "object", "required": [name], "properties": {name: {"const": value}}}
        cases.append(case(member, lambda t, key=key: key in t.values))
    other = {"not": {"enum": list(every.values())}}
    rest = {"type": "object", "required": [name], "properties": {name: other}}
    cases.append(case(rest, lambda t: False))
    return cases


def _test(cond: Any, index: int) -> tuple[str, _Test] | None:
    """(member name, test) if `cond` only asks for one member's value (const/enum)."""
    if not isinstance(cond, dict) or not isinstance(cond.get("properties"), dict):
        return None
    if any(k not in ("properties", "required", "type") and k not in _SKIPPED for k in cond):
        return None
    props = cond["properties"]
    if len(props) != 1:
        return None
    ((name, sub),) = props.items()
    required = cond.get("required", [])
    if required not in ([], [name]) or cond.get("type", "object") != "object":
        return None
    values = _values(sub)
    if values is None:
        return None
    return name, _Test(index, values, bool(required), "type" in cond)


def _values(schema: Any) -> dict[str, Any] | None:
    if not isinstance(schema, dict) or not ("const" in schema or "enum" in schema):
        return None
    if any(k not in ("const", "enum", "type") and k not in _SKIPPED for k in schema):
        return None
    lists = ([schema["const"]],) if "const" in schema else ()
    if "enum" in schema:
        if not isinstance(schema["enum"], list):
            return None
        lists += (schema["enum"],)
    names = schema.get("type")
    names = [names] if isinstance(names, str) else names
    if names is not None and not isinstance(names, list):
        return None
    allowed = None if names is None else {t for n in names for t in _internal(n)}
    keys = [{canonical_key(v): v for v in values} for values in lists]
    common = {k: v for k, v in keys[0].items() if all(k in other for other in keys[1:])}
    return {k: v for k, v in common.items() if allowed is None or value_type(v) in allowed}


def _internal(name: Any) -> set[str]:
    return {"integer", "fraction"} if name == "number" else {str(name)}


def _cases(facts: Facts, name: str, tests: list[_Test]) -> list[list[Part]]:
    """Parts of each exclusive case (see the module docstring)."""
    every: dict[str, Any] = {}
    for test in tests:
        every.update(test.values)
    anchor = facts.parts[tests[0].index]

    def synthetic(schema: dict[str, Any]) -> Part:
        return replace(anchor, schema=schema, pointer=anchor.at("if"), skip=frozenset(),
                       ref=False, parent=0, synthetic=True)  # fmt: skip

    def outcome(holds: Any) -> list[Part]:
        out = []
        for test in tests:
            holder = facts.parts[test.index]
            chosen = "then" if holds(test) else "else"
            if chosen in holder.schema:
                out.append(replace(holder, schema=holder.schema[chosen], pointer=holder.at(chosen),
                                   skip=frozenset(), ref=False, parent=id(holder.schema),
                                   synthetic=False))  # fmt: skip
        return out

    cases = [
        [synthetic({"type": NON_OBJECT}), *outcome(lambda t: not t.typed)],
        [synthetic({"type": "object", "properties": {name: False}}),
         *outcome(lambda t: not t.requires)],
    ]  # fmt: skip
    for key, value in every.items():
        member = {"type": "object", "required": [name], "properties": {name: {"const": value}}}
        cases.append([synthetic(member), *outcome(lambda t, key=key: key in t.values)])
    other = {"not": {"enum": list(every.values())}}
    rest = {"type": "object", "required": [name], "properties": {name: other}}
    cases.append([synthetic(rest), *outcome(lambda t: False)])
    return cases


def presence_cases(keyword: str, value: Any, holder: Part) -> list[list[Part]] | None:
    """Exclusive-enough cases for `oneOf`/`not` that only ask which members are present,
    or None: `"oneOf": [{"required": ["a"]}, {"required": ["b"]}]` is an object with `a`
    and without `b`, or the reverse (a non-object satisfies both: fails); `"not":
    {"required": ["a", "b"]}` is an object without `a`, or without `b`; `"not": {"anyOf":
    [{"required": ["a"]}, {"required": ["b"]}]}` an object with neither."""

    def case(schema: dict[str, Any]) -> list[Part]:
        return [replace(holder, schema={"type": "object", **schema}, pointer=holder.at(keyword),
                        skip=frozenset(), ref=False, parent=0, synthetic=True)]  # fmt: skip

    if keyword == "oneOf" and isinstance(value, list):
        names = [_names(s) for s in value]
        single = [n[0] for n in names if n is not None and len(n) == 1]
        if len(single) < 2 or len(single) != len(value) or len(set(single)) != len(single):
            return None
        absent = {n: False for n in single}
        return [case({"required": [n], "properties": {**absent, n: True}}) for n in single]
    if keyword != "not" or not isinstance(value, dict):
        return None
    names = _names(value)
    if names:
        return [case({"properties": {n: False}}) for n in names]
    options = value.get("anyOf") if set(value) - _SKIPPED == {"anyOf"} else None
    if not isinstance(options, list) or not options:
        return None
    found = [_names(s) for s in options]
    if any(n is None or len(n) != 1 for n in found):
        return None
    return [case({"properties": {n[0]: False for n in found if n}})]


def presence_if(holder: Part) -> list[list[Part]] | None:
    """Exclusive cases for an `if` that only asks which members are present (`"if":
    {"required": [a, b]}`), or None: the `then` beside "a and b present (or not an
    object)", the `else` beside "an object without a" and "an object with a, without b"
    (utam-page-object's actions: no subtraction of the whole object)."""
    schema = holder.schema
    names = _names(schema["if"])
    if names is None:
        return None

    def made(made_schema: dict[str, Any]) -> Part:
        return replace(holder, schema=made_schema, pointer=holder.at("if"), skip=frozenset(),
                       ref=False, parent=0, synthetic=True)  # fmt: skip

    def side(key: str) -> list[Part]:
        if key not in schema:
            return []
        return [replace(holder, schema=schema[key], pointer=holder.at(key), skip=frozenset(),
                        ref=False, parent=id(schema), synthetic=False)]  # fmt: skip

    cases = [[made({"required": names}), *side("then")]]
    for i, name in enumerate(names):
        absent = {"type": "object", "required": names[:i], "properties": {name: False}}
        cases.append([made(absent), *side("else")])
    return cases


def _names(schema: Any) -> list[str] | None:
    """The names of a schema that only says `required` (None otherwise)."""
    if not isinstance(schema, dict) or set(schema) - _SKIPPED != {"required"}:
        return None
    names = schema["required"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return None
    return list(dict.fromkeys(names))
