"""Large string member values of a large object as rules of their own (terminals).

An object rule's DFA holds every scalar member's states inline: SchemaStore's
evidence-bundle start rule had ~3,000 states from a `maxLength: 200` string and a few
`date-time`s, all determinized and minimized before the first mask although the first
token only needs `{` and a key. When the members' strings add up to `OBJECT_STATES` states
or more, each string value of `VALUE_STATES` or more becomes a call to a rule of its own
(`RuleBook.fixed`, built when the matcher first reaches it), and the object's DFA keeps
only its keys and punctuation. Small objects are left alone: their schemas keep one rule
and the very DFA they had (the whole-DFA engine, the masks it serves).

Only values whose language is non-empty on their AST alone (no product, no call, no
automaton that is empty) are split: `fixed` rules are taken as productive.
"""

from __future__ import annotations

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Join, Node, Product, Repeat, Seq
from kor_cli.grammar.json_rules import RuleBook

OBJECT_STATES = 1_000  # an object's string values (estimated states) from which they split
VALUE_STATES = 48  # a string value's estimated states from which it is a rule
_QUOTE = 1 << ord('"')


def split(rules: RuleBook, members: list[tuple[str, Node, str]]) -> list[tuple[str, Node, str]]:
    """`members` (name, value, pointer) with their large string values as rule calls, if
    the object's strings are large in all (see the module docstring)."""
    sizes = [_states(v, OBJECT_STATES) if _string(v) else 0 for _, v, _ in members]
    if sum(sizes) < OBJECT_STATES:
        return members
    out = []
    for (name, value, pointer), size in zip(members, sizes, strict=True):
        if size >= VALUE_STATES and surely_nonempty(value):  # by identity: `value` is the
            # rule's body, held by its builder and then `rules.bodies`, so its id stays its own
            value = rules.fixed(pointer or "#", lambda v=value: v, key=("terminal", id(value)))
        out.append((name, value, pointer))
    return out


def _string(node: Node) -> bool:
    """Whether every text of `node` starts with a quote (a JSON string)."""
    while True:
        if isinstance(node, Bytes):
            return node.mask == _QUOTE
        if isinstance(node, Seq) and node.items:
            node = node.items[0]
        elif isinstance(node, Alt) and node.items:
            return all(_string(x) for x in node.items)
        elif isinstance(node, Product) and node.op == "and":
            return _string(node.left) or _string(node.right)
        elif isinstance(node, Product):
            node = node.left
        else:
            return False


def _states(node: Node, limit: int) -> int:
    """About how many DFA states `node` needs (capped at `limit`)."""
    if isinstance(node, Bytes):
        return 1
    if isinstance(node, Automaton):
        return node.dfa.num_states
    if isinstance(node, (Seq, Alt)):
        return min(limit, sum(_states(x, limit) for x in node.items))
    if isinstance(node, Repeat):
        copies = max(node.min, node.max or 1)
        one = _states(node.item, limit) + (0 if node.sep is None else _states(node.sep, limit))
        return min(limit, one * copies)
    if isinstance(node, Product):
        return min(limit, _states(node.left, limit) * _states(node.right, limit))
    return limit if isinstance(node, Join) else 1


def surely_nonempty(node: Node) -> bool:
    """Whether `node` certainly generates a string, from its AST alone (False: unknown)."""
    if isinstance(node, Bytes):
        return node.mask != 0
    if isinstance(node, Seq):
        return all(surely_nonempty(x) for x in node.items)
    if isinstance(node, Alt):
        return any(surely_nonempty(x) for x in node.items)
    if isinstance(node, Repeat):
        item = node.min == 0 or surely_nonempty(node.item)
        return item and (node.min < 2 or node.sep is None or surely_nonempty(node.sep))
    if isinstance(node, Automaton):
        return not node.dfa.is_empty()
    return False  # products, calls, joins: not decided here
