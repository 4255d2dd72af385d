"""The record's JSON Schema: a source document wrapped as `{root_id: <document>}`.

Every source ends here: the grammar compiles this document and validation checks it. A
JSON Schema (or a Pydantic class's JSON Schema) becomes the value under the root id; its
local `$ref`s are rewritten to point into the wrapper (`#/$defs/A` →
`#/properties/<root>/$defs/A`), its `$schema` and root `$id` move to the wrapper (the
draft and base URI stay those of the whole document), and the prompt-only keywords
(`x-kor-examples`, `x-kor-null-examples`) are left out. Everything else is kept as
written: unknown keywords are annotations for the engine and for validation alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PROMPT_KEYWORDS = ("x-kor-examples", "x-kor-null-examples")
# keywords whose value is a schema, a list of schemas, or a map of name → schema
SCHEMA_VALUES = (
    "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "additionalItems", "contentSchema", "items",
)  # fmt: skip
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SCHEMA_MAPS = (
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
)  # fmt: skip
OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


def declared_draft(document: Any) -> str | None:
    """'draft-04' … 'draft-07' when `$schema` names an older draft, else None (2019-09+)."""
    uri = document.get("$schema") if isinstance(document, dict) else None
    if isinstance(uri, str):
        for draft in OLD_DRAFTS:
            if draft in uri:
                return draft
    return None


def subschemas(schema: Any, pointer: str = "") -> Iterator[tuple[str, Any, str]]:
    """(keyword, subschema, pointer) for each schema directly inside `schema`."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        where = f"{pointer}/{escape(key)}"
        if key in SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, (dict, bool)):
                    yield key, sub, f"{where}/{escape(name)}"
        elif key in SCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield key, sub, f"{where}/{index}"
        elif key in SCHEMA_VALUES and isinstance(value, (dict, bool)):
            yield key, value, where


def record_document(document: dict[str, Any], root_id: str) -> dict[str, Any]:
    """The whole record's JSON Schema: `document` as the value under `root_id`."""
    body = dict(document)
    head: dict[str, Any] = {}
    id_key = "id" if declared_draft(document) in ("draft-03", "draft-04") else "$id"
    for key in ("$schema", id_key):
        if isinstance(body.get(key), str):
            head[key] = body.pop(key)
    base = head.get(id_key, "")
    prefix = "#/properties/" + escape(root_id)
    return {
        **head,
        "type": "object",
        "properties": {root_id: _rewrite(body, prefix, base, id_key, top=True)},
        "required": [root_id],
        "additionalProperties": False,
    }


def _rewrite(schema: Any, prefix: str, base: str, id_key: str, *, top: bool = False) -> Any:
    if not isinstance(schema, dict):
        return schema
    if not top and isinstance(schema.get(id_key), str) and not schema[id_key].startswith("#"):
        return _strip(schema)  # an embedded resource: its own refs are relative to itself
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in PROMPT_KEYWORDS:
            continue
        if key in ("$ref", "$dynamicRef") and isinstance(value, str):
            out[key] = _moved_ref(value, prefix, base)
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {n: _rewrite(s, prefix, base, id_key) for n, s in value.items()}
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_rewrite(s, prefix, base, id_key) for s in value]
        elif key in SCHEMA_VALUES:
            out[key] = _rewrite(value, prefix, base, id_key)
        else:
            out[key] = value
    return out


def _strip(schema: Any) -> Any:
    """`schema` without the prompt-only keywords, at any depth (refs untouched)."""
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in PROMPT_KEYWORDS}
    for key, sub, _ in subschemas(schema):
        if key in SCHEMA_MAPS:
            out[key] = {n: _strip(s) for n, s in schema[key].items()}
        elif key in SCHEMA_LISTS and isinstance(schema[key], list):
            out[key] = [_strip(s) for s in schema[key]]
        else:
            out[key] = _strip(sub)
    return out


def _moved_ref(ref: str, prefix: str, base: str) -> str:
    if base and ref.startswith(base + "#"):
        ref = ref[len(base) :]
    if ref == "#" or ref.startswith("#/"):
        return prefix + ref[1:]
    return ref


def escape(name: str) -> str:
    """A JSON pointer segment for `name`."""
    return name.replace("~", "~0").replace("/", "~1")


def resolve_pointer(document: Any, ref: str) -> Any:
    """The target of a local `#/a/b` pointer in `document`, or None when absent."""
    target = document
    if ref in ("#", ""):
        return target
    if not ref.startswith("#/"):
        return None
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target
