"""`$ref` resolution inside one schema document (and sibling files, given a loader).

Supports JSON pointers (`#/$defs/x`, `#`), `$anchor`/`$dynamicAnchor` names, and
`$id`-based URIs of subschemas of the same document (resolved against each schema's base
URI). With a `loader` (see `json_files`), other documents it finds are indexed on first
use, each read in its own draft. Anything else raises `GrammarError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from kor_cli.errors import GrammarError
from kor_cli.grammar.json_drafts import Draft, detect, escape_pointer, has_subschemas

__all__ = ["Resolver", "escape_pointer"]

DEFAULT_BASE = "https://kor-cli.invalid/schema.json"


class Resolver:
    """Resolves `$ref` values relative to the schema object that holds them."""

    def __init__(
        self, root: Any, draft: Draft | None = None, loader: Callable[[str], Any] | None = None
    ) -> None:
        self.root = root
        self.draft = draft or detect(root)
        self.loader = loader
        self.draft_of: dict[int, Draft] = {}  # schemas of loaded documents in another draft
        self.base_of: dict[int, str] = {}
        self.pointer_of: dict[int, str] = {}
        self.documents: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[str, tuple[Any, str]] = {}
        self._walked: dict[tuple[str, str], tuple[Any, str]] = {}  # (uri, pointer) -> target
        self._index(root, DEFAULT_BASE, "", self.draft)
        self.documents.setdefault(DEFAULT_BASE, (root, ""))

    def draft_for(self, schema: Any) -> Draft:
        """The draft `schema` is read in (its document's)."""
        return self.draft_of.get(id(schema), self.draft)

    def _index(self, schema: Any, base: str, pointer: str, draft: Draft) -> None:
        if not isinstance(schema, dict):
            return
        key = id(schema)
        if draft is not self.draft:
            self.draft_of[key] = draft
        ident = schema.get(draft.id_keyword)
        if isinstance(ident, str):
            uri, fragment = urldefrag(urljoin(base, ident))
            if uri != base or not ident.startswith("#"):
                base = uri
                self.documents.setdefault(base, (schema, pointer))
            if fragment and draft.old:  # `$id: "#name"` is an anchor before 2019-09
                self.anchors[f"{base}#{fragment}"] = (schema, pointer)
        if "$anchor" in schema or "$dynamicAnchor" in schema:
            for name in ("$anchor", "$dynamicAnchor"):
                if isinstance(schema.get(name), str):
                    self.anchors[f"{base}#{schema[name]}"] = (schema, pointer)
        self.base_of[key] = base
        self.pointer_of[key] = pointer
        if has_subschemas(schema):  # most schema objects are leaves
            for sub, sub_pointer in draft.subschemas(schema, pointer):
                self._index(sub, base, sub_pointer, draft)

    def pointer(self, schema: Any, default: str = "") -> str:
        """The JSON pointer of an indexed schema object."""
        return self.pointer_of.get(id(schema), default)

    def resolve(self, ref: str, holder: dict[str, Any], pointer: str) -> tuple[Any, str]:
        """(target schema, its pointer) of `ref` found in `holder` at `pointer`."""
        base = self.base_of.get(id(holder), DEFAULT_BASE)
        uri, fragment = (base, ref[1:]) if ref.startswith("#") else urldefrag(urljoin(base, ref))
        if uri not in self.documents and not self._load(uri):
            where = "this schema or its sibling files" if self.loader else "this schema"
            raise GrammarError(
                f"cannot resolve {ref!r}: only references inside {where} are supported",
                keyword="$ref",
                pointer=pointer,
            )
        document, doc_pointer = self.documents[uri]
        if not fragment or fragment.startswith("/"):
            found = self._walked.get((uri, fragment))
            if found is None:  # a GrammarError is raised again each time
                target, target_pointer = _walk(document, fragment, ref, pointer)
                found = self._walked[(uri, fragment)] = (target, doc_pointer + target_pointer)
            return found
        found = self.anchors.get(f"{uri}#{fragment}")
        if found is None:
            raise GrammarError(f"unknown anchor in {ref!r}", keyword="$ref", pointer=pointer)
        return found

    def _load(self, uri: str) -> bool:
        """Index the document the loader finds for `uri`; False if there is none."""
        document = self.loader(uri) if self.loader else None
        if document is None:
            return False
        if id(document) in self.pointer_of:  # the same file under another URI
            self.documents[uri] = (document, self.pointer_of[id(document)])
            return True
        name = uri.rsplit("/", 1)[-1]
        self.documents[uri] = (document, f"{name}#")
        has_draft = isinstance(document, dict) and "$schema" in document
        self._index(document, uri, f"{name}#", detect(document) if has_draft else self.draft)
        return True


def _walk(document: Any, fragment: str, ref: str, pointer: str) -> tuple[Any, str]:
    node = document
    tokens = [unquote(t).replace("~1", "/").replace("~0", "~") for t in fragment.split("/")[1:]]
    for token in tokens:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise GrammarError(f"{ref!r} points nowhere", keyword="$ref", pointer=pointer)
    if not isinstance(node, (dict, bool)):
        raise GrammarError(f"{ref!r} does not point to a schema", keyword="$ref", pointer=pointer)
    return node, "".join("/" + escape_pointer(t) for t in tokens)
