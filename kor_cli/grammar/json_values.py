"""Canonical JSON text: the serialiser and the byte ASTs of JSON tokens.

Every JSON value has exactly one canonical text, which is the only one the grammars
accept; that is what makes lengths, patterns, `oneOf` and `not` exact on text:

- strings: `json.dumps(s, ensure_ascii=False)` — raw UTF-8 except `\\"`, `\\\\`, the short
  escapes `\\b \\f \\n \\r \\t` and `\\u00xx` (lower-case hex) for other control characters;
- numbers: integers without fraction (`1.0` is written `1`), other numbers positional
  (no exponent) with no trailing fraction zeros; `-0` is written `0`;
- separators: `","`/`":"` (compact) or `", "`/`": "` (spaced, like `json.dumps`).
"""

from __future__ import annotations

import functools
import json
import math
import weakref
from decimal import Decimal
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

import numpy as np

from kor_cli.grammar import charset as cs
from kor_cli.grammar.ast import ALL_BYTES, Automaton, Bytes, Node, alt, literal, repeat, seq

if TYPE_CHECKING:
    from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.charset import Ranges
from kor_cli.grammar.shared_rules import once

SEPARATORS = {"compact": (",", ":"), "spaced": (", ", ": ")}
_MUST_ESCAPE: Ranges = cs.union(((0, 0x1F),), cs.chars('"\\'))
NULL = literal("null")
BOOLEAN = alt(literal("true"), literal("false"))
QUOTE = literal('"')


def separators(whitespace: str) -> tuple[str, str]:
    """(item separator, key separator) of a whitespace style."""
    try:
        return SEPARATORS[whitespace]
    except KeyError:
        raise ValueError(f"whitespace must be 'compact' or 'spaced', not {whitespace!r}") from None


def format_number(value: int | float | Decimal) -> str:
    """Canonical JSON text of a number."""
    if isinstance(value, bool):
        raise TypeError("booleans are not numbers")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        value = Decimal(repr(value))
    if not value.is_finite():
        raise ValueError(f"{value!r} is not a JSON number")
    if value == value.to_integral_value():
        # digits without int(): no context rounding, no limit on the digits (1E+10000)
        digits = format(value, "f").split(".")[0]
        return "0" if digits == "-0" else digits
    return format(value, "f").rstrip("0")  # exact: no rounding to the context precision


def json_text(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False)`; a str without the encoder that call builds
    each time (its text is `encode_basestring`'s)."""
    return encode_basestring(value) if type(value) is str else json.dumps(value, ensure_ascii=False)


def dumps(value: Any, whitespace: str = "compact") -> str:
    """Canonical JSON text of `value` (object keys in the order given)."""
    item_sep, key_sep = separators(whitespace)
    return _dumps(value, item_sep, key_sep)


def _dumps(value: Any, item_sep: str, key_sep: str) -> str:
    if value is None or isinstance(value, (bool, str)):
        return json_text(value)
    if isinstance(value, (int, float, Decimal)):
        return format_number(value)
    if isinstance(value, (list, tuple)):
        return "[" + item_sep.join(_dumps(v, item_sep, key_sep) for v in value) + "]"
    if isinstance(value, dict):
        members = (_key(k) + key_sep + _dumps(v, item_sep, key_sep) for k, v in value.items())
        return "{" + item_sep.join(members) + "}"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return json_text(key)
    if key is None or isinstance(key, bool):
        return json.dumps(json.dumps(key))
    if isinstance(key, (int, float)):
        return json.dumps(format_number(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


@functools.lru_cache(maxsize=256)
def json_char(ranges: Ranges) -> Node:
    """One character of `ranges` as it appears inside a canonical JSON string."""
    raw = cs.utf8(cs.minus(ranges, _MUST_ESCAPE))
    escaped = [
        literal(json.dumps(chr(c))[1:-1])
        for lo, hi in cs.intersection(ranges, _MUST_ESCAPE)
        for c in range(lo, hi + 1)
    ]
    return alt(raw, *escaped)


@once
def any_char() -> Node:
    """Any character inside a JSON string, one automaton built once per process (16 DFA
    states; as an AST ~240 nodes, raw UTF-8 sequences and 34 escapes, that every string of
    every grammar would otherwise rebuild as NFA states, determinise and minimise)."""
    from kor_cli.grammar.fsm import compile_ast

    return Automaton(compile_ast(json_char(cs.ALL)))


@once
def _any_string() -> Node:
    from kor_cli.grammar.fsm import compile_ast

    return Automaton(compile_ast(seq(QUOTE, repeat(any_char(), 0, None), QUOTE)))


def string_node(min_length: int = 0, max_length: int | None = None) -> Node:
    """A JSON string of min_length..max_length characters (escapes count as one); any
    string is one automaton built once per process."""
    if min_length == 0 and max_length is None:
        return _any_string()
    return seq(QUOTE, repeat(any_char(), min_length, max_length), QUOTE)


def quoted(body: Node) -> Node:
    """A JSON string whose contents (between the quotes) match `body`."""
    return seq(QUOTE, body, QUOTE)


def _bytes_except(chars: str) -> Node:
    mask = ALL_BYTES
    for c in chars:
        mask &= ~(1 << ord(c))
    return Bytes(mask)


_OPEN, _CLOSE = alt(literal("["), literal("{")), alt(literal("]"), literal("}"))
_ANY_ESCAPE = seq(literal("\\"), Bytes(ALL_BYTES))
_ATOM = seq(QUOTE, repeat(alt(_bytes_except('"\\'), _ANY_ESCAPE), 0, None), QUOTE)
_FREE = _bytes_except('"[]{}')


@functools.lru_cache(maxsize=64)
def _inside(depth: int) -> Node:
    """Container contents nested at most `depth` more levels; strings stay atomic."""
    nested = seq(_OPEN, _inside(depth - 1), _CLOSE) if depth > 0 else _FREE
    return repeat(alt(_ATOM, _FREE, nested), 0, None)


@functools.lru_cache(maxsize=64)
def loose_container(brackets: str, depth: int) -> Node:
    """A regular superset of the JSON arrays (`brackets` "[]") or objects ("{}") that nest
    at most `depth` levels (inner brackets of either kind, separators anywhere)."""
    return seq(literal(brackets[0]), _inside(depth - 1), literal(brackets[1]))


@functools.lru_cache(maxsize=64)
def loose_value(depth: int) -> Node:
    """A regular superset of the JSON values nesting at most `depth` levels, each still one
    value: a scalar holds no separator and containers balance their brackets."""
    scalar = alt(_ATOM, repeat(_bytes_except('"[]{},:'), 1, None))
    if depth <= 0:
        return scalar
    return alt(scalar, loose_container("[]", depth), loose_container("{}", depth))


def max_depth(dfa: ByteDFA) -> int:
    """The deepest bracket nesting of the JSON texts a (trim) DFA accepts.

    In a trim DFA of JSON texts every state has one lexical context (depth, inside a
    string or not), because all its completions must close exactly what is open; so a
    search from the start reads each state's context off any one edge that first reaches
    it. Remembered per DFA (a product's settled operand is asked again by each subtraction).
    """
    found = _depths.get(dfa)
    if found is None:
        found = _depths[dfa] = _max_depth(dfa)
    return found


_depths: weakref.WeakKeyDictionary[ByteDFA, int] = weakref.WeakKeyDictionary()


def _max_depth(dfa: ByteDFA) -> int:
    _, masks, table = dfa.compressed()
    reps = [_representative(m) for m in masks]
    size, width = table.shape
    if size * width < _SMALL_TABLE:
        return _max_depth_small(dfa.start, table.tolist(), reps)
    if size >= _LEVELS:
        return _max_depth_levels(dfa.start, table, reps)
    # each state's distinct successors and one class leading to each (numpy), then a
    # depth-first search over those edges only: a JSON DFA has a few per state
    order = np.argsort(table, axis=1, kind="stable")
    targets = np.take_along_axis(table, order, axis=1)
    distinct = targets != 0
    distinct[:, 1:] &= targets[:, 1:] != targets[:, :-1]
    successors = targets[distinct].tolist()
    classes = order[distinct].tolist()
    bounds = [0, *np.cumsum(distinct.sum(axis=1)).tolist()]
    seen: dict[int, tuple[int, int]] = {dfa.start: (0, 0)}  # state -> (depth, lexer)
    stack = [dfa.start]
    deepest = 0
    while stack:
        state = stack.pop()
        depth, lexer = seen[state]
        deepest = max(deepest, depth)
        for k in range(bounds[state], bounds[state + 1]):
            target = successors[k]
            if target not in seen:
                seen[target] = _lex(depth, lexer, reps[classes[k]])
                stack.append(target)
    return deepest


_SMALL_TABLE = 2000  # table cells below which the search reads the whole table
_LEVELS = 1500  # states from which a breadth-first search in numpy is faster


def _max_depth_levels(start: int, table: np.ndarray, reps: list[int]) -> int:
    """`max_depth` by a breadth-first search, level by level in numpy (large DFAs): each
    edge's depth change and next lexer state read from a table by (lexer, class)."""
    size, width = table.shape
    steps = [[_lex(0, lexer, byte) for byte in reps] for lexer in range(3)]
    moves = np.array([[m for m, _ in row] for row in steps], dtype=np.int64)
    lexes = np.array([[x for _, x in row] for row in steps], dtype=np.int64)
    depth = np.zeros(size, dtype=np.int64)
    lexer = np.zeros(size, dtype=np.int64)
    seen = np.zeros(size, dtype=bool)
    seen[0] = seen[start] = True  # 0: the dead state, never a context
    frontier = np.array([start], dtype=np.int64)
    deepest = 0
    while len(frontier):
        rows = table[frontier].ravel()
        fresh = ~seen[rows]
        if not fresh.any():
            break
        found = rows[fresh]
        by = np.argsort(found, kind="stable")  # first occurrences (np.unique: slower)
        ordered = found[by]
        keep = np.empty(len(by), dtype=bool)
        keep[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
        targets = ordered[keep]
        where = np.flatnonzero(fresh)[by[keep]]  # the first edge into each new state
        source, k = frontier[where // width], where % width
        state = lexer[source]
        depth[targets] = depth[source] + moves[state, k]
        lexer[targets] = lexes[state, k]
        seen[targets] = True
        deepest = max(deepest, int(depth[targets].max()))
        frontier = targets
    return deepest


def _max_depth_small(start: int, table: list[list[int]], reps: list[int]) -> int:
    """`max_depth` by a depth-first search over every cell of a small table."""
    seen: dict[int, tuple[int, int]] = {start: (0, 0)}  # state -> (depth, lexer)
    stack = [start]
    deepest = 0
    while stack:
        state = stack.pop()
        depth, lexer = seen[state]
        deepest = max(deepest, depth)
        for k, target in enumerate(table[state]):
            if target and target not in seen:
                seen[target] = _lex(depth, lexer, reps[k])
                stack.append(target)
    return deepest


def _representative(mask: int) -> int:
    for byte in (0x22, 0x5C, 0x5B, 0x5D, 0x7B, 0x7D):
        if mask >> byte & 1:
            return byte
    return (mask & -mask).bit_length() - 1


def _lex(depth: int, lexer: int, byte: int) -> tuple[int, int]:
    """JSON lexer step; lexer 0 outside strings, 1 inside, 2 after a backslash."""
    if lexer == 2:
        return depth, 1
    if lexer == 1:
        return depth, {0x5C: 2, 0x22: 0}.get(byte, 1)
    if byte == 0x22:
        return depth, 1
    return depth + (byte in (0x5B, 0x7B)) - (byte in (0x5D, 0x7D)), 0
