"""Container member values of a large object as rules of their own.

`RuleBook.split` makes a member value a rule when the value alone is large (`SPLIT_SIZE`
AST nodes). An object of many small containers stays one rule all the same: SchemaStore's
coffeelint has 38 optional members, each a small object (40-90 AST nodes), and its start
rule had 2,555 DFA states, all determinised and minimised before the first mask although
the first token only needs `{` and a key. When an object's container values (arrays,
objects, values that may be either) add up to `OBJECT_NODES` AST nodes or more, each one of
`VALUE_NODES` or more becomes a call to a rule whose body is that very value
(`RuleBook.own`: built when the matcher first reaches it, its productivity decided on
demand as for any split value), and the object's DFA keeps its keys, punctuation and
scalars. The language is unchanged (inlining every call gives the same AST back); small
objects are left alone: their schemas keep one rule and the very DFA they had (the
whole-DFA engine, the masks it serves). `OBJECT_NODES` was 400: at 100, SchemaStore's
middle schemas (hugo-theme, packwiz-pack: two or three small object members) no longer
determinise those members before the first mask.
"""

from __future__ import annotations

from kor_cli.grammar.ast import Node
from kor_cli.grammar.json_rule_walk import Call, container, size
from kor_cli.grammar.json_rules import RuleBook

KEY_STATES = 1  # the excluded names' estimated DFA states from which other keys are a rule
OBJECT_NODES = 100  # an object's container values (AST nodes) from which they split
VALUE_NODES = 24  # a container value's AST nodes from which it is a rule


def split(rules: RuleBook, members: list[tuple[str, Node, str]]) -> list[tuple[str, Node, str]]:
    """`members` (name, value, pointer) with their container values as rule calls, if the
    object's containers are large in all (see the module docstring)."""
    sizes = [_size(value) for _, value, _ in members]
    if sum(sizes) < OBJECT_NODES:
        return members
    out = []
    for (name, value, pointer), count in zip(members, sizes, strict=True):
        if count >= VALUE_NODES:
            value = rules.own(value, pointer if "#" in pointer else "#" + pointer)
        out.append((name, value, pointer))
    return out


def _size(value: Node) -> int:
    """`value`'s AST nodes if it is an inline container (not a call), else 0."""
    if isinstance(value, Call) or not container(value):
        return 0
    return size(value, OBJECT_NODES)


def extra_key(rules: RuleBook, key: Node, names: tuple[str, ...], pointer: str) -> Node:
    """`key` (the keys of members beyond `names`: any string but those, maybe split by
    patterns; never empty) as a call to a rule of its own when some name is excluded
    (`KEY_STATES`, was 128): the difference, crossed with every named key's prefix in the
    object's DFA, was most of the start rule of tsdrc, epr-manifest, language-configuration
    (3-127 states of names); with no name excluded, the key stays inline (no product)."""
    if sum(len(name) + 2 for name in names) < KEY_STATES:
        return key
    name = (pointer if "#" in pointer else "#" + pointer) + "/other-keys"
    # by identity: `key` is the rule's body, held by its builder and then `rules.bodies`
    # (never dropped), so its id is not reused while the entry lives
    return rules.fixed(name, lambda: key, key=("other keys", id(key)))
