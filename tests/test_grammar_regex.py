"""Regex text → byte DFA, checked against Python's `re.fullmatch`."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_regex
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_values import json_char
from kor_cli.grammar.regex import Dialect, fullmatch, search

ALPHABET = "ab_0 \n\t-é٣ß😀"
ATOMS = [
    "a", "b", "é", "😀", ".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", r"\.", r"\n",
    "[ab]", "[^a]", "[a-c_]", r"[^\d\s]", r"[\w-]", "[é-ü]", r"\x61", r"\u00e9", "[]a]",
]  # fmt: skip
QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{1,2}", "{,2}", "{2,}", "*?", "+?"]


@st.composite
def regexes(draw: st.DrawFn, depth: int = 2) -> str:
    def piece() -> str:
        if depth and draw(st.integers(0, 4)) == 0:
            inner = draw(regexes(depth - 1))
            atom = draw(st.sampled_from(["({})", "(?:{})"])).format(inner)
        else:
            atom = draw(st.sampled_from(ATOMS))
        return atom + draw(st.sampled_from(QUANTIFIERS))

    branches = [
        "".join(piece() for _ in range(draw(st.integers(0, 3))))
        for _ in range(draw(st.integers(1, 2)))
    ]
    return "|".join(branches)


@given(regexes(), st.lists(st.text(ALPHABET, max_size=6), min_size=10, max_size=30))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_matches_python_fullmatch(pattern: str, texts: list[str]) -> None:
    try:
        dfa = compile_regex(pattern, GrammarOptions(max_states=5000)).dfa
    except GrammarError as error:  # Unicode classes under nested repeats can be huge
        assume("too large" not in str(error))
        raise
    compiled = re.compile(pattern)
    for text in texts:
        assert dfa.accepts(text.encode()) == (compiled.fullmatch(text) is not None), (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (r"^\d{3}-\d{2}$", ["123-45", "١٢٣-45"], ["12-345", "123-45\n"]),
        (r"a{,2}b{2,}", ["bb", "aabbb"], ["aaabb", "ab"]),
        (r"[^a-z\s]+", ["ABC", "É😀"], ["a", " ", ""]),
        (r"(?:ab|cd)*(?#comment)", ["", "abcd"], ["abc"]),
        (r"\x41\u00e9\\", ["Aé\\"], ["Ae\\"]),
        (r"[\b]", ["\b"], ["b"]),
        (r"\0\101", ["\0A"], ["0A"]),
        (r"x{1", ["x{1"], ["x"]),
    ],
)
def test_cases(pattern: str, yes: list[str], no: list[str]) -> None:
    dfa = compile_regex(pattern).dfa
    for text in yes:
        assert dfa.accepts(text.encode()) and re.fullmatch(pattern, text)
    for text in no:
        assert not dfa.accepts(text.encode()) and not re.fullmatch(pattern, text)


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [
        ("a(?=a)", "lookahead"),
        ("(?=a(?=b))", "lookahead"),
        ("(?!^a)", "anchor ^ inside a group"),
        ("a(?!b)", "lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("(?<!a)b", "lookbehind"),
        (r"(a)\1", "backreference"),
        ("(?P<x>a)(?P=x)", "backreference"),
        (r"\bword", r"word boundary \b"),
        (r"a\B", r"non-word boundary \B"),
        (r"\Aa", r"anchor \A"),
        ("(?i)a", "inline flags"),
        ("a*+", "possessive quantifier"),
        ("(?>a)", "atomic group"),
        ("a$b", "anchor $ before the end"),
        ("(^a)", "anchor ^ inside a group"),
        (r"\p{L}", "Unicode property escapes"),
    ],
)
def test_unsupported_features_name_themselves(pattern: str, feature: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(feature)):
        compile_regex(pattern)


@pytest.mark.parametrize("pattern", ["a**", "(a", "a)", "[a", "*a", "a{3,1}", r"\q", "[z-a]"])
def test_syntax_errors(pattern: str) -> None:
    with pytest.raises(GrammarError):
        compile_regex(pattern)
    with pytest.raises(re.error):
        re.compile(pattern)


def test_json_dialects_bracket_python_and_ecma() -> None:
    strict, loose = Dialect(json_char, "strict"), Dialect(json_char, "loose")
    digits_strict = compile_ast(fullmatch(r"\d+", strict))
    digits_loose = compile_ast(fullmatch(r"\d+", loose))
    assert digits_strict.accepts(b"12") and not digits_strict.accepts("١".encode())
    assert digits_loose.accepts("١".encode())
    newline = compile_ast(search("a$", loose))
    assert newline.accepts(b"xa\\n") and not compile_ast(search("a$", strict)).accepts(b"xa\\n")
    escaped = compile_ast(search('"', strict))  # a quote in the decoded string is \" in JSON
    assert escaped.accepts(b'x\\"y') and not escaped.accepts(b'x"y')


def test_search_is_unanchored_unless_anchored() -> None:
    strict = Dialect(json_char, "strict")
    assert compile_ast(search("b", strict)).accepts(b"abc")
    anchored = compile_ast(search("^a|c$", strict))
    assert anchored.accepts(b"ab") and anchored.accepts(b"bc") and not anchored.accepts(b"bab")
