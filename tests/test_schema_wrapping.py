"""The record's JSON Schema wraps a source document without changing what it means."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kor_cli.schema.document import record_document
from kor_cli.validate import RecordValidator, json_validator

STORE = Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata" / "schemastore"
INT = {"type": "integer"}


def agree(document: dict, instances: list) -> None:
    """Wrapped validation says what plain validation of the document says, per instance."""
    plain = json_validator(document)
    wrapped = RecordValidator(record_document(document, "r"), "r")
    for instance in instances:
        expected = not list(plain.iter_errors(instance))
        assert (not wrapped.validate({"r": instance})[1]) is expected, instance


def test_refs_move_under_the_root_id() -> None:
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"n": INT},
        "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#"}},
    }
    wrapped = record_document(document, "my/root")
    assert wrapped["$schema"] == document["$schema"]
    inner = wrapped["properties"]["my/root"]
    assert "$schema" not in inner
    assert inner["properties"]["a"]["$ref"] == "#/properties/my~1root/$defs/n"
    assert inner["properties"]["b"]["$ref"] == "#/properties/my~1root"
    agree(document, [{"a": 1}, {"a": "x"}, {"b": {"a": 2}}, {"b": {"a": "y"}}])


def test_refs_relative_to_the_root_id_and_keyword_like_names() -> None:
    document = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "https://example.com/s/a.json",
        "definitions": {"group": {"item": INT}, "n": {"minimum": 3}},
        "properties": {
            "default": {"$ref": "a.json#/definitions/group/item"},
            "enum": {"$ref": "https://example.com/s/a.json#/definitions/n"},
            "const": {"const": {"$ref": "#/not/a/ref"}},
        },
    }
    inner = record_document(document, "r")["properties"]["r"]
    assert inner["properties"]["default"]["$ref"] == "#/properties/r/definitions/group/item"
    assert inner["properties"]["const"]["const"] == {"$ref": "#/not/a/ref"}  # data, untouched
    agree(document, [{"default": 1}, {"default": "x"}, {"enum": 4}, {"enum": 2}, {"const": 1}])


def test_embedded_resources_keep_their_own_refs() -> None:
    document = {
        "properties": {
            "a": {
                "$id": "https://example.com/inner.json",
                "$defs": {"n": INT},
                "$ref": "#/$defs/n",
            }
        },
        "x-kor-examples": [{"text": "t", "output": {"a": 1}}],
    }
    inner = record_document(document, "r")["properties"]["r"]
    assert inner["properties"]["a"]["$ref"] == "#/$defs/n"
    assert "x-kor-examples" not in inner
    agree(document, [{"a": 1}, {"a": "x"}])


@pytest.mark.skipif(not STORE.is_dir(), reason="../shared/testdata/schemastore is absent")
def test_schemastore_sample_validates_the_same_wrapped() -> None:
    folders = sorted((STORE / "valid").iterdir())[::8] + sorted((STORE / "invalid").iterdir())[::8]
    checked = 0
    for folder in folders:
        schema_path = STORE / "schemas" / f"{folder.name}.json"
        if not schema_path.is_file():
            continue
        document = json.loads(schema_path.read_text(encoding="utf-8"))
        instances = []
        for path in sorted(folder.iterdir()):
            try:
                instance = json.loads(path.read_text(encoding="utf-8"))
                list(json_validator(document).iter_errors(instance))
            except Exception:  # not JSON, or plain validation cannot run (remote refs, ...)
                continue
            instances.append(instance)
        agree(document, instances)
        checked += len(instances)
    assert checked > 100
