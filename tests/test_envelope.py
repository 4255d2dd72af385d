"""The output envelope is one seam: a second format is one class, used end to end."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kor_cli.constrain import record_grammar
from kor_cli.decode import SamplingOptions
from kor_cli.envelope import JSON_TAGS, Envelope, ParseFailure
from kor_cli.extract import ExtractOptions, Extractor
from kor_cli.grammar.ast import Node, literal, seq
from kor_cli.models import load_model
from kor_cli.parse import parse_prompt_output
from kor_cli.prompt import render_prompt
from kor_cli.schema import load_schema

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ToolCall(Envelope):
    """A second format: the record as a tool call's arguments, one call per output."""

    name: str = "tool-call"

    @property
    def instructions(self) -> str:
        return "Call the tool `record` once with the extracted information as its arguments."

    def encode(self, record: dict[str, Any]) -> str:
        return f"<call record>{json.dumps(record)}<end>"

    def wrap(self, body: Node) -> Node:
        return seq(literal(" <call record>"), body, literal("<end>"))

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return ("<end>",)

    def payload(self, raw: str) -> str:
        start = raw.find("<call record>")
        end = raw.find("<end>", start)
        if start < 0 or end < 0:
            raise ParseFailure("output has no tool call")
        return raw[start + len("<call record>") : end]


def person() -> Any:
    return load_schema(str(ROOT / "schemas" / "person.yaml"))


def test_json_tags_round_trip() -> None:
    record = {"person": {"name": "Zoë", "age": 3}}
    raw = JSON_TAGS.encode(record)
    assert raw == '<json>{"person": {"name": "Zoë", "age": 3}}</json>'
    assert JSON_TAGS.decode("noise " + raw + " more") == record
    assert JSON_TAGS.stop_strings == ("</json>",)
    with pytest.raises(ParseFailure, match="no closing"):
        JSON_TAGS.payload('<json>{"a": 1}')


def test_a_second_envelope_shapes_the_prompt() -> None:
    prompt = render_prompt(person(), "Ann is 5.", envelope=ToolCall())
    assert "Call the tool `record` once" in prompt
    assert "<json>" not in prompt
    assert 'Output: <call record>{"person": {"name": "Bob Smith"' in prompt
    assert "Output: <call record>{}<end>" in prompt  # the null example
    assert prompt.endswith("Input: Ann is 5.\nOutput:")


def test_a_second_envelope_wraps_the_grammar() -> None:
    schema = person()
    dfa = record_grammar(schema.json_schema(), envelope=ToolCall()).dfa
    record = json.dumps({"person": {"name": "Ann", "age": 5, "city": "Oslo"}})
    assert dfa.accepts(f" <call record>{record}<end>".encode())
    assert not dfa.accepts(f" <json>{record}</json>".encode())
    default = record_grammar(schema.json_schema()).dfa
    assert default.accepts(f" <json>{record}</json>".encode())


def test_a_second_envelope_parses_prompt_output() -> None:
    raw = 'sure <call record>{"person": {"name": "Ann"}}<end>'
    assert parse_prompt_output(raw, "person", ToolCall()) == {"person": {"name": "Ann"}}
    with pytest.raises(ParseFailure, match="no tool call"):
        parse_prompt_output('<json>{"person": {}}</json>', "person", ToolCall())


def test_a_second_envelope_decodes_end_to_end(tiny_model_dir: str) -> None:
    """Random weights never write the wrapper by chance: the grammar and stops are ToolCall's."""
    options = ExtractOptions(
        sampling=SamplingOptions(temperature=1.0, seed=3, max_new_tokens=120),
        envelope=ToolCall(),
    )
    results = Extractor(person(), load_model(tiny_model_dir), options).extract_batch(["Ann"] * 3)
    for result in results:
        assert result.raw.strip().startswith("<call record>"), result.raw
        if result.finish_reason == "stop":
            assert result.raw.endswith("<end>")
            assert result.valid, result.errors
        else:
            assert result.finish_reason == "length" and not result.valid
