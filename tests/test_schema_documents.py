"""JSON Schemas beyond Kor's node tree: loaded as documents the grammar engine accepts,
rendered as TypeScript, validated with jsonschema (and a user's own Pydantic class)."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest

from kor_cli.errors import SchemaError
from kor_cli.schema import load_schema
from kor_cli.typescript_json import render_document_typescript

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def _obj(**properties: object) -> dict:
    return {"type": "object", "properties": properties}


def load(tmp_path: Path, document: dict, name: str = "s.json"):  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return load_schema(str(path))


def error_of(tmp_path: Path, document: dict) -> str:
    with pytest.raises(SchemaError) as caught:
        load(tmp_path, document)
    return str(caught.value)


TREE = {
    "$defs": {
        "Tree": _obj(
            label={"type": "string"},
            children={"type": "array", "items": {"$ref": "#/$defs/Tree"}},
        )
    },
    "$ref": "#/$defs/Tree",
}

# (keyword, schema of property 'a', a valid value of 'a', an invalid value of 'a')
KEYWORD_CASES = [
    ("not", {"type": "string", "not": {"const": "no"}}, "yes", "no"),
    (
        "if/then/else",
        {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}},
        7,
        3,
    ),  # noqa: E501
    (
        "patternProperties",
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
        {"x1": 1},
        {"x1": "a"},
    ),  # noqa: E501
    (
        "prefixItems",
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        ["a", 1],
        ["a", "b"],
    ),  # noqa: E501
    (
        "contains",
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}},
        [1, 3],
        [1, 2],
    ),  # noqa: E501
    ("anyOf", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, 4, 4.5),
    (
        "oneOf",
        {"oneOf": [{"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 2}]},
        1,
        2,
    ),  # noqa: E501
    (
        "object without properties",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"k": 1},
        {"k": "v"},
    ),  # noqa: E501
    ("format uri", {"type": "string", "format": "uri"}, "https://a.example/x?y=1", "not a uri"),
    ("format hostname", {"type": "string", "format": "hostname"}, "a.example", "a..b"),
    ("format duration", {"type": "string", "format": "duration"}, "P3DT4H", "3 days"),
    ("format json-pointer", {"type": "string", "format": "json-pointer"}, "/a/b~1c", "a/b"),
    ("enum of any values", {"enum": [1, "two", None]}, None, 3),
]


@pytest.mark.parametrize(
    ("keyword", "schema", "good", "bad"), KEYWORD_CASES, ids=[c[0] for c in KEYWORD_CASES]
)  # noqa: E501
def test_keywords_the_engine_enforces_load_render_and_validate(
    tmp_path: Path, keyword: str, schema: dict, good: object, bad: object
) -> None:
    loaded = load(tmp_path, {**_obj(a=schema), "required": ["a"]})
    assert loaded.tree == keyword.startswith("format"), keyword  # formats fit the node tree
    assert loaded.typescript().startswith("```TypeScript\n\ns: { // \n a: ")
    validator = loaded.validator()
    assert validator.validate({"s": {"a": good}}) == ({"s": {"a": good}}, [])
    data, errors = validator.validate({"s": {"a": bad}})
    assert data is None and errors and errors[0].startswith("s.a"), errors


def test_recursive_ref_renders_named_type_and_validates(tmp_path: Path) -> None:
    loaded = load(tmp_path, {**TREE, "description": "A tree"}, "tree.json")
    assert loaded.typescript() == (
        "```TypeScript\n\n"
        "tree: Tree // A tree\n"
        "\n"
        "interface Tree { // \n"
        " label?: string // \n"
        " children?: Array<Tree> // \n"
        "}\n"
        "```\n"
    )
    document = loaded.json_schema()
    assert document["properties"]["tree"]["$ref"] == "#/properties/tree/$defs/Tree"
    validator = loaded.validator()
    record = {"tree": {"label": "r", "children": [{"label": "c", "children": []}]}}
    assert validator.validate(record)[1] == []
    assert validator.validate({"tree": {"children": [{"label": 3}]}})[1]


def test_pydantic_recursive_model_loads_and_keeps_the_class(tmp_path: Path) -> None:
    source = (
        "from __future__ import annotations\n"
        "from pydantic import BaseModel, field_validator\n"
        "class Tree(BaseModel):\n"
        "    label: str\n"
        "    children: list[Tree] = []\n"
        "    @field_validator('label')\n"
        "    @classmethod\n"
        "    def lower(cls, value: str) -> str:\n"
        "        if value != value.lower():\n"
        "            raise ValueError('labels are lower case')\n"
        "        return value\n"
    )
    path = tmp_path / "tree.py"
    path.write_text(source, encoding="utf-8")
    loaded = load_schema(f"{path}:Tree")
    assert not loaded.tree and loaded.user_model is not None
    assert "interface Tree {" in loaded.typescript()
    validator = loaded.validator()
    good = {"tree": {"label": "a", "children": [{"label": "b", "children": []}]}}
    assert validator.validate(good) == (good, [])
    data, errors = validator.validate({"tree": {"label": "a", "children": [{"label": "B"}]}})
    assert data is None and "labels are lower case" in errors[0]


def test_user_class_validators_run_for_tree_schemas_too(tmp_path: Path) -> None:
    source = (
        "from pydantic import BaseModel, field_validator\n"
        "class Person(BaseModel):\n"
        "    name: str\n"
        "    @field_validator('name')\n"
        "    @classmethod\n"
        "    def no_digits(cls, value: str) -> str:\n"
        "        if any(ch.isdigit() for ch in value):\n"
        "            raise ValueError('no digits in names')\n"
        "        return value\n"
    )
    path = tmp_path / "person.py"
    path.write_text(source, encoding="utf-8")
    loaded = load_schema(f"{path}:Person")
    assert loaded.tree
    validator = loaded.validator()
    assert validator.validate({"person": {"name": "Ann"}}) == ({"person": {"name": "Ann"}}, [])
    assert "no digits in names" in validator.validate({"person": {"name": "R2D2"}})[1][0]


def test_unions_records_and_tuples_in_typescript(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        {
            **_obj(
                v={"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer"}]},
                m={"type": "object", "additionalProperties": {"type": "number"}},
                t={"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
                n={"type": ["integer", "null"], "description": "Count", "minimum": 0},
            ),
            "required": ["v", "m", "t", "n"],
        },
    )
    assert loaded.typescript() == (
        "```TypeScript\n\n"
        "s: { // \n"
        " v: string | number // \n"
        " m: Record<string, number> // \n"
        " t: [string, number, ...Array<any>] // \n"
        " n: number | null // Count (minimum: 0)\n"
        "}\n"
        "```\n"
    )


@pytest.mark.parametrize(
    "spec",
    [
        "schemas/person.yaml",
        "schemas/restaurant_review.yaml",
        "schemas/weather.json",
        "schemas/receipt.yaml",
        str(DATA / "contact.yaml"),
        str(DATA / "kor_order.yaml"),
    ],
)
def test_document_view_agrees_with_the_tree_view(
    monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    monkeypatch.chdir(ROOT)
    schema = load_schema(spec)
    rendered = render_document_typescript(schema.json_schema(), schema.root.id, constraints=False)
    assert rendered == schema.typescript()


def test_examples_of_a_document_schema_are_gathered_and_checked(tmp_path: Path) -> None:
    document = {
        **_obj(
            a={"not": {"const": 0}, "x-kor-examples": [{"text": "a is 5", "output": 5}]},
            b={"type": "array", "items": {"type": "string"}},
        ),
        "x-kor-examples": [{"text": "a=1, b=x", "output": {"a": 1, "b": ["x"]}}],
        "x-kor-null-examples": ["nothing"],
    }
    loaded = load(tmp_path, document)
    assert loaded.examples == [
        ("a=1, b=x", {"a": 1, "b": ["x"]}),
        ("nothing", None),
        ("a is 5", {"a": 5}),
    ]  # noqa: E501
    assert "x-kor-examples" not in json.dumps(loaded.json_schema())
    document["properties"]["a"]["x-kor-examples"] = [{"text": "zero", "output": 0}]
    message = error_of(tmp_path, document)
    assert "example 1 of 's.a' ('zero') does not fit the schema" in message


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (_obj(a={"$ref": "#/$defs/Missing"}), "'#/$defs/Missing' points nowhere"),
        (_obj(a={"$ref": "other.json#/x"}), "'other.json#/x'"),
        (_obj(a={"type": "strin"}), "not a valid JSON Schema"),
        (_obj(a={"minLength": -1}), "at '/properties/a/minLength'"),
        ({**_obj(a={"not": {}}), "x-kor-examples": [{"text": 1}]}, "x-kor-examples"),
    ],
)
def test_errors_name_the_problem_and_the_pointer(
    tmp_path: Path, document: dict, expected: str
) -> None:
    assert expected in error_of(tmp_path, document)


def test_schema_pickles_for_workers_with_the_users_class(tmp_path: Path) -> None:
    source = "from pydantic import BaseModel\nclass Pet(BaseModel):\n    name: str\n"
    path = tmp_path / "pet.py"
    path.write_text(source, encoding="utf-8")
    loaded = load_schema(f"{path}:Pet")
    loaded.validator()
    data = pickle.dumps(loaded)
    del sys.modules[loaded.user_model.__module__]  # a fresh worker process has not imported it
    again = pickle.loads(data)
    assert again.user_model is not None and again.user_model.__name__ == "Pet"
    assert again.validator().validate({"pet": {"name": "Rex"}}) == ({"pet": {"name": "Rex"}}, [])
    assert again.validator().validate({"pet": {"name": 3}})[1]


def test_member_names_that_are_not_identifiers_are_quoted(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        {
            **_obj(**{"tree-edge": {"type": "string"}, "ok": {"not": {"type": "null"}}}),
            "required": ["ok", "a b"],
        },
    )
    assert loaded.typescript() == (
        "```TypeScript\n\n"
        "s: { // \n"
        ' "tree-edge"?: string // \n'
        " ok: any // not: null\n"
        ' "a b": any // \n'
        "}\n"
        "```\n"
    )


def test_validation_closes_objects_where_the_grammar_does(tmp_path: Path) -> None:
    document = {
        **_obj(
            a={"not": {"const": 0}},
            o={"allOf": [{"properties": {"x": {}}}, {"properties": {"y": {}}, "required": ["z"]}]},
            p={"type": "object", "additionalProperties": {"type": "integer"}},
        ),
        "required": ["a"],
    }
    closed = load(tmp_path, document).validator()
    assert closed.validate({"s": {"a": 1, "o": {"x": 1, "y": 2, "z": 3}, "p": {"k": 3}}})[1] == []
    assert "'b' not allowed" in closed.validate({"s": {"a": 1, "b": 2}})[1][0]
    assert closed.validate({"s": {"a": 1, "o": {"x": 1, "w": 2, "z": 3}}})[1][0].startswith("s.o:")
    path = tmp_path / "s.json"
    opened = load_schema(str(path), open_objects=True).validator()
    assert opened.validate({"s": {"a": 1, "b": 2}})[1] == []


def test_multiple_of_is_exact_decimal_arithmetic(tmp_path: Path) -> None:
    loaded = load(tmp_path, {**_obj(a={"multipleOf": 0.0001}), "required": ["a"]})
    validator = loaded.validator()
    assert validator.validate({"s": {"a": 96.005}})[1] == []  # 96.005 / 0.0001 is 960050.00...01
    assert validator.validate({"s": {"a": -0.7}})[1] == []
    assert "not a multiple of 0.0001" in validator.validate({"s": {"a": 0.00015}})[1][0]


def test_a_format_no_draft_defines_is_an_annotation(tmp_path: Path) -> None:
    loaded = load(tmp_path, {**_obj(a={"type": "integer", "format": "int32"}), "required": ["a"]})
    assert not loaded.tree
    assert loaded.validator().validate({"s": {"a": 5}}) == ({"s": {"a": 5}}, [])
