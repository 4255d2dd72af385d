"""Which member values and items are built only when the matcher first reaches them.

Time to first mask should grow with the top-level object, not with the whole schema: a
member value whose schema subtree is large becomes a rule whose *AST* is built when the
rule is first needed (`json_rules.RuleBook.defer`), so the products (`not`, `oneOf`,
`if`, ...) compiled while building it are paid only when generation gets there.

Keyword errors must still come at compile time (a bad keyword deep inside a value that is
never reached is reported when the schema is loaded). So a value is deferred only when a
cheap walk over its schema subtree (through `$ref`s, every applicator, each schema object
once) shows that building it cannot refuse a keyword: every keyword is one whose handling
never calls `SchemaCompiler.fail` (or is a well-formed use of one that can: a pattern that
parses, a format that is supported), every `$ref` resolves, and values are well-formed.
Anything else (`uniqueItems`, `contains`, `multipleOf`, an unknown format, a bad pattern, a
keyword not listed here) keeps the value eager, exactly as before. What may still surface
when a deferred rule is first reached are size and time limits (`max_states`, the CPU
limit), as for any lazily built rule.

Small subtrees (fewer than `DEFER_SIZE` schema objects) and values that cannot be arrays
or objects stay eager: small schemas keep one rule and the very DFA they had.
"""

from __future__ import annotations

from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node
from kor_cli.grammar.json_drafts import FORMATS as ASSERTED_FORMATS
from kor_cli.grammar.json_formats import FORMATS
from kor_cli.grammar.json_keywords import ANNOTATIONS, Part
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_values import json_char
from kor_cli.grammar.limits import current
from kor_cli.grammar.regex import Dialect, search

DEFER_SIZE = 8  # schema objects in a value's subtree from which it is built when reached
MAX_PATTERNS = 3  # patternProperties per schema (merged objects stay far below json_objects')

_STRICT = Dialect(json_char, "strict")
_LOOSE = Dialect(json_char, "loose")
_TYPES = frozenset({"null", "boolean", "object", "array", "string", "integer", "number"})
_SCALARS = frozenset({"null", "boolean", "string", "integer", "number"})
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_ONE = ("additionalProperties", "not", "if", "propertyNames", "unevaluatedItems",
        "unevaluatedProperties")  # fmt: skip
_LISTS = ("allOf", "anyOf", "oneOf")


class DeferPolicy:
    """Decides `deferrable(parts)`; remembers each schema object's verdict and size."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._seen: dict[int, tuple[bool, int]] = {}  # id(schema) -> (safe, capped size)
        self._patterns: dict[str, Node | GrammarError] = {}
        self._keep: list[Any] = []  # schemas whose ids are keys (kept alive)

    def deferrable(self, parts: list[Part], building: frozenset[int] = frozenset()) -> bool:
        """Whether the conjunction `parts` (a member value) may be built when first reached:
        large enough, maybe a container, and no keyword in it can be refused. `building`:
        ids of the schemas whose conjunctions are being built; a `$ref` back to one of them
        costs a call, so it does not count towards the size (ui's `children`, an array of
        `$ref: "#"`, is built now and closes the recursion as tree's `kids` do)."""
        if not any(_container(p.schema) for p in parts):
            return False
        size = 0
        for part in parts:
            safe, count = self._scan(part.schema)
            if not safe:
                return False
            size += count
        if size < DEFER_SIZE:
            return False
        seen: set[int] = set(building)
        return not building or sum(self._near(p.schema, seen) for p in parts) >= DEFER_SIZE

    def safe(self, schema: Any) -> bool:
        """Whether no keyword of `schema`'s subtree can be refused."""
        return self._scan(schema)[0]

    def _scan(self, schema: Any) -> tuple[bool, int]:
        if isinstance(schema, bool):
            return True, 0
        if not isinstance(schema, dict):
            return False, 0
        found = self._seen.get(id(schema))
        if found is not None:
            return found
        self._seen[id(schema)] = (True, 0)  # a cycle adds no keyword of its own
        self._keep.append(schema)
        try:
            children = self._children(schema)
        except GrammarError:
            children = None
        safe, size = children is not None, 1
        for child in children or ():
            child_safe, child_size = self._scan(child)
            safe &= child_safe
            size = min(size + child_size, DEFER_SIZE)
            if not safe:
                break
        self._seen[id(schema)] = (safe, size)
        return safe, size

    def _near(self, schema: Any, seen: set[int]) -> int:
        """The size of `schema`'s subtree (as `_scan`'s, capped) without the schemas in
        `seen` (those being built, and those counted already)."""
        if not isinstance(schema, dict) or id(schema) in seen:
            return 0
        seen.add(id(schema))
        size = 1
        for child in self._children(schema) or ():
            size += self._near(child, seen)
            if size >= DEFER_SIZE:
                break
        return size

    def _children(self, schema: dict[str, Any]) -> list[Any] | None:
        """The subschemas the compiler reads from `schema` (`$ref` targets included), or
        None if one of its keywords could be refused."""
        out: list[Any] = []
        keys = self.resolver.draft_for(schema).applied(schema)
        for key in keys:
            value = schema[key]
            if key in ("then", "else"):
                out.append(value)
            elif key in ANNOTATIONS:
                if key == "additionalItems":
                    out.append(value)
            elif not self._keyword(schema, key, value, out):
                return None
        return out

    def _keyword(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        """Whether keyword `key` cannot be refused; its subschemas go to `out`."""
        if key == "type":
            names = [value] if isinstance(value, str) else value
            return isinstance(names, list) and all(n in _TYPES for n in names)
        if key == "enum":
            return isinstance(value, list) and len(value) <= current().max_enum
        if key == "const" or key == "required" and _strings(value):
            return True
        if key in _NUMBERS:
            return _number(value) or isinstance(value, bool) and key.startswith("exclusive")
        if key in _COUNTS:
            return _number(value) and value >= 0 and value == int(value)
        if key == "uniqueItems":
            return value is False
        if key == "pattern":
            return isinstance(value, str) and self._parses(value, _STRICT)
        if key == "format":
            return isinstance(value, str) and (value not in ASSERTED_FORMATS or value in FORMATS)
        if key == "properties":
            out += value.values() if isinstance(value, dict) else ()
            return isinstance(value, dict) and len(value) <= current().max_properties
        if key == "patternProperties":
            ok = isinstance(value, dict) and len(value) <= MAX_PATTERNS
            ok = ok and all(self._parses(p, _STRICT) and self._parses(p, _LOOSE) for p in value)
            out += value.values() if ok else ()
            return ok
        if key in ("items", "prefixItems"):
            if key == "items" and isinstance(value, list) and "prefixItems" in schema:
                return False
            out += value if isinstance(value, list) else [value]
            return True
        if key in _ONE:
            out.append(value)
            return True
        if key in _LISTS:
            out += value if isinstance(value, list) else ()
            return isinstance(value, list) and bool(value)
        if key == "$ref":
            return isinstance(value, str) and self._ref(schema, value, out)
        if key in ("dependentRequired", "dependentSchemas", "dependencies"):
            return self._dependent(key, value, out)
        return False  # contains, multipleOf, $dynamicRef, ...: keep the value eager

    def _ref(self, holder: dict[str, Any], ref: str, out: list[Any]) -> bool:
        pointer = self.resolver.pointer(holder)
        target, _ = self.resolver.resolve(ref, holder, pointer)  # GrammarError: not safe
        out.append(target)
        return True

    def _dependent(self, key: str, value: Any, out: list[Any]) -> bool:
        if not isinstance(value, dict):
            return False
        for then in value.values():
            if key == "dependentRequired" or isinstance(then, list):
                if key == "dependentSchemas" or not _strings(then):
                    return False
            else:
                out.append(then)
        return True

    def _parses(self, pattern: Any, dialect: Dialect) -> bool:
        try:
            return isinstance(pattern, str) and self.parsed(pattern, dialect) is not None
        except GrammarError:
            return False

    def parsed(self, pattern: str, dialect: Dialect) -> Node:
        """`regex.search(pattern, dialect)`, parsed once per compile (the scan and the
        compiler share it); GrammarError as `search` raises it."""
        key = f"{dialect.classes} {pattern}"
        found = self._patterns.get(key)
        if found is None:
            try:
                found = search(pattern, dialect)
            except GrammarError as error:
                found = error
            self._patterns[key] = found
        if isinstance(found, GrammarError):
            raise found
        return found


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _container(schema: Any) -> bool:
    """False only when the schema's own `type` rules out arrays and objects."""
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    names = [kind] if isinstance(kind, str) else kind
    return not (isinstance(names, list) and names and all(n in _SCALARS for n in names))
