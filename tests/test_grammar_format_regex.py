"""`format: regex`: every pattern the grammar accepts compiles in Python's `re` (and in
ECMA-262, by construction: see json_formats); common patterns are accepted, broken ones are
not, and validation agrees."""

from __future__ import annotations

import json
import random
import re
import warnings
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_json_schema import random_text

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Automaton, difference
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_formats import FORMATS
from kor_cli.grammar.json_schema import STRICT
from kor_cli.grammar.json_values import quoted
from kor_cli.grammar.regex import fullmatch, parse
from kor_cli.schema.formats import is_valid_format

SCHEMA = {"type": "string", "format": "regex"}
COMMON = [
    "^[a-z0-9-]+$",
    r"\d+",
    "(foo|bar)*",
    r"^v[0-9]+(\.[0-9]+)*$",
    "",
    "a",
    r"^\S+@\S+$",
    "^[A-Za-z_][A-Za-z0-9_]*$",
    r"^(?:[0-9]{1,3}\.){3}[0-9]{1,3}$",
    "^[^/]+/[^/]+$",
    r"\.json$",
    "^(true|false)$",
    "a*?b+?c??",
    "x{2}y{3,}z{0,255}",
    r'say "hi"\\',
    "[-_.a-f]",
    r"^\$\{[A-Z_]+\}$",
    "é+ü|日本",
]
INVALID = [
    "(",
    ")",
    "[z-a]",
    "a{3,2}",
    "*a",
    "a**",
    "[",
    "a{",
    "]",
    "}",
    r"\1",
    "a|*",
    "^*",
    "(?=a)",
    "(?P<n>a)",
    r"\-",
    "[^]",
    "a{,3}",
    "a*??",
    "((((a))))",
    r"\u0041",
    r"\b",
]


@cache
def dfa() -> ByteDFA:
    return compile_json_schema(SCHEMA).dfa


def accepts(pattern: str) -> bool:
    return dfa().accepts(json.dumps(pattern, ensure_ascii=False).encode())


def compiles_in_python(pattern: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # FutureWarning on nested sets etc. counts as failure
        try:
            re.compile(pattern)
        except (re.error, Warning, OverflowError):
            return False
    return True


@given(st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_accepted_pattern_compiles(rng: random.Random) -> None:
    text = random_text(dfa(), rng, budget=60).decode("utf-8")
    pattern = json.loads(text)
    assert compiles_in_python(pattern), pattern
    assert is_valid_format("regex", pattern)
    try:  # kor's own (Python-syntax subset) parser: parses it or names what it refuses
        parse(pattern)
    except GrammarError as error:
        assert "not supported" in error.message or "limit" in error.message.lower(), error


@given(st.text(alphabet="ab^$.|?*+()[]{}\\-,:0123_d", max_size=12))
@settings(max_examples=400, deadline=None)
def test_accepted_random_texts_compile(pattern: str) -> None:
    if accepts(pattern):
        assert compiles_in_python(pattern), pattern


@pytest.mark.parametrize("pattern", COMMON)
def test_common_patterns_are_accepted(pattern: str) -> None:
    assert compiles_in_python(pattern)
    assert accepts(pattern)


@pytest.mark.parametrize("pattern", INVALID)
def test_invalid_and_unsupported_patterns_are_rejected(pattern: str) -> None:
    assert not accepts(pattern)


@pytest.mark.parametrize("pattern", ["(", "[z-a]", "a{3,2}", "*a", "a**"])
def test_validation_rejects_what_python_cannot_compile(pattern: str) -> None:
    assert not is_valid_format("regex", pattern)
    assert is_valid_format("regex", "(?P<n>a)")  # valid Python: validation is wider


def test_rules_form_is_the_flat_language() -> None:
    """The string's rules (class, counted quantifier, groups: `json_format_rules`) inlined
    give exactly the flat `FORMATS["regex"]` DFA, nesting bound included."""
    grammar = compile_json_schema(SCHEMA)
    assert grammar.has_calls  # the small-rules form, not one DFA
    flat = compile_ast(quoted(fullmatch(FORMATS["regex"], STRICT)), 400_000)
    view = Automaton(grammar.dfa)
    for a, b in ((view, Automaton(flat)), (Automaton(flat), view)):
        assert compile_ast(difference(a, b), 400_000).is_empty()


@pytest.mark.parametrize("pattern", COMMON + INVALID + ["(((a)))", "((((a))))", "[a-c]{2,3}?"])
def test_pushdown_walk_agrees_with_the_flat_dfa(pattern: str) -> None:
    text = json.dumps(pattern, ensure_ascii=False).encode()
    flat = compile_json_schema({"type": "string", "format": "regex", "minLength": 0}).dfa
    assert compile_json_schema(SCHEMA).accepts(text) == flat.accepts(text)


def test_format_under_a_product_or_with_other_constraints_stays_one_dfa() -> None:
    for schema in (
        {"type": "string", "format": "regex", "maxLength": 6},
        {"not": {"type": "string", "format": "regex"}},
        {"oneOf": [{"type": "string", "format": "regex"}, {"type": "string", "maxLength": 2}]},
    ):
        grammar = compile_json_schema(schema)
        assert not grammar.has_calls, schema
    grammar = compile_json_schema({"type": "string", "format": "regex", "maxLength": 5})
    assert grammar.accepts(b'"(a|b)"') and not grammar.accepts(b'"(a|bc)"')
