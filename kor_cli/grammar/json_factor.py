"""Products on one member, factored into that member: `oneOf` whose options each constrain
one and the same member, and the `else` side of an `if` on one member.

SchemaStore's hatch says at its root `oneOf: [{properties: {version: false}},
{required: [version], properties: {version: A}}, ...]`: every option speaks only of the
member `version`. Distributing it (`json_disjoint.one_of`) builds the whole root object
once per option and subtracts the other options' objects as DFAs: seconds. Counted
member-wise, the options that hold are:

- on a value that is not an object: every option (`properties` and `required` pass), so
  with two options or more `oneOf` fails: the value must be an object;
- on an object without the member: the options that do not require it, so it may be
  absent iff exactly one option does not require it;
- on an object with the member: the options whose `properties` schema its value passes.

So the `oneOf` is exactly `{type: object, properties: {name: {oneOf: [S_1, ..., S_n]}}}`
(plus `required: [name]` unless exactly one option lets it be absent): a product over one
member value instead of over the whole object.

Conditions, so that the compiled language is the one the distribution gave: every option
is an object whose only keywords (besides annotations) are `properties` naming exactly
that member and `required` naming at most it; so every option declares the member (kor
closes objects that declare names; the replacement declares it too) and `unevaluated*`
sees it evaluated in the same cases. Each member schema must be one no keyword of which
can be refused (`json_defer`'s scan): the replacement's pointers name the made-up schema,
so no error may come from inside it.

`if: {properties: {m: S}}` (maybe `required: [m]`) fails exactly on objects where `m` is
present with a value that fails `S`, or (when the `if` requires it) `m` is absent. So the
`else` side is `{type: object, properties: {m: {not: S}}}` (plus `required: [m]` unless the
`if` requires it) beside `else`, instead of the whole object with the `if` subtracted as
DFAs (SchemaStore's buf.gen: its v2 object, ~1 s). The made-up part is synthetic (it closes
no object), so `m` must be declared by the schema holding the `if` or by its `else`, as it
then is on both sides anyway, or the `else` (or its `$ref` target) must allow members it does
not name (`additionalProperties` true or a schema: then no object there is closed by
default, and `m` is allowed on both sides alike; intlayer's recursive content values). An
`if` that also says `type: object` fails on non-objects too: the made-up part then leaves
out `type: object` (`properties`/`required` hold on non-objects).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_NOTES = frozenset({
    "title", "description", "$comment", "default", "examples", "deprecated", "readOnly",
    "writeOnly",
})  # fmt: skip
_ALLOWED = _NOTES | {"properties", "required"}


class OneOfFactor:
    """`one_key(options)` and `failed_if(holder)` memoized per schema (the made-up schemas
    are kept alive: the compiler's memo keys schemas by identity)."""

    def __init__(
        self,
        applied: Callable[[dict[str, Any]], list[str]],
        safe: Callable[[Any], bool],
        resolve: Callable[[Any], Any] | None = None,
    ) -> None:
        self.applied = applied
        self.safe = safe
        self.resolve = resolve  # a schema's `$ref` target (None if it has none / on error)
        self._made: dict[tuple[str, int], tuple[Any, Any]] = {}

    def factored(self, options: Any) -> dict[str, Any] | None:
        """The schema equivalent to `oneOf: options` over one member, or None."""
        return self._memo("oneOf", options, lambda: one_key(options, self.applied, self.safe))

    def failed_if(
        self, holder: dict[str, Any], settled: Callable[[str], bool] = lambda name: False
    ) -> dict[str, Any] | None:
        """The objects on which `holder`'s `if` fails, as a schema on one member, or None.
        `settled(member)`: the conjunction around decides whether the member may be
        present (it declares it, or closes the object explicitly)."""
        found = self._memo(
            "if", holder, lambda: _failed(holder, self.applied, self.safe, self.resolve)
        )
        return found[0] if found is not None and (found[2] or settled(found[1])) else None

    def negated_if(
        self, holder: dict[str, Any], settled: Callable[[str], bool]
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """For `"if": {"not": T}` with T a test on one member's value (prometheus' auth:
        `{"not": {"properties": {"basic_auth": {"const": null}}}}`): (where the `if`
        holds, where it fails), as schemas on that member (where T fails, and T), or None.
        Both are made-up parts beside `then`/`else`: the member must be settled around."""
        cond = holder.get("if")
        if not isinstance(cond, dict) or set(self.applied(cond)) - _NOTES != {"not"}:
            return None
        if "unevaluatedProperties" in holder:  # a failing `not` annotates nothing
            return None
        inner = {"if": cond["not"], **{k: v for k, v in holder.items() if k == "properties"}}
        found = self._memo("not-if", holder, lambda: (inner, _failed(inner, self.applied,
                                                                     self.safe, None)))  # fmt: skip
        made = found[1]
        if made is None or not (made[2] or settled(made[1])):
            return None
        return made[0], found[0]["if"]

    def _memo(self, kind: str, value: Any, make: Callable[[], Any]) -> Any:
        found = self._made.get((kind, id(value)))
        if found is None:
            found = self._made[(kind, id(value))] = (value, make())
        return found[1]


def one_key(
    options: Any, applied: Callable[[dict[str, Any]], list[str]], safe: Callable[[Any], bool]
) -> dict[str, Any] | None:
    """See the module docstring; None when the conditions do not hold."""
    if not isinstance(options, list) or len(options) < 2:
        return None
    names: set[str] = set()
    for option in options:
        if not isinstance(option, dict) or not set(applied(option)) <= _ALLOWED:
            return None
        props, required = option.get("properties"), option.get("required", [])
        if not isinstance(props, dict) or len(props) != 1:
            return None
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            return None
        names |= set(props) | set(required)
    if len(names) != 1:
        return None
    (name,) = names
    values = [option["properties"][name] for option in options]
    if not all(safe(v) for v in values):
        return None
    absent = sum(name not in option.get("required", []) for option in options)
    out: dict[str, Any] = {"type": "object", "properties": {name: {"oneOf": values}}}
    if absent != 1:
        out["required"] = [name]
    return out


def failed_if(
    holder: dict[str, Any],
    applied: Callable[[dict[str, Any]], list[str]],
    safe: Callable[[Any], bool],
    resolve: Callable[[Any], Any] | None = None,
) -> dict[str, Any] | None:
    """See the module docstring; None when the conditions do not hold."""
    found = _failed(holder, applied, safe, resolve)
    return found[0] if found is not None and found[2] else None


def _failed(
    holder: dict[str, Any],
    applied: Callable[[dict[str, Any]], list[str]],
    safe: Callable[[Any], bool],
    resolve: Callable[[Any], Any] | None,
) -> tuple[dict[str, Any], str, bool] | None:
    """(where the `if` fails, its member, whether the holder or the `else` settles the
    member) or None when the `if` is not a test on one member's value."""
    cond, other = holder.get("if"), holder.get("else", {})
    if not isinstance(cond, dict) or not set(applied(cond)) <= _ALLOWED | {"type"}:
        return None
    if cond.get("type", "object") not in ("object", ["object"]):
        return None
    props, required = cond.get("properties"), cond.get("required", [])
    if not isinstance(props, dict) or len(props) != 1 or not isinstance(required, list):
        return None
    (name,) = props
    if not set(required) <= {name} or not safe(props[name]) or "unevaluatedProperties" in holder:
        return None
    declared = [holder.get("properties"), other.get("properties") if isinstance(other, dict) else 0]
    ok = any(isinstance(names, dict) and name in names for names in declared)
    out: dict[str, Any] = {"properties": {name: {"not": props[name]}}}
    if "type" not in cond:  # the `if` holds on every non-object: the `else` side has none
        out = {"type": "object", **out}
    if name not in required:
        out["required"] = [name]
    return out, name, ok or _opens(other, applied, resolve)


def _opens(
    schema: Any,
    applied: Callable[[dict[str, Any]], list[str]],
    resolve: Callable[[Any], Any] | None,
    hops: int = 3,
) -> bool:
    """`schema` (or a `$ref` target of it) allows members it does not name
    (`additionalProperties` true or a schema): no object beside it is closed by default,
    so the made-up part's `properties` allow no member the `else` side did not."""
    if not isinstance(schema, dict):
        return False
    keys = applied(schema)
    if "additionalProperties" in keys and schema["additionalProperties"] is not False:
        return True
    if resolve is None or hops == 0 or "$ref" not in keys:
        return False
    return _opens(resolve(schema), applied, resolve, hops - 1)
