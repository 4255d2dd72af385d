"""Exact automata for JSON numbers: ranges, `multipleOf`, and the spellings of a value.

Canonical numbers (see `json_values`): `-?(0|[1-9][0-9]*)(\\.[0-9]*[1-9])?` without `-0`.
Bounds are exact for integers and decimals (compared digit by digit, no floats), and
`multipleOf` is a residue automaton over the digits.

Other spellings of the same value (what `json.dumps` and models write): trailing fraction
zeros (`4.0`, `2.50`, `spellings`) and normalised exponent forms (`1e-05`, `1.5E+20`,
`SCIENTIFIC`: one non-zero digit, a fraction without trailing zeros, `e`/`E`, a signed
exponent; `scientific_range` compares them with bounds exactly: exponent first, then the
mantissa digit by digit). `value_spellings` gives every text of one value that any grammar
may accept, for the subtractions of `not`/`oneOf`/`if`.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import (
    EMPTY,
    NOTHING,
    Automaton,
    Node,
    alt,
    byte_range,
    intersect,
    literal,
    opt,
    repeat,
    seq,
)
from kor_cli.grammar.byte_dfa import ByteDFA, minimal
from kor_cli.grammar.fsm import compile_ast, product
from kor_cli.grammar.json_values import format_number
from kor_cli.grammar.limits import check
from kor_cli.grammar.shared_rules import once

DIGIT = byte_range(0x30, 0x39)
NONZERO = byte_range(0x31, 0x39)
MINUS = literal("-")
FRACTION = seq(literal("."), repeat(DIGIT, 0, None), NONZERO)  # canonical, non-empty
UINT = alt(literal("0"), seq(NONZERO, repeat(DIGIT, 0, None)))

Bound = tuple[Decimal, bool]  # (value, exclusive)


def _digit(lo: int, hi: int) -> Node:
    return byte_range(0x30 + lo, 0x30 + hi)


def _between(a: str, b: str) -> Node:
    """Digit strings x of len(a) == len(b) with a <= x <= b."""
    if not a:
        return EMPTY
    if a[0] == b[0]:
        return seq(literal(a[0]), _between(a[1:], b[1:]))
    rest = len(a) - 1
    low_full, high_full = a[1:] == "0" * rest, b[1:] == "9" * rest
    first = int(a[0]) + (0 if low_full else 1)
    last = int(b[0]) - (0 if high_full else 1)
    parts = []
    if not low_full:
        parts.append(seq(literal(a[0]), _between(a[1:], "9" * rest)))
    if first <= last:
        parts.append(seq(_digit(first, last), repeat(DIGIT, rest, rest)))
    if not high_full:
        parts.append(seq(literal(b[0]), _between("0" * rest, b[1:])))
    return alt(*parts)


def uint_range(lo: int, hi: int | None) -> Node:
    """Canonical non-negative integers in lo..hi (hi None: unbounded)."""
    lo = max(lo, 0)
    if hi is not None and hi < lo:
        return NOTHING
    parts = []
    top = len(str(lo)) if hi is None else len(str(hi))
    for n in range(len(str(lo)), top + 1):
        a = max(lo, 10 ** (n - 1) if n > 1 else 0)
        b = 10**n - 1 if hi is None else min(hi, 10**n - 1)
        if a <= b:
            parts.append(_between(str(a), str(b)))
    if hi is None:
        parts.append(seq(NONZERO, repeat(DIGIT, len(str(lo)), None)))
    return alt(*parts)


def int_range(lo: int | None, hi: int | None) -> Node:
    """Canonical integers in lo..hi (None: unbounded on that side)."""
    parts = []
    if hi is None or hi >= 0:
        parts.append(uint_range(0 if lo is None else max(lo, 0), hi))
    if lo is None or lo < 0:
        top = None if lo is None else -lo
        parts.append(seq(MINUS, uint_range(1 if hi is None or hi >= 0 else -hi, top)))
    return alt(*parts)


def integer_bounds(lower: Bound | None, upper: Bound | None) -> tuple[int | None, int | None]:
    """The integer range lo..hi equivalent to decimal bounds."""
    lo = hi = None
    if lower is not None:
        lo = math.floor(lower[0]) + 1 if lower[1] else math.ceil(lower[0])
    if upper is not None:
        hi = math.ceil(upper[0]) - 1 if upper[1] else math.floor(upper[0])
    return lo, hi


def number_range(lower: Bound | None, upper: Bound | None) -> Node:
    """Canonical numbers x with lower <(=) x <(=) upper."""
    positive: list[Node] = []  # constraints on x >= 0 (as magnitude)
    negative: list[Node] = [_magnitude("gt", Decimal(0))]  # on -x for x < 0
    has_positive = has_negative = True
    if lower is not None:
        value, exclusive = lower
        if value > 0 or (value == 0 and exclusive):
            positive.append(_magnitude("gt" if exclusive else "ge", value))
            has_negative = False
        else:
            negative.append(_magnitude("lt" if exclusive else "le", -value))
    if upper is not None:
        value, exclusive = upper
        if value < 0 or (value == 0 and exclusive):
            negative.append(_magnitude("gt" if exclusive else "ge", -value))
            has_positive = False
        else:
            positive.append(_magnitude("lt" if exclusive else "le", value))
    parts = []
    if has_positive:
        parts.append(_all_of(positive) if positive else seq(UINT, opt(FRACTION)))
    if has_negative:
        parts.append(seq(MINUS, _all_of(negative)))
    return alt(*parts)


def _all_of(nodes: list[Node]) -> Node:
    out = nodes[0]
    for node in nodes[1:]:
        out = intersect(out, node)
    return out


def _split(value: Decimal) -> tuple[int, str]:
    """(integer part, fraction digits without trailing zeros) of a non-negative decimal."""
    whole = int(value)
    return whole, format(value - whole, "f").partition(".")[2].rstrip("0")


def _magnitude(op: str, bound: Decimal) -> Node:
    """Unsigned canonical numbers m with `m op bound` (op: ge, gt, le, lt)."""
    whole, frac = _split(bound)
    same = seq(literal(str(whole)), _fraction(op, frac))
    if op in ("ge", "gt"):
        return alt(seq(uint_range(whole + 1, None), opt(FRACTION)), same)
    smaller = seq(uint_range(0, whole - 1), opt(FRACTION)) if whole else NOTHING
    return alt(smaller, same)


def _fraction(op: str, bound: str) -> Node:
    """Optional canonical fractions `.F` (or none, F = "") with `0.F op 0.bound`."""
    tail = opt(seq(repeat(DIGIT, 0, None), NONZERO))
    dot = literal(".")
    if op in ("ge", "gt"):
        nonempty = seq(repeat(DIGIT, 0, None), NONZERO)
        extension = seq(literal(bound), tail if op == "ge" else nonempty)
        bigger = [
            seq(literal(bound[:j]), _digit(int(bound[j]) + 1, 9), tail)
            for j in range(len(bound))
            if bound[j] != "9"
        ]
        if not bound:
            return opt(FRACTION) if op == "ge" else FRACTION
        return seq(dot, alt(extension, *bigger))
    if not bound:
        return EMPTY if op == "le" else NOTHING
    prefixes = [literal(bound[:j]) for j in range(1, len(bound)) if bound[j - 1] != "0"]
    smaller = [
        seq(
            literal(bound[:j]),
            alt(
                seq(_digit(0, int(bound[j]) - 1), repeat(DIGIT, 0, None), NONZERO),
                _digit(1, int(bound[j]) - 1) if bound[j] > "1" else NOTHING,
            ),
        )
        for j in range(len(bound))
        if bound[j] != "0"
    ]
    equal = [literal(bound)] if op == "le" else []
    return opt(seq(dot, alt(*equal, *prefixes, *smaller)))


NUMBER = number_range(None, None)
FRACTIONAL = seq(opt(MINUS), UINT, FRACTION)  # numbers that are not integers


def multiple_of(step: Decimal, max_states: int) -> Node:
    """Canonical numbers that are integer multiples of `step` > 0 (exact decimal)."""
    sign, digits, exponent = step.normalize().as_tuple()
    assert isinstance(exponent, int)
    p = int("".join(map(str, digits))) * 10 ** max(exponent, 0)
    s = max(-exponent, 0)
    size = 3 + p * (s + 2)
    if sign or p <= 0 or size > max_states:
        raise GrammarError(f"multipleOf {step} needs too many states (at most {max_states})")
    # states: 0 dead, 1 start, 2 after "-", int residue r: 3 + r, fraction (r, k): 3+p+r*(s+1)+k
    table = np.zeros((size, 256), dtype=np.int32)
    accepting = np.zeros(size, dtype=bool)
    frac = 3 + p

    def fstate(r: int, k: int) -> int:
        return frac + r * (s + 1) + k

    for d in range(10):
        table[1, 0x30 + d] = table[2, 0x30 + d] = 3 + d % p
    table[1, ord("-")] = 2
    for r in range(p):
        for d in range(10):
            table[3 + r, 0x30 + d] = 3 + (10 * r + d) % p
        table[3 + r, ord(".")] = fstate(r, 0)
        accepting[3 + r] = (r * 10**s) % p == 0
        for k in range(s + 1):
            accepting[fstate(r, k)] = (r * 10 ** (s - k)) % p == 0
            for d in range(10):
                if k < s:
                    table[fstate(r, k), 0x30 + d] = fstate((10 * r + d) % p, k + 1)
            if k == s:
                table[fstate(r, k), 0x30] = fstate(r, k)
    return Automaton(minimal(table, accepting, 1))


INTEGER_TEXT = seq(opt(MINUS), UINT)
ZEROS = repeat(literal("0"), 1, None)
SCIENTIFIC = seq(
    opt(MINUS),
    NONZERO,
    opt(FRACTION),
    alt(literal("e"), literal("E")),
    opt(alt(literal("+"), MINUS)),
    repeat(DIGIT, 1, None),
)


def spellings(node: Node) -> Node:
    """Canonical numbers `node` with any number of trailing fraction zeros (`4` -> `4.0`)."""
    return alt(
        node,
        seq(intersect(node, FRACTIONAL), ZEROS),
        seq(intersect(node, INTEGER_TEXT), literal("."), ZEROS),
    )


def settled_spellings(node: Node, scientific: bool) -> Node:
    """`spellings(node)` (and every exponent form if `scientific`) as one compiled automaton,
    so that later compiles do not redo its products. Built from `node`'s DFA directly
    (`spelled_dfa`), not as the products and NFA `spellings` spells (~0.5 ms, was ~3.5 ms
    for a bounded number)."""
    dfa = spelled_dfa(compile_ast(node))
    if scientific:
        dfa = product(dfa, _spelling_parts()[2], "or")
    return Automaton(dfa)


@once
def _spelling_parts() -> tuple[ByteDFA, ByteDFA, ByteDFA]:
    """The DFAs of `FRACTIONAL`, `INTEGER_TEXT` and `SCIENTIFIC`, once per process."""
    return compile_ast(FRACTIONAL), compile_ast(INTEGER_TEXT), compile_ast(SCIENTIFIC)


_ZERO, _DOT = ord("0"), ord(".")


def spelled_dfa(dfa: ByteDFA) -> ByteDFA:
    """The minimal DFA of `spellings` of `dfa`'s language: a subset construction in plain
    Python over the bytes `dfa` reads (a dozen for numbers). Its states are sets of
    (state of `dfa`, of `FRACTIONAL`'s DFA, of `INTEGER_TEXT`'s) and two more: "P" after
    `w.` (w an integer text of the language), "Z" after trailing zeros (accepting)."""
    fractional, integer, _ = _spelling_parts()
    columns = sorted({*np.flatnonzero(dfa.transitions.any(axis=0)).tolist(), _ZERO, _DOT})
    rows = [t.transitions[:, columns].tolist() for t in (dfa, fractional, integer)]
    accepting = [t.accepting.tolist() for t in (dfa, fractional, integer)]
    zero, dot = columns.index(_ZERO), columns.index(_DOT)

    def step(subset: frozenset, k: int) -> frozenset:
        out: set = set()
        for x in subset:
            if isinstance(x, str):  # "P" or "Z": only zeros follow
                if k == zero:
                    out.add("Z")
                continue
            q, f, i = x
            if rows[0][q][k]:
                out.add((rows[0][q][k], rows[1][f][k], rows[2][i][k]))
            if accepting[0][q] and (
                (k == zero and accepting[1][f]) or (k == dot and accepting[2][i])
            ):
                out.add("Z" if k == zero else "P")
        return frozenset(out)

    start = frozenset({(dfa.start, fractional.start, integer.start)})
    number = {start: 1}
    order = [start]
    edges: list[tuple[int, int, int]] = []
    for subset in order:
        check()
        for k in range(len(columns)):
            target = step(subset, k)
            if target:
                if target not in number:
                    number[target] = len(order) + 1
                    order.append(target)
                edges.append((number[subset], columns[k], number[target]))
    table = np.zeros((len(order) + 1, 256), dtype=np.int32)
    for state, byte, target in edges:
        table[state, byte] = target
    final = np.zeros(len(order) + 1, dtype=bool)
    final[1:] = [
        any(x == "Z" or (not isinstance(x, str) and accepting[0][x[0]]) for x in s) for s in order
    ]
    return minimal(table, final, 1)


def value_spellings(value: int | float | Decimal) -> Node:
    """Every text of number `value` a grammar may accept (a superset: any exponent form)."""
    text = format_number(value)
    zeros = seq(literal(text), ZEROS) if "." in text else seq(literal(text + "."), ZEROS)
    return alt(literal(text), zeros, SCIENTIFIC)


@once
def any_number() -> Node:
    """Every number, in every accepted spelling."""
    return settled_spellings(NUMBER, True)


MANTISSA = seq(NONZERO, opt(FRACTION))  # of a normalised exponent form: 1 <= m < 10
_EXP_MARK = alt(literal("e"), literal("E"))
_ZEROS = repeat(literal("0"), 0, None)


def _exponents(lo: int | None, hi: int | None) -> Node:
    """Exponent texts (after `e`) of the integers lo..hi: `+` optional, leading zeros,
    zero also as `-0`."""
    parts = []
    if hi is None or hi >= 0:
        parts.append(seq(opt(literal("+")), _ZEROS, uint_range(max(lo or 0, 0), hi)))
        if lo is None or lo <= 0:
            parts.append(seq(MINUS, ZEROS))
    if lo is None or lo < 0:
        top = None if lo is None else -lo
        parts.append(seq(MINUS, _ZEROS, uint_range(1 if hi is None or hi >= 0 else -hi, top)))
    return alt(*parts)


def _scientific_magnitude(op: str, bound: Decimal) -> Node:
    """Unsigned normalised exponent forms m`e`E with `m*10**E op bound` (bound > 0)."""
    _, digits, exponent = bound.normalize().as_tuple()
    assert isinstance(exponent, int)
    power = exponent + len(digits) - 1
    mantissa = Decimal("".join(map(str, digits))).scaleb(-(len(digits) - 1))
    same = seq(intersect(MANTISSA, _magnitude(op, mantissa)), _EXP_MARK, _exponents(power, power))
    if op in ("ge", "gt"):
        return alt(seq(MANTISSA, _EXP_MARK, _exponents(power + 1, None)), same)
    return alt(seq(MANTISSA, _EXP_MARK, _exponents(None, power - 1)), same)


def scientific_range(lower: Bound | None, upper: Bound | None) -> Node:
    """Normalised exponent forms of the numbers x with lower <(=) x <(=) upper (exact)."""
    every = seq(MANTISSA, _EXP_MARK, _exponents(None, None))  # never zero
    positive: list[Node] = [every]  # constraints on x > 0
    negative: list[Node] = [every]  # on -x for x < 0
    has_positive = has_negative = True
    if lower is not None:
        value, exclusive = lower
        if value < 0:
            negative.append(_scientific_magnitude("lt" if exclusive else "le", -value))
        else:
            has_negative = False
            if value > 0:
                positive.append(_scientific_magnitude("gt" if exclusive else "ge", value))
    if upper is not None:
        value, exclusive = upper
        if value > 0:
            positive.append(_scientific_magnitude("lt" if exclusive else "le", value))
        else:
            has_positive = False
            if value < 0:
                negative.append(_scientific_magnitude("gt" if exclusive else "ge", -value))
    parts = []
    if has_positive:
        parts.append(_all_of(positive))
    if has_negative:
        parts.append(seq(MINUS, _all_of(negative)))
    return alt(*parts)
