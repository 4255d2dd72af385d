"""Objects for the JSON Schema compiler.

Members come in the location's order (`json_location`): first the named slots (each
optional or required), then any other members ("extras"), whose keys avoid the named
ones. In positive mode an object that declares `properties` or `required` is closed
unless a part opens it (`additionalProperties` true or a schema, or `patternProperties`
for the keys they match), or the compiler's `open_objects` follows the specification
(absent `additionalProperties` allows any other member). Keys whose `patternProperties`
match depends on the regex flavour (Python vs ECMA-262) are treated conservatively: never
generated as extras, and held to every schema that may apply when named.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kor_cli.grammar import json_member_rules as member_rules
from kor_cli.grammar import json_terminals as terminals
from kor_cli.grammar.ast import (
    NOTHING,
    Automaton,
    Node,
    alt,
    difference,
    intersect,
    join,
    literal,
    seq,
)
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_containers import any_object
from kor_cli.grammar.json_key_witness import realised_over
from kor_cli.grammar.json_keywords import Facts, ObjectPart, Part
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.json_values import json_text

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

OPEN_BRACE, CLOSE_BRACE = literal("{"), literal("}")
MAX_PATTERNS = 16  # extras are split into cases by which patterns they match ...
MAX_CASES = 64  # ... keeping only cases whose keys exist (disjoint patterns: n + 1 cases)


def obj(c: SchemaCompiler, facts: Facts, loc: Location, pos: bool) -> Node:
    """Objects satisfying the conjunction's object keywords."""
    objs = facts.objects + (_unevaluated_props(facts) if pos else [])
    counted = facts.min_props or facts.max_props is not None  # exact on text in both modes
    if not (objs or facts.property_names or counted):
        free = pos and not c.undering
        return any_object(c, loc, c.max_any_depth - 1) if free else c.loose_object()
    shape = _Shape(c, objs, pos)
    with c.exactly():  # names are checked on their DFAs
        names_nodes = [c.conj([p], c.space.at([]), pos) for p in facts.property_names]
    required = shape.required()
    if required is None:
        return NOTHING
    members: list[tuple[str, Node, str]] = []
    names = loc.names + tuple(n for n in shape.declared + required if n not in loc.names)
    for name in shape.candidates(dict.fromkeys(names)):
        text = json_text(name)
        if not shape.possible(name) or not all(c.accepts(n, text) for n in names_nodes):
            if name in required:
                return NOTHING
            continue
        parts = shape.value_parts(name)
        value = c.member(parts, loc.child(name), pos)
        members.append((name, value, parts[0].pointer if parts else loc_pointer(facts)))
    if pos and not c.exact:
        members = member_rules.split(c.rules, terminals.split(c.rules, members))
    slots = [(seq(c.name(n), c.key_sep, v), n in required) for n, v, _ in members]
    tails = []
    for key, parts in shape.extras(c.other_key(loc.names)):
        for names_node in names_nodes:
            key = intersect(key, names_node)
        if pos and not c.exact and not names_nodes:
            key = member_rules.extra_key(c.rules, key, loc.names, loc_pointer(facts))
        value = c.member(parts, loc.child(None), pos) if pos else c.loose()
        tails.append(seq(key, c.key_sep, value))
    lo, hi = facts.min_props, facts.max_props
    tail = alt(*tails) if tails else None
    return seq(OPEN_BRACE, join(slots, c.item_sep, tail, lo, hi), CLOSE_BRACE)


def loc_pointer(facts: Facts) -> str:
    """A pointer naming the object (its first part's)."""
    return facts.parts[0].pointer if facts.parts else ""


def _unevaluated_props(facts: Facts) -> list[ObjectPart]:
    """`unevaluatedProperties` as additionalProperties beyond its owner subtree's names."""
    out = []
    for owner, value in facts.unevaluated_props:
        subtree = [p.schema for p in facts.subtree(owner) if isinstance(p.schema, dict)]
        nested = [s for s in subtree if id(s) != owner and "unevaluatedProperties" in s]
        if value is True or nested or any("additionalProperties" in s for s in subtree):
            if value is not False:  # explicitly open: no default closure
                out.append(ObjectPart({}, [], Part(True, "")))
            continue  # every member is evaluated already
        names = {n: Part(True, "") for s in subtree for n in s.get("properties", {})}
        patterns = {p: Part(True, "") for s in subtree for p in s.get("patternProperties", {})}
        out.append(ObjectPart(names, [], value, patterns=patterns))
    return out


def _without_patterns(o: ObjectPart) -> ObjectPart:
    """`o` for negative mode: with patterns, "additional" cannot be told apart: drop both."""
    return ObjectPart(o.props, o.required, None, o.declares) if o.patterns else o


class _Shape:
    """Which member names an object may have, and the schemas of their values."""

    def __init__(self, c: SchemaCompiler, objs: list[ObjectPart], pos: bool) -> None:
        if not pos:  # negative mode ignores patterns, and what they leave "additional"
            objs = [_without_patterns(o) for o in objs]
        self.c = c
        self.objs = objs
        self.declared = list(dict.fromkeys(n for o in objs for n in o.props))
        self._named = set(self.declared).union(*(o.required for o in objs))
        self.closers = [o for o in objs if o.additional is False]
        self.patterns = [(o, p, sub) for o in objs for p, sub in o.patterns.items()]
        if len(self.patterns) > MAX_PATTERNS:
            message = f"more than {MAX_PATTERNS} patterns apply to one object"
            c.fail("patternProperties", self.patterns[0][2].pointer, message)
            self.patterns = self.patterns[:MAX_PATTERNS]
        opened = any(isinstance(o.additional, Part) for o in objs)
        declares = any((o.props or o.required) and o.declares for o in objs)
        closed_default = pos and not opened and declares and not c.open_objects
        self.open = not self.closers and not closed_default

    def candidates(self, names: Iterable[str]) -> list[str]:
        """`names` without those `possible` certainly refuses: an object closed (by default
        or explicitly) without patterns has only its declared and required names (a
        location may list hundreds: utcm-monitor's)."""
        if self.open or self.patterns or any(o.patterns for o in self.closers):
            return list(names)
        return [n for n in names if n in self._named]

    def required(self) -> list[str] | None:
        """The required names, or None if one of them cannot be present."""
        required = list(dict.fromkeys(n for o in self.objs for n in o.required))
        return None if any(not self.possible(n) for n in required) else required

    def possible(self, name: str) -> bool:
        if any(name not in o.props and not self._matched(o, name) for o in self.closers):
            return False
        declared = name in self._named
        return declared or self.open or any(self._matched(o, name) for o in self.objs)

    def value_parts(self, name: str) -> list[Part]:
        parts = [o.props[name] for o in self.objs if name in o.props]
        for o in self.objs:
            parts += [sub for p, sub in o.patterns.items() if self._may_match(o, p, name)]
            if name not in o.props and not self._matched(o, name):
                parts += [o.additional] if isinstance(o.additional, Part) else []
        return parts

    def extras(self, others: Node) -> list[tuple[Node, list[Part]]]:
        """(key, value schemas) for members beyond the named ones, one case per set of
        patterns the key matches (sets that no key matches are dropped as they appear)."""
        out = []
        for key, mask in self._key_cases(others):
            chosen = [t for i, t in enumerate(self.patterns) if mask >> i & 1]
            unmatched = [o for o in self.objs if not any(t[0] is o for t in chosen)]
            if (not chosen and not self.open) or any(o.additional is False for o in unmatched):
                continue
            parts = [sub for _, _, sub in chosen]
            parts += [o.additional for o in unmatched if isinstance(o.additional, Part)]
            out.append((key, parts))
        return out

    def _key_cases(self, others: Node) -> list[tuple[Node, int]]:
        """(keys, bit set of the patterns they certainly match), the keys certainly
        matching none of the others; only non-empty key languages."""
        cases: list[tuple[Node, int]] = [(others, 0)]
        if not self.patterns:
            return cases
        if 1 << len(self.patterns) > MAX_CASES and not self.c.lenient and self._surely_many(others):
            self._too_many(self.patterns[-1][2])  # known at once (`json_key_witness`)
        for i, (o, pattern, sub) in enumerate(self.patterns):
            strict = self.c.key_pattern(pattern, True, o.pointer)
            loose = self.c.key_pattern(pattern, False, o.pointer)
            split = [(intersect(key, strict), mask | 1 << i) for key, mask in cases]
            split += [(difference(key, loose), mask) for key, mask in cases]
            cases = [(key, mask) for key, mask in map(self._settled, split) if key is not NOTHING]
            if len(cases) > MAX_CASES:
                self._too_many(sub)
                return cases[:MAX_CASES]
        return cases

    def _too_many(self, sub: Part) -> None:
        message = f"patterns overlap in too many ways (more than {MAX_CASES} combinations)"
        self.c.fail("patternProperties", sub.pointer, message)

    def _surely_many(self, others: Node) -> bool:
        """More than `MAX_CASES` key cases are realised by joined witness keys."""
        limit = self.c.max_states
        strict, loose = (
            [compile_ast(self.c.key_pattern(p, s, o.pointer), limit) for o, p, _ in self.patterns]
            for s in (True, False)
        )
        return realised_over(strict, loose, compile_ast(others, limit).accepts, MAX_CASES)

    def _settled(self, case: tuple[Node, int]) -> tuple[Node, int]:
        """`case` with its keys compiled (NOTHING if there are none)."""
        dfa = compile_ast(case[0], self.c.max_states)
        return (NOTHING if dfa.is_empty() else Automaton(dfa)), case[1]

    def _matched(self, o: ObjectPart, name: str) -> bool:
        """`name` certainly matches one of `o`'s patterns (in every regex flavour)."""
        if not o.patterns:
            return False
        text = json_text(name)
        return any(self.c.accepts(self.c.key_pattern(p, True, o.pointer), text) for p in o.patterns)

    def _may_match(self, o: ObjectPart, pattern: str, name: str) -> bool:
        text = json_text(name)
        return self.c.accepts(self.c.key_pattern(pattern, False, o.pointer), text)
