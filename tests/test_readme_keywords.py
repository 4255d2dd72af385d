"""The README's "Enforced" keyword list is what `kor-cli` accepts: every keyword it names
loads through the CLI, compiles into the record grammar, and `extract` runs with all of
them in one schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.constrain import record_grammar
from kor_cli.schema import load_schema

README = Path(__file__).resolve().parents[1] / "README.md"
INT = {"type": "integer"}
OBJ = {"type": "object", "properties": {"a": INT, "b": INT}}
ARR = {"type": "array", "items": INT}
# one property schema per keyword the README lists (formats as "format:<name>")
CASES: dict[str, dict] = {
    "type": {"type": "string"},
    "null": {"type": ["integer", "null"]},
    "properties": OBJ,
    "required": {**OBJ, "required": ["a"]},
    "additionalProperties": {"type": "object", "additionalProperties": INT, "maxProperties": 2},
    "patternProperties": {"type": "object", "patternProperties": {"^x": INT}, "maxProperties": 2},
    "propertyNames": {"type": "object", "propertyNames": {"enum": ["p", "q"]}},
    "minProperties": {"type": "object", "additionalProperties": INT, "minProperties": 1},
    "maxProperties": {"type": "object", "additionalProperties": INT, "maxProperties": 1},
    "dependentRequired": {**OBJ, "dependentRequired": {"a": ["b"]}},
    "dependentSchemas": {**OBJ, "dependentSchemas": {"a": {"required": ["b"]}}},
    "enum": {"enum": [1, "two", None, {"k": [3]}]},
    "const": {"const": {"k": 1}},
    "anyOf": {"anyOf": [INT, {"type": "string", "maxLength": 3}]},
    "oneOf": {"oneOf": [{"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 2}]},
    "allOf": {"allOf": [{"type": "integer"}, {"minimum": 1}]},
    "not": {"type": "integer", "not": {"const": 0}},
    "if": {"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 2}},
    "then": {"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 2}},
    "else": {"type": "integer", "if": {"minimum": 10}, "else": {"maximum": 5}},
    "$defs": {"$ref": "#/$defs/Node"},
    "$ref": {"$ref": "#/$defs/Node"},
    "$id": {"$ref": "https://example.com/item.json"},
    "items": ARR,
    "prefixItems": {"type": "array", "prefixItems": [INT, {"type": "string"}], "items": False},
    "minItems": {**ARR, "minItems": 1},
    "maxItems": {**ARR, "maxItems": 2},
    "contains": {**ARR, "contains": {"const": 3}},
    "minContains": {**ARR, "contains": {"const": 3}, "minContains": 2},
    "maxContains": {**ARR, "contains": {"const": 3}, "maxContains": 1},
    "unevaluatedItems": {"type": "array", "prefixItems": [INT], "unevaluatedItems": False},
    "unevaluatedProperties": {**OBJ, "unevaluatedProperties": False},
    "uniqueItems": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    "minLength": {"type": "string", "minLength": 2},
    "maxLength": {"type": "string", "maxLength": 4},
    "pattern": {"type": "string", "pattern": "^[a-z]+[0-9]?$"},
    "multipleOf": {"type": "number", "multipleOf": 0.5},
    "{}": {},
    **{
        f"format:{name}": {"type": "string", "format": name}
        for name in (
            "date time date-time duration email hostname ipv4 ipv6 uri uri-reference uuid "
            "json-pointer relative-json-pointer regex"
        ).split()
    },
}
DEFS = {
    "Node": {"type": "object", "properties": {"n": INT, "next": {"$ref": "#/$defs/Node"}}},
    "Item": {"$id": "https://example.com/item.json", "type": "integer", "minimum": 3},
}
# engine options and a command the bullet mentions
NOT_KEYWORDS = {"max_recursion_depth", "max_any_depth", "generate"}


def readme_enforced() -> set[str]:
    """The keywords in backticks of the README's "Enforced" bullet, plus its formats."""
    text = README.read_text(encoding="utf-8")
    bullet = text.split("- **Enforced:**", 1)[1].split("\n- **", 1)[0]
    formats = re.search(r"`format` \(([^)]*)\)", bullet)
    assert formats, "the bullet lists the enforced formats"
    names = formats[1].split(";")[0]  # after ';': what is not enforced
    found = {f"format:{name.strip()}" for name in names.split(",")}
    for word in re.findall(r"`([^`]+)`", bullet.replace(formats[0], "`format`")):
        match = re.fullmatch(r"min/max(\w+)", word)
        found |= {f"min{match[1]}", f"max{match[1]}"} if match else {word}
    return found - {"format"} - NOT_KEYWORDS


def document(properties: dict[str, dict]) -> dict:
    return {"type": "object", "properties": properties, "$defs": DEFS}


def test_readme_list_is_the_tested_list() -> None:
    assert readme_enforced() == set(CASES)


@pytest.mark.parametrize("keyword", sorted(CASES))
def test_each_enforced_keyword_loads_through_the_cli_and_compiles(
    tmp_path: Path, keyword: str
) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps(document({"v": CASES[keyword]})), encoding="utf-8")
    result = CliRunner().invoke(app, ["schema", "show", str(path)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("```TypeScript\n\nk: { // \n v?: ")
    grammar = record_grammar(load_schema(str(path)).json_schema())
    assert grammar.warnings == ()


def test_extract_runs_with_every_enforced_keyword(tmp_path: Path) -> None:
    """One `kor-cli extract` on the demo model with all keywords in one schema."""
    properties = {f"p{n}": schema for n, schema in enumerate(CASES.values())}
    path = tmp_path / "every.json"
    path.write_text(json.dumps(document(properties)), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["extract", str(path), "-", "--max-tokens", "8"], input="Nothing much here."
    )
    assert result.exit_code in (0, 1), result.stderr
    row = json.loads(result.stdout)
    assert row["mode"] == "constrained" and row["raw"].startswith(' <json>{"every": {')
