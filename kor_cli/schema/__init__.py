"""Schemas: YAML (Kor-like), JSON Schema or Pydantic → the record's JSON Schema.

`load_schema(spec)` is the entry point; `Schema` gives the record's JSON Schema (what the
grammar compiles and validation checks), the record validator, and the prompt's view:
Kor's TypeScript block and the few-shot examples (from Kor's node tree when it can
express the schema, else from the JSON Schema itself).
"""

from kor_cli.schema.loader import Schema, load_schema
from kor_cli.schema.nodes import NODE_TYPES, Example, Node, NodeType, Option

__all__ = ["NODE_TYPES", "Example", "Node", "NodeType", "Option", "Schema", "load_schema"]
