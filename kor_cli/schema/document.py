"""The record's JSON Schema: a source document wrapped as `{root_id: <document>}`.

Every source ends here: the grammar compiles this document and validation checks it. A
JSON Schema (or a Pydantic class's JSON Schema) becomes the value under the root id; its
`$ref`s into itself are rewritten to point into the wrapper (`#/$defs/A` and, against
the root `$id`, `a.json#/$defs/A` → `#/properties/<root>/$defs/A`), its `$schema` and
root `$id` move to the wrapper (the draft and base URI stay those of the whole
document), and the prompt-only keywords
(`x-kor-examples`, `x-kor-null-examples`) are left out. Everything else is kept as
written: unknown keywords are annotations for the engine and for validation alike.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

PROMPT_KEYWORDS = ("x-kor-examples", "x-kor-null-examples")
# keywords whose value maps names to schemas
SCHEMA_MAPS = (
    "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
)  # fmt: skip
DATA_KEYWORDS = ("const", "enum", "default", "examples")
OLD_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")


def declared_draft(document: Any) -> str | None:
    """'draft-04' … 'draft-07' when `$schema` names an older draft, else None (2019-09+)."""
    uri = document.get("$schema") if isinstance(document, dict) else None
    if isinstance(uri, str):
        for draft in OLD_DRAFTS:
            if draft in uri:
                return draft
    return None


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


def _rewrite(
    value: Any, prefix: str, base: str, id_key: str, *, top: bool = False, names: bool = False
) -> Any:
    """`value` with its root-relative refs moved under `prefix`: every `$ref` outside data
    keywords (`const`, `enum`, `default`, `examples`), also in containers that are no
    schema (e.g. `definitions: {"group": {"item": {...}}}`); embedded resources (their own
    `$id`) keep their refs, which are relative to themselves."""
    if isinstance(value, list):
        return [_rewrite(item, prefix, base, id_key) for item in value]
    if not isinstance(value, dict):
        return value
    if names:  # a map of name → schema (`properties`, `$defs`, ...): keys are no keywords
        return {name: _rewrite(sub, prefix, base, id_key) for name, sub in value.items()}
    own_id = value.get(id_key)
    if not top and isinstance(own_id, str) and not own_id.startswith("#"):
        return _strip(value)
    out: dict[str, Any] = {}
    for key, sub in value.items():
        if key in PROMPT_KEYWORDS:
            continue
        if key in DATA_KEYWORDS:
            out[key] = sub
        elif key in ("$ref", "$dynamicRef") and isinstance(sub, str):
            out[key] = _moved_ref(sub, prefix, base)
        else:
            out[key] = _rewrite(sub, prefix, base, id_key, names=key in SCHEMA_MAPS)
    return out


def _strip(value: Any, *, names: bool = False) -> Any:
    """`value` without the prompt-only keywords, at any depth (refs untouched)."""
    if isinstance(value, list):
        return [_strip(item) for item in value]
    if not isinstance(value, dict):
        return value
    if names:
        return {name: _strip(sub) for name, sub in value.items()}
    return {
        key: sub if key in DATA_KEYWORDS else _strip(sub, names=key in SCHEMA_MAPS)
        for key, sub in value.items()
        if key not in PROMPT_KEYWORDS
    }


def _moved_ref(ref: str, prefix: str, base: str) -> str:
    if base and not ref.startswith("#"):
        target, _, fragment = urljoin(base, ref).partition("#")
        if target != base.partition("#")[0]:
            return ref  # another document: the engine names it
        ref = "#" + fragment
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
