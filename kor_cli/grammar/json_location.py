"""Instance locations and the canonical order of object members.

A `Location` is the set of schema objects that may apply at one place of an instance
(closed under `$ref` and the applicators). Its `names` (property names in order of first
appearance in `properties`, `required` and object `enum`/`const` values) fix the member
order of every object the grammar builds there, whatever branch of `anyOf`/`oneOf`/`allOf`
produced it; other keys follow, in any order. Because
every part of a grammar uses the same order at the same place, intersections and
differences of grammars (`allOf`, `oneOf`, `not`) are exact on the text.

`reorder` puts an instance's keys in that order (other keys sorted), which is how a valid
instance is serialised into the form the grammar accepts.
"""

from __future__ import annotations

import re
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.json_refs import Resolver

_APPLICATOR_LISTS = ("allOf", "anyOf", "oneOf")
_APPLICATOR_ONE = ("not", "if", "then", "else")
_NAMING = frozenset({"dependentRequired", "dependentSchemas", "dependencies", "enum", "const"})


class Location:
    """Schema objects applying at one instance location; see the module docstring."""

    __slots__ = ("space", "nodes", "names", "_children", "_item", "_members")

    def __init__(self, space: LocationSpace, nodes: tuple[dict[str, Any], ...]) -> None:
        self.space = space
        self.nodes = nodes
        names: dict[str, None] = {}
        for node in nodes:
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(dict.fromkeys(props))
            required = node.get("required")
            if isinstance(required, list):
                names.update(dict.fromkeys(r for r in required if isinstance(r, str)))
            if _NAMING.isdisjoint(node):  # most nodes: no other names below
                continue
            for key in ("dependentRequired", "dependentSchemas", "dependencies"):
                found = node.get(key)
                for trigger, then in (found if isinstance(found, dict) else {}).items():
                    names[trigger] = None
                    if isinstance(then, list):
                        names.update(dict.fromkeys(n for n in then if isinstance(n, str)))
            values = node.get("enum") if isinstance(node.get("enum"), list) else []
            for value in values + ([node["const"]] if "const" in node else []):
                if isinstance(value, dict):
                    names.update(dict.fromkeys(k for k in value if isinstance(k, str)))
        self.names: tuple[str, ...] = tuple(names)
        self._children: dict[str | None, Location] = {}
        self._item: Location | None = None
        self._members: _Members | None = None

    def child(self, key: str | None) -> Location:
        """Location of the value of member `key` (None: any key not in `names`)."""
        found = self._children.get(key)
        if found is None:
            if self._members is None:
                self._members = _Members(self.nodes)
            found = self._children[key] = self.space.at(self._members.schemas(key))
        return found

    def item(self) -> Location:
        """Location of the items of an array."""
        if self._item is None:
            subs: list[Any] = []
            for node in self.nodes:
                for key in ("prefixItems", "items"):
                    if isinstance(node.get(key), list):
                        subs += node[key]
                keys = ("items", "additionalItems", "unevaluatedItems", "contains")
                subs += [node[k] for k in keys if k in node]
            self._item = self.space.at(subs)
        return self._item


class _Members:
    """Which of a location's nodes speak of which member names, so that a child location
    costs the nodes that apply to its key, not all of them (utcm-monitor's any-value
    location had ~500 nodes and ~3,000 names: 1.8 M node visits)."""

    def __init__(self, nodes: tuple[dict[str, Any], ...]) -> None:
        self.nodes = nodes
        self.named: dict[str, list[int]] = {}  # name -> nodes whose `properties` have it
        self.other: list[int] = []  # nodes with schemas for other keys
        for n, node in enumerate(nodes):
            props = node.get("properties")
            for name in props if isinstance(props, dict) else ():
                self.named.setdefault(name, []).append(n)
            if any(k in node for k in _OTHER_KEYS):
                self.other.append(n)

    def schemas(self, key: str | None) -> list[Any]:
        """The subschemas that apply to member `key`, in node order (as
        `_member_schemas` over every node)."""
        found = self.named.get(key, []) if key is not None else []
        ordered = sorted({*found, *self.other}) if self.other else found
        return [sub for n in ordered for sub in _member_schemas(self.nodes[n], key)]


_OTHER_KEYS = ("additionalProperties", "unevaluatedProperties", "patternProperties")


def _member_schemas(node: dict[str, Any], key: str | None) -> list[Any]:
    props = node.get("properties")
    if key is not None and isinstance(props, dict) and key in props:
        return [props[key]]
    out = [node[k] for k in ("additionalProperties", "unevaluatedProperties") if k in node]
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        out += [sub for pattern, sub in patterns.items() if key is None or _search(pattern, key)]
    return out


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True


class LocationSpace:
    """Creates and shares `Location`s of one schema document."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self._memo: dict[tuple[int, ...], Location] = {}
        self._applied_to: dict[int, tuple[Any, list[Any]]] = {}  # id -> (node, _applied)

    def at(self, schemas: list[Any]) -> Location:
        """The location where `schemas` apply (closed under references and applicators)."""
        nodes: list[dict[str, Any]] = []
        seen: set[int] = set()
        stack = list(reversed(schemas))
        while stack:
            node = stack.pop()
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            nodes.append(node)
            found = self._applied_to.get(id(node))
            if found is None:  # the node is kept alive with it: its id stays its own
                found = self._applied_to[id(node)] = (node, self._applied(node))
            stack += reversed(found[1])
        key = tuple(id(n) for n in nodes)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = Location(self, tuple(nodes))
        return found

    def _applied(self, node: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        if isinstance(node.get("$ref"), str):
            try:
                out.append(self.resolver.resolve(node["$ref"], node, "")[0])
            except GrammarError:
                pass  # reported where the reference is compiled
            if self.resolver.draft_for(node).old:
                return out  # its siblings are ignored
        for key in _APPLICATOR_LISTS:
            if isinstance(node.get(key), list):
                out += node[key]
        out += [node[key] for key in _APPLICATOR_ONE if key in node]
        for key in ("dependentSchemas", "dependencies"):
            if isinstance(node.get(key), dict):
                out += [s for s in node[key].values() if isinstance(s, dict)]
        return out


def reorder(instance: Any, location: Location) -> Any:
    """`instance` with object keys in the canonical order of each location."""
    if isinstance(instance, list):
        item = location.item()
        return [reorder(v, item) for v in instance]
    if not isinstance(instance, dict):
        return instance
    named = [k for k in location.names if k in instance]
    known = set(named)
    out = {k: reorder(instance[k], location.child(k)) for k in named}
    extra = location.child(None)
    rest = sorted((k for k in instance if k not in known), key=str)
    out.update((k, reorder(instance[k], extra)) for k in rest)
    return out
