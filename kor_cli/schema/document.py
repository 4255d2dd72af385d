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
    mover = _RefMover("#/properties/" + escape(root_id), head.get(id_key, ""), id_key)
    return {
        **head,
        "type": "object",
        "properties": {root_id: mover.rewrite(body, mover.base)},
        "required": [root_id],
        "additionalProperties": False,
    }


class _RefMover:
    """Moves refs into the root document under `prefix`: every `$ref` outside data keywords
    (`const`, `enum`, `default`, `examples`), also in containers that are no schema (e.g.
    `definitions: {"group": {"item": {...}}}`). Inside embedded resources (their own
    `$id`), refs that resolve to the root document become absolute (`<root $id>#/...`)."""

    def __init__(self, prefix: str, base: str, id_key: str) -> None:
        self.prefix = prefix
        self.base = base
        self.root_uri = base.partition("#")[0]
        self.id_key = id_key

    def rewrite(self, value: Any, current: str, embedded: bool = False, names: bool = False) -> Any:
        if isinstance(value, list):
            return [self.rewrite(item, current, embedded) for item in value]
        if not isinstance(value, dict):
            return value
        if names:  # a map of name → schema (`properties`, `$defs`, ...): keys are no keywords
            return {n: self.rewrite(sub, current, embedded) for n, sub in value.items()}
        own_id = value.get(self.id_key)
        if isinstance(own_id, str) and not own_id.startswith("#"):
            current, embedded = urljoin(current, own_id), True  # an embedded resource
        out: dict[str, Any] = {}
        for key, sub in value.items():
            if key in PROMPT_KEYWORDS:
                continue
            if key in DATA_KEYWORDS:
                out[key] = sub
            elif key in ("$ref", "$dynamicRef") and isinstance(sub, str):
                out[key] = self.moved(sub, current, embedded)
            else:
                out[key] = self.rewrite(sub, current, embedded, names=key in SCHEMA_MAPS)
        return out

    def moved(self, ref: str, current: str, embedded: bool) -> str:
        if not embedded and ref.startswith("#"):
            return self.prefix + ref[1:] if ref == "#" or ref.startswith("#/") else ref
        if not self.root_uri:
            return ref  # relative to an embedded resource, or to no known document
        target, _, fragment = urljoin(current, ref).partition("#")
        if target != self.root_uri:
            return ref  # another resource: left as written (remote ones the engine names)
        if fragment and not fragment.startswith("/"):  # an anchor of the root document
            return f"{self.root_uri}#{fragment}" if embedded else "#" + fragment
        pointer = self.prefix[1:] + fragment
        return f"{self.root_uri}#{pointer}" if embedded else "#" + pointer


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
