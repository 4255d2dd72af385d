"""`oneOf` options that overlap, subtracted member by member instead of as whole objects.

An option that only says `properties`, `required` (and maybe `type: object`) holds on an
object exactly when every member it names passes: a required one is present, a present
one's value passes its `properties` schema. So it fails exactly when one of its members
fails: a required member is absent, or a member is present with a value that fails its
schema (or, with `type: object`, the value is not an object). "Option k and not option j"
is then a union of cases, option k beside one such failure of j each, and "and not j, not
l, ..." the cases of every combination: a product over one member value each (`not` of
its schema, `json_schema.minus`), where `json_disjoint.one_of` built and subtracted the
whole object as DFAs, recursion unrolled (utam-page-object's `arg`: ~30 s).

Conditions: the rival options qualify (their member schemas no keyword of which may be
refused, as `json_factor` asks: the made-up parts' pointers name made-up schemas); each
member a made-up case makes present is declared already by the conjunction or the option
(a made-up part is synthetic and must not open a closed object); no `unevaluated*` beside
(failing options annotate nothing); at most `MAX_CASES` cases an option.

A failure "member n present with a value failing S" is impossible where the conjunction
or option k itself says n's value passes that same S (the same schema object, or `$ref`s
to one target): it is left out (grpc-api-gateway's Schema.Item: a closed object declaring
`schema` and `list`, options requiring one each with the same `$ref`s; "list present and
not a SchemaList" was a product over the recursive SchemaList, unrolled: > 10 s).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kor_cli.grammar.json_keywords import ANNOTATIONS, Facts, Part

MAX_CASES = 16
NON_OBJECT = ["null", "boolean", "number", "string", "array"]
_KEYS = frozenset({"properties", "required", "type"})


def failures(
    option: Part, applied: Callable[[Any], list[str]], safe: Callable[[Any], bool]
) -> list[dict[str, Any]] | None:
    """Schemas of the exclusive-enough ways `option` fails (their union is exactly where it
    fails), or None if it does not qualify."""
    schema = option.schema
    if not isinstance(schema, dict) or not set(applied(schema)) - ANNOTATIONS <= _KEYS:
        return None
    props, required = schema.get("properties", {}), schema.get("required", [])
    kind = schema.get("type")
    if kind not in (None, "object", ["object"]) or not isinstance(props, dict):
        return None
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        return None
    out: list[dict[str, Any]] = [{"type": NON_OBJECT}] if kind is not None else []
    for name in required:
        out.append({"type": "object", "properties": {name: False}})
    for name, sub in props.items():
        if sub is True or isinstance(sub, dict) and set(applied(sub)) <= ANNOTATIONS:
            continue  # never fails
        if not safe(sub):
            return None
        value: Any = True if sub is False else {"not": sub}
        out.append({"type": "object", "required": [name], "properties": {name: value}})
    return out


def cases(
    facts: Facts,
    options: list[Part],
    rivals: list[set[int]],
    applied: Callable[[Any], list[str]],
    safe: Callable[[Any], bool],
    same: Callable[[Any, Any], bool] = lambda a, b: a is b,
) -> dict[int, list[list[Part]]]:
    """For each option `k` with rivals that all qualify: the lists of parts (option `k`
    and one failure of each rival) whose union is "option k and no rival" (`same(a, b)`:
    the schemas `a` and `b` hold on the same values, e.g. `$ref`s to one target)."""
    if facts.unevaluated_props or facts.unevaluated_items:
        return {}
    fails = {j: failures(options[j], applied, safe) for j in set().union(*rivals)}
    declared = {n for o in facts.objects for n in [*o.props, *o.required]}
    out: dict[int, list[list[Part]]] = {}
    for k, others in enumerate(rivals):
        if not others or any(fails[j] is None for j in others):
            continue
        known = declared | _names(options[k].schema)
        held = _held(facts, options[k].schema)
        possible = {
            j: [f for f in fails[j] or () if not _impossible(f, held, same)] for j in others
        }
        ways = [[f for f in possible[j] if _present(f) <= known] for j in sorted(others)]
        if any(len(w) < len(possible[j]) for w, j in zip(ways, sorted(others), strict=True)):
            continue  # a failure would make present a member nothing declares
        count = 1
        for w in ways:
            count *= len(w)
        if count > MAX_CASES:
            continue
        pointer = options[k].pointer
        out[k] = [
            [options[k], *(Part(f, pointer, synthetic=True) for f in combo)]
            for combo in itertools.product(*ways)
        ]
    return out


def _held(facts: Facts, option: Any) -> dict[str, list[Any]]:
    """For each member name, the schemas its value must pass where present (the
    conjunction's `properties` and the option's own)."""
    held: dict[str, list[Any]] = {}
    for o in facts.objects:
        for name, part in o.props.items():
            held.setdefault(name, []).append(part.schema)
    props = option.get("properties", {}) if isinstance(option, dict) else {}
    for name, sub in props.items() if isinstance(props, dict) else ():
        held.setdefault(name, []).append(sub)
    return held


def _impossible(
    failure: dict[str, Any], held: dict[str, list[Any]], same: Callable[[Any, Any], bool]
) -> bool:
    """`failure` is "member n present with a value failing S" and n's value passes S."""
    required = failure.get("required", [])
    if len(required) != 1:
        return False
    value = failure.get("properties", {}).get(required[0])
    if not isinstance(value, dict) or set(value) != {"not"}:
        return False
    return any(same(s, value["not"]) for s in held.get(required[0], ()))


def _names(schema: Any) -> set[str]:
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    names = set(props) if isinstance(props, dict) else set()
    return names | (set(required) if isinstance(required, list) else set())


def _present(failure: dict[str, Any]) -> set[str]:
    return set(failure.get("required", []))
