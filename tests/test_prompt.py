"""The extraction prompt: Kor's exact wording and layout, templates, input formatters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kor_cli.errors import InputError, UsageError
from kor_cli.prompt import default_template, load_template, render_prompt
from kor_cli.schema import Node, Schema, load_schema

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# docs/design.md §6: what Kor produces for this schema, example and input.
KOR_REFERENCE = (
    "Your goal is to extract structured information from the user's input that matches the form "
    "described below. When extracting information please make sure it matches the type information "
    "exactly. Do not add any attributes that do not appear in the schema shown below.\n\n"
    "```TypeScript\n\nobj: { // \n text_node: string // Text Field\n}\n```\n\n\n"
    "Please output the extracted information in JSON format. Do not output anything except for the "
    "extracted information. Do not add any clarifying information. Do not add any fields that are "
    "not in the schema. If the text contains attributes that do not appear in the schema, please "
    "ignore them. All output must be in JSON format and follow the schema specified above. "
    "Wrap the JSON in <json> tags.\n\n\n\n"
    "Input: hello\n"
    'Output: <json>{"obj": {"text_node": "goodbye"}}</json>\n'
    "Input: [text]\n"
    "Output:"
)


def reference_schema() -> Schema:
    text_node = Node(id="text_node", description="Text Field", examples=[("hello", "goodbye")])
    return Schema(Node(id="obj", type="object", attributes=[text_node]))


def test_kor_reference_prompt() -> None:
    assert render_prompt(reference_schema(), "[text]") == KOR_REFERENCE


def test_kor_reference_prompt_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "obj.yaml"
    path.write_text(
        "id: obj\nattributes:\n  - id: text_node\n    description: Text Field\n"
        "    examples: [{text: hello, output: goodbye}]\n",
        encoding="utf-8",
    )
    assert render_prompt(load_schema(str(path)), "[text]") == KOR_REFERENCE


@pytest.mark.parametrize("formatter", ["none", "triple_quotes", "text_prefix"])
@pytest.mark.parametrize("name", ["order", "review"])
def test_prompts_equal_kors_own_output(name: str, formatter: str) -> None:
    """Nested objects, many, selections with option and null examples, non-ASCII text and
    every input formatter, against prompts Kor 3.0.0 rendered (see tests/data/kor_order.yaml)."""
    expected = json.loads((DATA / "kor_reference_prompts.json").read_text(encoding="utf-8"))
    schema = load_schema(str(DATA / f"kor_{name}.yaml"))
    assert (
        render_prompt(schema, "Bob paid\n5", input_formatter=formatter)
        == expected[f"{name}-{formatter}"]
    )


def test_template_copies_are_identical() -> None:
    packaged = ROOT / "kor_cli" / "resources" / "prompts" / "kor_default.txt"
    user_copy = ROOT / "prompts" / "kor_default.txt"
    assert packaged.read_bytes() == user_copy.read_bytes()
    assert default_template() == packaged.read_text(encoding="utf-8")
    assert load_template(user_copy) == default_template()


def test_custom_template(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Schema {{json}}:\n{type_description}\n{format_instructions}\n", "utf-8")
    prompt = render_prompt(reference_schema(), "x", template=load_template(path))
    assert prompt.startswith("Schema {json}:\n```TypeScript\n")
    assert prompt.endswith(
        "Wrap the JSON in <json> tags.\n\n\nInput: hello\n"
        + ('Output: <json>{"obj": {"text_node": "goodbye"}}</json>\nInput: x\nOutput:')
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Extract the person.\n", "neither {type_description} nor {format_instructions}"),
        ("{type_description} {format_instructions} {text}", "unknown placeholder(s) {text}"),
        ("{type_description} {format_instructions} {", "bad template"),
    ],
)
def test_bad_templates_are_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_template(path)
    assert str(caught.value).startswith(str(path)) and expected in str(caught.value)
    with pytest.raises(InputError):
        render_prompt(reference_schema(), "x", template=text)


def test_missing_template_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="template file not found"):
        load_template(tmp_path / "none.txt")


def test_unknown_input_formatter() -> None:
    with pytest.raises(UsageError, match="triple_quotes"):
        render_prompt(reference_schema(), "x", input_formatter="quotes")


def test_examples_override_and_nothing_here() -> None:
    prompt = render_prompt(
        reference_schema(), "x", examples=[("ü", {"text_node": "é"}), ("nothing", None)]
    )
    assert prompt.endswith(
        'Input: ü\nOutput: <json>{"obj": {"text_node": "é"}}</json>\n'
        "Input: nothing\nOutput: <json>{}</json>\nInput: x\nOutput:"
    )
    no_examples = render_prompt(reference_schema(), "x", examples=[])
    assert no_examples.endswith("<json> tags.\n\n\n\nInput: x\nOutput:")


def test_sample_prompt_keeps_chinese_as_is() -> None:
    schema = load_schema(str(ROOT / "schemas" / "restaurant_review.yaml"))
    prompt = render_prompt(schema, "菜很好吃")
    assert '{"review": [{"aspect": "菜品", "sentiment_word": "很香"' in prompt
    assert prompt.endswith("Input: 菜很好吃\nOutput:")
