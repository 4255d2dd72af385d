"""Closed objects for validation: the grammar's default, made checkable by `jsonschema`.

During generation an object that declares `properties` or `required` (itself, in a
`$ref` target or an `allOf` branch, or in every alternative of an `anyOf`/`oneOf` or of
`then`/`else`) and that no part opens (`additionalProperties` or `unevaluatedProperties`
other than false) is closed: it holds only the members those parts name or match.
Where the grammar's closing depends on the alternative or on a `dependentSchemas`
trigger, nothing is marked. `mark_closed` copies a record document and puts the marker keyword
`x-kor-closed` (the names `required` allows besides) where that holds; `closed_keyword`
is its check: every member must be evaluated the way `unevaluatedProperties` sees it, or
be a required name. Where a part cannot be resolved, nothing is marked (validation then
follows the specification there, never rejecting what the grammar writes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kor_cli.schema.document import resolve_pointer

MARKER = "x-kor-closed"
# subschemas at the same place (parts) and at a member or item of it (new places)
_PART_LISTS = ("allOf", "anyOf", "oneOf")
_PART_VALUES = ("then", "else")
_PART_MAPS = ("dependentSchemas", "$defs", "definitions")
_PLACE_VALUES = (
    "additionalProperties", "unevaluatedProperties", "items", "contains", "unevaluatedItems",
    "additionalItems",
)  # fmt: skip
_PLACE_LISTS = ("prefixItems", "items")
_PLACE_MAPS = ("properties", "patternProperties")


def mark_closed(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of the record `document` with `x-kor-closed` where the grammar closes objects."""
    return _Marker(document).copy(document, place=True)


class _Marker:
    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.base = document.get("$id", "") if isinstance(document.get("$id"), str) else ""

    def copy(self, schema: Any, *, place: bool) -> Any:
        if not isinstance(schema, dict):
            return schema
        out = dict(schema)
        for key, value in schema.items():
            if key in _PLACE_MAPS + _PART_MAPS and isinstance(value, dict):
                out[key] = {n: self.copy(s, place=key in _PLACE_MAPS) for n, s in value.items()}
            elif key in _PART_LISTS + _PLACE_LISTS and isinstance(value, list):
                out[key] = [self.copy(s, place=key in _PLACE_LISTS) for s in value]
            elif key in _PART_VALUES + _PLACE_VALUES:
                out[key] = self.copy(value, place=key in _PLACE_VALUES)
        if place:
            names = self.closed_names(schema)
            if names is not None:
                out[MARKER] = names
        return out

    def closed_names(self, schema: dict[str, Any]) -> list[str] | None:
        """The required names when the object at this place is closed, else None."""
        parts = list(self.parts(schema, set()))
        if any(part is None for part in parts) or not self.declares(schema, set()):
            return None  # an unresolvable part (do not guess), or nothing declared
        names: list[str] = []
        for part in parts:
            assert part is not None
            if any(part.get(k, False) is not False for k in _OPENERS):
                return None
            required = part.get("required")
            names += (
                [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
            )
            for needed in (part.get("dependentRequired") or {}).values():
                names += (
                    [n for n in needed if isinstance(n, str)] if isinstance(needed, list) else []
                )
        return list(dict.fromkeys(names))

    def declares(self, schema: Any, seen: set[int]) -> bool:
        """Whether every way of matching here goes through a part that declares
        `properties` or `required` (alternatives: all of them; triggers: never)."""
        if not isinstance(schema, dict) or id(schema) in seen:
            return False
        seen = seen | {id(schema)}
        if isinstance(schema.get("properties"), dict) or "required" in schema:
            return True
        ref = schema.get("$ref")
        if isinstance(ref, str) and self.declares(self.lookup(ref), seen):
            return True
        branches = schema.get("allOf")
        if isinstance(branches, list) and any(self.declares(b, seen) for b in branches):
            return True
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                if all(self.declares(b, seen) for b in branches):
                    return True
        then, other = schema.get("then"), schema.get("else")
        return "if" in schema and self.declares(then, seen) and self.declares(other, seen)

    def parts(self, schema: Any, seen: set[int]) -> Iterator[dict[str, Any] | None]:
        if not isinstance(schema, dict) or id(schema) in seen:
            return
        seen.add(id(schema))
        yield schema
        for key in ("$ref", "$dynamicRef"):
            ref = schema.get(key)
            if isinstance(ref, str):
                target = self.lookup(ref)
                if target is None:
                    yield None
                else:
                    yield from self.parts(target, seen)
        for key in _PART_LISTS:
            for branch in schema.get(key, []) if isinstance(schema.get(key), list) else []:
                yield from self.parts(branch, seen)
        for key in _PART_VALUES:
            yield from self.parts(schema.get(key), seen)
        dependent = schema.get("dependentSchemas")
        for branch in dependent.values() if isinstance(dependent, dict) else []:
            yield from self.parts(branch, seen)

    def lookup(self, ref: str) -> Any:
        if self.base and ref.startswith(self.base.partition("#")[0] + "#"):
            ref = ref[len(self.base.partition("#")[0]) :]
        target = resolve_pointer(self.document, ref)
        return target if isinstance(target, (dict, bool)) else None


_OPENERS = ("additionalProperties", "unevaluatedProperties")


def closed_keyword(validator: Any, names: Any, instance: Any, schema: dict[str, Any]) -> Any:
    """jsonschema keyword function for `x-kor-closed`."""
    from jsonschema import ValidationError
    from jsonschema._utils import find_evaluated_property_keys_by_schema

    if not validator.is_type(instance, "object"):
        return
    allowed = set(names) | set(find_evaluated_property_keys_by_schema(validator, instance, schema))
    extras = [key for key in instance if key not in allowed]
    if extras:
        listed = ", ".join(repr(key) for key in extras)
        yield ValidationError(
            f"{listed} not allowed: objects without 'additionalProperties' are closed "
            "(--open-objects follows the JSON Schema specification)"
        )
