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

import numpy as np

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Node, Product, Seq
from kor_cli.grammar.byte_dfa import ByteDFA, empty_dfa
from kor_cli.grammar.json_rule_walk import Call, container, size
from kor_cli.grammar.json_rules import RuleBook
from kor_cli.grammar.json_values import string_node

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
    return rules.fixed(name, lambda: _but_names(key), key=("other keys", id(key)))


def _but_names(key: Node) -> Node:
    """`key` as the automaton of its language when it is any string less a few literals
    (`SchemaCompiler.other_key`), built directly (`_less`), else `key` itself. The same
    minimal DFA (canonical: the same fingerprint) as `compile_ast`'s product, which built
    the names' DFA, crossed the two and minimised the pairs: ~2 ms for 100 states of
    names, on the first mask when a key may follow `{`."""
    if not (isinstance(key, Product) and key.op == "diff" and key.left is string_node()):
        return key
    words = _literals(key.right)
    return key if words is None else Automaton(_less(key.left.dfa, words))


def _literals(node: Node) -> list[bytes] | None:
    """The byte strings of an alternation of literals (`ast.literal`s), else None."""
    out = []
    for item in node.items if isinstance(node, Alt) else (node,):
        items = item.items if isinstance(item, Seq) else (item,)
        masks = [b.mask for b in items if isinstance(b, Bytes) and b.mask & (b.mask - 1) == 0]
        if len(masks) != len(items) or not masks:
            return None
        out.append(bytes(m.bit_length() - 1 for m in masks))
    return out


def _less(dfa: ByteDFA, words: list[bytes]) -> ByteDFA:
    """The minimal DFA of `dfa`'s language less `words`, `dfa` minimal. Its states are
    `dfa`'s (past the words' trie) and the trie's nodes (a prefix read, in the `dfa` state
    it leads to), merged bottom-up: the trie is a tree over `dfa`'s states, whose Nerode
    classes are those states themselves, so a node's class is that of any state with its
    acceptance and its successors' classes (children first), then numbered breadth-first
    from the start in byte-class order, as `minimize` numbers."""
    table = dfa.transitions
    at, final, kids = [dfa.start], [False], [{}]  # per trie node (its dfa state, ...)
    for word in words:
        node = 0
        for byte in word:
            child = kids[node].get(byte)
            if child is None:
                state = int(table[at[node], byte])
                if not state:  # the dfa rejects this prefix: no word goes on here
                    break
                child = kids[node][byte] = len(at)
                at.append(state)
                final.append(False)
                kids.append({})
            node = child
        else:
            final[node] = True
    class_of, reps = _classes(dfa, {b for k in kids for b in k})
    rows = table[:, reps].tolist()  # the classes' rows; `dfa`'s states are classes 0..n-1
    accepting = dfa.accepting.tolist()
    sign = {(a, tuple(r)): s for s, (a, r) in enumerate(zip(accepting, rows, strict=True))}
    cls = [0] * len(at)
    for node in range(len(at) - 1, -1, -1):  # children were made after their parents
        row = list(rows[at[node]])
        for byte, child in kids[node].items():
            row[class_of[byte]] = cls[child]
        found = (accepting[at[node]] and not final[node], tuple(row))
        cls[node] = sign.get(found, -1)
        if cls[node] < 0:
            cls[node] = sign[found] = len(rows)
            rows.append(row)
            accepting.append(found[0])
    if not cls[0]:
        return empty_dfa()
    number, queue = {0: 0, cls[0]: 1}, [cls[0]]
    for state in queue:
        for target in dict.fromkeys(rows[state]):  # first occurrences, in class order
            if target not in number:
                number[target] = len(number)
                queue.append(target)
    renumber = np.zeros(len(rows), dtype=np.int32)
    renumber[list(number)] = list(number.values())
    table = np.zeros((len(queue) + 1, len(reps)), dtype=np.int32)
    table[1:] = renumber[np.array([rows[s] for s in queue])]
    columns = table[:, class_of]
    final_states = np.array([False] + [accepting[s] for s in queue])
    return ByteDFA.made(columns, final_states, 1, trimmed=True)


def _classes(dfa: ByteDFA, split: set[int]) -> tuple[list[int], list[int]]:
    """(class of each byte, lowest byte of each class): `dfa`'s byte classes with each
    byte of `split` apart, ordered by their lowest byte (`ByteDFA.compressed`'s order)."""
    old = dfa.compressed()[0].tolist()
    ids: dict[tuple[int, int], int] = {}
    class_of, reps = [], []
    for byte, k in enumerate(old):
        found = ids.setdefault((k, byte if byte in split else -1), len(ids))
        if found == len(reps):
            reps.append(byte)
        class_of.append(found)
    return class_of, reps
