"""`oneOf` whose options each constrain one and the same member, factored into that member.

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
    """`one_key(options)` memoized per options list (the made-up schemas are kept alive:
    the compiler's memo keys schemas by identity)."""

    def __init__(
        self, applied: Callable[[dict[str, Any]], list[str]], safe: Callable[[Any], bool]
    ) -> None:
        self.applied = applied
        self.safe = safe
        self._made: dict[int, tuple[Any, dict[str, Any] | None]] = {}

    def factored(self, options: Any) -> dict[str, Any] | None:
        """The schema equivalent to `oneOf: options` over one member, or None."""
        found = self._made.get(id(options))
        if found is None:
            found = self._made[id(options)] = (options, one_key(options, self.applied, self.safe))
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
