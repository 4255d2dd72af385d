"""JSON Schema documents → Kor's node tree, when the tree can express them.

The node tree is the prompt's view (TypeScript block, few-shot examples) and the rebuilt
Pydantic model; the record's JSON Schema document is what the grammar compiles and
validation checks. `parse_json_schema` raises `NotATree` for any document the tree
cannot express exactly; the loader then keeps the document as it is and asks the
grammar engine whether it can enforce it (see `loader.load_schema`).

The tree takes: objects (`"type": "object"` with `properties`, `required`,
`additionalProperties: false`),
arrays of objects or scalars (`items`; the node gets `many`), string/number/integer/
boolean, string `enum`/`const` (→ selection), nullability written as `anyOf`/`oneOf`
with `{"type": "null"}`, a `["T", "null"]` type list or `null` in an enum, local
non-recursive `$ref` into `$defs`/`definitions`, single-entry `allOf`, the constraint
keywords in `nodes.CONSTRAINT_KEYWORDS`, annotations (`title`, `default`, `examples`,
`x-*`, ...), and no `$schema` older than 2019-09. Few-shot examples sit in
`x-kor-examples` (a list of `{text, output}`, output being that node's value) and
`x-kor-null-examples` (texts) at any level; at the top level they are the root's.
Malformed example lists are a SchemaError whatever the view.
"""

from __future__ import annotations

from typing import Any

from kor_cli.errors import SchemaError
from kor_cli.schema.document import declared_draft
from kor_cli.schema.formats import FORMATS
from kor_cli.schema.nodes import (
    ARRAY_KEYWORDS,
    CONSTRAINT_KEYWORDS,
    NUMBER_KEYWORDS,
    STRING_KEYWORDS,
    Node,
    Option,
    did_you_mean,
    is_example_list,
    snake_case,
)

ANNOTATIONS = (
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "$schema", "$id", "$comment", "$defs", "definitions", "x-kor-examples", "x-kor-null-examples",
)  # fmt: skip
STRUCTURE = (
    "type", "properties", "required", "additionalProperties", "items",
    "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
)  # fmt: skip
UNSUPPORTED = (
    "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
    "prefixItems", "additionalItems", "contains", "minContains", "maxContains",
    "unevaluatedItems", "not", "if", "then", "else", "$anchor", "$dynamicRef",
    "$dynamicAnchor", "$vocabulary", "contentEncoding", "contentMediaType", "contentSchema",
)  # fmt: skip
KNOWN = ANNOTATIONS + STRUCTURE + CONSTRAINT_KEYWORDS
# keywords a node of each kind may carry besides annotations and `type`
_OWN_KEYWORDS: dict[str, tuple[str, ...]] = {
    "object": ("properties", "required", "additionalProperties"),
    "selection": ("enum", "const"),
    "text": STRING_KEYWORDS,
    "number": NUMBER_KEYWORDS,
    "integer": NUMBER_KEYWORDS,
    "boolean": (),
}
_SCALARS = {"string": "text", "number": "number", "integer": "integer", "boolean": "boolean"}
_NULL = {"type": "null"}


class NotATree(SchemaError):
    """The document is fine JSON Schema that Kor's node tree cannot express exactly."""


def root_id_for(document: Any, fallback: str) -> str:
    """The root id: the snake-cased `title`, else the snake-cased `fallback` (file stem)."""
    title = document.get("title") if isinstance(document, dict) else None
    if isinstance(title, str) and snake_case(title):
        return snake_case(title)
    return snake_case(fallback) or "record"


def parse_json_schema(
    document: Any, source: str, *, root_id: str, open_objects: bool = False
) -> Node:
    """Convert a JSON Schema document (an object, or an array of objects) to the root node;
    NotATree when the tree cannot express it. The tree's objects are closed: with
    `open_objects`, an object that does not say `additionalProperties: false` is open,
    which the tree cannot express."""
    if not isinstance(document, dict):
        raise SchemaError(f"{source}: a JSON Schema must be a JSON object")
    if declared_draft(document):
        raise NotATree(f"{source}: '$schema' {document['$schema']!r} is an older draft")
    converter = _Converter(document, source)
    converter.open_objects = open_objects
    root = converter.node(document, "", root_id, required=True)
    if root.type != "object" or root.nullable:
        raise NotATree(f"{source}: the root is not an object")
    return root


class _Converter:
    def __init__(self, document: dict[str, Any], source: str) -> None:
        self.document = document
        self.source = source
        self.refs: list[str] = []  # $refs being expanded on the current path, for cycles
        self.open_objects = False

    def fail(self, message: str, pointer: str) -> SchemaError:
        return NotATree(f"{self.source}: {message} at '{pointer or '/'}'")

    def bad_examples(self, message: str, pointer: str) -> SchemaError:
        return SchemaError(f"{self.source}: {message} at '{pointer or '/'}'")

    def node(self, schema: Any, pointer: str, node_id: str, *, required: bool) -> Node:
        depth = len(self.refs)
        try:
            schema, pointer = self.resolve(schema, pointer)
            schema, pointer, nullable = self.split_null(schema, pointer)
            outer, outer_pointer = schema, pointer
            many = schema.get("type") == "array"
            if many:
                self.check_keywords(outer, outer_pointer, ARRAY_KEYWORDS + ("items",))
                if not isinstance(schema.get("items"), dict):
                    raise self.fail("an array needs 'items' with one schema", pointer)
                schema, pointer = self.resolve(schema["items"], f"{pointer}/items")
                if self.split_null(schema, pointer)[2]:
                    raise self.fail("nullable array items are not supported", pointer)
            node = self.body(schema, pointer, node_id)
        finally:
            del self.refs[depth:]
        node.many, node.required, node.nullable = many, required, nullable
        node.description = outer.get("description") or node.description
        if many:
            node.constraints.update({k: outer[k] for k in ARRAY_KEYWORDS if k in outer})
            node.examples[:0] = self.examples(outer, outer_pointer)
            node.null_examples[:0] = self.null_examples(outer, outer_pointer)
        return node

    def body(self, schema: dict[str, Any], pointer: str, node_id: str) -> Node:
        """One value (an array's item, or the node itself): its type, keywords and examples."""
        kind = self.kind(schema, pointer)
        self.check_keywords(schema, pointer, _OWN_KEYWORDS[kind])
        if "format" in schema and schema["format"] not in FORMATS:
            raise self.fail(f"format {schema['format']!r} (an annotation)", pointer)
        node = Node(
            id=node_id,
            type=kind,  # type: ignore[arg-type]
            description=schema.get("description", ""),
            examples=self.examples(schema, pointer),
            null_examples=self.null_examples(schema, pointer),
            constraints={k: v for k, v in schema.items() if k in CONSTRAINT_KEYWORDS},
        )
        if kind == "selection":
            values = schema["enum"] if "enum" in schema else [schema["const"]]
            if not isinstance(values, list) or not values:
                raise self.fail("'enum' must be a non-empty list", pointer)
            if not all(isinstance(value, str) for value in values):
                raise self.fail("only enums of strings are supported", pointer)
            node.options = [Option(id=value) for value in values]
        elif kind == "object":
            node.attributes = self.attributes(schema, pointer)
        return node

    def kind(self, schema: dict[str, Any], pointer: str) -> str:
        declared = schema.get("type")
        if "enum" in schema or "const" in schema:
            if declared not in (None, "string"):
                raise self.fail("'enum'/'const' is supported for strings only", pointer)
            return "selection"
        if declared == "object":
            return "object"
        if declared is None and "properties" in schema:  # any non-object value fits too
            raise self.fail('\'properties\' without "type": "object"', pointer)
        if declared in _SCALARS:
            return _SCALARS[declared]
        if declared == "array":
            raise self.fail("arrays of arrays are not supported", pointer)
        if declared is None:
            raise self.fail("missing 'type'", pointer)
        raise self.fail(f"unsupported type {declared!r}", pointer)

    def attributes(self, schema: dict[str, Any], pointer: str) -> list[Node]:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            raise self.fail("an object needs a non-empty 'properties'", pointer)
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
            raise self.fail("'required' must be a list of property names", pointer)
        for name in required:
            if name not in properties:
                raise self.fail(f"'required' names {name!r}, which is not a property", pointer)
        default = self.open_objects  # absent: closed (False) unless objects are open
        if schema.get("additionalProperties", default) is not False:
            raise self.fail(
                "unsupported keyword 'additionalProperties' (only false; objects are closed)",
                pointer,
            )
        return [
            self.node(sub, f"{pointer}/properties/{_escape(name)}", name, required=name in required)
            for name, sub in properties.items()
        ]

    def resolve(self, schema: Any, pointer: str) -> tuple[dict[str, Any], str]:
        """Follow `$ref` (sibling keywords win) and single-entry `allOf` to a plain schema."""
        while True:
            if not isinstance(schema, dict):
                raise self.fail(f"expected a schema object, got {schema!r}", pointer)
            if "$ref" in schema:
                ref = schema["$ref"]
                if not isinstance(ref, str) or not ref.startswith("#"):
                    raise self.fail(
                        f"unsupported keyword '$ref' ({ref!r}: only local refs)", pointer
                    )
                if ref in self.refs:
                    raise self.fail(f"recursive '$ref' {ref!r} is not supported", pointer)
                self.refs.append(ref)
                siblings = {k: v for k, v in schema.items() if k != "$ref"}
                schema, pointer = {**self.lookup(ref, pointer), **siblings}, ref[1:]
            elif "allOf" in schema:
                parts = schema["allOf"]
                if not isinstance(parts, list) or len(parts) != 1:
                    raise self.fail("unsupported keyword 'allOf' (only one entry)", pointer)
                rest = {k: v for k, v in schema.items() if k != "allOf"}
                inner, pointer = self.resolve(parts[0], f"{pointer}/allOf/0")
                schema = {**inner, **rest}
            else:
                return schema, pointer

    def lookup(self, ref: str, pointer: str) -> Any:
        target: Any = self.document
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise self.fail(f"'$ref' target {ref!r} not found", pointer)
            target = target[part]
        if not isinstance(target, dict):
            raise self.fail(f"'$ref' target {ref!r} is not a schema object", pointer)
        return target

    def split_null(self, schema: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str, bool]:
        """(the schema without its null alternative, its pointer, whether null was allowed)."""
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = schema[key]
                rest = {k: v for k, v in schema.items() if k != key}
                if not isinstance(branches, list) or len(branches) != 2 or _NULL not in branches:
                    raise self.fail(
                        f'unsupported keyword \'{key}\' (only [<schema>, {{"type": "null"}}])',
                        pointer,
                    )
                index = 1 - branches.index(_NULL)
                inner, inner_pointer = self.resolve(branches[index], f"{pointer}/{key}/{index}")
                return {**inner, **rest}, inner_pointer, True
        nullable = False
        declared = schema.get("type")
        if isinstance(declared, list):
            others = [t for t in declared if t != "null"]
            if len(others) != 1 or len(declared) != 2:
                raise self.fail(f"unsupported type list {declared!r} (only [T, 'null'])", pointer)
            schema, nullable = {**schema, "type": others[0]}, True
        if isinstance(schema.get("enum"), list) and None in schema["enum"]:
            values = [value for value in schema["enum"] if value is not None]
            schema, nullable = {**schema, "enum": values}, True
        return schema, pointer, nullable

    def check_keywords(self, schema: dict[str, Any], pointer: str, own: tuple[str, ...]) -> None:
        for key in schema:
            if key in ANNOTATIONS or key == "type" or key in own or key.startswith("x-"):
                continue
            if key in KNOWN:
                raise self.fail(f"keyword '{key}' does not apply here", pointer)
            if key in UNSUPPORTED:
                raise self.fail(f"unsupported keyword '{key}'", pointer)
            raise self.fail(f"unknown keyword '{key}'{did_you_mean(key, KNOWN)}", pointer)

    def examples(self, schema: dict[str, Any], pointer: str) -> list[tuple[str, Any]]:
        items = schema.get("x-kor-examples", [])
        if not is_example_list(items):
            raise self.bad_examples(
                '\'x-kor-examples\' must be a list of {"text", "output"}', pointer
            )
        return [(item["text"], item["output"]) for item in items]

    def null_examples(self, schema: dict[str, Any], pointer: str) -> list[str]:
        texts = schema.get("x-kor-null-examples", [])
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise self.bad_examples("'x-kor-null-examples' must be a list of texts", pointer)
        return texts


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
