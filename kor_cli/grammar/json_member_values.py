"""What a conjunction says of one member's value, for `json_disjoint`'s proofs.

A `Member` is the member's possible types (None: any) and the patterns its strings must
match, read from the property schemas' own `type` and `pattern` keywords (those the
schema's draft applies: not beside an old draft's `$ref`); a `$ref` or applicator there
only narrows the value further, so this over-approximates it. Two `oneOf` options that
both require a member told apart only by patterns (compilerconfig's `inputFile`:
`\\.less$`, `\\.(scss|sass)$`, ... under `type: string`) are disjoint when the member's
common types are strings and some pair of their patterns matches no string in common:
decided on the patterns' loose (over-approximating) languages, a small DFA product each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, intersect
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_values import json_char
from kor_cli.grammar.regex import Dialect

Member = tuple[frozenset[str] | None, frozenset[str]]  # types (None: any), patterns
ANY_MEMBER: Member = (None, frozenset())
LOOSE = Dialect(json_char, "loose")
_NUMBER = frozenset({"integer", "fraction"})
MAX_STATES = 2_000  # a pattern pair whose product is larger is not told apart


def member(schema: Any, applied: Callable[[dict[str, Any]], list[str]]) -> Member:
    """The types and patterns the property schema `schema` itself says."""
    if not isinstance(schema, dict):
        return ANY_MEMBER
    keys = applied(schema)
    types: frozenset[str] | None = None
    if "type" in keys:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if all(isinstance(n, str) for n in names):
            types = frozenset().union(*(_NUMBER if n == "number" else {n} for n in names))
    pattern = schema.get("pattern") if "pattern" in keys else None
    return types, frozenset([pattern] if isinstance(pattern, str) else [])


def meet(a: Member, b: Member) -> Member:
    """What both say (values of both)."""
    types = b[0] if a[0] is None else a[0] if b[0] is None else a[0] & b[0]
    return types, a[1] | b[1]


def join(a: Member, b: Member) -> Member:
    """What either says (values of either, over-approximated)."""
    types = None if a[0] is None or b[0] is None else a[0] | b[0]
    return types, a[1] & b[1]


def apart(a: Member, b: Member, patterns: Callable[[str, str], bool]) -> bool:
    """True if no value has both: no type in common, or only strings and two patterns
    that no string matches both (`patterns(p, q)`)."""
    if a[0] is None or b[0] is None:
        common = a[0] if b[0] is None else b[0]
        if common is None or not common <= {"string"}:
            return False
    else:
        common = a[0] & b[0]
        if not common:
            return True
        if common != {"string"}:
            return False
    return any(patterns(p, q) for p in a[1] for q in b[1] if p != q)


class PatternsApart:
    """`(p, q) -> True` if no string matches both patterns (their loose languages have an
    empty product); memoized per pair, False when a pattern cannot be parsed or the product
    runs past `MAX_STATES`."""

    def __init__(self, parsed: Callable[[str, Dialect], Node]) -> None:
        self.parsed = parsed
        self._found: dict[frozenset[str], bool] = {}

    def __call__(self, p: str, q: str) -> bool:
        key = frozenset((p, q))
        found = self._found.get(key)
        if found is None:
            try:
                product = intersect(self.parsed(p, LOOSE), self.parsed(q, LOOSE))
                found = compile_ast(product, MAX_STATES).is_empty()
            except GrammarError:
                found = False
            self._found[key] = found
        return found
