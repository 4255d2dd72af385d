"""Node tree → Pydantic model (`pydantic.create_model`), the validator of extracted records.

Models are strict (no "5" → 5 coercion, no bool for numbers) and forbid extra keys, so
they accept what the schema's JSON Schema accepts. Ids that are not usable as Python
field names (leading '_', BaseModel attributes) become aliases of generated names.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from kor_cli.schema.formats import format_checker
from kor_cli.schema.nodes import Node, snake_case

MODEL_CONFIG = ConfigDict(
    extra="forbid",
    strict=True,
    regex_engine="python-re",
    serialize_by_alias=True,
)

_FIELD_ARGS = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "minItems": "min_length",
    "maxItems": "max_length",
}


def record_model(root: Node) -> type[BaseModel]:
    """Model of the whole output record: `{root.id: <root value>}`."""
    return _object_model(_camel(root.id) + "Record", [root])


def value_annotation(node: Node) -> Any:
    """The annotation of one node's value (list for `many`, Optional for `nullable`)."""
    item = _item_annotation(node)
    if node.many:
        metadata = _field_metadata(node.array_constraints())
        if node.constraints.get("uniqueItems"):
            metadata.append(AfterValidator(_check_unique_items))
        item = _annotate(list[item], metadata)  # type: ignore[valid-type]
    return item | None if node.nullable else item


def _item_annotation(node: Node) -> Any:
    constraints = node.item_constraints()
    metadata = _field_metadata(constraints)
    if "format" in constraints:
        metadata.append(AfterValidator(format_checker(constraints["format"])))
    if node.type == "object":
        return _object_model(_camel(node.id), node.attributes)
    if node.type == "selection":
        return Literal[tuple(option.id for option in node.options)]
    if node.type == "number":
        # int stays int (a JSON 12 is not dumped as 12.0); each member carries the bounds.
        return _annotate(int, metadata) | _annotate(float, metadata)
    base = {"text": str, "integer": int, "boolean": bool}[node.type]
    return _annotate(base, metadata)


def _object_model(name: str, attributes: list[Node]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    ids = {child.id for child in attributes}
    for index, child in enumerate(attributes):
        alias = None if _usable_name(child.id) else child.id
        python_name = _free_name(f"field_{index}", ids) if alias else child.id
        info = Field(
            ... if child.required else None,
            alias=alias,
            description=child.description or None,
        )
        fields[python_name] = (value_annotation(child), info)
    return create_model(name, __config__=MODEL_CONFIG, **fields)


def _usable_name(name: str) -> bool:
    return name.isidentifier() and not name.startswith("_") and not hasattr(BaseModel, name)


def _free_name(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _field_metadata(constraints: dict[str, Any]) -> list[Any]:
    kwargs = {_FIELD_ARGS[k]: v for k, v in constraints.items() if k in _FIELD_ARGS}
    return [Field(**kwargs)] if kwargs else []


def _annotate(base: Any, metadata: list[Any]) -> Any:
    return Annotated[(base, *metadata)] if metadata else base


def _check_unique_items(items: list[Any]) -> list[Any]:
    plain = [item.model_dump() if isinstance(item, BaseModel) else item for item in items]
    for index, item in enumerate(plain):
        if item in plain[:index]:
            raise ValueError(f"items must be unique; item {index} repeats an earlier one")
    return items


def _camel(node_id: str) -> str:
    return "".join(part.capitalize() for part in snake_case(node_id).split("_")) or "Node"
