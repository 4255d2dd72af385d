"""Leading lookaheads in regexes: the same match result as Python's `re` (hypothesis over
random patterns and strings), sound approximations for JSON Schema's `pattern`, and the
forms SchemaStore uses."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_values import json_char
from kor_cli.grammar.regex import UTF8, Dialect, fullmatch, search

ALPHABET = "ab.-é \t"
ATOMS = ["a", "b", ".", "[ab]", "[^a]", r"\.", r"\s", r"\w", "é", "(?:a|b.)", "-"]
QUANTS = ["", "", "*", "+", "?", "{1,2}"]


@st.composite
def pieces(draw: st.DrawFn, most: int = 3) -> str:
    n = draw(st.integers(0, most))
    return "".join(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANTS)) for _ in range(n))


@st.composite
def lookaheads(draw: st.DrawFn, anchored: bool) -> str:
    bodies = []
    for _ in range(draw(st.integers(1, 2))):
        start = "^" if anchored and draw(st.booleans()) else ""
        bodies.append(start + draw(pieces()) + ("$" if draw(st.booleans()) else ""))
    return "(?" + draw(st.sampled_from("=!")) + "|".join(bodies) + ")"


@st.composite
def patterns(draw: st.DrawFn) -> str:
    branches = []
    for _ in range(draw(st.integers(1, 2))):
        anchored = draw(st.booleans())
        looks = "".join(draw(lookaheads(anchored)) for _ in range(draw(st.integers(0, 2))))
        end = "$" if draw(st.booleans()) else ""
        branches.append(("^" if anchored else "") + looks + draw(pieces()) + end)
    return "|".join(branches)


def dfa(node: object) -> ByteDFA:
    return compile_ast(node)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(patterns(), st.lists(st.text(ALPHABET, max_size=6), min_size=8, max_size=8))
def test_the_same_match_result_as_re(pattern: str, texts: list[str]) -> None:
    try:
        found, whole = dfa(search(pattern, UTF8)), dfa(fullmatch(pattern, UTF8))
    except GrammarError as error:
        # an unanchored search under negative lookaheads may pass the state budget, e.g.
        # (?!a|(?:a|b.)*a$)(?![^a](?:a|b.)[^a]+$|\w*a$)a*.+a: a refusal, not a wrong answer
        assert str(error).startswith("grammar too large"), error
        reject()
    compiled = re.compile(pattern)
    for text in texts:
        data = text.encode()
        assert found.accepts(data) == (compiled.search(text) is not None), text
        assert whole.accepts(data) == (compiled.fullmatch(text) is not None), text


STRICT, LOOSE = Dialect(json_char, "strict"), Dialect(json_char, "loose")


@settings(max_examples=80, deadline=None)
@given(patterns(), st.lists(st.text(ALPHABET + "\r\u00a0\u2028", max_size=6), min_size=6))
def test_pattern_approximations_are_sound(pattern: str, texts: list[str]) -> None:
    """Strict (what the grammar generates) matches only where Python matches (and ECMA-262,
    on these ASCII and space differences); loose (what `not` subtracts) wherever it does."""
    strict, loose = dfa(search(pattern, STRICT)), dfa(search(pattern, LOOSE))
    compiled = re.compile(pattern)
    for text in texts:
        body = json.dumps(text, ensure_ascii=False)[1:-1].encode()
        matched = compiled.search(text) is not None
        assert not strict.accepts(body) or matched, text
        assert loose.accepts(body) or not matched, text


SCHEMASTORE = {  # a pattern of the corpus: (matching, not matching)
    r"^(?!.*(\{ConfigName\}|[<>*?:/\\])).*\.[bB][lL][fF]$": (["x.blf", "a b.BLF"], ["a/b.blf"]),
    r"^(?![ \t\n]*\(default(.*)\))[\s\S]*": (["(x)", "default"], [" (default(1))"]),
    r"^(?!bundle::)(?!with$).*": (["withx", "bundle:"], ["with", "bundle::a"]),
    r"^(?=[A-Z])[a-zA-Z0-9.,;()\s]*[^.,;!?: \W]$": (["Ab", "A (x) b1"], ["ab", "A."]),
    r"^(?!tag|category)$": ([""], ["tag", "x"]),
    r"^(?!\.{1,2}$)(?!.*\/)[a-zA-Z0-9\-\._]+$": (["...", "a.b"], ["..", "a/b"]),
    r"^(?!^lucene\.|builtin\.|mongodb\.).*": (["lucene", "x.builtin."], ["builtin.x"]),
}


@pytest.mark.parametrize("pattern", SCHEMASTORE)
def test_schemastore_patterns(pattern: str) -> None:
    yes, no = SCHEMASTORE[pattern]
    grammar = compile_json_schema({"type": "string", "pattern": pattern})
    closed = {"patternProperties": {pattern: {"const": 1}}, "additionalProperties": False}
    keys = compile_json_schema({"type": "object", **closed})
    for text in yes + no:
        valid = text in yes
        assert (re.search(pattern, text) is not None) == valid, text
        assert grammar.accepts(json.dumps(text).encode()) == valid, text
        member = json.dumps({text: 1}, separators=(",", ":")).encode()
        assert keys.accepts(member) == valid, text
    negated = compile_json_schema({"type": "string", "not": {"pattern": pattern}})
    assert all(negated.accepts(json.dumps(t).encode()) != (t in yes) for t in yes + no)


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [("a(?=b)", "lookahead other than at the start"), ("(?=(?!a))", "lookahead"),
     ("(?!^a)", "anchor ^ inside a group"), ("(?<=a)b", "lookbehind"),
     (r"^(?!.*\bnative\b)", r"word boundary \b")],
)  # fmt: skip
def test_other_lookarounds_are_named_refusals(pattern: str, feature: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(feature)):
        compile_json_schema({"type": "string", "pattern": pattern})


def test_a_search_past_the_state_budget_is_refused_by_name() -> None:
    pattern = r"(?!a|(?:a|b.)*a$)(?![^a](?:a|b.)[^a]+$|\w*a$)a*.+a"
    whole = dfa(fullmatch(pattern, UTF8))
    assert whole.accepts(b".a") and not whole.accepts(b"aba")
    with pytest.raises(GrammarError, match="grammar too large"):
        dfa(search(pattern, UTF8))
