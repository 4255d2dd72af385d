"""References between schema files (`GrammarOptions.ref_dir`, `json_files`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema


def _write(folder: Path, name: str, schema: Any) -> None:
    (folder / name).write_text(json.dumps(schema))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    _write(tmp_path, "base.json", {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"path": {"type": "string", "pattern": "^/"},
                        "count": {"$ref": "#/definitions/int"},
                        "int": {"type": "integer", "minimum": 0}},
    })  # fmt: skip
    _write(tmp_path, "thing.json", {"type": "object", "properties": {"n": {"type": "boolean"}}})
    return tmp_path


def test_sibling_files_by_name(folder: Path) -> None:
    schema = {
        "$id": "https://json.schemastore.org/main.json",
        "type": "object",
        "properties": {
            "p": {"$ref": "base.json#/definitions/path"},
            "c": {"$ref": "https://json.schemastore.org/base.json#/definitions/count"},
            "t": {"$ref": "thing"},
        },
    }
    dfa = compile_json_schema(schema, GrammarOptions(ref_dir=str(folder))).dfa
    assert dfa.accepts(b'{"p":"/x","c":3,"t":{"n":true}}')
    assert not dfa.accepts(b'{"p":"x"}') and not dfa.accepts(b'{"c":-1}')
    assert not dfa.accepts(b'{"t":{"n":1}}')


def test_relative_refs_without_an_id(folder: Path) -> None:
    schema = {"$ref": "base.json#/definitions/count"}
    dfa = compile_json_schema(schema, GrammarOptions(ref_dir=str(folder))).dfa
    assert dfa.accepts(b"0") and not dfa.accepts(b"-1")


@pytest.mark.parametrize(
    "ref", ["https://example.com/base.json", "missing.json", "base.json#/definitions/none"]
)
def test_other_references_stay_named_errors(folder: Path, ref: str) -> None:
    with pytest.raises(GrammarError) as error:
        compile_json_schema({"$ref": ref}, GrammarOptions(ref_dir=str(folder)))
    assert error.value.keyword == "$ref"


def test_without_ref_dir_nothing_is_loaded(folder: Path) -> None:
    with pytest.raises(GrammarError, match="only references inside this schema"):
        compile_json_schema({"$ref": "base.json#/definitions/int"})


def test_prefix_map_loads_by_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", "int.json", {"type": "integer"})
    schema = {
        "$id": "http://localhost:1234/sub/main.json",
        "items": {"$ref": "int.json"},
        "properties": {"a": {"$ref": "http://localhost:1234/sub/int.json"}},
    }
    options = GrammarOptions(ref_map=(("http://localhost:1234/", str(tmp_path)),))
    dfa = compile_json_schema({**schema, "type": "array"}, options).dfa
    assert dfa.accepts(b"[1,2]") and not dfa.accepts(b'["x"]')
    with pytest.raises(GrammarError):
        compile_json_schema({"$ref": "http://localhost:1234/../etc/passwd"}, options)
