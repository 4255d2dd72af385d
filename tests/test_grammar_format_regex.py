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
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.fsm import ByteDFA
from kor_cli.grammar.regex import parse
from kor_cli.schema.formats import is_valid_format

SCHEMA = {"type": "string", "format": "regex"}
COMMON = [
    "^[a-z0-9-]+$", r"\d+", "(foo|bar)*", r"^v[0-9]+(\.[0-9]+)*$", "", "a", r"^\S+@\S+$",
    "^[A-Za-z_][A-Za-z0-9_]*$", r"^(?:[0-9]{1,3}\.){3}[0-9]{1,3}$", "^[^/]+/[^/]+$",
    r"\.json$", "^(true|false)$", "a*?b+?c??", "x{2}y{3,}z{0,255}", r'say "hi"\\',
    "[-_.a-f]", r"^\$\{[A-Z_]+\}$", "é+ü|日本",
]
INVALID = [
    "(", ")", "[z-a]", "a{3,2}", "*a", "a**", "[", "a{", "]", "}", r"\1", "a|*", "^*",
    "(?=a)", "(?P<n>a)", r"\-", "[^]", "a{,3}", "a*??", "((((a))))", r"\u0041", r"\b",
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
