"""A text that a regex AST matches, found by walking the AST (no automaton built).

`SchemaCompiler._some_string` asks whether a string of a `pattern` exists (the cheap
productivity proof, `json_witness`). Compiling the pattern crossed with a JSON string took
~3 ms for azure-iot-edgeagent's unanchored `1.0` before its first mask; most patterns
show a text at once: the walk takes each alternative in turn, the fewest copies of a
repeat and a printable byte of each byte set. The caller still checks the text against
what the walk cannot see (a JSON string, its length); None sends it back to the compile.
"""

from __future__ import annotations

import numpy as np

from kor_cli.grammar.ast import Alt, Automaton, Bytes, Node, Repeat, Seq
from kor_cli.grammar.json_key_witness import shortest
from kor_cli.grammar.json_values import quoted, string_node

MAX_BYTES = 256  # texts longer than this are not looked for
_PRINTABLE = sum(1 << b for b in range(0x20, 0x7F)) & ~(1 << ord('"')) & ~(1 << ord("\\"))
_ORDER = np.array(sorted(range(256), key=lambda b: not _PRINTABLE >> b & 1), dtype=np.int64)


def has_string(body: Node, low: int, high: int | None) -> bool:
    """True if a text found in `body` (a string's contents) makes a JSON string (without
    escapes) of `low`..`high` characters; False: unknown."""
    text = sample(quoted(body))
    any_string = string_node()
    if text is None or b"\\" in text or not isinstance(any_string, Automaton):
        return False
    if not any_string.dfa.accepts(text):
        return False
    count = len(text[1:-1].decode("utf-8"))  # valid UTF-8: a JSON string's
    return low <= count and (high is None or count <= high)


def sample(node: Node) -> bytes | None:
    """Some text `node` matches, or None (none found: a product, a call, a join, ...)."""
    out = bytearray()
    return bytes(out) if _walk(node, out) else None


def _walk(node: Node, out: bytearray) -> bool:
    if len(out) > MAX_BYTES:
        return False
    if isinstance(node, Bytes):
        if not node.mask:
            return False
        mask = node.mask & _PRINTABLE or node.mask
        out.append((mask & -mask).bit_length() - 1)
        return True
    if isinstance(node, Seq):
        return all(_walk(item, out) for item in node.items)
    if isinstance(node, Alt):
        mark = len(out)
        for item in node.items:
            if _walk(item, out):
                return True
            del out[mark:]
        return False
    if isinstance(node, Repeat):
        for copy in range(node.min):
            if copy and node.sep is not None and not _walk(node.sep, out):
                return False
            if not _walk(node.item, out) or len(out) > MAX_BYTES:
                return False
        return True
    if isinstance(node, Automaton):
        found = shortest(node.dfa, _ORDER)
        if found is not None:
            out += found
        return found is not None
    return False
