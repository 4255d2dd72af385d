"""JSON Schema (draft 2020-12) → byte-level regex AST of canonical JSON text.

Semantics and choices:

- The grammar accepts only canonical text (see `json_values`): one text per value
  (integers without fraction, no exponents, `json.dumps` string escapes), object members
  in the order of `json_location` (schema order), bounded whitespace.
- Objects: `additionalProperties: false` is the DEFAULT as soon as a schema declares
  `properties` or `required` (`open_objects=True` follows the specification instead);
  optional properties may be absent, present ones come in schema order. An object schema
  without declarations (e.g. `{"type": "object"}`) accepts any object;
  `additionalProperties: true`/a schema, `patternProperties` and `unevaluatedProperties`
  allow other members after the declared ones. `{}`/`true` is any JSON value, any depth:
  a call to a shared recursive rule (`json_containers`); under products, where no call may
  appear, it is unrolled `max_any_depth` deep.
- Arrays follow the spec: without `items`, further items are any values. `contains`
  (with min/maxContains) is exact; `uniqueItems` too (a DFA for items with few values, else
  checked at run time by the pushdown matcher, `unique_check`; refused under products).
- `$ref` (local pointers, anchors, `$id`s in the document): recursion becomes rules that
  call each other (`json_rules`; unbounded depth on the pushdown matcher). Under products
  (`not`, `oneOf`, `if`/`else`, `contains`, `uniqueItems`, ...: see `exactly`) recursion
  is unrolled to `max_recursion_depth`; deeper alternatives are unavailable there.
- `allOf` merges its branches; `anyOf` is a union; `dependentRequired`/`dependentSchemas`
  split into "trigger absent" / "present"; `oneOf`, `not` and `if`/`then`/`else` are
  exact on canonical text: each branch minus an over-approximation of the others
  (computed in "negative" mode, where whatever cannot be expressed is dropped, so the
  subtraction never removes too little). The validator re-checks `oneOf` afterwards,
  which also covers free-form objects whose keys could come in another order.
- `format` is enforced (date, time, date-time, duration, email, hostname, ipv4, ipv6,
  uri, uuid, json-pointer, relative-json-pointer, regex: a subset of the patterns both
  ECMA-262 and Python compile); other formats are refused.
- Keywords no supported draft defines are annotations, ignored (`json_drafts`); `$schema`
  picks draft-04/06/07/2019-09 semantics where they differ from 2020-12.
- Whatever cannot be enforced raises `GrammarError(keyword=..., pointer=...)`, or with
  `lenient` is dropped with a warning. Nothing constraining is ever silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar import json_containers as containers
from kor_cli.grammar import json_enums as enums
from kor_cli.grammar import json_objects as objects
from kor_cli.grammar import json_scalars as scalars
from kor_cli.grammar.ast import (
    NOTHING,
    Automaton,
    Node,
    alt,
    difference,
    intersect,
    is_nothing,
    literal,
)
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_applicators import distribute
from kor_cli.grammar.json_defer import DeferPolicy
from kor_cli.grammar.json_factor import OneOfFactor
from kor_cli.grammar.json_format_rules import only_regex_format, regex_format
from kor_cli.grammar.json_formats import FORMATS
from kor_cli.grammar.json_free_types import shared_types
from kor_cli.grammar.json_keywords import ANNOTATIONS, Collector, Facts, Part
from kor_cli.grammar.json_location import Location, LocationSpace
from kor_cli.grammar.json_member_values import PatternsApart
from kor_cli.grammar.json_memo import ConjMemo
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.json_rules import RuleBook
from kor_cli.grammar.json_sample import has_string
from kor_cli.grammar.json_values import (
    BOOLEAN,
    NULL,
    json_char,
    json_text,
    loose_container,
    loose_value,
    max_depth,
    quoted,
    separators,
    string_node,
)
from kor_cli.grammar.json_witness import Witness
from kor_cli.grammar.limits import check, current
from kor_cli.grammar.regex import Dialect, fullmatch
from kor_cli.grammar.shared_rules import shared_node

STRICT = Dialect(json_char, "strict")
LOOSE_DIALECT = Dialect(json_char, "loose")


def format_node(name: str) -> Node:
    """A string in format `name` (a key of `FORMATS`), quoted: parsed once per process and
    repeat limit (the parse refuses counts past it), the same object after."""
    key = ("format", name, STRICT, current().max_repeat)
    return shared_node(f"format:{name}", key, lambda: quoted(fullmatch(FORMATS[name], STRICT)))


class SchemaCompiler:
    """Compiles one schema document; see the module docstring."""

    def __init__(
        self,
        root: Any,
        whitespace: str = "compact",
        lenient: bool = False,
        max_recursion_depth: int = 3,
        max_any_depth: int = 3,
        max_states: int = 50_000,
        open_objects: bool = False,
        loader: Callable[[str], Any] | None = None,
    ) -> None:
        self.root = root
        self.open_objects = open_objects
        self.whitespace = whitespace
        item_sep, key_sep = separators(whitespace)
        self.item_sep_text = item_sep
        self.item_sep, self.key_sep = literal(item_sep), literal(key_sep)
        self.lenient = lenient
        self.max_any_depth = max_any_depth
        self.max_states = max_states
        self.warnings: list[str] = []
        self.resolver = Resolver(root, loader=loader)
        self.space = LocationSpace(self.resolver)
        self.active: dict[int, int] = {}
        self.collector = Collector(self.resolver, self.active, max_recursion_depth)
        self.max_recursion_depth = max_recursion_depth
        self.rules = RuleBook(max_states, self._bare_target)
        self.defer = DeferPolicy(self.resolver)
        self.witness = Witness(self.resolver, self._some_string, max_recursion_depth)
        applied = lambda s: self.resolver.draft_for(s).applied(s)  # noqa: E731
        self.factor = OneOfFactor(applied, self.defer.safe, self._target)
        self.patterns_apart = PatternsApart(self.defer.parsed)  # json_disjoint's proofs
        self.memo = ConjMemo(self)
        self.exact = 0  # > 0 while building what a product (DFA operation) will take
        self._any: dict[tuple[int, int, bool], Node] = {}
        self._dfas: dict[int, tuple[Node, ByteDFA]] = {}
        self._keys: dict[tuple[str, ...], Node] = {}
        self.loose_depth = 0  # set while building what a difference subtracts
        self.undering = False  # True while building `under`
        self.subtracted: list[tuple[str, str]] = []  # (keyword, pointer) of subtractions
        self._patterns: dict[tuple[str, bool], Node] = {}
        self._numbers: dict[tuple[Any, ...], Node] = {}
        self._names: dict[str, Node] = {}  # member name -> its JSON string literal

    def _target(self, schema: dict[str, Any]) -> Any:
        """The target of `schema`'s `$ref` (None if it cannot be resolved)."""
        try:
            return self.resolver.resolve(schema["$ref"], schema, "")[0]
        except (GrammarError, TypeError):
            return None

    def _bare_target(self, schema: Any) -> Any:
        """The target of `schema` if it is only a `$ref` (beside descriptions), else None."""
        if not isinstance(schema, dict) or set(schema) - _DESCRIPTIVE != {"$ref"}:
            return None
        return self._target(schema)

    def same(self, a: Any, b: Any) -> bool:
        """True if the schemas `a` and `b` hold on the same values as far as cheaply seen:
        one object, or each only a `$ref` (beside annotations) to one target."""
        if a is b:
            return True
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        for s in (a, b):
            if set(self.resolver.draft_for(s).applied(s)) - ANNOTATIONS != {"$ref"}:
                return False
        target = self._target(a)
        return target is not None and target is self._target(b)

    def compile(self) -> RuleBook:
        """The rules of the whole document (one rule unless `$ref` recurses, see
        `json_rules`); GrammarError if the start rule generates nothing."""
        node = self.conj([Part(self.root, "")], self.space.at([self.root]), True)
        if is_nothing(node) or not self.rules.finish(node):
            raise self.empty_error()
        return self.rules

    def empty_error(self) -> GrammarError:
        """Why the grammar is empty: a recursion without a way out, a subtraction, or no
        value at all."""
        endless = self.rules.unproductive()
        if endless:
            message = "recursive $ref has no finite expansion (every instance would nest forever)"
            return GrammarError(message, keyword="$ref", pointer=endless[0].lstrip("#"))
        if self.collector.cut_pointers:
            return GrammarError(
                "recursive $ref has no finite expansion within max_recursion_depth="
                f"{self.max_recursion_depth} (the bound under not/oneOf/if/contains/uniqueItems)",
                keyword="$ref",
                pointer=self.collector.cut_pointers[0],
            )
        if self.subtracted:  # "matches nothing" is only said of empty languages
            keyword, pointer = self.subtracted[0]
            return GrammarError(
                f"nothing is left once '{keyword}' at '{pointer or '/'}' and the other "
                "subtractions are applied (the schema may match no value, or a subtracted "
                "branch could only be over-approximated)"
            )
        return GrammarError("the schema matches no JSON value")

    def fail(self, keyword: str, pointer: str, message: str) -> None:
        """Refuse `keyword`, or in lenient mode drop it with a warning."""
        if not self.lenient:
            raise GrammarError(message, keyword=keyword, pointer=pointer)
        warning = f"dropped '{keyword}' at '{pointer or '/'}': {message}"
        if warning not in self.warnings:
            self.warnings.append(warning)

    # conjunctions and applicators

    def conj(self, parts: list[Part], loc: Location, pos: bool) -> Node:
        """All of `parts` at `loc`; `pos` False over-approximates (see module docstring).
        Outside products a conjunction that recurses becomes a rule (`json_rules`)."""
        check()
        key = self.memo.key(parts, loc, pos)
        found = self.memo.get(key)
        if found is not None:
            return found
        if pos and not self.exact:
            node = self.rules.conj(parts, loc, lambda: self._conj(parts, loc, pos))
        else:
            node = self._conj(parts, loc, pos)
        return self.memo.put(key, node, parts, loc)

    def _conj(self, parts: list[Part], loc: Location, pos: bool) -> Node:
        facts = self.collector.collect(parts)
        if facts is None:
            return NOTHING if pos else self.loose()
        if facts.false:
            return NOTHING
        with self._descending(facts.refs):  # branches, negations and types alike
            if facts.pending:
                return self.distribute(facts, loc, pos)
            return self.typed(facts, loc, pos)

    @contextmanager
    def _descending(self, refs: list[int]) -> Iterator[None]:
        for r in refs:
            self.active[r] = self.active.get(r, 0) + 1
        try:
            yield
        finally:
            for r in refs:
                self.active[r] -= 1

    @contextmanager
    def exactly(self) -> Iterator[None]:
        """Build what a product takes: no calls; recursion unrolled to max_recursion_depth,
        counted from here (the depth of the rules around does not count)."""
        saved = dict(self.active) if not self.exact else None
        if saved is not None:
            self.active.clear()
            self.collector.bounded = True
        self.exact += 1
        try:
            yield
        finally:
            self.exact -= 1
            if saved is not None:
                self.active.clear()
                self.active.update(saved)
                self.collector.bounded = False

    def distribute(self, facts: Facts, loc: Location, pos: bool) -> Node:
        """Resolve the first pending applicator (anyOf, oneOf, not, if) by cases."""
        return distribute(self, facts, loc, pos)

    def minus(self, keep: Node, part: Part, loc: Location) -> Node:
        """The texts of `keep` (positive) whose value certainly fails `part`."""
        keep, depth = self.settle(keep)
        with self.subtracting(depth):
            return difference(keep, self.conj([part], loc, False))

    def settle(self, node: Node) -> tuple[Node, int]:
        """`node` compiled to a DFA now, and how deep its JSON texts nest."""
        dfa = compile_ast(node, self.max_states)
        if dfa.is_empty():
            return NOTHING, 0
        return Automaton(dfa), max_depth(dfa)

    @contextmanager
    def subtracting(self, depth: int) -> Iterator[None]:
        saved, self.loose_depth = self.loose_depth, depth
        try:
            yield
        finally:
            self.loose_depth = saved

    def under(self, part: Part, loc: Location) -> Node:
        """A positive (under-approximating) grammar of `part`, strict; NOTHING on refusal.

        Objects are open, as the specification says, and a free value is `loose` (as deep
        as the texts subtracted from): closed, or unrolled `max_any_depth` deep, they would
        make the negation around take values the schema allows (aspire-8.0's extension
        option: every resource with another member, or a deep one, failed its `oneOf`). A
        loose value is a superset of the JSON values, but what it adds is not JSON: the
        difference it is subtracted within only holds JSON texts, whose values it splits
        where JSON does (strings atomic, brackets balanced)."""
        saved = self.lenient, self.open_objects, self.undering, list(self.warnings)
        self.lenient, self.open_objects, self.undering = False, True, True
        try:
            return self.conj([part], loc, True)
        except GrammarError:
            return NOTHING
        finally:
            self.lenient, self.open_objects, self.undering, self.warnings = saved

    # types

    def typed(self, facts: Facts, loc: Location, pos: bool) -> Node:
        types = facts.types
        if pos:
            for refused, keyword, pointer, message in facts.refusals:
                if refused & types:
                    self.fail(keyword, pointer, message)
        if facts.enums:
            return enums.enum(self, facts, loc, pos)
        if len(types) == 7 and not facts.scalar_constraints():
            if not pos:
                return self.loose()
            if not (self.exact or facts.unique) and containers.name_free(loc):  # the shared
                return self.any_value(loc, self.max_any_depth)  # rule: built once per process
        return self.union(facts, loc, pos, types)

    def union(self, facts: Facts, loc: Location, pos: bool, types: frozenset[str]) -> Node:
        parts = []
        if (shared := shared_types(self, facts, loc, pos, types)) is not None:
            call, types = shared  # the free types: one rule built once per process
            parts.append(call)
        if "null" in types:
            parts.append(NULL)
        if "boolean" in types:
            parts.append(BOOLEAN)
        if "integer" in types or "fraction" in types:
            parts.append(self.number(facts, pos, types))
        if "string" in types:
            parts.append(self.string(facts, pos))
        if "array" in types:
            parts.append(containers.array(self, facts, loc, pos))
        if "object" in types:
            parts.append(objects.obj(self, facts, loc, pos))
        return alt(*parts)

    def number(self, facts: Facts, pos: bool, types: frozenset[str]) -> Node:
        """Numbers within the bounds and steps, in every spelling this mode accepts."""
        key = (tuple(facts.lower), tuple(facts.upper), tuple(facts.multiples), types, pos)
        found = self._numbers.get(key)
        if found is None:
            found = self._numbers[key] = scalars.number(self, facts, pos, types)
        return found

    def string(self, facts: Facts, pos: bool) -> Node:
        if pos and not self.exact and only_regex_format(facts):  # small rules, not one DFA
            return quoted(regex_format(self.rules.fixed, STRICT))
        base = string_node(facts.min_length, facts.max_length)
        constraints = [
            quoted(node)
            for node in (self.pattern(p, ptr, pos) for p, ptr in facts.patterns)
            if node is not None
        ]
        for name, pointer in facts.formats if pos else ():
            if name in FORMATS:
                constraints.append(format_node(name))
            else:
                self.fail("format", pointer, f"format {name!r} is not supported")
        if not constraints:
            return base
        node = constraints[0]
        for other in constraints[1:]:
            node = intersect(node, other)
        if facts.min_length or facts.max_length is not None:
            node = intersect(node, base)
        return node

    def _some_string(self, patterns: list[str], low: int, high: int | None) -> bool:
        """Whether a string matches all `patterns` within the lengths, as `string` compiles
        it (positive mode; False where a pattern is refused or a limit is met)."""
        node = string_node(low, high)
        try:
            if len(patterns) == 1 and has_string(self.defer.parsed(patterns[0], STRICT), low, high):
                return True  # a text found on the AST (`json_sample`): nothing compiled
            for pattern in patterns:
                node = intersect(node, quoted(self.defer.parsed(pattern, STRICT)))
            return not compile_ast(node, self.max_states).is_empty()
        except GrammarError:
            return False

    def pattern(self, pattern: str, pointer: str, pos: bool) -> Node | None:
        try:
            return self.defer.parsed(pattern, STRICT if pos else LOOSE_DIALECT)
        except GrammarError as error:
            if pos:
                self.fail("pattern", pointer, error.message)
            return None

    # shared helpers for containers

    def member(self, parts: list[Part], loc: Location, pos: bool) -> Node:
        """The value of a member/item: all of `parts`, or any value if there are none
        (or they constrain nothing: the shared "any value" rule, not a copy of it)."""
        if parts and pos and not self.exact and all(map(_free, parts)):
            return self.any_value(loc, self.max_any_depth)
        if parts:
            building = self.rules.building()
            if pos and not self.exact and self.defer.deferrable(parts, building):  # when reached
                build = lambda: self.conj(parts, loc, True)  # noqa: E731
                proof = lambda: self.witness.exists([p.schema for p in parts])  # noqa: E731
                return self.rules.defer(parts, loc, build, proof)
            node = self.conj(parts, loc, pos)
            return self.rules.split(node, parts) if pos and not self.exact else node
        return self.any_value(loc, self.max_any_depth) if pos else self.loose()

    def loose(self) -> Node:
        """Negative mode's "any value": nests as deep as the texts it is subtracted from."""
        return loose_value(self.loose_depth)

    def loose_object(self) -> Node:
        return loose_container("{}", max(self.loose_depth, 1))

    def any_value(self, loc: Location, depth: int) -> Node:
        """Any JSON value, members in `loc` order: a call to a recursive rule (any depth),
        under products at most `depth` containers deep (`json_containers`); in `under`, a
        loose value."""
        if self.undering:
            return self.loose()
        key = (id(loc), depth, self.exact > 0)
        found = self._any.get(key)
        if found is None:
            build = containers.any_value if self.exact else containers.any_call
            found = self._any[key] = build(self, loc, depth)
        return found

    def other_key(self, names: tuple[str, ...]) -> Node:
        """Any member name (a JSON string) other than `names`."""
        found = self._keys.get(names)
        if found is None:
            found = string_node()
            if names:
                found = difference(found, alt(*(self.name(n) for n in names)))
            self._keys[names] = found
        return found

    def key_pattern(self, pattern: str, strict: bool, pointer: str) -> Node:
        """Member names (JSON strings) in which `pattern` certainly (`strict`) / maybe matches."""
        found = self._patterns.get((pattern, strict))
        if found is None:
            try:
                found = quoted(self.defer.parsed(pattern, STRICT if strict else LOOSE_DIALECT))
            except GrammarError as error:
                self.fail("patternProperties", pointer, error.message)
                found = NOTHING if strict else string_node()
            self._patterns[(pattern, strict)] = found
        return found

    def name(self, name: str) -> Node:
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = literal(json_text(name))
        return found

    def accepts(self, node: Node, text: str) -> bool:
        found = self._dfas.get(id(node))
        if found is None:
            found = self._dfas[id(node)] = (node, compile_ast(node, self.max_states))
        return found[1].accepts(text.encode())


_DESCRIPTIVE = frozenset({"title", "description", "$comment", "default", "examples"})


def _free(part: Part) -> bool:
    """True when `part` constrains nothing (`true`, or only annotations)."""
    schema = part.schema
    return schema is True or isinstance(schema, dict) and set(schema) - part.skip <= ANNOTATIONS
