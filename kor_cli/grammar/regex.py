"""Regex text → AST, for a subset of Python's `re` syntax.

Supported: literals and escapes (`\\n \\t \\xhh \\uhhhh \\Uhhhhhhhh \\N{name}`, octal),
classes `[...]`/`[^...]` with ranges, `\\d \\w \\s \\D \\W \\S`, `.`, groups (capturing,
named, `(?:...)`, comments), alternation, quantifiers `? * + {m} {m,} {m,n} {,n}` (lazy
forms match the same strings), and `^`/`$` at the ends of top-level alternatives.
Lookahead `(?=...)` / `(?!...)` at the start of a top-level alternative (after `^`, or
where an unanchored search tries a position), any number in a row: lookaheads are regular,
so the alternative's language from there (its `$`-less part followed by whatever the match
leaves, as `search` reads it) is intersected with, or has subtracted, the language of what
the lookahead body matches at its start (`body` then any text; a body alternative ending in
`$` stops at the end, before one newline in Python's reading). `^` inside a body is allowed
when the alternative is anchored; a lookahead anywhere else, lookbehind, backreferences,
`\\b`/`\\B`/`\\A`/`\\Z`, inline flags, atomic groups and possessive quantifiers raise
`GrammarError` naming the feature.

A `Dialect` says how a set of characters becomes bytes (plain UTF-8, or the JSON string
encoding) and what the class escapes mean: ``python`` is Python's Unicode semantics;
``strict`` and ``loose`` are the subset and superset of what both Python and ECMA-262
(JSON Schema's regex flavour) match, used for `pattern` in positive and negated positions.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from kor_cli.errors import GrammarError
from kor_cli.grammar import charset as cs
from kor_cli.grammar import limits
from kor_cli.grammar.ast import EMPTY, Node, alt, difference, intersect, opt, repeat, seq
from kor_cli.grammar.charset import Ranges

_SIMPLE = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_FEATURES = {
    "b": "word boundary \\b",
    "B": "non-word boundary \\B",
    "A": "anchor \\A",
    "Z": "anchor \\Z",
    "z": "anchor \\z",
    "G": "anchor \\G",
    "p": "Unicode property escapes \\p",
    "P": "Unicode property escapes \\P",
    "k": "named backreference \\k",
    "c": "control escape \\c",
}
_QUANTIFIER_START = "*+?{"


@dataclass(frozen=True)
class Dialect:
    """How characters become bytes (`encode`) and what class escapes mean (`classes`)."""

    encode: Callable[[Ranges], Node]
    classes: str = "python"  # "python" | "strict" | "loose"


UTF8 = Dialect(cs.utf8)


@dataclass(frozen=True)
class Branch:
    """One top-level alternative, whether it is anchored at either end, and its leading
    lookaheads: (positive, the texts from there on that the lookahead accepts)."""

    start: bool
    end: bool
    node: Node
    ahead: tuple[tuple[bool, Node], ...] = ()

    def rest(self, after: Node) -> Node:
        """The texts from the branch's position on: its match, then `after` (what the match
        leaves), held to the lookaheads."""
        node = seq(self.node, after)
        for positive, accepted in self.ahead:
            node = intersect(node, accepted) if positive else difference(node, accepted)
        return node


def parse(pattern: str, dialect: Dialect = UTF8) -> list[Branch]:
    """The top-level alternatives of `pattern`."""
    return _Parser(pattern, dialect).parse()


def fullmatch(pattern: str, dialect: Dialect = UTF8) -> Node:
    """Strings `pattern` matches in full (like `re.fullmatch`)."""
    return alt(*(branch.rest(EMPTY) for branch in parse(pattern, dialect)))


def search(pattern: str, dialect: Dialect) -> Node:
    """Strings in which `pattern` matches somewhere (like `re.search`)."""
    anything = repeat(dialect.encode(cs.ALL), 0, None)
    newline = dialect.encode(cs.chars("\n"))
    parts = []
    for branch in parse(pattern, dialect):
        before = EMPTY if branch.start else anything
        after = anything
        if branch.end:
            after = opt(newline) if dialect.classes == "loose" else EMPTY
        parts.append(seq(before, branch.rest(after)))
    return alt(*parts)


def _class_escape(letter: str, variant: str) -> Ranges:
    """The set of `\\d \\w \\s` (lower case) under `variant` python/min/max."""
    if variant == "python":
        return cs.python_class(letter)
    if letter == "s":
        both = cs.intersection(cs.ECMA_SPACE, cs.python_class("s"))
        return both if variant == "min" else cs.union(cs.ECMA_SPACE, cs.python_class("s"))
    if variant == "min":
        return cs.ASCII_DIGIT if letter == "d" else cs.ASCII_WORD
    return cs.python_class(letter)


_OPPOSITE = {"python": "python", "min": "max", "max": "min"}


class _Parser:
    def __init__(self, text: str, dialect: Dialect) -> None:
        self.text = text
        self.i = 0
        self.dialect = dialect
        self.variant = {"python": "python", "strict": "min", "loose": "max"}[dialect.classes]
        self.anchored = False  # the top-level alternative being read starts with ^

    def error(self, message: str, feature: str | None = None) -> GrammarError:
        where = f" at position {self.i} in regex {self.text!r}"
        if feature is not None:
            message = f"{feature} is not supported"
        return GrammarError(f"{message}{where}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def parse(self) -> list[Branch]:
        branches = [self.branch(top=True)]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.branch(top=True))
        if self.i < len(self.text):
            raise self.error("unbalanced parenthesis")
        return branches

    def branch(self, top: bool, ahead: bool = False) -> Branch:
        """An alternative: top-level, inside a group, or (`ahead`) of a lookahead body."""
        start = end = False
        if self.peek() == "^":
            if not (top or ahead and self.anchored):
                raise self.error("", feature="anchor ^ inside a group")
            start = True
            self.i += 1
        looks: list[tuple[bool, Node]] = []
        if top:
            self.anchored = start
            while self.text.startswith(("(?=", "(?!"), self.i):
                looks.append(self.lookahead())
        pieces: list[Node] = []
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "$":
                self.i += 1
                if not (top and self.peek() in ("", "|") or ahead and self.peek() in ("|", ")")):
                    raise self.error("", feature="anchor $ before the end")
                end = True
                break
            if self.peek() == "^":
                raise self.error("", feature="anchor ^ after the start")
            pieces.append(self.piece())
        return Branch(start, end, seq(*pieces), tuple(looks))

    def lookahead(self) -> tuple[bool, Node]:
        """A leading `(?=...)` / `(?!...)`: whether it is positive, and the texts from here
        on it accepts. A negative one's body is read in the opposite approximation (what
        is subtracted must over-approximate in strict mode, under-approximate in loose)."""
        positive = self.peek(2) == "="
        self.i += 3
        saved = self.variant
        self.variant = saved if positive else _OPPOSITE[saved]
        anything = repeat(self.encode(cs.ALL), 0, None)
        at_end = opt(self.encode(cs.chars("\n"))) if self.variant != "min" else EMPTY
        try:
            nodes = []
            while True:
                body = self.branch(top=False, ahead=True)
                nodes.append(seq(body.node, at_end if body.end else anything))
                if self.peek() != "|":
                    break
                self.i += 1
        finally:
            self.variant = saved
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern")
        self.i += 1
        return positive, alt(*nodes)

    def alternation(self) -> Node:
        nodes = [self.branch(top=False).node]
        while self.peek() == "|":
            self.i += 1
            nodes.append(self.branch(top=False).node)
        return alt(*nodes)

    def piece(self) -> Node:
        node = self.atom()
        bounds = self.quantifier()
        if bounds is None:
            return node
        if self.peek() == "?":
            self.i += 1
        elif self.peek() == "+":
            raise self.error("", feature="possessive quantifier")
        if self.quantifier() is not None:
            raise self.error("multiple repeat")
        return repeat(node, *bounds)

    def quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c != "{":
            return None
        close = self.text.find("}", self.i)
        body = self.text[self.i + 1 : close] if close > 0 else ""
        lo, comma, hi = body.partition(",")
        if close < 0 or not (lo.isdigit() or (comma and (not lo or lo.isdigit()))):
            return None
        if (hi and not hi.isdigit()) or not (lo.isascii() and hi.isascii()):
            return None
        self.i = close + 1
        low = int(lo) if lo else 0
        high = (int(hi) if hi else None) if comma else low
        if high is not None and high < low:
            raise self.error("min repeat greater than max repeat")
        if max(low, high or 0) > limits.current().max_repeat:
            count, limit = max(low, high or 0), limits.current().max_repeat
            raise self.error(f"repetition count {count} exceeds the limit of {limit} "
                             "(raise GrammarOptions.max_repeat)")  # fmt: skip
        return low, high

    def atom(self) -> Node:
        c = self.peek()
        if c == "" or c in "*+?" or (c == "{" and self._quantifier_ahead()):
            raise self.error("nothing to repeat")
        self.i += 1
        if c == "(":
            return self.group()
        if c == "[":
            return self.encode(self.char_class())
        if c == ".":
            hidden = cs.chars("\n") if self.variant != "min" else cs.ECMA_LINE_TERMINATORS
            return self.encode(cs.minus(cs.ALL, hidden))
        if c == "\\":
            return self.encode(self.escape(in_class=False))
        return self.encode(cs.chars(c))

    def _quantifier_ahead(self) -> bool:
        saved = self.i
        try:
            return self.quantifier() is not None
        finally:
            self.i = saved

    def encode(self, ranges: Ranges) -> Node:
        return self.dialect.encode(ranges)

    def group(self) -> Node:
        if self.peek() == "?":
            self.i += 1
            self.group_extension()
        node = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern")
        self.i += 1
        return node

    def group_extension(self) -> None:
        c, c2 = self.peek(), self.peek(1)
        if c == ":":
            self.i += 1
        elif c == "P" and c2 == "<" or c == "<" and c2 not in ("=", "!"):
            end = self.text.find(">", self.i)
            if end < 0:
                raise self.error("missing >, unterminated name")
            self.i = end + 1
        elif c == "#":
            end = self.text.find(")", self.i)
            if end < 0:
                raise self.error("missing ), unterminated comment")
            self.i = end  # the caller reads an empty body and the ")"
        else:
            raise self.error("", feature=_extension_name(c, c2))

    def char_class(self) -> Ranges:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        variant = _OPPOSITE[self.variant] if negate else self.variant
        parts: list[Ranges] = []
        first = True
        while True:
            c = self.peek()
            if c == "":
                raise self.error("unterminated character set")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            parts.append(self.class_item(variant))
        ranges = cs.union(*parts)
        return cs.complement(ranges) if negate else ranges

    def class_item(self, variant: str) -> Ranges:
        lo = self.class_atom(variant)
        if self.peek() != "-" or self.peek(1) in ("]", ""):
            return lo
        self.i += 1
        hi = self.class_atom(variant)
        if len(lo) != 1 or len(hi) != 1 or lo[0][0] != lo[0][1] or hi[0][0] != hi[0][1]:
            raise self.error("bad character range")
        if lo[0][0] > hi[0][0]:
            raise self.error("bad character range")
        return cs.normalize([(lo[0][0], hi[0][0])])

    def class_atom(self, variant: str) -> Ranges:
        c = self.peek()
        self.i += 1
        if c != "\\":
            return cs.chars(c)
        if self.peek() == "b":
            self.i += 1
            return cs.chars("\b")
        saved, self.variant = self.variant, variant
        try:
            return self.escape(in_class=True)
        finally:
            self.variant = saved

    def escape(self, in_class: bool) -> Ranges:
        c = self.peek()
        if c == "":
            raise self.error("bad escape (end of pattern)")
        self.i += 1
        if c.lower() in "dws" and c.isascii():
            if c.islower():
                return _class_escape(c, self.variant)
            return cs.complement(_class_escape(c.lower(), _OPPOSITE[self.variant]))
        if c in _SIMPLE:
            return cs.chars(chr(_SIMPLE[c]))
        if c in "xuU":
            return self.hex_escape({"x": 2, "u": 4, "U": 8}[c])
        if c == "N":
            return self.named_escape()
        if c.isdigit():
            return self.octal_or_backref(c, in_class)
        if c in _FEATURES:
            raise self.error("", feature=_FEATURES[c])
        if c.isascii() and c.isalnum():
            raise self.error(f"bad escape \\{c}")
        return cs.chars(c)

    def hex_escape(self, width: int) -> Ranges:
        digits = self.text[self.i : self.i + width]
        if len(digits) != width or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise self.error("incomplete hex escape")
        self.i += width
        value = int(digits, 16)
        if value > cs.MAX_CODE_POINT:
            raise self.error("bad escape (code point out of range)")
        return cs.normalize([(value, value)])

    def named_escape(self) -> Ranges:
        end = self.text.find("}", self.i)
        if self.peek() != "{" or end < 0:
            raise self.error("missing {, \\N needs a character name")
        name = self.text[self.i + 1 : end]
        try:
            char = unicodedata.lookup(name)
        except KeyError:
            raise self.error(f"undefined character name {name!r}") from None
        self.i = end + 1
        return cs.chars(char)

    def octal_or_backref(self, first: str, in_class: bool) -> Ranges:
        digits = first
        while len(digits) < 3 and self.peek() in tuple("01234567") and self.peek():
            digits += self.peek()
            self.i += 1
        octal = all(d in "01234567" for d in digits)
        if first == "0" or (octal and (len(digits) == 3 or in_class)):
            value = int(digits, 8)
            if value > 0o377:
                raise self.error("octal escape value outside of range 0-0o377")
            return cs.normalize([(value, value)])
        raise self.error("", feature="backreference")


def _extension_name(c: str, c2: str) -> str:
    if c in "=!":
        return "lookahead other than at the start of the pattern"
    if c == "<":
        return "lookbehind"
    if c == "P" and c2 == "=":
        return "backreference"
    if c == ">":
        return "atomic group"
    if c == "(":
        return "conditional group"
    if c.isalpha() or c == "-":
        return "inline flags"
    return f"group extension (?{c}"
