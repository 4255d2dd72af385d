"""Memo of the compiler's conjunctions: the same parts at the same location, compiled in
the same mode, give the same AST, so each is built once.

Real-world schemas reference one definition from many places, and products (`oneOf`,
`not`, `if`) compile the same branches in both modes again at every such place; without
the memo a schema like SchemaStore's dofigen builds ~13,000 conjunctions of which ~1,700
differ.

The key holds everything a conjunction's AST depends on: each part's schema (by identity;
the memo keeps the parts alive so no id is reused), skipped keywords, `parent` (which
`unevaluated*` reads: the id of a schema of the loaded documents or of another part of the
same conjunction, an applicator's holder, which `json_applicators.distribute` keeps among
the branch's parts, so it is kept alive as well) and `synthetic`; the location (by
identity: kept in the entry, and by `LocationSpace` for the compile); the mode (positive
or negative, under a product or not, lenient or strict, the depth negative mode's "any
value" nests to); and under products, where recursion is unrolled, how often each `$ref`
target is already open (outside products recursion becomes rules and the counts do not
matter).
ASTs are immutable, so sharing one between places is safe; a call to a rule names the
same conjunction wherever it appears.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kor_cli.grammar.ast import Node
from kor_cli.grammar.json_keywords import Part
from kor_cli.grammar.json_location import Location

if TYPE_CHECKING:
    from kor_cli.grammar.json_schema import SchemaCompiler

Key = tuple[Any, ...]


class ConjMemo:
    """Built conjunctions of one compile, by `key`."""

    def __init__(self, compiler: SchemaCompiler) -> None:
        self.c = compiler
        self._built: dict[Key, tuple[Node, list[Part], Location]] = {}

    def key(self, parts: list[Part], loc: Location, pos: bool) -> Key:
        c = self.c
        described = tuple((id(p.schema), p.skip, p.ref, p.parent, p.synthetic) for p in parts)
        depths = tuple(sorted((r, n) for r, n in c.active.items() if n)) if c.exact else ()
        opened = c.open_objects, c.undering
        return described, id(loc), pos, c.exact > 0, c.lenient, opened, c.loose_depth, depths

    def get(self, key: Key) -> Node | None:
        found = self._built.get(key)
        return None if found is None else found[0]

    def put(self, key: Key, node: Node, parts: list[Part], loc: Location) -> Node:
        self._built[key] = (node, parts, loc)
        return node
