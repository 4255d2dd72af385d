"""The rules of a JSON Schema grammar: recursive `$ref`s become calls, not unrolled copies.

The compiler (`json_schema`) builds every conjunction (`conj`: parts at a location) as a
regex AST. When it re-enters a conjunction that it is still building (same parts at the
same location, positive mode, outside products), the inner occurrence becomes a `Call`
leaf to a rule whose body is that conjunction, and the outer occurrence refers to the rule
too. So recursion costs one rule, not copies, and nests to any depth on the pushdown
matcher (`rules.RuleSet`). "Same" reads a bare `$ref` as its target (`_same`): a node that
is both the root and its own items (`tree`), or a definition reached as items and as
members (`rpc`), is one rule that every place calls, not a copy inlined into the first
caller plus a rule per place. A deferred value (below) that reaches the root again calls
the start rule itself (`finish`), not a copy of the root as a rule of its own.

Large member values and items that may be arrays or objects (`split`, from `SPLIT_SIZE`
AST nodes) become rules of their own too, so a big schema's rules are compiled to DFAs only
when the matcher first reaches them (`RuleSet.rule` builds lazily). Small schemas keep one
rule: the very AST (and so the very DFA) of the whole-DFA engine; inlining every call gives
that AST back in any case.

Deferred values (`defer`, decided by `json_defer`): a large member value or item whose
schema cannot refuse a keyword becomes a rule whose body is a thunk over (parts,
location): its AST is built when the rule's body is first needed (`body`: the rule is
built for the matcher, or its productivity is asked by a caller's rule), so a schema's
compile costs about its top-level object, and the products inside a value are compiled
only when generation reaches it. Deferred rules are memoized by conjunction, so a
recursion through deferred values closes on the same rule; `inlined` finds such cycles
on the call graph (`_cycles`).

"Any value" (`{}`, free items and members) is a `recursive` rule too: one per grammar
(per location that orders member names, see `json_containers`), calling itself for what
it holds; each call carries the bounded value the DFA view inlines in its place.

Under products (`not`, `oneOf`, `if`/`else`, `contains`, `uniqueItems`, `enum` beside
constraints, `propertyNames`: whatever is compiled to a DFA and intersected or
subtracted mid-compile) no call may appear: there the compiler unrolls recursion to
`max_recursion_depth`, as the whole-DFA engine did (a sound under-approximation).

Productivity (`json_productive`, the base of `RuleBook`): a rule that generates nothing is
never offered to the matcher (`resolved` removes calls to it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from kor_cli.grammar.ast import NOTHING, Node
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_keywords import Part
from kor_cli.grammar.json_location import Location
from kor_cli.grammar.json_productive import Productivity
from kor_cli.grammar.json_rule_walk import Call, callees, container, large, substitute
from kor_cli.grammar.rules import call

SPLIT_SIZE = 100  # AST nodes (automaton states) from which a member value is a rule

Key = tuple[tuple[tuple[int, frozenset[str], int, bool], ...], Any]


class RuleBook(Productivity):
    """The rules found while compiling one schema, their bodies and productivity.
    `target(schema)`: the schema a bare `$ref` stands for (None if `schema` is not one),
    so that a recursion reached through different references is one rule (`_same`)."""

    def __init__(self, max_states: int, target: Callable[[Any], Any] | None = None) -> None:
        super().__init__(max_states)
        self._target = target
        self._locs: dict[int, Any] = {}  # id(location) -> its key in `_same`
        self.bodies: dict[int, Node] = {}
        self.names: dict[int, str] = {}
        self.start = 0
        self._rooted = False  # `finish` was called
        self._forcing = 0  # deferred bodies being built (`body`)
        self._rule_of: dict[Key, int] = {}
        self._open: dict[Key, list[Any]] = {}  # key -> [rule or None, parts, raw hit, raw]
        self._raw: dict[int, Key] = {}  # recursive rule -> `_key` of its conjunction
        self._keep: list[list[Part]] = []  # parts of finished rules (their ids are keys)
        self.cyclic: set[int] = set()  # rules that (may) call themselves
        self._split: dict[int, int] = {}  # id(node) -> its rule (nodes kept in `bodies`)
        self._thunks: dict[Key, int] = {}  # deferred conjunction -> its rule
        self._pending: dict[int, Callable[[], Node]] = {}  # deferred rule -> its builder
        self.forced = 0  # deferred bodies built so far
        self.checked: dict[int, int] = {}  # uniqueItems array rule -> item rule (`unique_check`)
        self._views: dict[int, Callable[[Node], Node]] = {}  # checked array's DFA view
        self._named: dict[Any, int] = {}  # `recursive` rules by their key
        self._fixed: dict[Any, int] = {}  # rules of fixed grammars (`fixed`), by key
        self.shared: dict[int, Hashable] = {}  # schema-independent rule -> its memo key
        self._root_view: Callable[[], Node] | None = None  # the start call's own view
        self._outer: tuple[Key, Key, list[Part], Node] | None = None  # last outermost conj
        self._markers: dict[int, Node] = {}  # callee -> its call marker (`resolved`)

    def conj(self, parts: list[Part], loc: Location, build: Callable[[], Node]) -> Node:
        """`build()`, or a call to the rule of this conjunction if it recurses."""
        key, raw = self._same(parts, loc), _key(parts, loc)
        found = self._rule_of.get(key)
        if found is not None:
            return Call(found, free=raw != self._raw[found])
        entry = self._open.get(key)
        if entry is not None:  # re-entered while still being built: a recursive rule
            if entry[0] is None:
                entry[0] = self._new(_name(parts))
                self.cyclic.add(entry[0])
            entry[2] |= raw == entry[3]
            return Call(entry[0])
        outermost = not self._open
        self._open[key] = [None, parts, False, raw]
        try:
            node = build()
        finally:
            rule, _, again, _ = self._open.pop(key)
        if rule is None:
            if outermost:  # the start rule's body if it is the root's (`finish`)
                self._outer = (key, raw, parts, node)
            return node
        self.bodies[rule] = node
        self._rule_of[key] = rule
        self._raw[rule] = raw
        self._keep.append(parts)
        return Call(rule, free=not again)  # free: a copy inlined here before merging

    def building(self) -> frozenset[int]:
        """Ids of the root's schemas while it is built (as `_same` reads them): a value that
        reaches one is a call (`json_defer`); none in deferred bodies (their rule would only
        call the recursion rule)."""
        outer = next(iter(self._open), None)
        rooting = not (self._forcing or self._rooted)
        return frozenset(d[0] for d in outer[0]) if outer is not None and rooting else frozenset()

    def defer(
        self,
        parts: list[Part],
        loc: Location,
        build: Callable[[], Node],
        proof: Callable[[], bool] | None = None,
    ) -> Node:
        """A call to a rule whose body is `build()` (the conjunction `parts` at `loc`),
        built when first needed (see the module docstring); `proof()` True says the rule
        surely generates a string without building it (`json_witness`)."""
        key = _key(parts, loc)
        found = self._rule_of.get(self._same(parts, loc), self._thunks.get(key))
        if found is not None:
            return Call(found)
        if self._same(parts, loc) in self._open:  # being built: the recursion rule of `conj`
            return self.conj(parts, loc, build)
        rule = self._thunks[key] = self._new(_name(parts))
        self._pending[rule] = build
        if proof is not None:
            self._proofs[rule] = proof
        self._keep.append(parts)
        return Call(rule)

    def recursive(
        self, key: Any, name: str, build: Callable[[], Node], shared: Hashable | None = None
    ) -> int:
        """The rule of `key` (e.g. "any value" at a location), its body `build()`, which may
        call the rule itself (the id exists before the body is built); built once. `shared`:
        the body does not depend on the schema, only on the options `shared` names (every
        one that could shape it): its DFA comes from the process-wide memo (`shared_rules`,
        keyed by `shared`, the rule id and the state limit)."""
        rule = self._named.get(key)
        if rule is None:
            rule = self._named[key] = self._new(name)
            self.cyclic.add(rule)
            self.bodies[rule] = build()
            if shared is not None:
                self.shared[rule] = (shared, rule, self.max_states)
        return rule

    def body(self, rule: int) -> Node:
        """The AST of `rule` (a deferred rule's built now, once)."""
        build = self._pending.get(rule)
        if build is not None:
            self._forcing += 1
            try:
                self.bodies[rule] = build()  # on an error (a limit) it stays pending
            finally:
                self._forcing -= 1
            del self._pending[rule]
            self.forced += 1
        return self.bodies[rule]

    def _new(self, name: str) -> int:
        rule = len(self.names) + 1  # 0 is kept for a start rule that is not recursive
        self.names[rule] = name
        return rule

    def split(self, node: Node, parts: list[Part]) -> Node:
        """`node` (the value of `parts`) as a call to a rule of its own if it is large."""
        if isinstance(node, Call) or not container(node) or not large(node, SPLIT_SIZE):
            return node
        return self.own(node, _name(parts))

    def own(self, node: Node, name: str) -> Call:
        """A call to a rule whose body is `node` (one rule per node; its DFA built when
        the matcher first reaches it, its productivity decided on demand)."""
        rule = self._split.get(id(node))
        if rule is None:
            rule = self._split[id(node)] = self._new(name)
            self.bodies[rule] = node
        return Call(rule)

    def checked_array(
        self,
        item: Node | Callable[[], Node],
        array: Callable[[Node], Node],
        view: Callable[[Node], Node],
        name: str,
        proof: Callable[[], bool] | None = None,
    ) -> Node:
        """A call to a `uniqueItems` array rule, `array(call to the item rule)`, checked at
        run time; the item rule's body is `item` (call-free), or `item()` built when first
        needed (`proof()` True: it surely generates a string, as in `defer`); `view(item
        body)` (call-free, an under-approximation) stands for the array in the DFA view."""
        item_rule = self._new(name + "/items")
        if callable(item):
            self._pending[item_rule] = item
            if proof is not None:
                self._proofs[item_rule] = proof
        else:
            self.bodies[item_rule] = item
        rule = self._new(name)
        self.bodies[rule] = array(Call(item_rule))
        self.checked[rule] = item_rule
        self._views[rule] = view
        return Call(rule)

    def fixed(self, name: str, build: Callable[[], Node], key: Any = None) -> Node:
        """A call to the rule `name` (one per `key`, default the name) whose body is
        `build()`, built when first needed; for fixed sub-grammars (`json_format_rules`,
        distinct enum items) that never recurse and always generate a string (so
        productivity does not build them)."""
        found = key if key is not None else name
        rule = self._fixed.get(found)
        if rule is None:
            rule = self._fixed[found] = self._new(name)
            self._pending[rule] = build
            self._decided[rule] = True
        return Call(rule)

    @property
    def has_calls(self) -> bool:
        """True once a conjunction recursed, a value was split off or deferred, an array
        is checked or a fixed rule used (more than one rule)."""
        return bool(self.cyclic or self._split or self._thunks or self.checked or self._fixed)

    @property
    def only_any_values(self) -> bool:
        """True when the only rules besides the start are "any value" rules (`recursive`)."""
        return self.cyclic == set(self._named.values()) and not (
            self._split or self._thunks or self.checked or self._fixed
        )

    def finish(self, root: Node) -> bool:
        """Fix the start rule (`root`'s); False if it generates nothing."""
        multiple, self._rooted = self.has_calls, True
        if isinstance(root, Call):
            self.start = root.rule
            self._root_view = root.view
        else:
            self.start = 0
            self.bodies[0] = root
            self.names[0] = "#"
            if self._outer is not None and self._outer[3] is root:
                key, self._raw[0], parts, _ = self._outer  # reached again from a deferred
                self._rule_of[key] = 0  # value (ui's children): a call to the start rule
                self._keep.append(parts)
        if not multiple:  # one rule: its DFA (built anyway) tells whether it is empty
            self._decided[0] = True
            return True
        return self.productive(self.start)

    def unproductive(self) -> list[str]:
        """Names of the rules found to generate nothing (recursion without a way out)."""
        recursive = self.cyclic | self._cycles(force=False)
        rules = sorted(self._decided, key=lambda r: (r == 0, r))  # recursive rules first
        return [self.names[r] for r in rules if not self._decided[r] and r in recursive]

    def resolved(self, rule: int) -> Node:
        """The body of `rule` with calls to productive rules as call markers, others removed
        (one marker node per callee, shared by every body: nodes may be shared)."""

        def leaf(c: Call) -> Node:
            found = self._markers.get(c.rule)
            if found is None:
                found = self._markers[c.rule] = call(c.rule) if self.productive(c.rule) else NOTHING
            return found

        return substitute(self.body(rule), leaf, self._settled)

    def build(self, rule: int) -> ByteDFA:
        """The DFA (with call markers) of `rule`, for `rules.RuleSet`."""
        return compile_ast(self.resolved(rule), self.max_states)

    def inlined(self, depth: int) -> Node:
        """The start rule with calls inlined, recursive ones `depth` deep (deeper ones
        removed): the DFA view of the grammar (bounded if it recurses). A start rule
        reached by a call that has a view of its own (the shared "any value" rule, which
        inlines itself one level deep) is that view."""
        if self._root_view is not None:
            return self._root_view()
        memo: dict[tuple[int, int], Node] = {}
        cyclic = self.cyclic | self._cycles()

        def expand(rule: int, left: int) -> Node:
            found = memo.get((rule, left))
            if found is None:
                found = substitute(self.body(rule), inner(left), self._settled)
                memo[(rule, left)] = found
            return found

        def inner(left: int) -> Callable[[Call], Node]:
            def leaf(c: Call) -> Node:
                if c.view is not None:
                    return c.view()
                if c.rule in self._views:  # from its item rule's body
                    return self._views[c.rule](self.body(self.checked[c.rule]))
                below = left - 1 if c.rule in cyclic and not c.free else left
                if below < 0 or not self.productive(c.rule):
                    return NOTHING
                return expand(c.rule, below)

            return leaf

        return expand(self.start, depth)

    def _cycles(self, force: bool = True) -> set[int]:
        """The rules reachable from the start that can call themselves again (through
        deferred values; `cyclic` has those found while building). Builds their bodies
        (`force`), or reads only those built so far (none before `finish`)."""
        edges: dict[int, set[int]] = {}
        todo = [self.start]
        while todo:
            rule = todo.pop()
            if rule not in edges:
                known = rule in self.bodies or force and rule in self._pending
                edges[rule] = callees(self.body(rule)) if known else set()
                todo += edges[rule]
        out = set()
        for rule in edges:
            seen, todo = set(), list(edges[rule])
            while todo:
                r = todo.pop()
                if r not in seen:
                    seen.add(r)
                    todo += edges[r]
            if rule in seen:
                out.add(rule)
        return out

    def _same(self, parts: list[Part], loc: Location) -> Key:
        """The key of a recursive conjunction: `_key` with a bare `$ref` part read as its
        target and bare `$ref` schemas left out of the location (which add nothing to its
        member names, members or items), so that a node reached as the root and as its own
        items (`tree`), or one definition reached as items and as members (`rpc`), is one
        rule, not a copy inlined in the caller and a rule per place."""
        if self._target is None:
            return _key(parts, loc)
        described = []
        for p in parts:
            schema, seen = p.schema, 0
            if not (p.skip or p.synthetic):
                while (found := self._target(schema)) is not None and seen < 64:
                    schema, seen = found, seen + 1
            if schema is p.schema:
                described.append((id(schema), p.skip, p.parent, p.synthetic))
            else:
                described.append((id(schema), frozenset(), p.parent, False))
        place = self._locs.get(id(loc))
        if place is None:
            kept = (id(n) for n in loc.nodes if self._target(n) is None)
            place = self._locs[id(loc)] = ("same", tuple(kept))
        return tuple(described), place


def _key(parts: list[Part], loc: Location) -> Key:
    return (tuple((id(p.schema), p.skip, p.parent, p.synthetic) for p in parts), id(loc))


def _name(parts: list[Part]) -> str:
    """A readable rule name: the schema pointer of the conjunction's first part."""
    pointer = parts[0].pointer if parts else ""
    return pointer if "#" in pointer else "#" + pointer
