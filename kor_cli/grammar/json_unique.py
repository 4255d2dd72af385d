"""`uniqueItems` for items with a small finite set of values (enums, booleans, consts).

Canonical texts are equal exactly when values are equal, so "no value twice" is a
property of the texts: an automaton that remembers which values were used (2**k sets,
k values) accepts exactly the separated sequences of distinct values.

Items with more possible values (free strings, objects, enums past `MAX_VALUES`) cannot be
a regular (nor context-free) language: a grammar could only over-approximate it (a false
accept) or under-approximate it (forbid valid arrays). There the array becomes a rule the
pushdown matcher checks at run time (`unique_check`), except under a whole-DFA product
(`not`, `oneOf`, `if`, `contains`), where it is a named refusal (`--lenient` drops it with a
warning; the validator then re-checks the record). llguidance refuses `uniqueItems` over
many values; XGrammar ignores it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Node, Repeat, Seq, literal, repeat, seq
from kor_cli.grammar.byte_dfa import ByteDFA, minimal
from kor_cli.grammar.json_terminals import surely_nonempty

if TYPE_CHECKING:
    from kor_cli.grammar.json_keywords import Part
    from kor_cli.grammar.json_location import Location
    from kor_cli.grammar.json_schema import SchemaCompiler

MAX_VALUES = 6
INLINE_SIZE = 512  # distinct arrays past about this many DFA states are rules of their own
_OPEN, _CLOSE = literal("["), literal("]")


def finite_texts(dfa: ByteDFA, limit: int = MAX_VALUES) -> list[bytes] | None:
    """All strings of a finite language of at most `limit` strings, else None."""
    edges = dfa.edges()
    out: list[bytes] = []
    on_path: set[int] = set()

    def walk(state: int, prefix: bytes) -> bool:
        if state in on_path:
            return False  # a cycle on a live path: infinitely many strings
        if dfa.accepting[state]:
            out.append(prefix)
            if len(out) > limit:
                return False
        on_path.add(state)
        for mask, target in edges[state]:
            for byte in (b for b in range(256) if mask >> b & 1):
                if not walk(target, prefix + bytes([byte])):
                    return False
        on_path.discard(state)
        return True

    return out if walk(dfa.start, b"") else None


def surely_many(node: Node, limit: int = MAX_VALUES) -> bool:
    """Whether `node` certainly has more than `limit` strings, from its AST alone (False:
    unknown), so `finite_texts` of its DFA would be None without building that DFA."""
    if isinstance(node, Bytes):
        return node.mask.bit_count() > limit
    if isinstance(node, Automaton):
        return finite_texts(node.dfa, limit) is None
    if isinstance(node, Seq):  # x -> a x b is one-to-one for fixed strings a, b
        return all(map(surely_nonempty, node.items)) and any(surely_many(x) for x in node.items)
    if isinstance(node, Alt):
        return any(surely_many(x, limit) for x in node.items)
    if isinstance(node, Repeat):  # one copy (no separator) is among its strings
        return (node.max is None or node.max >= 1) and surely_many(node.item, limit)
    return False  # products, joins, calls


def distinct_sequence(values: list[bytes], separator: bytes) -> ByteDFA:
    """Sequences of `values` joined by `separator`, each value at most once (or none)."""
    children: list[dict[int, int]] = [{}]
    ends: list[int] = [-1]  # value index ending at each trie node
    below: list[int] = [0]  # bit set of values in each node's subtree
    for i, value in enumerate(values):
        node = 0
        below[0] |= 1 << i
        for byte in value:
            if byte not in children[node]:
                children[node][byte] = len(children)
                children.append({})
                ends.append(-1)
                below.append(0)
            node = children[node][byte]
            below[node] |= 1 << i
        ends[node] = i
    width = len(children) + len(separator) - 1  # trie nodes, then separator progress

    def state(used: int, position: int) -> int:
        return 1 + used * width + position

    size = 1 + (1 << len(values)) * width
    table = np.zeros((size, 256), dtype=np.int32)
    accepting = np.zeros(size, dtype=bool)
    for used in range(1 << len(values)):
        for node, kids in enumerate(children):
            here = state(used, node)
            for byte, child in kids.items():
                if below[child] & ~used:
                    table[here, byte] = state(used, child)
            value = ends[node]
            if value >= 0 and not used >> value & 1:
                accepting[here] = True
                after = used | 1 << value
                nxt = state(after, len(children)) if len(separator) > 1 else state(after, 0)
                table[here, separator[0]] = nxt
        for j in range(1, len(separator)):
            nxt = state(used, len(children) + j) if j + 1 < len(separator) else state(used, 0)
            table[state(used, len(children) + j - 1), separator[j]] = nxt
    accepting[state(0, 0)] = True
    return minimal(table, accepting, state(0, 0))


def deferred_unique(
    c: SchemaCompiler, items: list[Part], loc: Location, lo: int, hi: int | None, pointer: str
) -> Node | None:
    """A checked `uniqueItems` array (`unique_check`) whose item rule, `items` call-free,
    is built when the array is first reached (its AST then; its DFA when the matcher enters
    it; with minItems 1 productivity decides on the AST, compiling only the products it
    needs, not the whole item DFA at compile time); None where `_array` decides on the item's
    DFA at once: items that are small, or maybe scalar (enums: a DFA of distinct sequences),
    or hold a keyword that could be refused (it must be refused when the schema loads), and
    minItems past 1 (whether that many distinct values exist). An item language found empty
    when built leaves the call unproductive: the array is then `[]` or nothing, as before."""
    if lo > 1 or not c.defer.deferrable(items):
        return None

    def item() -> Node:  # call-free; its products compiled only as productivity needs them
        with c.exactly():
            return c.member(items, loc, True)

    def array(call: Node) -> Node:
        return seq(_OPEN, repeat(call, lo, hi, c.item_sep), _CLOSE)

    def view(body: Node) -> Node:  # the DFA view under-approximates: at most one item
        return seq(_OPEN, repeat(body, lo, 1), _CLOSE)

    def proof() -> bool:  # an item surely exists, its witness within the unrolled depth
        return c.witness.exists_unrolled([p.schema for p in items])

    name = pointer if "#" in pointer else "#" + pointer
    return c.rules.checked_array(item, array, view, name, proof)


def distinct_array(c: SchemaCompiler, texts: list[bytes], pointer: str) -> Node:
    """Arrays of distinct `texts` (any number of them): the DFA (2**k used-sets over the
    texts' trie) inline when small, else a rule of its own built when first reached (no
    call under products)."""
    sep = c.item_sep_text.encode()

    def build() -> Node:
        return seq(_OPEN, Automaton(distinct_sequence(texts, sep)), _CLOSE)

    if c.exact or (1 << len(texts)) * sum(map(len, texts)) <= INLINE_SIZE:
        return build()
    name = (pointer if "#" in pointer else "#" + pointer) + "/distinct"
    return c.rules.fixed(name, build, key=("distinct", tuple(texts), sep))
