"""Which JSON Schema draft a document follows, and which of its keywords are annotations.

`$schema` decides the draft (draft-04, -06, -07, 2019-09, 2020-12); without one, or with
an unrecognised (custom) meta-schema, the document is read as 2020-12. Draft-03 is refused.

Keyword policy (the specification's own rule): a keyword that no supported draft defines
is an annotation: it is ignored, never an error (`ignored_keywords` lists them).
Keywords that some supported draft defines are enforced whatever the document's draft
(`dependencies`, `additionalItems` with array-form `items`, draft-04's boolean
`exclusiveMinimum`), except where the drafts really differ:

- before 2019-09, the keywords beside `$ref` are ignored (listed as ignored too);
- draft-04 names the base URI `id`; before 2019-09 a fragment-only `$id`/`id` is an anchor;
- `additionalItems` only applies after array-form `items` (ignored otherwise);
- a `format` no draft defines (`int32`, `url`, ...) is an annotation too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kor_cli.errors import GrammarError

DRAFTS = ("draft-04", "draft-06", "draft-07", "2019-09", "2020-12")

CORE = frozenset({
    "$schema", "$id", "$ref", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef",
    "$recursiveAnchor", "$vocabulary", "$comment", "$defs", "definitions",
})  # fmt: skip
APPLICATORS = frozenset({
    "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies",
    "prefixItems", "items", "additionalItems", "contains", "properties", "patternProperties",
    "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
})  # fmt: skip
VALIDATION = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "format",
})  # fmt: skip
META = frozenset({
    "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
    "contentEncoding", "contentMediaType", "contentSchema",
})  # fmt: skip
KNOWN = CORE | APPLICATORS | VALIDATION | META
FORMATS = frozenset({
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex",
})  # fmt: skip
"""The formats some supported draft defines; any other `format` is only an annotation."""
"""Every keyword some supported draft defines (draft-04's `id` only in draft-04)."""

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "contentSchema",
)  # fmt: skip
_SUBSCHEMA_KEYS = frozenset((*_SCHEMA_MAPS, *_SCHEMA_LISTS, *_SCHEMA_ONE, "dependencies", "items"))
_KIND: dict[str, type] = {
    **dict.fromkeys((*_SCHEMA_MAPS, "dependencies"), dict),
    **dict.fromkeys(_SCHEMA_LISTS, list),
    **dict.fromkeys(("items", *_SCHEMA_ONE), object),
}  # how `Draft.subschemas` reads each key's value
_RANK = {
    key: rank
    for rank, key in enumerate(
        (*_SCHEMA_MAPS, "dependencies", *_SCHEMA_LISTS, "items", *_SCHEMA_ONE)
    )
}  # its output's order
_NAVIGABLE = frozenset({"$defs", "definitions"})  # kept for pointers beside an old $ref
_PATTERNS = (
    (re.compile(r"draft-0?3\b"), "draft-03"),
    (re.compile(r"draft-0?4\b"), "draft-04"),
    (re.compile(r"draft-0?6\b"), "draft-06"),
    (re.compile(r"draft-0?7\b"), "draft-07"),
    (re.compile(r"2019-09"), "2019-09"),
    (re.compile(r"2020-12"), "2020-12"),
)


def escape_pointer(token: str) -> str:
    """One JSON pointer reference token."""
    if "~" not in token and "/" not in token:
        return token
    return token.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Draft:
    """The semantics of one draft where it differs from 2020-12."""

    name: str = "2020-12"

    @cached_property
    def old(self) -> bool:
        """Before 2019-09: keywords beside `$ref` are ignored, `$id: "#x"` is an anchor."""
        return self.name in ("draft-04", "draft-06", "draft-07")

    @cached_property
    def id_keyword(self) -> str:
        return "id" if self.name == "draft-04" else "$id"

    def known(self, keyword: str) -> bool:
        """True if `keyword` is defined (validates or structures) in some supported draft."""
        return keyword in KNOWN or (keyword == "id" and self.name == "draft-04")

    def applied(self, schema: dict[str, Any]) -> list[str]:
        """The keys of `schema` that take effect (in document order)."""
        if self.old and "$ref" in schema:
            return ["$ref"]
        draft04 = self.name == "draft-04"
        return [k for k in schema if k in KNOWN or k == "id" and draft04]

    def subschemas(self, schema: dict[str, Any], pointer: str) -> list[tuple[Any, str]]:
        """The direct subschemas of `schema` (every position this draft reads as a schema,
        also beside an old-draft `$ref`, so that pointers and `$id`s resolve)."""
        out: list[tuple[Any, str]] = []
        present = _SUBSCHEMA_KEYS.intersection(schema)
        if not present:  # most schema objects are leaves
            return out
        for key in sorted(present, key=_RANK.__getitem__) if len(present) > 1 else present:
            value, kind = schema[key], _KIND[key]
            if kind is dict:  # a map of subschemas (dependencies: those not name lists)
                if isinstance(value, dict):
                    at = f"{pointer}/{key}/"
                    pairs: Iterable[tuple[str, Any]] = value.items()
                    if key == "dependencies":
                        pairs = [(n, s) for n, s in pairs if _is_schema(s)]
                    out += [(sub, at + escape_pointer(name)) for name, sub in pairs]
            elif kind is list:
                if isinstance(value, list):
                    out += [(sub, f"{pointer}/{key}/{i}") for i, sub in enumerate(value)]
            elif key == "items" and isinstance(value, list):
                out += [(sub, f"{pointer}/items/{i}") for i, sub in enumerate(value)]
                if "additionalItems" in schema:
                    out.append((schema["additionalItems"], pointer + "/additionalItems"))
            else:
                out.append((value, f"{pointer}/{key}"))
        return out


def has_subschemas(schema: dict[str, Any]) -> bool:
    """Whether `schema` has a key under which some draft reads subschemas (a cheap test
    before `Draft.subschemas`)."""
    return not _SUBSCHEMA_KEYS.isdisjoint(schema)


def _is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def detect(document: Any) -> Draft:
    """The draft `document` follows (its root `$schema`; 2020-12 without one)."""
    uri = document.get("$schema") if isinstance(document, dict) else None
    if not isinstance(uri, str):
        return Draft()
    for pattern, name in _PATTERNS:
        if pattern.search(uri):
            if name == "draft-03":
                raise GrammarError("draft-03 schemas are not supported", "$schema", "")
            return Draft(name)
    return Draft()


def ignored_keywords(document: Any, draft: Draft | None = None) -> list[tuple[str, str]]:
    """(keyword, JSON pointer) of every keyword of `document` that is only an annotation:
    not defined by any supported draft, beside an old-draft `$ref`, or `additionalItems`
    without array-form `items`. Metadata keywords (title, description, ...) are not listed.
    """
    draft = draft or detect(document)
    out: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(document, "")]
    seen: set[int] = set()
    while stack:
        schema, pointer = stack.pop()
        if not isinstance(schema, dict) or id(schema) in seen:
            continue
        seen.add(id(schema))
        applied = set(draft.applied(schema))
        for key in schema:
            if key in applied and not (key == "additionalItems" and _lone_additional(schema)):
                if key != "format" or not _custom_format(schema[key]):
                    continue
            if key in META or key in _NAVIGABLE or key in ("$schema", "$comment"):
                continue
            out.append((key, pointer))
        subs = draft.subschemas(schema, pointer)
        if draft.old and "$ref" in schema:  # only what pointers may reach
            subs = [(s, p) for s, p in subs if p.split("/")[-2] in _NAVIGABLE]
        stack += reversed(subs)
    return out


def _custom_format(value: Any) -> bool:
    return isinstance(value, str) and value not in FORMATS


def _lone_additional(schema: dict[str, Any]) -> bool:
    return not isinstance(schema.get("items"), list)
