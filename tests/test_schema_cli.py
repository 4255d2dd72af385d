"""Schema flags through the CLI: `schema show --verbose`, `--lenient`, `--open-objects`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.constrain import record_grammar
from kor_cli.schema import load_schema

runner = CliRunner()


def write(tmp_path: Path, document: dict, name: str = "s.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_verbose_lists_annotations_and_they_are_never_errors(tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        {
            "type": "object",
            "properties": {"a": {"type": "string", "maxLenght": 3, "x-ui": "wide"}},
            "required": ["a"],
            "readonly": True,
        },
    )
    quiet = runner.invoke(app, ["schema", "show", spec, "--as", "json-schema"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    document = json.loads(quiet.stdout)
    assert document["properties"]["s"]["properties"]["a"]["maxLenght"] == 3  # kept as written
    loud = runner.invoke(app, ["schema", "show", spec, "--as", "json-schema", "--verbose"])
    assert loud.exit_code == 0 and loud.stdout == quiet.stdout
    assert "ignored (annotation): 'readonly' at '/'" in loud.stderr
    assert "ignored (annotation): 'maxLenght' at '/properties/a'" in loud.stderr
    schema = load_schema(spec)
    assert schema.validator().validate({"s": {"a": "longer than three"}})[1] == []


def test_verbose_on_a_schema_without_annotations(tmp_path: Path) -> None:
    spec = write(tmp_path, {"type": "object", "properties": {"a": {"type": "string"}}})
    result = runner.invoke(app, ["schema", "show", spec, "--verbose"])
    assert result.exit_code == 0 and "no keyword ignored" in result.stderr


UNENFORCEABLE = {
    "type": "object",
    "properties": {
        "tags": {  # uniqueItems under contains (a product): not enforceable there
            "type": "array",
            "items": {"type": "string"},
            "uniqueItems": True,
            "contains": {},
        },
        "n": {"not": {"const": 0}},
    },
}


def test_unenforceable_keyword_is_a_named_error_and_lenient_drops_it(tmp_path: Path) -> None:
    spec = write(tmp_path, UNENFORCEABLE)
    for command in (["schema", "show", spec], ["prompt", spec, "-"]):
        strict = runner.invoke(app, command, input="text")
        assert strict.exit_code == 2
        assert "'uniqueItems' at '/properties/tags'" in strict.stderr
        lenient = runner.invoke(app, [*command, "--lenient"], input="text")
        assert lenient.exit_code == 0, lenient.stderr
        assert "warning" in lenient.stderr and "uniqueItems" in lenient.stderr
    schema = load_schema(spec, lenient=True)
    assert schema.validator().validate({"s": {"tags": ["a", "a"]}})[1]  # validation still checks


def test_open_objects_follow_the_spec_and_closed_is_the_default(tmp_path: Path) -> None:
    spec = write(tmp_path, {"type": "object", "properties": {"a": {"type": "integer"}}})
    extra = b' <json>{"s": {"a": 1, "b": 2}}</json>'
    closed = load_schema(spec)
    assert closed.tree
    assert not record_grammar(closed.json_schema()).dfa.accepts(extra)
    opened = load_schema(spec, open_objects=True)
    assert not opened.tree  # Kor's node tree has closed objects only
    grammar = record_grammar(opened.json_schema(), open_objects=True)
    assert grammar.dfa.accepts(extra) and grammar.dfa.accepts(b' <json>{"s": {"a": 1}}</json>')
    assert opened.validator().validate({"s": {"a": 1, "b": 2}})[1] == []
    shown = runner.invoke(app, ["schema", "show", spec, "--open-objects"])
    assert shown.exit_code == 0 and " a?: number // " in shown.stdout


def test_help_documents_the_schema_flags() -> None:
    text = runner.invoke(app, ["extract", "--help"], terminal_width=200).stdout
    assert "--open-objects" in text and "closed" in text and "--lenient" in text
    show = runner.invoke(app, ["schema", "show", "--help"], terminal_width=200).stdout
    assert "--verbose" in show
