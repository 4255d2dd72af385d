"""`format: regex` as a few small rules instead of one DFA of ~1,500 states.

The flat grammar (`json_formats.FORMATS["regex"]`) nests groups `REGEX_DEPTH` deep; as one
DFA every nesting level repeats the states of character classes and counted quantifiers
(`{n,m}` with n <= m), and building it took ~1.4 s of a schema's first mask (SchemaStore's
accelerator). Here the class, the counted quantifier and each level's group are rules of
their own, called where they start (`[`, `{`, `(`): the string's own rule stays small, and
the others are built only when generation reaches them. The language is the flat one
(levels are distinct rules, so nesting stays `REGEX_DEPTH` deep; a test compares the
inlined rules with the flat DFA).

Calls may not occur under products: the compiler uses this form only outside them, for a
string whose only constraint is this format.
"""

from __future__ import annotations

from collections.abc import Callable

from kor_cli.grammar.ast import EMPTY, Node, alt, opt, repeat, seq
from kor_cli.grammar.json_formats import REGEX_BRACES, REGEX_CHAR, REGEX_CLASS, REGEX_DEPTH
from kor_cli.grammar.json_keywords import Facts
from kor_cli.grammar.limits import current
from kor_cli.grammar.regex import Dialect, fullmatch
from kor_cli.grammar.shared_rules import shared_node

Rule = Callable[[str, Callable[[], Node]], Node]  # (name, build) -> a call to that rule


def regex_format(rule: Rule, dialect: Dialect, depth: int = REGEX_DEPTH) -> Node:
    """The contents of a string holding a regex (as `FORMATS["regex"]`), with calls made
    by `rule` (e.g. `RuleBook.fixed`)."""

    def piece(text: str, site: int = 0) -> Node:
        """`text` parsed once per process: one node per `site` (a level), so a tree shares
        nodes exactly where it did when each call parsed anew."""
        key = ("format:regex", text, site, dialect, current().max_repeat)
        return shared_node("format:regex", key, lambda: fullmatch(text, dialect))

    char_class = rule("format:regex/class", lambda: piece(REGEX_CLASS))
    braces = rule("format:regex/braces", lambda: piece(REGEX_BRACES))
    quantifier = opt(seq(alt(piece("[*+?]"), braces), opt(piece(r"\?"))))
    alternatives: Node = EMPTY  # unused at level 0
    for level in range(depth + 1):
        atoms = [piece(REGEX_CHAR, level), char_class]
        if level:
            atoms.append(rule(f"format:regex/group{level}", _group(piece, alternatives, level)))
        sequence = repeat(alt(piece(r"[\^$]", level), seq(alt(*atoms), quantifier)), 0, None)
        alternatives = seq(sequence, repeat(seq(piece(r"\|", level), sequence), 0, None))
    return alternatives


def only_regex_format(facts: Facts) -> bool:
    """Whether a string's only constraint is `format: regex`."""
    plain = not (facts.patterns or facts.min_length or facts.max_length is not None)
    return plain and bool(facts.formats) and {n for n, _ in facts.formats} == {"regex"}


def _group(piece: Callable[[str, int], Node], inner: Node, level: int) -> Callable[[], Node]:
    """The body of a group rule: `(`, maybe `?:`, `inner`, `)`."""
    return lambda: seq(piece(r"\((?:\?:)?", level), inner, piece(r"\)", level))
