"""A record's JSON Schema → Kor-style TypeScript block, for schemas beyond Kor's node tree.

Same layout as `kor_cli.typescript` (objects as indented blocks, `// description` after
every member, `?` for optional members, `| null` for nullable ones), and besides:

    ```TypeScript

    tree: Node // A tree
    kind: "a" | "b" | 3 // unions and enums of any values
    labels: Record<string, number> // minProperties: 1
    pair: [string, number] //
    extra: any //

    interface Node { // One node
     label: string // minLength: 1
     children?: Array<Node> //
    }
    ```

`$ref` targets become named types after the root (`interface` for objects with
properties, `type Name = …` otherwise; recursion by name); `anyOf`/`oneOf` are `A | B`,
`allOf` is `A & B`, free-form objects are `Record<string, T>` or `object`, member names
that are not identifiers are quoted (`"tree-edge"?: string`); validating
keywords (bounds, `pattern`, `format`, `not`, `if`, …) are listed in the comment.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kor_cli.schema.document import resolve_pointer
from kor_cli.schema.nodes import snake_case

_NULL = {"type": "null"}
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SCALARS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}
_NOTED = (
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties", "required", "contains", "minContains", "maxContains", "not", "if",
    "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
)  # fmt: skip
_SCHEMA_NOTES = ("contains", "not", "propertyNames")


def render_document_typescript(
    document: dict[str, Any], root_id: str, *, constraints: bool = True
) -> str:
    """The fenced TypeScript block for the value under `root_id` in a record document
    (`constraints=False`: descriptions only, as Kor's node tree renders)."""
    lines = _Renderer(document, constraints).block(root_id)
    return "```TypeScript\n\n" + "\n".join(lines) + "\n```\n"


class _Renderer:
    def __init__(self, document: dict[str, Any], constraints: bool = True) -> None:
        self.document = document
        self.constraints = constraints
        self.names: dict[str, str] = {}  # ref → type name
        self.queue: list[str] = []

    def block(self, root_id: str) -> list[str]:
        lines = self.member(root_id, self.document["properties"][root_id], 0, root=True)
        done = 0
        while done < len(self.queue):
            lines += ["", *self.named(self.queue[done])]
            done += 1
        return lines

    def member(
        self, name: str, schema: Any, depth: int, *, root: bool = False, opt: bool = False
    ) -> list[str]:
        indent = " " * depth
        label = name if root else _key(name) + ("?" if opt else "")
        schema, nullable = _split_null(schema)
        null = " | null" if nullable else ""
        shape = self.shape(schema)
        if shape is not None:
            opening, closing, obj = shape
            comment = self.comment(schema, obj)
            lines = [f"{indent}{label}: {opening} // {comment}"]
            lines += self.fields(obj, depth + 1)
            return [*lines, f"{indent}{closing}{null}"]
        return [f"{indent}{label}: {self.inline(schema)}{null} // {self.comment(schema)}"]

    def shape(self, schema: Any) -> tuple[str, str, dict[str, Any]] | None:
        """('{', '}', object) / ('Array<{', '}>', items) for members written as blocks."""
        if _is_block(schema):
            return "{", "}", schema
        if (
            isinstance(schema, dict)
            and schema.get("type") == "array"
            and _is_block(schema.get("items"))
        ):
            if not any(k in schema for k in ("prefixItems", "$ref", "anyOf", "oneOf", "allOf")):
                return "Array<{", "}>", schema["items"]
        return None

    def fields(self, obj: dict[str, Any], depth: int) -> list[str]:
        required = obj.get("required", [])
        lines: list[str] = []
        properties = obj.get("properties", {})
        for name, sub in properties.items():
            lines += self.member(name, sub, depth, opt=name not in required)
        for name in required:
            if isinstance(name, str) and name not in properties:
                lines.append(f"{' ' * depth}{_key(name)}: any // ")
        extra = self.extra_values(obj)
        if extra is not None:
            lines.append(f"{' ' * depth}[key: string]: {extra} // ")
        return lines

    def extra_values(self, obj: dict[str, Any]) -> str | None:
        """The type of members beyond `properties`, when the schema allows any."""
        kinds = [self.inline(s) for s in obj.get("patternProperties", {}).values()]
        extra = obj.get("additionalProperties", obj.get("unevaluatedProperties"))
        if extra is not None and extra is not False:
            kinds.append(self.inline(extra))
        return " | ".join(dict.fromkeys(kinds)) if kinds else None

    def inline(self, schema: Any) -> str:
        """A one-line type."""
        if schema is True or schema == {}:
            return "any"
        if schema is False or not isinstance(schema, dict):
            return "never"
        if isinstance(schema.get("$ref"), str):
            return self.name(schema["$ref"])
        if "const" in schema:
            return _literal(schema["const"])
        if isinstance(schema.get("enum"), list):
            return " | ".join(_literal(value) for value in schema["enum"]) or "never"
        for key, joint in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
            if isinstance(schema.get(key), list):
                rest = {k: v for k, v in schema.items() if k != key}
                parts = [self.inline(branch) for branch in schema[key]]
                if key == "allOf" and _typed(rest):
                    parts.insert(0, self.inline(rest))
                text = joint.join(dict.fromkeys(parts)) or "never"
                return f"({text})" if joint == " & " and len(parts) > 1 else text
        declared = schema.get("type")
        if isinstance(declared, list):
            parts = [self.inline({**schema, "type": kind}) for kind in declared]
            return " | ".join(dict.fromkeys(parts)) or "never"
        if declared == "object" or (declared is None and "properties" in schema):
            return self.object_text(schema)
        if declared == "array" or (
            declared is None and ("items" in schema or "prefixItems" in schema)
        ):
            return self.array_text(schema)
        if declared == "null":
            return "null"
        return _SCALARS.get(str(declared), "any")

    def object_text(self, schema: dict[str, Any]) -> str:
        extra = self.extra_values(schema)
        properties = schema.get("properties", {})
        if not properties:
            if extra is not None:
                return f"Record<string, {extra}>"
            declared = ("additionalProperties", "properties", "required")
            return "{}" if any(k in schema for k in declared) else "object"
        required = schema.get("required", [])
        members = [
            f"{_key(name)}{'' if name in required else '?'}: {self.inline(sub)}"
            for name, sub in properties.items()
        ]
        if extra is not None:
            members.append(f"[key: string]: {extra}")
        return "{ " + "; ".join(members) + " }"

    def array_text(self, schema: dict[str, Any]) -> str:
        items = schema.get("items")
        if isinstance(items, list):  # draft-04..07 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        else:
            prefix = schema.get("prefixItems", [])
            items = True if items is None else items
        if not prefix:
            return f"Array<{self.inline(items)}>"
        head = ", ".join(self.inline(sub) for sub in prefix)
        rest = "" if items is False else f", ...Array<{self.inline(items)}>"
        return f"[{head}{rest}]"

    def comment(self, schema: Any, inner: Any = None) -> str:
        """The description plus the validating keywords of the member (and its items)."""
        if not isinstance(schema, dict):
            return ""
        parts = [schema]
        if inner is not None and inner is not schema:
            parts.append(inner)
        elif inner is None and schema.get("type") == "array" and _is_plain(schema.get("items")):
            parts.append(schema["items"])
        description = next((p["description"] for p in parts if _text(p.get("description"))), "")
        text = ", ".join(note for part in parts for note in self.notes(part))
        if description and text:
            return f"{description} ({text})"
        return description or text

    def notes(self, schema: dict[str, Any]) -> list[str]:
        found: list[str] = []
        if not self.constraints:
            return found
        for key in _NOTED:
            if key not in schema or (key == "required" and "properties" in schema):
                continue
            value = schema[key]
            if key in _SCHEMA_NOTES:
                found.append(f"{key}: {self.inline(value)}")
            else:
                found.append("if/then/else" if key == "if" else f"{key}: {_literal(value)}")
        return found

    def name(self, ref: str) -> str:
        if ref not in self.names:
            target = self.target(ref)
            if target is None:
                return "any"
            base = ref.rstrip("/").rsplit("/", 1)[-1].lstrip("#") or "Root"
            name = "".join(p.capitalize() for p in snake_case(base).split("_")) or "Type"
            if not name[0].isalpha():
                name = "T" + name
            taken = set(self.names.values())
            unique, number = name, 2
            while unique in taken:
                unique, number = f"{name}{number}", number + 1
            self.names[ref] = unique
            self.queue.append(ref)
        return self.names[ref]

    def target(self, ref: str) -> Any:
        if ref.startswith("#/") or ref == "#":
            return resolve_pointer(self.document, ref)
        if ref.startswith("#"):
            return _find_anchor(self.document, ref[1:])
        return None

    def named(self, ref: str) -> list[str]:
        target = self.target(ref)
        name = self.names[ref]
        if _is_block(target):
            lines = [f"interface {name} {{ // {self.comment(target, target)}"]
            return [*lines, *self.fields(target, 1), "}"]
        return [f"type {name} = {self.inline(target)} // {self.comment(target)}"]


def _split_null(schema: Any) -> tuple[Any, bool]:
    """(schema without its null alternative, whether null is allowed) for simple forms."""
    if not isinstance(schema, dict):
        return schema, False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and len(branches) == 2 and _NULL in branches:
            other = branches[1 - branches.index(_NULL)]
            rest = {k: v for k, v in schema.items() if k != key}
            if isinstance(other, dict) and not set(rest) & set(other):
                return {**other, **rest}, True
    declared = schema.get("type")
    others = [t for t in declared if t != "null"] if isinstance(declared, list) else []
    if len(others) == 1 and len(declared) == 2:
        return {**schema, "type": others[0]}, True
    return schema, False


def _is_block(schema: Any) -> bool:
    """An object with properties and no union around it: written as a block."""
    return (
        isinstance(schema, dict)
        and isinstance(schema.get("properties"), dict)
        and bool(schema["properties"])
        and schema.get("type", "object") == "object"
        and not any(k in schema for k in ("$ref", "anyOf", "oneOf", "allOf", "enum", "const"))
    )


def _is_plain(schema: Any) -> bool:
    return isinstance(schema, dict) and not _is_block(schema) and "$ref" not in schema


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _typed(schema: dict[str, Any]) -> bool:
    return any(k in schema for k in ("type", "properties", "items", "enum", "const", "$ref"))


def _key(name: str) -> str:
    """A member name as TypeScript writes it: quoted unless it is an identifier."""
    return name if _IDENTIFIER.fullmatch(name) else _literal(name)


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _find_anchor(schema: Any, anchor: str) -> Any:
    if isinstance(schema, dict):
        if schema.get("$anchor") == anchor or schema.get("$dynamicAnchor") == anchor:
            return schema
        children: Any = schema.values()
    elif isinstance(schema, list):
        children = schema
    else:
        return None
    for child in children:
        found = _find_anchor(child, anchor)
        if found is not None:
            return found
    return None
