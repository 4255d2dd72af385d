"""A cheap proof that a conjunction of schemas has a value the grammar accepts.

The pushdown matcher may only be offered calls to rules that generate a string
(`json_rules.RuleBook.productive`). For a deferred member value (`json_defer`) that used to
mean building its AST just to learn it is not empty: utcm-monitor's item rule asked it of
235 deferred `properties` values, each a whole resource object, before the rule's first
mask. Most such values obviously have a value: an object whose required members (if any;
optional declared ones too, up to `minProperties`) obviously have one, an empty array (or
`minItems` copies of an item), a string (a `pattern`'s: its small DFA, compiled as the
compiler compiles it, says; or one of a format), an integer within the bounds, a literal of
the enum, an `anyOf` branch that has one beside the rest (the compiler's union of cases), a
`oneOf` branch whose witness object every other branch surely refuses (`_exclusive`), an
object beside a `not` whose schema surely refuses an object of its member names (a
required name it lacks, a name it forbids, a count, a type: rust-toolchain's `oneOf` of a
`not` and a `required`), an `if` by cases (a value of `if` and `then`, or one of `else`
beside a `not` of `if`); under those products, no deeper than recursion is unrolled.

`Witness.exists(schemas)` says True only when it finds such a value from the schemas
alone, under the compiler's own semantics (closed objects: a required member must be
declared in some `properties`; only keywords whose effect on the witness is known are
read, any other keyword means "unknown"); False means unknown, and the caller builds the
rule's AST as before. So the answer never differs from the built rule's: a value that
satisfies every keyword is one the grammar accepts (canonical text, members in location
order, none missing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.json_canonical import canonical_key, value_type
from kor_cli.grammar.json_formats import FORMATS
from kor_cli.grammar.json_keywords import ANNOTATIONS
from kor_cli.grammar.json_refs import Resolver

MAX_SCHEMAS = 64  # schema objects in one conjunction (through $ref/allOf) looked at
MAX_DEPTH = 8  # nested required members followed
_BOUND = 1e15  # numeric bounds read (larger ones: unknown)
MAX_BRANCHES = 32  # `anyOf` branches tried in one proof
MAX_REFUSAL = 4  # nested `anyOf`/`oneOf` levels a refusal looks into

_KNOWN = frozenset({
    "type", "enum", "const", "properties", "required", "additionalProperties", "$ref",
    "allOf", "items", "prefixItems", "maxItems", "uniqueItems", "minLength", "maxLength",
    "maxProperties", "pattern", "anyOf", "patternProperties", "minimum", "maximum", "oneOf",
    "minProperties", "minItems", "format", "propertyNames", "dependencies", "dependentRequired",
    "dependentSchemas", "not", "if",
})  # fmt: skip
_DEPENDENT = ("dependencies", "dependentRequired", "dependentSchemas")
_CONDITION = ("if", "then", "else")
_NAMES = {"number": {"integer", "fraction"}}
_ALL = frozenset({"null", "boolean", "integer", "fraction", "string", "array", "object"})
_TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


class Witness:
    """Decides `exists` for the schemas of one document (see the module docstring)."""

    def __init__(
        self,
        resolver: Resolver,
        strings: Callable[[list[str], int, int | None], bool],
        unrolled: int = 3,
    ) -> None:
        self.resolver = resolver
        self.strings = strings  # (patterns, minLength, maxLength): the compiler's strings
        # under a product a `$ref` is followed at most `unrolled` times (`max_recursion_depth`,
        # counted from the product): a witness there nests at most `unrolled - 1` levels
        self._exact_depth = MAX_DEPTH - unrolled + 1 if unrolled >= 1 else None
        self._branches = MAX_BRANCHES  # `anyOf` branches the current proof may still try

    def exists(self, schemas: list[Any], depth: int = 0) -> bool:
        """True if a value certainly satisfies all of `schemas` (False: unknown)."""
        found = self._flatten(schemas)
        if found is None or depth > MAX_DEPTH:
            return False
        if depth == 0:
            self._branches = MAX_BRANCHES
        return self._cases(found, depth)

    def exists_unrolled(self, schemas: list[Any]) -> bool:
        """`exists` for a value built as a product's operands are (recursion unrolled: a
        checked array's item): its witness nests no deeper than the unrolling allows."""
        if self._exact_depth is None:
            return False
        self._branches = MAX_BRANCHES
        return self.exists(schemas, self._exact_depth)

    def _cases(self, found: list[dict[str, Any]], depth: int) -> bool:
        """`found` with its first `anyOf` (or `oneOf` of branches of disjoint types: one
        branch's value fails the others' `type`) resolved by cases: some branch, joined to
        the rest, has a value (as the compiler unions the conjunction with each branch); at
        most `MAX_BRANCHES` branches are tried in one proof."""
        for index, schema in enumerate(found):
            key = "anyOf" if "anyOf" in schema else "oneOf" if "oneOf" in schema else None
            if key is None:
                if "if" in schema:
                    return self._condition(found, index, depth)
                continue
            branches = schema[key]
            if not isinstance(branches, list):
                return False
            rest = [*found[:index], {k: v for k, v in schema.items() if k != key}]
            rest += found[index + 1 :]
            if key == "oneOf" and not _apart(branches):
                return self._exclusive(rest, branches, depth)
            for branch in branches:
                self._branches -= 1
                if self._branches < 0:
                    return False
                extra = self._flatten([branch])
                if extra is not None and self._cases(rest + extra, depth):
                    return True
            return False
        return self._decide(found, depth)

    def _condition(self, found: list[dict[str, Any]], index: int, depth: int) -> bool:
        """`found` with the `if` of `found[index]` resolved by cases: a value of `if` and
        `then`, or one of `else` that `if` surely refuses (a `not`), joined to the rest."""
        if self._exact_depth is None:  # compiled as a product (`_exclusive`)
            return False
        depth = max(depth, self._exact_depth)
        schema = found[index]
        rest = [*found[:index], {k: v for k, v in schema.items() if k not in _CONDITION}]
        rest += found[index + 1 :]
        test, then = self._flatten([schema["if"]]), self._flatten([schema["then"]])
        otherwise = self._flatten([schema["else"]])
        cases = [test + then if test is not None and then is not None else None]
        cases.append(otherwise + [{"not": schema["if"]}] if otherwise is not None else None)
        for extra in cases:
            self._branches -= 1
            if self._branches < 0:
                return False
            if extra is not None and self._cases(rest + extra, depth):
                return True
        return False

    def _decide(self, found: list[dict[str, Any]], depth: int) -> bool:
        """`exists` for schema objects without `anyOf`."""
        keys = {k for s in found for k in s}
        types = set(_ALL)
        for schema in found:
            if "type" in schema:
                types &= _types(schema["type"])
        if "enum" in keys or "const" in keys:
            return keys <= {"type", "enum", "const"} and self._literal(found, types)
        return any(self._of_type(t, found, keys, depth) for t in types)

    def _flatten(self, schemas: list[Any]) -> list[dict[str, Any]] | None:
        """The schema objects of the conjunction (through `$ref`s and `allOf`), their keys
        the keywords that take effect; None if one is false or not understood."""
        out: dict[int, dict[str, Any]] = {}
        todo = list(schemas)
        while todo:
            schema = todo.pop()
            if schema is True:
                continue
            if not isinstance(schema, dict) or len(out) >= MAX_SCHEMAS:
                return None
            if id(schema) in out:
                continue
            draft = self.resolver.draft_for(schema)
            kept = {k: v for k, v in schema.items() if draft.known(k) and k not in ANNOTATIONS}
            if not set(kept) <= _KNOWN:
                return None
            if "if" in kept:  # its `then`/`else` (annotations alone) with it
                kept["then"], kept["else"] = schema.get("then", True), schema.get("else", True)
            out[id(schema)] = kept
            if "$ref" in kept:
                try:
                    todo.append(self.resolver.resolve(kept["$ref"], schema, "")[0])
                except GrammarError:
                    return None
            if "allOf" in kept:
                if not isinstance(kept["allOf"], list):
                    return None
                todo += kept["allOf"]
        return [{k: v for k, v in s.items() if k not in ("$ref", "allOf")} for s in out.values()]

    def _literal(self, found: list[dict[str, Any]], types: set[str]) -> bool:
        """Some value every `enum`/`const` lists is of an allowed type."""
        lists = [s["enum"] for s in found if "enum" in s]
        lists += [[s["const"]] for s in found if "const" in s]
        if not all(isinstance(values, list) for values in lists):
            return False
        keys = [{canonical_key(v) for v in values} for values in lists[1:]]
        return any(
            value_type(v) in types and all(canonical_key(v) in k for k in keys) for v in lists[0]
        )

    def _of_type(self, kind: str, found: list[dict[str, Any]], keys: set[str], depth: int) -> bool:
        """A value of `kind` satisfies `found`: null, false, 0, a string (of its patterns: the
        compiler's own strings, compiled), an empty array, an object of the required members
        (the only kind a `not` is read for, see `_members`)."""
        if kind != "object" and any("not" in s for s in found):
            return False
        if kind == "string":
            low = max((s.get("minLength", 0) for s in found), default=0)
            highs = [s["maxLength"] for s in found if "maxLength" in s]
            if not all(map(_count, [low, *highs])) or any(h < low for h in highs):
                return False
            patterns = [s["pattern"] for s in found if "pattern" in s]
            if not all(isinstance(p, str) for p in patterns):
                return False
            formats = {s["format"] for s in found if "format" in s}
            if not all(isinstance(f, str) for f in formats):
                return False
            formats &= set(FORMATS)  # any other format is only an annotation
            if formats:  # a string of one format, nothing else on it
                return len(formats) == 1 and not (patterns or low or highs)
            return not patterns or self.strings(patterns, low, min(highs, default=None))
        if kind == "object":
            return self._object(found, depth)
        if kind == "array":
            return self._array(found, depth)
        if kind in ("integer", "fraction"):
            return _integer_between(found)
        return True  # null, boolean

    def _array(self, found: list[dict[str, Any]], depth: int) -> bool:
        """The empty array, or (`minItems`) that many copies of one item: not under
        `prefixItems`, nor past one under `uniqueItems`."""
        lows = [s.get("minItems", 0) for s in found]
        if not all(map(_count, lows)):
            return False
        low = max(lows, default=0)
        if low == 0:
            return True
        highs = [s["maxItems"] for s in found if "maxItems" in s]
        if not all(map(_count, highs)) or any(h < low for h in highs):
            return False
        if any("prefixItems" in s or low > 1 and s.get("uniqueItems", False) for s in found):
            return False
        items = [s["items"] for s in found if "items" in s]
        return all(isinstance(i, (dict, bool)) for i in items) and self.exists(items, depth + 1)

    def _exclusive(self, rest: list[dict[str, Any]], branches: list[Any], depth: int) -> bool:
        """A `oneOf` whose branches may share a type: some branch, joined to `rest` (no
        other `anyOf`/`oneOf`/literal left), has a witness object (`_members`) that every
        other branch surely refuses (`_refuses`). The branches are compiled under a product
        (recursion unrolled): the witness nests no deeper than the unrolling allows."""
        if self._exact_depth is None:
            return False
        depth = max(depth, self._exact_depth)
        for index, branch in enumerate(branches):
            self._branches -= 1
            if self._branches < 0:
                return False
            extra = self._flatten([branch])
            if extra is None:
                continue
            mine = rest + extra
            if any(k in s for s in mine for k in ("anyOf", "oneOf", "enum", "const", "if")):
                continue
            if not all("object" in _types(s["type"]) for s in mine if "type" in s):
                continue
            keys = self._members(mine, depth)
            others = branches[:index] + branches[index + 1 :]
            if keys is not None and all(self._refuses(b, keys) for b in others):
                return True
        return False

    def _refuses(self, branch: Any, keys: frozenset[str], depth: int = 0) -> bool:
        """`branch` surely refuses every object whose member names are exactly `keys`: it
        is false, or one of its schema objects allows no object, requires another name,
        forbids one of `keys`, bounds the count of members past them, or has an `anyOf` or
        `oneOf` each branch of which refuses them (`MAX_REFUSAL` levels of those)."""
        if branch is False:
            return True
        found = self._flatten([branch])
        for schema in found or ():
            for key in ("anyOf", "oneOf"):
                cases = schema.get(key)
                if depth < MAX_REFUSAL and isinstance(cases, list):
                    if all(self._refuses(case, keys, depth + 1) for case in cases):
                        return True
            kinds = schema.get("type", "object")
            kinds = [kinds] if isinstance(kinds, str) else kinds
            known = isinstance(kinds, list) and all(k in _TYPE_NAMES for k in map(str, kinds))
            if known and "object" not in kinds:
                return True
            names, props = schema.get("required", []), schema.get("properties", {})
            if isinstance(names, list) and any(isinstance(n, str) and n not in keys for n in names):
                return True
            if isinstance(props, dict) and any(props.get(n) is False for n in keys):
                return True
            low, high = schema.get("minProperties", 0), schema.get("maxProperties", len(keys))
            if _count(low) and low > len(keys) or _count(high) and high < len(keys):
                return True
        return False

    def _object(self, found: list[dict[str, Any]], depth: int) -> bool:
        return self._members(found, depth) is not None

    def _members(self, found: list[dict[str, Any]], depth: int) -> frozenset[str] | None:
        """The member names of a witness object of `found` (None: unknown): the required
        members, then (for `minProperties`) optional ones every schema that names members
        declares, in order, each with a value of its own; none a dependency's trigger, none
        at all under `propertyNames`; each `not` beside them surely refusing an object of
        exactly these names (`_refuses`), whatever their values."""
        if any("not" in s for s in found):  # a product: recursion unrolled (`_exclusive`)
            if self._exact_depth is None:
                return None
            depth = max(depth, self._exact_depth)
        required: dict[str, None] = {}
        for schema in found:
            names = schema.get("required", [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                return None
            required.update(dict.fromkeys(names))
        if any("patternProperties" in s for s in found):
            if required or any("minProperties" in s for s in found):
                return None  # a name may match a pattern: not followed here
        triggers: set[str] = set()  # dependencies hold when none of their names is there
        for schema in found:
            for key in _DEPENDENT:
                if not isinstance(schema.get(key, {}), dict):
                    return None
                triggers.update(schema.get(key, {}))
        if triggers & set(required):
            return None
        for name in required:
            subs, declared = [], False
            for schema in found:
                props = schema.get("properties", {})
                if not isinstance(props, dict):
                    return None
                if name in props:
                    subs.append(props[name])
                    declared = True
                elif "additionalProperties" in schema:
                    subs.append(schema["additionalProperties"])
            if not declared or not self.exists(subs, depth + 1):
                return None
        lows = [s.get("minProperties", 0) for s in found]
        if not all(map(_count, lows)):
            return None
        low = max(lows, default=0)
        more = low > len(required)  # optional members needed
        if more and not all(isinstance(s.get("properties", {}), dict) for s in found):
            return None
        for name in self._optional(found, required) if more else ():
            if len(required) >= low:
                break
            if name in triggers:
                continue
            subs = [s["properties"][name] for s in found if name in s.get("properties", {})]
            if self.exists(subs, depth + 1):
                required[name] = None
        if len(required) < low:
            return None
        highs = [s.get("maxProperties", len(required)) for s in found]
        if not all(map(_count, highs)) or min(highs, default=len(required)) < len(required):
            return None
        if required and any("propertyNames" in s for s in found):
            return None  # propertyNames holds for no member; names are not checked here
        names = frozenset(required)
        if not all(self._refuses(s["not"], names) for s in found if "not" in s):
            return None  # a `not` holds when its schema surely refuses these names
        return names

    @staticmethod
    def _optional(found: list[dict[str, Any]], required: dict[str, None]) -> list[str]:
        """Names not in `required` that every schema naming members (properties, required
        or additionalProperties) declares in its `properties`."""
        naming = [s for s in found if {"properties", "required", "additionalProperties"} & set(s)]
        if not naming:
            return []
        first = [n for n in naming[0].get("properties", {}) if n not in required]
        return [n for n in first if all(n in s.get("properties", {}) for s in naming[1:])]


def _types(value: Any) -> set[str]:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list):
        return set()
    return {t for n in names if isinstance(n, str) for t in _NAMES.get(n, {n})} & _ALL


def _apart(branches: list[Any]) -> bool:
    """Whether each branch states a `type` of its own and no two share a type (integers
    are numbers too)."""
    seen: set[str] = set()
    for branch in branches:
        if not isinstance(branch, dict) or "type" not in branch:
            return False
        types = _types(branch["type"])
        if not types or types & seen:
            return False
        seen |= types
    return True


def _integer_between(found: list[dict[str, Any]]) -> bool:
    """Some integer (of a few digits: a plain literal) lies within every `minimum` and
    `maximum` of `found`."""
    lows = [s["minimum"] for s in found if "minimum" in s]
    highs = [s["maximum"] for s in found if "maximum" in s]
    bounds = [*lows, *highs]
    if not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds):
        return False
    if any(abs(b) > _BOUND for b in bounds):
        return False
    return not lows or not highs or max(map(math.ceil, lows)) <= min(map(math.floor, highs))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
