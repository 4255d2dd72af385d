"""Prompt-only output → JSON: the first `<json>…</json>` block, strictly.

No block, malformed JSON or a missing root id is an error in the result, never `{}`.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = re.compile(r"<json>(.*?)</json>", re.DOTALL)


class ParseFailure(Exception):
    """The model output holds no usable JSON record."""


def extract_json_block(raw: str) -> str:
    """The text inside the first complete `<json>…</json>` block."""
    match = _BLOCK.search(raw)
    if match is None:
        if "<json>" in raw:
            raise ParseFailure("output has '<json>' but no closing '</json>'")
        raise ParseFailure("output has no <json>…</json> block")
    return match.group(1)


def parse_json(text: str) -> Any:
    """json.loads with a one-line error that gives the position."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseFailure(
            f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None


def check_root(data: Any, root_id: str) -> dict[str, Any]:
    """The record must be an object holding the schema's root id."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ParseFailure(f"expected a JSON object with key '{root_id}', got {kind}")
    if root_id not in data:
        raise ParseFailure(f"missing root id '{root_id}' in output object")
    return data


def parse_prompt_output(raw: str, root_id: str) -> dict[str, Any]:
    """Parse prompt-only model output; raise ParseFailure with a clear reason."""
    return check_root(parse_json(extract_json_block(raw)), root_id)
