"""Prompt-only output parsing is strict: errors, never a silent {}."""

import pytest

from kor_cli.parse import ParseFailure, parse_prompt_output


def test_first_block_is_taken() -> None:
    raw = 'noise <json>{"person": {"name": "Ann"}}</json> <json>{"person": {}}</json>'
    assert parse_prompt_output(raw, "person") == {"person": {"name": "Ann"}}


def test_block_spanning_lines() -> None:
    raw = '<json>{\n "person": [1, 2]\n}</json>'
    assert parse_prompt_output(raw, "person") == {"person": [1, 2]}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("just words", "no <json>"),
        ('<json>{"person": {}', "no closing"),
        ("<json>{person: 1}</json>", "malformed JSON"),
        ('<json>{"other": 1}</json>', "missing root id 'person'"),
        ("<json>[1, 2]</json>", "expected a JSON object"),
        ("<json></json>", "malformed JSON"),
    ],
)
def test_failures_are_named(raw: str, message: str) -> None:
    with pytest.raises(ParseFailure, match=message):
        parse_prompt_output(raw, "person")
