"""Schemas: YAML (Kor-like), JSON Schema or Pydantic → one checked `Schema` tree.

`load_schema(spec)` is the entry point; `Schema` gives the record's JSON Schema, Kor's
TypeScript block, a strict Pydantic model and the few-shot examples.
"""

from kor_cli.schema.loader import Schema, load_schema
from kor_cli.schema.nodes import NODE_TYPES, Example, Node, NodeType, Option

__all__ = ["NODE_TYPES", "Example", "Node", "NodeType", "Option", "Schema", "load_schema"]
