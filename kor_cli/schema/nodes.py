"""Kor's node tree (the prompt's view of a schema, when it can express it) and its checks.

A `Node` is Kor's node model (Object, Text, Number, Bool, Selection) flattened into one
dataclass, plus what Kor lacks: `integer`, `required`, `nullable` and JSON-Schema
`constraints`. Arrays are `many=True` on the item node (objects and scalars alike); a
JSON Schema `enum` of strings is a `selection`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from kor_cli.errors import SchemaError
from kor_cli.schema.formats import FORMATS

NodeType = Literal["object", "text", "number", "integer", "boolean", "selection"]
NODE_TYPES: tuple[str, ...] = get_args(NodeType)

STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
ARRAY_KEYWORDS = ("minItems", "maxItems", "uniqueItems")
CONSTRAINT_KEYWORDS = STRING_KEYWORDS + NUMBER_KEYWORDS + ARRAY_KEYWORDS
_ITEM_KEYWORDS: dict[str, tuple[str, ...]] = {
    "text": STRING_KEYWORDS,
    "number": NUMBER_KEYWORDS,
    "integer": NUMBER_KEYWORDS,
}

Example = tuple[str, Any]
"""(input text, output for the node: the value that goes under the node's id)."""


@dataclass
class Option:
    """One choice of a selection: its id is the value written in the output."""

    id: str
    description: str = ""
    examples: list[str] = field(default_factory=list)


@dataclass
class Node:
    """One schema node; `constraints` holds extra JSON-Schema keywords, by their names."""

    id: str
    type: NodeType = "text"
    description: str = ""
    many: bool = False
    required: bool = True
    # False: `required` was not written in the schema (the prompt then never shows `?`, as in
    # Kor, and an example that leaves the field out makes it optional)
    required_stated: bool = True
    nullable: bool = False
    attributes: list[Node] = field(default_factory=list)
    options: list[Option] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    null_examples: list[str] = field(default_factory=list)
    constraints: dict[str, Any] = field(default_factory=dict)

    def item_constraints(self) -> dict[str, Any]:
        """Constraints on each value (string/number keywords)."""
        return {k: v for k, v in self.constraints.items() if k not in ARRAY_KEYWORDS}

    def array_constraints(self) -> dict[str, Any]:
        """Constraints on the list itself when `many` (minItems, maxItems, uniqueItems)."""
        return {k: v for k, v in self.constraints.items() if k in ARRAY_KEYWORDS}


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def snake_case(name: str) -> str:
    """'RestaurantReview' / 'restaurant review' / 'HTTPRequest' → 'restaurant_review' etc."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower()


def node_json_schema(node: Node) -> dict[str, Any]:
    """JSON Schema of one node's value: items for `many`, `anyOf` null for `nullable`."""
    if node.type == "object":
        item: dict[str, Any] = {
            "type": "object",
            "properties": {child.id: node_json_schema(child) for child in node.attributes},
            "required": [child.id for child in node.attributes if child.required],
            "additionalProperties": False,
        }
    elif node.type == "selection":
        item = {"type": "string", "enum": [option.id for option in node.options]}
    else:
        item = {"type": {"text": "string"}.get(node.type, node.type)}
    item.update(node.item_constraints())
    value = {"type": "array", "items": item, **node.array_constraints()} if node.many else item
    if node.nullable:
        value = {"anyOf": [value, {"type": "null"}]}
    return {"description": node.description, **value} if node.description else value


def check_tree(root: Node, source: str) -> None:
    """Structural checks shared by all sources; SchemaError names the source and node path."""
    if root.type != "object":
        raise SchemaError(f"{source}: the root node '{root.id}' must be an object")
    if root.nullable or not root.required:
        raise SchemaError(f"{source}: the root node '{root.id}' cannot be optional or nullable")
    _check_node(root, root.id, source)


def _check_node(node: Node, path: str, source: str) -> None:
    where = f"{source}: {path}"
    if not isinstance(node.id, str) or not node.id:
        raise SchemaError(f"{where}: every node needs a non-empty string id")
    if node.type not in NODE_TYPES:
        choices = ", ".join(NODE_TYPES)
        raise SchemaError(
            f"{where}: unknown type '{node.type}'{did_you_mean(str(node.type), NODE_TYPES)}; "
            f"use one of {choices}"
        )
    if (node.type == "object") != bool(node.attributes):
        raise SchemaError(f"{where}: attributes are required on object nodes and only there")
    if (node.type == "selection") != bool(node.options):
        raise SchemaError(f"{where}: options are required on selection nodes and only there")
    _check_unique([child.id for child in node.attributes], f"{where}: attribute id")
    _check_unique([option.id for option in node.options], f"{where}: option id")
    _check_constraints(node, where)
    for text in node.null_examples + [ex for option in node.options for ex in option.examples]:
        if not isinstance(text, str):
            raise SchemaError(f"{where}: example texts must be strings, got {text!r}")
    for text, _ in node.examples:
        if not isinstance(text, str):
            raise SchemaError(f"{where}: example texts must be strings, got {text!r}")
    for child in node.attributes:
        _check_node(child, f"{path}.{child.id}", source)


def _check_unique(ids: list[str], what: str) -> None:
    seen: set[str] = set()
    for item in ids:
        if not isinstance(item, str) or not item:
            raise SchemaError(f"{what} must be a non-empty string, got {item!r}")
        if item in seen:
            raise SchemaError(f"{what} '{item}' appears twice")
        seen.add(item)


def _check_constraints(node: Node, where: str) -> None:
    allowed = _ITEM_KEYWORDS.get(node.type, ()) + (ARRAY_KEYWORDS if node.many else ())
    for key, value in node.constraints.items():
        if key not in CONSTRAINT_KEYWORDS:
            raise SchemaError(f"{where}: unknown constraint '{key}'{did_you_mean(key, allowed)}")
        if key not in allowed:
            scope = "lists (many: true)" if key in ARRAY_KEYWORDS else f"{node.type} nodes"
            raise SchemaError(f"{where}: constraint '{key}' does not apply to {scope}")
        _check_constraint_value(key, value, f"{where}: constraint '{key}'")
    for low, high in (
        ("minLength", "maxLength"),
        ("minItems", "maxItems"),
        ("minimum", "maximum"),
    ):
        if low in node.constraints and high in node.constraints:
            if node.constraints[low] > node.constraints[high]:
                raise SchemaError(f"{where}: '{low}' is greater than '{high}'")


def _check_constraint_value(key: str, value: Any, where: str) -> None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key in ("minLength", "maxLength", "minItems", "maxItems"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SchemaError(f"{where} must be a non-negative integer, got {value!r}")
    elif key == "uniqueItems":
        if not isinstance(value, bool):
            raise SchemaError(f"{where} must be true or false, got {value!r}")
    elif key == "pattern":
        if not isinstance(value, str):
            raise SchemaError(f"{where} must be a string, got {value!r}")
        try:
            re.compile(value)
        except re.error as error:
            raise SchemaError(f"{where}: invalid regular expression: {error}") from None
    elif key == "format":
        if value not in FORMATS:
            raise SchemaError(
                f"{where}: unsupported format {value!r}{did_you_mean(str(value), FORMATS)}; "
                f"supported: {', '.join(FORMATS)}"
            )
    elif key == "multipleOf":
        if not is_number or value <= 0:
            raise SchemaError(f"{where} must be a number greater than 0, got {value!r}")
    elif not is_number:
        raise SchemaError(f"{where} must be a number, got {value!r}")


def is_example_list(items: Any) -> bool:
    """True for a JSON Schema's `x-kor-examples` shape: a list of {"text": str, "output": …}."""
    return isinstance(items, list) and all(
        isinstance(item, dict) and set(item) == {"text", "output"} and isinstance(item["text"], str)
        for item in items
    )
