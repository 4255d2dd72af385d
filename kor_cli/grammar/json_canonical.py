"""Canonical keys and internal type names of JSON values (JSON Schema equality: `1` and
`1.0` are equal, member order does not matter)."""

from __future__ import annotations

from typing import Any

from kor_cli.grammar.json_values import dumps


def value_type(value: Any) -> str:
    """The internal type name of a JSON value (integral floats are integers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "fraction"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, (list, tuple)) else "object"


def canonical_key(value: Any) -> str:
    """Equal JSON values (in the JSON Schema sense) get equal keys."""
    return dumps(_sorted(value))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [_sorted(v) for v in value]
    return value
