"""Prompt-only output → JSON record: the envelope's payload (first `<json>…</json>`), strictly.

No block, malformed JSON or a missing root id is an error in the result, never `{}`.
Finding the payload is the envelope's job (`kor_cli/envelope.py`); this module checks
what a record must be, whatever the format.
"""

from __future__ import annotations

from typing import Any

from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope, ParseFailure, parse_json

__all__ = ["ParseFailure", "check_root", "parse_json", "parse_prompt_output"]


def check_root(data: Any, root_id: str) -> dict[str, Any]:
    """The record must be an object holding the schema's root id."""
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ParseFailure(f"expected a JSON object with key '{root_id}', got {kind}")
    if root_id not in data:
        raise ParseFailure(f"missing root id '{root_id}' in output object")
    return data


def parse_prompt_output(
    raw: str, root_id: str, envelope: Envelope = DEFAULT_ENVELOPE
) -> dict[str, Any]:
    """Parse prompt-only model output; raise ParseFailure with a clear reason."""
    return check_root(envelope.decode(raw), root_id)
