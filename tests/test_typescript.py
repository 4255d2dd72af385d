"""Kor's TypeScript block, byte for byte, plus kor-cli's `?` and `| null` marks."""

from __future__ import annotations

from pathlib import Path

from kor_cli.schema import Node, Option, Schema, load_schema
from kor_cli.typescript import render_typescript

DATA = Path(__file__).resolve().parent / "data"


def test_kor_reference_block() -> None:
    root = Node(
        id="obj", type="object", attributes=[Node(id="text_node", description="Text Field")]
    )
    assert render_typescript(root) == (
        "```TypeScript\n\nobj: { // \n text_node: string // Text Field\n}\n```\n"
    )


def test_nested_many_selection_as_kor_writes_them() -> None:
    # The block inside tests/data/kor_reference_prompts.json ("order-*"), produced by Kor.
    expected = (
        "```TypeScript\n\n"
        "order: { // An order\n"
        " customer: string // Customer name\n"
        " total: number // Total price\n"
        " paid: boolean // Whether it is paid\n"
        ' channel: "web" | "phone" // How it was ordered\n'
        " tags: Array<string> // \n"
        " items: Array<{ // Line items\n"
        "  name: string // Item\n"
        "  qty: number // \n"
        " }>\n"
        " address: { // Ship to\n"
        "  city: string // City\n"
        " }\n"
        "}\n"
        "```\n"
    )
    assert load_schema(str(DATA / "kor_order.yaml")).typescript() == expected


def test_many_root() -> None:
    root = Node(
        id="review",
        type="object",
        many=True,
        attributes=[
            Node(id="aspect", description="Aspect"),
            Node(
                id="sentiment", type="selection", options=[Option("positive"), Option("negative")]
            ),
        ],
    )
    assert Schema(root).typescript() == (
        "```TypeScript\n\n"
        "review: Array<{ // \n"
        " aspect: string // Aspect\n"
        ' sentiment: "positive" | "negative" // \n'
        "}>\n"
        "```\n"
    )


def test_optional_and_nullable_marks() -> None:
    root = Node(
        id="doc",
        type="object",
        attributes=[
            Node(id="a", required=False),
            Node(id="b", type="integer", nullable=True),
            Node(id="c", many=True, required=False, nullable=True),
            Node(
                id="d",
                type="selection",
                many=True,
                nullable=True,
                options=[Option("x"), Option("y")],
            ),
            Node(
                id="e",
                type="object",
                many=True,
                required=False,
                nullable=True,
                description="Sub",
                attributes=[Node(id="f", type="boolean", required=False)],
            ),
            Node(id="g", type="object", nullable=True, attributes=[Node(id="h")]),
        ],
    )
    assert render_typescript(root) == (
        "```TypeScript\n\n"
        "doc: { // \n"
        " a?: string // \n"
        " b: number | null // \n"
        " c?: Array<string> | null // \n"
        ' d: Array<"x" | "y"> | null // \n'
        " e?: Array<{ // Sub\n"
        "  f?: boolean // \n"
        " }> | null\n"
        " g: { // \n"
        "  h: string // \n"
        " } | null\n"
        "}\n"
        "```\n"
    )
