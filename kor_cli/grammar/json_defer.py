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

from collections.abc import Callable
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node
from kor_cli.grammar.json_drafts import FORMATS as ASSERTED_FORMATS
from kor_cli.grammar.json_drafts import KNOWN
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
_FOLLOWED = frozenset({"then", "else", "additionalItems"})  # annotations read as subschemas


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
        seen, key = self._seen, id(schema)
        found = seen.get(key)
        if found is not None:
            return found
        seen[key] = (True, 0)  # a cycle adds no keyword of its own
        self._keep.append(schema)
        try:
            children = self._children(schema)
        except GrammarError:
            children = None
        if children is None:
            found = seen[key] = (False, 1)
            return found
        size = 1
        for child in children:
            child_safe, child_size = self._scan(child)
            size += child_size
            if not child_safe:
                found = seen[key] = (False, min(size, DEFER_SIZE))
                return found
        found = seen[key] = (True, min(size, DEFER_SIZE))
        return found

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
        old = "$ref" in schema and self.resolver.draft_for(schema).old
        for key in ("$ref",) if old else schema:  # as `Draft.applied`: its siblings ignored
            check = _ACTIONS.get(key, _SKIP)
            if check is _SKIP:
                continue
            if check is _FOLLOW:
                out.append(schema[key])
            elif check is _REFUSE or not check(self, schema, key, schema[key], out):
                return None
        return out

    def _type(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        if isinstance(value, str):
            return value in _TYPES
        return isinstance(value, list) and all(isinstance(n, str) and n in _TYPES for n in value)

    def _enum(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return isinstance(value, list) and len(value) <= current().max_enum

    def _const(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return True

    def _required(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return _strings(value)

    def _bound(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return _number(value) or isinstance(value, bool) and key.startswith("exclusive")

    def _count(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return _number(value) and value >= 0 and value == int(value)

    def _unique(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return value is False

    def _pattern(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return isinstance(value, str) and self._parses(value, _STRICT)

    def _format(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return isinstance(value, str) and (value not in ASSERTED_FORMATS or value in FORMATS)

    def _properties(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        if not isinstance(value, dict):
            return False
        out += value.values()
        return len(value) <= current().max_properties

    def _patterns(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        ok = isinstance(value, dict) and len(value) <= MAX_PATTERNS
        ok = ok and all(self._parses(p, _STRICT) and self._parses(p, _LOOSE) for p in value)
        out += value.values() if ok else ()
        return ok

    def _items(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        if key == "items" and isinstance(value, list) and "prefixItems" in schema:
            return False
        out += value if isinstance(value, list) else [value]
        return True

    def _one(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        out.append(value)
        return True

    def _list(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        if not isinstance(value, list):
            return False
        out += value
        return bool(value)

    def _reference(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return isinstance(value, str) and self._ref(schema, value, out)

    def _dependents(self, schema: dict[str, Any], key: str, value: Any, out: list[Any]) -> bool:
        return self._dependent(key, value, out)

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


_Check = Callable[[DeferPolicy, dict[str, Any], str, Any, list[Any]], bool]
_CHECKS: dict[str, _Check] = {
    "type": DeferPolicy._type,
    "enum": DeferPolicy._enum,
    "const": DeferPolicy._const,
    "required": DeferPolicy._required,
    **dict.fromkeys(_NUMBERS, DeferPolicy._bound),
    **dict.fromkeys(_COUNTS, DeferPolicy._count),
    "uniqueItems": DeferPolicy._unique,
    "pattern": DeferPolicy._pattern,
    "format": DeferPolicy._format,
    "properties": DeferPolicy._properties,
    "patternProperties": DeferPolicy._patterns,
    "items": DeferPolicy._items,
    "prefixItems": DeferPolicy._items,
    **dict.fromkeys(_ONE, DeferPolicy._one),
    **dict.fromkeys(_LISTS, DeferPolicy._list),
    "$ref": DeferPolicy._reference,
    **dict.fromkeys(
        ("dependentRequired", "dependentSchemas", "dependencies"), DeferPolicy._dependents
    ),
}  # keyword -> whether its use cannot be refused (its subschemas go to `out`); others
# keep the value eager, but for annotations (`_FOLLOWED` ones' subschemas are read)
_SKIP, _FOLLOW, _REFUSE = (lambda *_: True), (lambda *_: True), (lambda *_: False)


def _action(key: str) -> _Check:
    """What `_children` does with `key`: its check, read its subschema (`_FOLLOW`), skip
    an annotation, or refuse (contains, multipleOf, $dynamicRef, ...)."""
    if key in _CHECKS:
        return _CHECKS[key]
    return _FOLLOW if key in _FOLLOWED else _SKIP if key in ANNOTATIONS else _REFUSE


_ACTIONS = {key: _action(key) for key in KNOWN}  # one lookup per key in `_children`; a
# key no draft defines (or draft-04's `id`, an annotation) is skipped, as `Draft.applied`
# leaves it out


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
