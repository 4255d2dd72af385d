"""Prompt-only output → JSON record: the envelope's payload (first `<json>…</json>`), strictly.

No block, malformed JSON or a missing root id is an error in the result. Two answers
other than a record are legal when asked for: Kor's "nothing here" (`{}`, with
`allow_empty`) and a refusal (`{"error": "<why>"}`, with `allow_refusal`). Finding the
payload is the envelope's job (`kor_cli/envelope.py`); this module checks what a record
must be, whatever the format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope, ParseFailure, parse_json

__all__ = ["ParseFailure", "Reading", "check_root", "parse_json", "parse_prompt_output"]

REFUSAL_KEY = "error"  # `{"error": "<why>"}`: the model declines (--allow-refusal)


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
    """The record in model output (no empty or refusal answers); ParseFailure otherwise."""
    data = read_output(raw, root_id, envelope).data
    assert data is not None  # only a refusal has no data
    return data


@dataclass(frozen=True)
class Reading:
    """What one model output says: a record, nothing (Kor's `{}`), or a refusal."""

    data: dict[str, Any] | None  # `{}` when empty; None for a refusal
    empty: bool = False
    refusal: str | None = None


def says_nothing(data: Any, root_id: str) -> bool:
    """Kor's "nothing here": `{}`, or an empty list under the root id (`many` roots)."""
    return data == {} or (isinstance(data, dict) and data.get(root_id, None) == [])


def read_output(
    raw: str,
    root_id: str,
    envelope: Envelope = DEFAULT_ENVELOPE,
    *,
    allow_empty: bool = False,
    allow_refusal: bool = False,
) -> Reading:
    """Model output → a record, an empty outcome or a refusal; ParseFailure otherwise.

    `{}` is accepted only with `allow_empty` (Kor's "nothing here" examples teach it), and
    `{"error": "<why>"}` only with `allow_refusal`.
    """
    data = envelope.decode(raw)
    if allow_refusal and isinstance(data, dict) and set(data) == {REFUSAL_KEY}:
        return Reading(None, refusal=str(data[REFUSAL_KEY]))
    if allow_empty and data == {}:
        return Reading({}, empty=True)
    record = check_root(data, root_id)
    return Reading(record, empty=says_nothing(record, root_id))
