"""Kor-like YAML schemas → Node tree.

A node is a mapping with `id` and optional `description`, `type` (object, text, number,
integer, boolean, selection; default: object when `attributes` is given, selection when
`options` is given, else text), `many`, `required` (default true), `nullable`,
`attributes`, `options` (ids, or mappings with `id`, `description`, `examples`),
`examples` (a list of `{text, output}`, output being the node's value, `{}`/null for
"nothing here"), `null_examples` (texts), and the JSON-Schema constraint keywords
(`minLength`, `maxLength`, `pattern`, `format`, `minimum`, `maximum`, `exclusiveMinimum`,
`exclusiveMaximum`, `multipleOf`; `minItems`, `maxItems`, `uniqueItems` with many).
The top level is the root object node.
"""

from __future__ import annotations

from typing import Any

import yaml

from kor_cli.errors import SchemaError
from kor_cli.reading import checked_yaml_data, yaml_loader
from kor_cli.schema.nodes import (
    CONSTRAINT_KEYWORDS,
    NODE_TYPES,
    Node,
    Option,
    did_you_mean,
)

COMMON_KEYS = ("id", "description", "type", "many", "required", "nullable")
EXAMPLE_KEYS = ("examples", "null_examples")
NODE_KEYS = COMMON_KEYS + EXAMPLE_KEYS + ("attributes", "options") + CONSTRAINT_KEYWORDS
OPTION_KEYS = ("id", "description", "examples")


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""

    source = "<yaml>"

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise SchemaError(
                    f"{self.source}:{mark.line + 1}:{mark.column + 1}: duplicate key {key!r}"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str) -> Node:
    """Parse YAML text into the root node; SchemaError names the file, line or node path."""
    loader = yaml_loader(_UniqueKeyLoader, text, source, error=SchemaError)
    loader.source = source
    try:
        data = checked_yaml_data(loader, source, error=SchemaError)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = error.problem or error.context or "invalid YAML"
        raise SchemaError(f"{where}: YAML syntax error: {problem}") from None
    except yaml.YAMLError as error:
        raise SchemaError(f"{source}: YAML error: {error}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise SchemaError(f"{source}: the top level must be a mapping that describes the root")
    return _node(data, "", 0, source)


def _node(data: Any, parent: str, index: int, source: str) -> Node:
    """The node at `parent`'s attributes[index] (the root when `parent` is empty)."""
    slot = f"{parent}.attributes[{index}]" if parent else "<root>"
    if not isinstance(data, dict):
        raise SchemaError(f"{source}: {slot}: expected a mapping, got {_kind(data)}")
    node_id = data.get("id")
    if not isinstance(node_id, str) or not node_id:
        raise SchemaError(f"{source}: {slot}: every node needs an 'id' string")
    path = f"{parent}.{node_id}" if parent else node_id
    where = f"{source}: {path}"
    for key in data:
        if key not in NODE_KEYS:
            raise SchemaError(f"{where}: unknown key {key!r}{did_you_mean(str(key), NODE_KEYS)}")
    node_type = data.get("type", _implied_type(data))
    if node_type not in NODE_TYPES:
        raise SchemaError(
            f"{where}: unknown type {node_type!r}{did_you_mean(str(node_type), NODE_TYPES)}; "
            f"use one of {', '.join(NODE_TYPES)}"
        )
    for key, owner in (("attributes", "object"), ("options", "selection")):
        if key in data and node_type != owner:
            raise SchemaError(f"{where}: key '{key}' only applies to {owner} nodes")
    return Node(
        id=node_id,
        type=node_type,
        description=_string(data, "description", where),
        many=_flag(data, "many", False, where),
        required=_flag(data, "required", True, where),
        required_stated="required" in data,
        nullable=_flag(data, "nullable", False, where),
        attributes=[
            _node(child, path, position, source)
            for position, child in enumerate(_list(data, "attributes", where))
        ],
        options=[_option(item, where) for item in _list(data, "options", where)],
        examples=[_example(item, where) for item in _list(data, "examples", where)],
        null_examples=[
            _text(item, "null_examples", where) for item in _list(data, "null_examples", where)
        ],
        constraints={key: data[key] for key in CONSTRAINT_KEYWORDS if key in data},
    )


def _implied_type(data: dict[str, Any]) -> str:
    if "attributes" in data:
        return "object"
    return "selection" if "options" in data else "text"


def _option(item: Any, where: str) -> Option:
    if isinstance(item, str):
        return Option(id=item)
    if not isinstance(item, dict):
        raise SchemaError(f"{where}: each option is an id or a mapping, got {_kind(item)}")
    for key in item:
        if key not in OPTION_KEYS:
            raise SchemaError(
                f"{where}: option: unknown key {key!r}{did_you_mean(str(key), OPTION_KEYS)}"
            )
    option_id = item.get("id")
    if not isinstance(option_id, str) or not option_id:
        raise SchemaError(f"{where}: every option needs an 'id' string")
    return Option(
        id=option_id,
        description=_string(item, "description", f"{where}: option '{option_id}'"),
        examples=[
            _text(text, "examples", f"{where}: option '{option_id}'")
            for text in _list(item, "examples", where)
        ],
    )


def _example(item: Any, where: str) -> tuple[str, Any]:
    if not isinstance(item, dict) or set(item) != {"text", "output"}:
        raise SchemaError(f"{where}: each example is a mapping with exactly 'text' and 'output'")
    return _text(item["text"], "examples", where), item["output"]


def _list(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise SchemaError(f"{where}: '{key}' must be a list, got {_kind(value)}")
    return value


def _string(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise SchemaError(f"{where}: '{key}' must be a string, got {_kind(value)}")
    return value


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(f"{where}: '{key}' texts must be strings, got {_kind(value)}")
    return value


def _flag(data: dict[str, Any], key: str, default: bool, where: str) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise SchemaError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), repr(value))
