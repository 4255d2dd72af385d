"""Few-shot examples: gathered from every node the way Kor does, and checked at load time.

Kor's aggregation: a node's example `(text, value)` becomes `{node.id: value}` and is
wrapped under every ancestor id on the way up (inside a list where the ancestor is
`many`); a selection contributes its options' examples first; an empty value or a null
example means "nothing here" and becomes `{}`. One deliberate difference: Kor treats any
falsy value as empty, kor-cli only None, "", [] and {} (so 0 and false stay examples).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from kor_cli.errors import SchemaError
from kor_cli.schema.model import value_annotation
from kor_cli.schema.nodes import Example, Node


def is_empty(value: Any) -> bool:
    """Kor's "nothing here" outputs."""
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def gather_examples(root: Node) -> list[Example]:
    """Every example in the tree as (text, value under root id); None means nothing here."""
    return [(text, None if record is None else record[root.id]) for text, record in _collect(root)]


def check_examples(root: Node, source: str) -> None:
    """Validate each node's own example outputs against that node's value type, after
    making optional the fields that examples leave out (see `relax_left_out`)."""
    relax_left_out(root)
    _check_node(root, root.id, source)


def relax_left_out(node: Node) -> None:
    """Kor's few-shot examples often leave fields out. A field that some example of an
    enclosing object leaves out is optional (constrained decoding may leave it out too),
    unless the schema states `required` for it; the prompt shows it as Kor does (no `?`)."""
    for _, value in node.examples:
        _relax(node, value)
    for child in node.attributes:
        relax_left_out(child)


def _relax(node: Node, value: Any) -> None:
    for item in value if isinstance(value, list) else [value]:
        if node.type != "object" or not isinstance(item, dict) or is_empty(item):
            continue
        for child in node.attributes:
            if child.id in item:
                _relax(child, item[child.id])
            elif not child.required_stated:
                child.required = False


def _wrap(node: Node, value: Any) -> dict[str, Any] | None:
    if is_empty(value):
        return None
    if node.many and not isinstance(value, list):
        value = [value]
    return {node.id: value}


def _collect(node: Node) -> list[tuple[str, dict[str, Any] | None]]:
    found = [(text, _wrap(node, option.id)) for option in node.options for text in option.examples]
    found += [(text, _wrap(node, value)) for text, value in node.examples]
    found += [(text, None) for text in node.null_examples]
    for child in node.attributes:
        found += [(text, _wrap(node, record)) for text, record in _collect(child)]
    return found


def _check_node(node: Node, path: str, source: str) -> None:
    if node.examples:
        adapter: TypeAdapter[Any] = TypeAdapter(value_annotation(node))
        for number, (text, value) in enumerate(node.examples, start=1):
            if is_empty(value):
                continue
            if node.many and not isinstance(value, list):
                value = [value]
            try:
                adapter.validate_python(value)
            except ValidationError as error:
                problems = "; ".join(_describe(item) for item in error.errors())
                missing = any(item["type"] == "missing" for item in error.errors())
                hint = " (examples may leave out only optional fields)" if missing else ""
                raise SchemaError(
                    f"{source}: example {number} of '{path}' ({_short(text)}) does not fit "
                    f"the schema: {problems}{hint}"
                ) from None
    for child in node.attributes:
        _check_node(child, f"{path}.{child.id}", source)


def _describe(item: Any) -> str:
    where = ".".join(str(part) for part in item["loc"])
    return f"{where}: {item['msg']}" if where else item["msg"]


def _short(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")
