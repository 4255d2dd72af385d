"""JSON Schema → grammar, keyword by keyword on hand-picked instances: closed ordered
objects, canonical strings, formats, numbers, applicators, recursion, named errors and
the cache. The property-based half is test_grammar_json_schema.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_choice, compile_json_schema, serialize

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age"],
}


def accepts(schema: Any, instance: Any, **options: Any) -> bool:
    grammar = compile_json_schema(schema, GrammarOptions(**options))
    return grammar.dfa.accepts(serialize(instance, GrammarOptions(**options)).encode())


def test_objects_are_closed_and_ordered() -> None:
    assert accepts(PERSON, {"name": "Ann", "age": 3})
    assert accepts(PERSON, {"name": "Ann", "age": 3, "email": "a@b.co"})
    assert not accepts(PERSON, {"age": 3, "name": "Ann"})  # schema order only
    assert not accepts(PERSON, {"name": "Ann", "age": 3, "extra": 1})  # closed by default
    assert not accepts(PERSON, {"name": "Ann"})
    assert not accepts(PERSON, {"name": "Ann", "age": -1})
    assert accepts(PERSON, {"name": "Ann", "age": 3}, whitespace="spaced")
    spaced = compile_json_schema(PERSON, GrammarOptions(whitespace="spaced")).dfa
    assert spaced.accepts(b'{"name": "Ann", "age": 3}')
    assert not spaced.accepts(b'{"name":"Ann","age":3}')
    open_schema = {**PERSON, "additionalProperties": {"type": "integer"}}
    assert accepts(open_schema, {"name": "Ann", "age": 3, "extra": 1})
    assert not accepts(open_schema, {"name": "Ann", "age": 3, "extra": "x"})
    assert accepts({"type": "object"}, {"z": [1, {"y": None}], "a": "b"})


def test_strings_are_canonical_json() -> None:
    assert accepts({"type": "string"}, 'q"\\\n\x01é😀')
    dfa = compile_json_schema({"type": "string"}).dfa
    assert not dfa.accepts(b'"\\u00e9"') and not dfa.accepts(b'"\n"') and not dfa.accepts(b'"\\/"')
    assert serialize(1.0) == "1" and serialize(1e-7) == "0.0000001" and serialize(-0.0) == "0"
    assert serialize({"a": [True, None, 2.5]}, GrammarOptions(whitespace="spaced")) == (
        '{"a": [true, null, 2.5]}'
    )


def test_lengths_count_escapes_as_one_character() -> None:
    schema = {"type": "string", "minLength": 2, "maxLength": 2}
    assert accepts(schema, '\n"') and accepts(schema, "😀é")
    assert not accepts(schema, "abc") and not accepts(schema, "a")


def test_pattern_matches_the_decoded_string() -> None:
    schema = {"type": "string", "pattern": '^a"b\\n?$', "maxLength": 3}
    assert accepts(schema, 'a"b') and not accepts(schema, 'a"b\n')  # 4 characters
    assert accepts({"type": "string", "pattern": "b"}, "abc")  # search, not fullmatch
    assert not accepts({"type": "string", "pattern": "^b"}, "abc")


def test_formats() -> None:
    date = {"type": "string", "format": "date"}
    assert accepts(date, "2024-02-29") and not accepts(date, "2023-02-29")
    assert not accepts(date, "2023-04-31") and accepts(date, "2000-02-29")
    assert not accepts(date, "1900-02-29")
    assert accepts({"format": "uuid", "type": "string"}, "123e4567-e89b-12d3-a456-426614174000")
    ipv6 = {"type": "string", "format": "ipv6"}
    for text in ("::", "::1", "1::", "fe80::1:2", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4"):
        assert accepts(ipv6, text), text
    for text in ("1:2:3:4:5:6:7:8:9", "1::2::3", ":1", "12345::", "::1.2.3"):
        assert not accepts(ipv6, text), text
    duration = {"type": "string", "format": "duration"}
    assert (
        accepts(duration, "P1Y2M3DT4H5M6S")
        and not accepts(duration, "P")
        and not accepts(duration, "PT")
    )
    with pytest.raises(GrammarError, match="format") as error:
        compile_json_schema({"properties": {"d": {"format": "uri-template"}}})
    assert error.value.keyword == "format" and error.value.pointer == "/properties/d"


def test_numbers_and_enums() -> None:
    schema = {"type": "number", "minimum": 0, "exclusiveMaximum": 1.5}
    assert accepts(schema, 0) and accepts(schema, 1.49) and not accepts(schema, 1.5)
    assert not accepts(schema, -0.1)
    assert accepts({"type": "integer", "multipleOf": 3}, -9)
    assert not accepts({"type": "integer", "multipleOf": 3}, 10)
    assert accepts({"type": "integer"}, 2.0)  # canonical text of 2.0 is 2
    enum = {"enum": [{"b": 1, "a": 2}, 1, "x"], "type": ["object", "string"]}
    assert accepts(enum, {"b": 1, "a": 2}) and accepts(enum, "x") and not accepts(enum, 1)
    assert not accepts(enum, {"a": 2, "b": 1})  # members in the order the schema gives


def test_one_of_is_exclusive() -> None:
    schema = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}
    assert accepts(schema, 1) and accepts(schema, 2.5) and not accepts(schema, 3)
    assert not accepts(schema, 1.5)
    negated = {"type": "integer", "not": {"enum": [1, 2]}}
    assert accepts(negated, 3) and not accepts(negated, 2)
    conditional = {"if": {"minimum": 10}, "then": {"multipleOf": 2}, "else": {"maximum": 0}}
    assert accepts(conditional, 12) and not accepts(conditional, 11)
    assert accepts(conditional, -3) and not accepts(conditional, 3)


def test_all_of_merges_objects() -> None:
    schema = {
        "allOf": [
            {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}, "a": {"minimum": 5}}},
        ]
    }
    assert accepts(schema, {"a": 5, "b": "x"}) and accepts(schema, {"a": 6})
    assert not accepts(schema, {"a": 4}) and not accepts(schema, {"b": "x"})


def test_dependencies() -> None:
    schema = {
        "type": "object",
        "properties": {"card": {"type": "string"}, "cvv": {"type": "string"}, "n": {}},
        "dependentRequired": {"card": ["cvv"]},
        "dependentSchemas": {"n": {"properties": {"cvv": {"maxLength": 3}}}},
    }
    assert accepts(schema, {"card": "1", "cvv": "123"}) and accepts(schema, {"cvv": "1234"})
    assert not accepts(schema, {"card": "1"}) and not accepts(schema, {"cvv": "1234", "n": 1})
    assert accepts(schema, {"cvv": "123", "n": 1})


def test_contains_counts_matching_items() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}}
    assert accepts(schema, [1, 7]) and accepts(schema, [9]) and not accepts(schema, [1, 2])
    bounded = {**schema, "minContains": 2, "maxContains": 3, "maxItems": 4}
    assert accepts(bounded, [5, 1, 6]) and not accepts(bounded, [5, 1])
    assert not accepts(bounded, [5, 6, 7, 8]) and not accepts(bounded, [5, 6, 1, 1, 1])


def test_pattern_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}, "n$": {"type": "integer"}},
    }
    assert accepts(schema, {"id": 1, "x-a": "b"}) and accepts(schema, {"x-a": "s", "zn": 2})
    assert not accepts(schema, {"x-a": 1}) and not accepts(schema, {"other": "b"})
    assert not accepts(schema, {"x-n": 5})  # matches both patterns: must be both
    assert accepts({"patternProperties": {"^a": {"type": "integer"}}}, {"a1": 1, "b": "x"})
    closed = {**schema, "additionalProperties": False, "properties": {"idn": {}}}
    assert not accepts(closed, {"idn": "x"})  # "idn" also matches "n$"


def test_many_pattern_properties_split_only_where_keys_exist() -> None:
    kinds = ["integer", "string", "boolean", "null", "array", "object", "integer", "string"]
    letters = "abcdefgh"
    patterns = {f"^{c}": {"type": kind} for c, kind in zip(letters, kinds, strict=True)}
    schema = {"type": "object", "patternProperties": {**patterns, "z$": {"type": "integer"}}}
    assert accepts(schema, {"a1": 1, "b": "x", "c": True, "d": None, "g": 2, "h": "y"})
    assert accepts(schema, {"e": [], "f": {}, "q": "free"})
    assert accepts(schema, {"az": 1}) and not accepts(schema, {"bz": "x"})  # both apply
    assert not accepts(schema, {"a": "x"}) and not accepts(schema, {"zz": "x"})
    many = {"type": "object", "patternProperties": {f"^{i:02}": {} for i in range(17)}}
    with pytest.raises(GrammarError, match="more than 16 patterns"):
        compile_json_schema(many)


def test_unique_items_over_few_values() -> None:
    schema = {"type": "array", "items": {"enum": ["a", "b", 1, 12]}, "uniqueItems": True}
    for whitespace in ("compact", "spaced"):
        assert accepts(schema, [12, 1, "a", "b"], whitespace=whitespace)
        assert not accepts(schema, ["a", "b", "a"], whitespace=whitespace)
        assert not accepts(schema, [1, 1], whitespace=whitespace)
    assert accepts({**schema, "maxItems": 1, "items": {"type": "string"}}, ["x"])


def test_recursion_has_no_depth_bound() -> None:
    tree = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["v"],
    }
    grammar = compile_json_schema(tree)
    assert grammar.has_calls and len(grammar.rules.names) == 1  # the node, calling itself
    # the bounded DFA view (for DFA-only consumers) inlines the rules max_recursion_depth deep
    deep = {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3, "kids": [{"v": 4}]}]}]}
    assert accepts(tree, deep)
    assert not accepts(tree, {"v": 0, "kids": [deep]}, max_recursion_depth=3)
    assert accepts(tree, {"v": 0, "kids": [deep]}, max_recursion_depth=4)
    endless = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
    with pytest.raises(GrammarError, match="no finite expansion") as error:
        compile_json_schema(endless)
    assert error.value.keyword == "$ref" and error.value.pointer == "/properties/next"


def test_any_value_depth() -> None:
    assert accepts({}, [[["x"]]]) and not accepts({}, [[[["x"]]]])
    assert accepts({}, [[[["x"]]]], max_any_depth=4)


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        (
            {"properties": {"t": {"type": "array", "uniqueItems": True, "contains": {}}}},
            "uniqueItems",
            "/properties/t",
        ),
        (
            {"items": {"prefixItems": [{}], "contains": {"type": "integer"}}},
            "contains",
            "/items",
        ),
        (
            {"properties": {"o": {"patternProperties": {"x(?=x)": {}}}}},
            "patternProperties",
            "/properties/o",
        ),
        (
            # options that may overlap: a product, where uniqueItems has no run-time check
            {"oneOf": [{"type": "array", "maxItems": 1}, {"type": "array", "uniqueItems": True}]},
            "uniqueItems",
            "/oneOf/1",
        ),
        (
            {"$defs": {"a": {"$recursiveRef": "#"}}, "$ref": "#/$defs/a"},
            "$recursiveRef",
            "/$defs/a",
        ),
        ({"$ref": "https://example.com/other.json"}, "$ref", ""),
        ({"type": "string", "pattern": "x(?=x)"}, "pattern", ""),
    ],
)
def test_errors_name_keyword_and_pointer(schema: Any, keyword: str, pointer: str) -> None:
    with pytest.raises(GrammarError) as error:
        compile_json_schema(schema)
    assert error.value.keyword == keyword and error.value.pointer == pointer
    assert keyword in str(error.value)


def test_keywords_for_other_types_are_harmless() -> None:
    assert accepts({"type": "string", "uniqueItems": True, "minimum": 3}, "x")
    assert accepts({"minimum": 5}, "any string") and not accepts({"minimum": 5}, 4)


def test_lenient_drops_with_warning() -> None:
    unique = {"type": "array", "uniqueItems": True, "contains": {}}  # under a product
    schema = {"type": "object", "properties": {"t": unique}}
    grammar = compile_json_schema(schema, GrammarOptions(lenient=True))
    assert grammar.warnings and "uniqueItems" in grammar.warnings[0]
    assert "/properties/t" in grammar.warnings[0]
    assert grammar.dfa.accepts(b'{"t":[1,1]}')


def test_empty_grammars_are_errors() -> None:
    for schema in (
        False,
        {"not": {}},
        {"enum": []},
        {"type": "integer", "minimum": 3, "maximum": 2},
    ):
        with pytest.raises(GrammarError):
            compile_json_schema(schema)


def test_cache_and_keys() -> None:
    a = compile_json_schema(PERSON)
    assert compile_json_schema(json.loads(json.dumps(PERSON))) is a
    assert a.kind == "json-schema" and len(a.key) == 64
    same = {**PERSON, "title": "Person", "description": "annotations change nothing"}
    assert compile_json_schema(same).key == a.key
    choice = compile_choice(["yes", "no", "n/a"])
    assert choice.kind == "choice" and choice.dfa.accepts(b"n/a") and not choice.dfa.accepts(b"y")
