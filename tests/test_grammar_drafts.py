"""Keyword policy and draft semantics of the JSON Schema compiler (`json_drafts`)."""

from __future__ import annotations

from typing import Any

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar import ignored_keywords
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema

D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"


def accepts(schema: Any, *texts: str, **options: Any) -> list[bool]:
    dfa = compile_json_schema(schema, GrammarOptions(**options)).dfa
    return [dfa.accepts(t.encode()) for t in texts]


def test_unknown_keywords_are_annotations_and_listed() -> None:
    schema = {
        "type": "object",
        "readonly": True,
        "properties": {"a": {"type": "string", "_format": "x", "preferredOrder": [1]}},
        "x-extra": {"type": "integer"},
    }
    assert accepts(schema, '{"a":"s"}', '{"a":1}') == [True, False]
    assert ignored_keywords(schema) == [
        ("readonly", ""),
        ("x-extra", ""),
        ("_format", "/properties/a"),
        ("preferredOrder", "/properties/a"),
    ]


def test_metadata_is_not_listed() -> None:
    schema = {"title": "t", "description": "d", "default": 1, "examples": [1], "type": "integer"}
    assert ignored_keywords(schema) == []


def test_keywords_that_validate_stay_errors() -> None:
    with pytest.raises(GrammarError) as error:
        compile_json_schema({"properties": {"a": {"$recursiveRef": "#"}}})
    assert error.value.keyword == "$recursiveRef" and error.value.pointer == "/properties/a"


def test_open_objects_follows_the_specification() -> None:
    schema = {"properties": {"a": {"type": "integer"}}, "required": ["a"]}
    texts = ('{"a":1}', '{"a":1,"b":[true]}', '{"a":"x"}')
    assert accepts(schema, *texts) == [True, False, False]
    assert accepts(schema, *texts, open_objects=True) == [True, True, False]
    closed = {**schema, "additionalProperties": False}
    assert accepts(closed, *texts, open_objects=True) == [True, False, False]


def test_draft_is_read_from_schema() -> None:
    beside = {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 2}
    assert accepts(beside, '"abc"', '"ab"') == [False, True]  # 2020-12: siblings apply
    old = {**beside, "$schema": D7, "definitions": beside["$defs"], "$ref": "#/definitions/s"}
    assert accepts(old, '"abc"', "1") == [True, False]  # draft-07: siblings are ignored
    assert ("maxLength", "") in ignored_keywords(old)
    assert accepts({**old, "$schema": D2019}, '"abc"') == [False]


def test_dependencies_both_forms() -> None:
    schema = {
        "$schema": D7,
        "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
    }
    texts = ('{"a":1,"b":2}', '{"a":1}', '{"c":1}', '{"c":1,"d":2}', '{"b":1}')
    assert accepts(schema, *texts) == [True, False, False, True, True]


def test_array_form_items_and_additional_items() -> None:
    schema = {"items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False}
    texts = ('[1,"a"]', "[1]", '[1,"a",2]', '["a"]', "[]")
    assert accepts({**schema, "$schema": D7}, *texts) == [True, True, False, False, True]
    more = {**schema, "additionalItems": {"type": "boolean"}}
    assert accepts(more, '[1,"a",true]', '[1,"a",2]') == [True, False]
    lone = {"items": {"type": "integer"}, "additionalItems": False}
    assert accepts(lone, "[1,2,3]") == [True]  # ignored without array-form items
    assert ignored_keywords(lone) == [("additionalItems", "")]


def test_draft4_boolean_exclusive_bounds() -> None:
    schema = {"$schema": D4, "minimum": 1, "exclusiveMinimum": True, "maximum": 3}
    assert accepts(schema, "1", "2", "3", "1.5") == [False, True, True, True]
    upper = {"maximum": 3, "exclusiveMaximum": True, "type": "integer"}
    assert accepts(upper, "2", "3") == [True, False]


def test_ids_and_anchors_by_draft() -> None:
    draft4 = {
        "$schema": D4,
        "definitions": {"a": {"id": "#thing", "type": "integer"}},
        "properties": {"x": {"$ref": "#thing"}},
    }
    assert accepts(draft4, '{"x":1}', '{"x":"s"}') == [True, False]
    draft6 = {
        "$schema": D6,
        "definitions": {"a": {"$id": "item.json", "type": "string"}},
        "items": {"$ref": "item.json"},
    }
    assert accepts(draft6, '["s"]', "[1]") == [True, False]


def test_draft3_is_refused() -> None:
    with pytest.raises(GrammarError) as error:
        compile_json_schema({"$schema": "http://json-schema.org/draft-03/schema#"})
    assert error.value.keyword == "$schema"


def test_custom_formats_are_annotations() -> None:
    schema = {"properties": {"n": {"type": "integer", "format": "int32"}, "u": {"format": "uri"}}}
    assert accepts(schema, '{"n":1,"u":"http://x"}', '{"u":"not a uri"}') == [True, False]
    assert ignored_keywords(schema) == [("format", "/properties/n")]
