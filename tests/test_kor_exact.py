"""Kor schemas as Kor users write them, against prompts Kor 3.0.0 itself rendered
(tests/data/kor_partial.yaml says how): examples that leave fields out, input text with
trailing whitespace, and a template with only {type_description}."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.errors import SchemaError
from kor_cli.inputs import read_text
from kor_cli.prompt import load_template, render_prompt
from kor_cli.schema import load_schema

DATA = Path(__file__).parent / "data"
SCHEMA = DATA / "kor_partial.yaml"
KOR = json.loads((DATA / "kor_reference_partial.json").read_text(encoding="utf-8"))


def test_examples_that_leave_fields_out_load_and_render_kors_prompt() -> None:
    schema = load_schema(str(SCHEMA))
    text = KOR["_texts"]["partial-examples"]
    assert render_prompt(schema, text) == KOR["partial-examples"]
    assert "?:" not in schema.typescript()


def test_fields_some_example_leaves_out_are_optional_when_constrained() -> None:
    schema = load_schema(str(SCHEMA))
    person = schema.json_schema()["properties"]["person"]
    assert person["required"] == ["name"]  # every example has a name; the rest is left out
    assert person["properties"]["pet"]["required"] == ["kind"]
    validator = schema.validator()
    assert validator.validate({"person": {"name": "Carl"}})[1] == []
    assert validator.validate({"person": {"age": 30}})[1] != []  # name is still required


def test_a_stated_required_field_left_out_is_still_an_error(tmp_path: Path) -> None:
    text = SCHEMA.read_text(encoding="utf-8").replace(
        "{id: age, type: number,", "{id: age, type: number, required: true,"
    )
    path = tmp_path / "stated.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaError, match="example 2 of 'person'.*age: Field required"):
        load_schema(str(path))


def test_question_marks_only_where_the_schema_asks(tmp_path: Path) -> None:
    text = SCHEMA.read_text(encoding="utf-8").replace(
        "{id: city, description", "{id: city, required: false, description"
    )
    path = tmp_path / "asked.yaml"
    path.write_text(text, encoding="utf-8")
    lines = [line.strip() for line in load_schema(str(path)).typescript().splitlines()]
    assert [line for line in lines if "?:" in line] == ["city?: string // Where they live"]


def test_input_text_keeps_trailing_whitespace_as_kor(tmp_path: Path) -> None:
    text = KOR["_texts"]["trailing-whitespace"]
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8", newline="")
    assert read_text(str(path)) == text
    result = CliRunner().invoke(app, ["prompt", str(SCHEMA), str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == KOR["trailing-whitespace"] + "\n"


def test_template_with_only_type_description_is_accepted_as_kor(tmp_path: Path) -> None:
    path = tmp_path / "template.txt"
    path.write_text(KOR["_template"], encoding="utf-8")
    schema = load_schema(str(SCHEMA))
    text = KOR["_texts"]["type-description-only"]
    assert render_prompt(schema, text, template=load_template(path)) == KOR["type-description-only"]
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["prompt", str(SCHEMA), str(source), "--template", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == KOR["type-description-only"] + "\n"


def test_the_grammar_lets_the_model_leave_out_what_examples_leave_out() -> None:
    from kor_cli.constrain import record_grammar

    dfa = record_grammar(load_schema(str(SCHEMA)).json_schema()).dfa
    assert dfa.accepts(b' <json>{"person": {"name": "Carl", "pet": {"kind": "dog"}}}</json>')
    assert dfa.accepts(b' <json>{"person": {"name": "Carl", "age": 30}}</json>')
    assert not dfa.accepts(b' <json>{"person": {"age": 30}}</json>')  # no name: never left out
    assert not dfa.accepts(b' <json>{"person": {"name": "Carl", "pet": {}}}</json>')
