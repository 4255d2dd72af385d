"""Witness keys for `patternProperties` key cases (`json_key_witness`): every witness key
realises its set for real (Python's `re` agrees: it matches the set's patterns and none
of the others), and unanchored patterns that overlap in too many ways are refused from
the witnesses alone, without the per-case products, with the products' message."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import json_objects
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.json_key_witness import realised_over, shortest, witnesses
from kor_cli.grammar.json_schema import LOOSE_DIALECT, STRICT
from kor_cli.grammar.json_values import quoted
from kor_cli.grammar.regex import search

POOL = ["a.b", "b.c", "^a", "c$", "ab", r"\d", "x.*y", "^(a|b)c", "b", "[a-c]{2}", "^$", "é"]


def _dfas(patterns: list[str]) -> tuple[list, list]:
    return tuple(  # type: ignore[return-value]
        [compile_ast(quoted(search(p, dialect))) for p in patterns]
        for dialect in (STRICT, LOOSE_DIALECT)
    )


@given(st.lists(st.sampled_from(POOL), min_size=1, max_size=6, unique=True))
@settings(max_examples=60, deadline=None)
def test_witness_keys_realise_their_sets(patterns: list[str]) -> None:
    strict, loose = _dfas(patterns)
    for mask, key in witnesses(strict, loose, lambda key: True):
        text = json.loads(key.decode())
        for i, pattern in enumerate(patterns):
            assert bool(re.search(pattern, text)) == bool(mask >> i & 1), (patterns, text)


def test_shortest_key_of_a_pattern() -> None:
    strict, _ = _dfas(["ab+c", "^$"])
    assert shortest(strict[0]) == b'"abc"' and shortest(strict[1]) == b'""'


def test_overlapping_unanchored_patterns_are_refused_without_products(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # drupal-recipe: nine `block.block.*`-like patterns; every set of them is realised
    def product(*args: object) -> None:
        raise AssertionError("a per-case product was built")

    monkeypatch.setattr(json_objects, "intersect", product)
    patterns = {f"w{i}.x{i}.*": {"type": "object"} for i in range(9)}
    schema = {"type": "object", "patternProperties": patterns}
    with pytest.raises(GrammarError, match="overlap in too many ways"):
        compile_json_schema(schema, GrammarOptions())


def test_few_realised_sets_still_split_by_products() -> None:
    # anchored prefixes: 2^8 sets in principle, but a key starts with one letter only
    strict, loose = _dfas([f"^{c}" for c in "abcdefgh"])
    assert not realised_over(strict, loose, lambda key: True, 64)
    patterns = {f"^{c}": {"type": "integer"} for c in "abcdefgh"}
    grammar = compile_json_schema({"type": "object", "patternProperties": patterns})
    assert grammar.accepts(b'{"a1":1,"h":2}') and not grammar.accepts(b'{"b":"x"}')
