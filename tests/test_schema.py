"""Schema loading: the three sources, the normalised tree, the Pydantic model, the errors."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kor_cli.errors import SchemaError
from kor_cli.schema import Node, Option, Schema, load_schema

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SAMPLE_SCHEMAS = [
    "schemas/person.yaml",
    "schemas/person_model.py:Person",
    "schemas/restaurant_review.yaml",
    "schemas/weather.json",
    "schemas/receipt.yaml",
]


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(spec: str) -> str:
    with pytest.raises(SchemaError) as caught:
        load_schema(spec)
    return str(caught.value)


# --- samples ------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SAMPLE_SCHEMAS)
def test_sample_schemas_load_with_valid_examples(in_repo: None, spec: str) -> None:
    schema = load_schema(spec)
    assert schema.examples, "every sample has few-shot examples"
    jsonschema.Draft202012Validator.check_schema(schema.json_schema())
    validator = jsonschema.Draft202012Validator(schema.json_schema())
    model = schema.pydantic_model()
    for _, value in schema.root.examples:  # root-level examples are whole records
        if value:
            record = {schema.root.id: value}
            validator.validate(record)
            model.model_validate(record)


def test_sample_root_ids_and_shapes(in_repo: None) -> None:
    assert load_schema("schemas/person.yaml").root.id == "person"
    review = load_schema("schemas/restaurant_review.yaml").root
    assert (review.id, review.many) == ("review", True)
    sentiment = next(node for node in review.attributes if node.id == "sentiment")
    assert [option.id for option in sentiment.options] == ["positive", "negative", "neutral"]
    weather = load_schema("schemas/weather.json").root
    assert weather.id == "get_current_weather"
    assert weather.attributes[1].type == "selection"
    receipt = load_schema("schemas/receipt.yaml").root
    items = receipt.attributes[-1]
    assert (items.id, items.many, items.type) == ("items", True, "object")


def test_pydantic_sample_matches_yaml_sample(in_repo: None) -> None:
    yaml_schema = load_schema("schemas/person.yaml")
    model_schema = load_schema("schemas/person_model.py:Person")
    assert model_schema.json_schema() == yaml_schema.json_schema()
    assert model_schema.examples == yaml_schema.examples
    assert model_schema.typescript() == yaml_schema.typescript()


def test_pydantic_class_by_module_path(in_repo: None) -> None:
    schema = load_schema("schemas.person_model:Person")
    assert schema.json_schema() == load_schema("schemas/person.yaml").json_schema()


# --- one shape, three sources -------------------------------------------------------


def test_three_sources_give_the_same_json_schema() -> None:
    sources = [
        load_schema(str(DATA / "contact.yaml")),
        load_schema(str(DATA / "contact.json")),
        load_schema(f"{DATA / 'contact_model.py'}:Contact"),
    ]
    first = sources[0]
    for other in sources[1:]:
        assert other.json_schema() == first.json_schema()
        assert other.examples == first.examples
        assert other.typescript() == first.typescript()
    jsonschema.Draft202012Validator.check_schema(first.json_schema())


def test_json_schema_shape_of_nodes() -> None:
    contact = load_schema(str(DATA / "contact.yaml")).json_schema()
    assert contact["required"] == ["contact"] and contact["additionalProperties"] is False
    props = contact["properties"]["contact"]["properties"]
    assert props["email"] == {
        "description": "Email address",
        "anyOf": [{"type": "string", "format": "email"}, {"type": "null"}],
    }
    assert props["phones"]["items"] == {"type": "string", "pattern": "^[0-9+ -]+$"}
    assert props["phones"]["maxItems"] == 3
    assert props["tags"]["items"] == {"type": "string", "enum": ["vip", "new"]}
    assert contact["properties"]["contact"]["required"] == ["name", "email", "kind", "address"]


def test_many_root_is_an_array_of_objects(in_repo: None) -> None:
    review = load_schema("schemas/restaurant_review.yaml").json_schema()
    root = review["properties"]["review"]
    assert root["type"] == "array" and root["items"]["type"] == "object"


def test_emitted_json_schema_loads_back_to_the_same(tmp_path: Path) -> None:
    schema = load_schema(str(DATA / "contact.yaml"))
    document = dict(schema.json_schema()["properties"]["contact"], title="contact")
    again = load_schema(write(tmp_path, "again.json", json.dumps(document)))
    assert again.json_schema() == schema.json_schema()


# --- root ids -----------------------------------------------------------------------


def test_json_schema_root_id_from_title_or_file_stem(tmp_path: Path) -> None:
    body = {"type": "object", "properties": {"a": {"type": "string"}}}
    titled = write(tmp_path, "x.json", json.dumps({**body, "title": "Weather Report"}))
    assert load_schema(titled).root.id == "weather_report"
    untitled = write(tmp_path, "GetWeather.json", json.dumps(body))
    assert load_schema(untitled).root.id == "get_weather"


def test_pydantic_root_id_is_snake_case_class_name(tmp_path: Path) -> None:
    source = (
        "from pydantic import BaseModel, ConfigDict\n"
        "class RestaurantReview(BaseModel):\n"
        "    model_config = ConfigDict(title='Something Else')\n"
        "    text: str\n"
    )
    path = write(tmp_path, "models.py", source)
    assert load_schema(f"{path}:RestaurantReview").root.id == "restaurant_review"


# --- the Pydantic model -------------------------------------------------------------


PERSON = {"person": {"name": "Ann", "age": 31, "city": "Oslo"}}


@pytest.mark.parametrize(
    "record",
    [
        {"person": {"name": "Ann", "age": 31}},  # missing field
        {"person": {**PERSON["person"], "email": "a@b.c"}},  # extra field
        {"person": {**PERSON["person"], "age": "31"}},  # no str → int coercion
        {"person": {**PERSON["person"], "age": True}},  # no bool as int
        {"person": {**PERSON["person"], "age": 31.5}},
        {"person": {**PERSON["person"], "age": -1}},  # minimum: 0
        {"person": {**PERSON["person"], "name": None}},  # not nullable
        {"someone": PERSON["person"]},  # wrong root id
        {"person": PERSON["person"], "more": 1},
    ],
)
def test_person_model_rejects(in_repo: None, record: dict) -> None:
    schema = load_schema("schemas/person.yaml")
    with pytest.raises(ValueError):
        schema.pydantic_model().model_validate(record)
    assert not jsonschema.Draft202012Validator(schema.json_schema()).is_valid(record)


def test_person_model_accepts(in_repo: None) -> None:
    model = load_schema("schemas/person.yaml").pydantic_model()
    assert model.model_validate(PERSON).model_dump(mode="json") == PERSON


RECEIPT = {
    "merchant": "Shop",
    "date": "2024-11-02",
    "currency": None,
    "total": 9,
    "items": [{"name": "Apple", "quantity": 3, "price": 0.5}],
}


@pytest.mark.parametrize(
    ("change", "valid"),
    [
        ({}, True),
        ({"currency": "USD"}, True),
        ({"currency": "usd"}, False),  # pattern
        ({"date": "02/11/2024"}, False),  # format: date
        ({"date": "2024-02-30"}, False),
        ({"items": []}, False),  # minItems: 1
        ({"items": [{"name": "Apple", "quantity": 0, "price": 0.5}]}, False),
        ({"total": -1}, False),
    ],
)
def test_receipt_model_and_json_schema_agree(in_repo: None, change: dict, valid: bool) -> None:
    schema = load_schema("schemas/receipt.yaml")
    record = {"receipt": {**RECEIPT, **change}}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    validator = jsonschema.Draft202012Validator(schema.json_schema(), format_checker=checker)
    assert validator.is_valid(record) is valid
    try:
        schema.pydantic_model().model_validate(record)
        accepted = True
    except ValueError:
        accepted = False
    assert accepted is valid


def test_required_nullable_field_must_be_present(in_repo: None) -> None:
    model = load_schema("schemas/receipt.yaml").pydantic_model()
    record = {key: value for key, value in RECEIPT.items() if key != "currency"}
    with pytest.raises(ValueError):
        model.model_validate({"receipt": record})


def test_numbers_keep_integers_and_selections_are_literals(in_repo: None) -> None:
    receipt = load_schema("schemas/receipt.yaml").pydantic_model()
    dumped = receipt.model_validate({"receipt": RECEIPT}).model_dump(mode="json")
    assert dumped["receipt"]["total"] == 9 and isinstance(dumped["receipt"]["total"], int)
    review = load_schema("schemas/restaurant_review.yaml").pydantic_model()
    item = {"aspect": "a", "sentiment_word": "b", "sentiment": "great", "reference": "c"}
    with pytest.raises(ValueError):
        review.model_validate({"review": [item]})
    review.model_validate({"review": [{**item, "sentiment": "neutral"}]})


def test_unique_items_and_optional_fields() -> None:
    model = load_schema(str(DATA / "contact.yaml")).pydantic_model()
    base = {"name": "A", "email": None, "kind": "work", "address": {"city": "Oslo"}}
    model.model_validate({"contact": base})
    with pytest.raises(ValueError):
        model.model_validate({"contact": {**base, "tags": ["vip", "vip"]}})
    with pytest.raises(ValueError):
        model.model_validate({"contact": {**base, "score": 10}})  # exclusiveMaximum
    dumped = model.model_validate({"contact": base}).model_dump(mode="json", exclude_unset=True)
    assert dumped == {"contact": base}


def test_ids_that_are_not_python_names_round_trip() -> None:
    root = Node(
        id="doc",
        type="object",
        attributes=[Node(id="_id"), Node(id="first-name"), Node(id="model_config")],
    )
    record = {"doc": {"_id": "1", "first-name": "Ann", "model_config": "x"}}
    model = Schema(root).pydantic_model()
    assert model.model_validate(record).model_dump(mode="json") == record


# --- examples -----------------------------------------------------------------------


def test_examples_gathered_in_kor_order_with_nothing_as_none() -> None:
    root = Node(
        id="obj",
        type="object",
        attributes=[
            Node(id="a", examples=[("t1", "x")]),
            Node(
                id="s",
                type="selection",
                options=[Option(id="yes", examples=["t2"]), Option(id="no")],
                null_examples=["t3"],
            ),
            Node(id="n", type="integer", many=True, examples=[("t4", 0)]),
        ],
        examples=[("t0", {"a": "x", "s": "no", "n": [1]}), ("t5", {})],
    )
    assert Schema(root).examples == [
        ("t0", {"a": "x", "s": "no", "n": [1]}),
        ("t5", None),
        ("t1", {"a": "x"}),
        ("t2", {"s": "yes"}),
        ("t3", None),
        ("t4", {"n": [0]}),  # 0 is a value, not "nothing" (Kor would drop it)
    ]


def test_bad_example_names_the_example(tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "bad.yaml",
        "id: person\nattributes:\n  - id: name\n  - id: age\n    type: integer\n"
        "    examples:\n      - {text: I am 3, output: 3}\n      - {text: I am old, output: old}\n",
    )
    message = error_of(spec)
    assert "example 2 of 'person.age'" in message and "'I am old'" in message
    assert "valid integer" in message


def test_example_leaving_out_a_stated_required_field_is_named(tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "partial.yaml",
        "id: p\nattributes: [{id: a}, {id: b, required: true}]\n"
        "examples:\n  - {text: t, output: {a: x}}\n",
    )
    message = error_of(spec)
    assert "example 1 of 'p'" in message and "b: Field required" in message
    assert "leave out only optional fields" in message


# --- errors -------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    for name in ("nope.yaml", "nope.json", "nope.py:Model"):
        message = error_of(str(tmp_path / name))
        assert "not found" in message and "nope" in message


def test_unknown_spec_kind() -> None:
    assert "unknown schema kind" in error_of("schema.toml")


def test_non_utf8_schema_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("id: café\nattributes: [{id: a}]\n".encode("latin-1"))
    message = error_of(str(path))
    assert str(path) in message and "not UTF-8" in message


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    spec = write(tmp_path, "broken.yaml", "id: person\nattributes:\n  - id: [unclosed\n")
    message = error_of(spec)
    assert message.startswith(f"{spec}:4:") and "YAML syntax error" in message


def test_yaml_duplicate_key_has_line(tmp_path: Path) -> None:
    spec = write(tmp_path, "dup.yaml", "id: p\nattributes: [{id: a}]\nid: q\n")
    assert error_of(spec) == f"{spec}:3:1: duplicate key 'id'"


def test_yaml_unknown_key_suggests(tmp_path: Path) -> None:
    spec = write(tmp_path, "k.yaml", "id: person\nattributes:\n  - id: age\n    descripton: x\n")
    message = error_of(spec)
    assert message == f"{spec}: person.age: unknown key 'descripton' (did you mean 'description'?)"


def test_yaml_unknown_type_suggests(tmp_path: Path) -> None:
    spec = write(tmp_path, "t.yaml", "id: person\nattributes:\n  - id: age\n    type: integr\n")
    message = error_of(spec)
    assert "person.age: unknown type 'integr' (did you mean 'integer'?)" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- id: a\n", "the top level must be a mapping"),
        ("attributes: [{id: a}]\n", "<root>: every node needs an 'id'"),
        ("id: p\nattributes: [{type: text}]\n", "p.attributes[0]: every node needs an 'id'"),
        ("id: p\nattributes: [{id: a, many: yes please}]\n", "p.a: 'many' must be true or false"),
        ("id: p\nattributes: [{id: a, type: text, options: [x]}]\n", "p.a: key 'options' only"),
        ("id: p\ntype: text\n", "the root node 'p' must be an object"),
        ("id: p\nnullable: true\nattributes: [{id: a}]\n", "cannot be optional or nullable"),
        ("id: p\nattributes: [{id: a}, {id: a}]\n", "attribute id 'a' appears twice"),
        ("id: p\nattributes: [{id: a, type: integer, pattern: x}]\n", "'pattern' does not apply"),
        ("id: p\nattributes: [{id: a, minItems: 1}]\n", "'minItems' does not apply to lists"),
        ("id: p\nattributes: [{id: a, format: dat}]\n", "unsupported format 'dat' (did you"),
        ("id: p\nattributes: [{id: a, pattern: '('}]\n", "invalid regular expression"),
        ("id: p\nattributes: [{id: a, minLength: 3, maxLength: 2}]\n", "greater than"),
        ("id: p\nattributes: [{id: a}]\nexamples: [{text: t}]\n", "exactly 'text' and 'output'"),
        ("id: p\nattributes: [{id: s, type: selection}]\n", "options are required"),
    ],
)
def test_yaml_structure_errors(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(write(tmp_path, "s.yaml", text))


def test_json_syntax_error_has_line(tmp_path: Path) -> None:
    spec = write(tmp_path, "broken.json", '{\n  "type": "object",\n}\n')
    assert error_of(spec).startswith(f"{spec}:3:1: JSON syntax error")


def _obj(**properties: dict) -> dict:
    return {"type": "object", "properties": properties}


def test_shared_ref_is_not_recursion(tmp_path: Path) -> None:
    point = _obj(x={"type": "number"})
    document = {
        **_obj(start={"$ref": "#/$defs/P"}, end={"$ref": "#/$defs/P"}),
        "$defs": {"P": point},
    }
    schema = load_schema(write(tmp_path, "line.json", json.dumps(document)))
    assert [child.id for child in schema.root.attributes] == ["start", "end"]


def test_nullable_forms_in_json_schema(tmp_path: Path) -> None:
    document = _obj(
        a={"type": ["string", "null"]},
        b={"enum": ["x", None]},
        c={"oneOf": [{"type": "null"}, {"type": "integer"}]},
    )
    root = load_schema(write(tmp_path, "n.json", json.dumps(document))).root
    assert [(c.type, c.nullable) for c in root.attributes] == [
        ("text", True),
        ("selection", True),
        ("integer", True),
    ]


def test_pydantic_errors(tmp_path: Path) -> None:
    source = "from pydantic import BaseModel\nclass Person(BaseModel):\n    a: str\nx = 1\n"
    path = write(tmp_path, "m.py", source)
    assert "did you mean 'Person'" in error_of(f"{path}:Persn")
    broken = write(tmp_path, "broken.py", "def oops(:\n")
    assert "SyntaxError" in error_of(f"{broken}:Model")
    assert "No module named" in error_of("no_such_package_here.models:Model")
    assert "'x' in" in error_of(f"{path}:x") and "not a Pydantic model" in error_of(f"{path}:x")


def test_pydantic_field_examples_and_null_examples(tmp_path: Path) -> None:
    source = (
        "from pydantic import BaseModel, Field\n"
        "class Pet(BaseModel):\n"
        "    name: str = Field(json_schema_extra={\n"
        "        'x-kor-examples': [{'text': 'my dog Rex', 'output': 'Rex'}],\n"
        "        'x-kor-null-examples': ['no pets here'],\n"
        "    })\n"
    )
    schema = load_schema(f"{write(tmp_path, 'pet.py', source)}:Pet")
    assert schema.examples == [("my dog Rex", {"name": "Rex"}), ("no pets here", None)]
