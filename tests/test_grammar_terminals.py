"""Large string member values of a large object as rules of their own (`json_terminals`):
the same language as inline (pool of valid and invalid texts, walked by the pushdown
matcher and token by token through the real Qwen mask), and small objects untouched."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
from grammar_helpers import token_walk

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_objects, json_terminals
from kor_cli.grammar.ast import Automaton, alt, intersect, literal, repeat, seq
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.json_schema import SchemaCompiler
from kor_cli.grammar.surface import compile_grammar

LONG = {"type": "string", "maxLength": 120}
STAMP = {"type": "string", "format": "date-time"}
BIG = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "note": LONG, "text": LONG, "at": STAMP,
                   "until": STAMP, "by": {"type": "string", "pattern": "^[a-z]{2,40}$"}},
    "required": ["id", "at"],
}  # fmt: skip
TEXTS = [
    {"id": 1, "at": "2024-01-02T03:04:05Z"},
    {"id": 1, "note": "x" * 120, "at": "2024-01-02T03:04:05+01:00", "by": "ab"},
    {"id": 2, "note": "x" * 121, "at": "2024-01-02T03:04:05Z"},  # too long
    {"id": 3, "at": "2024-13-02T03:04:05Z"},  # no month 13
    {"id": 4, "at": "2024-01-02T03:04:05Z", "until": "soon"},
    {"id": 5, "text": 'a"b', "at": "2024-01-02T03:04:05Z", "by": "A"},
    {"id": 6},
    {"id": 7, "text": 'a"b\\c', "at": "2024-01-02T03:04:05Z", "by": "zz"},
]


def _texts() -> list[bytes]:
    return [json.dumps(t, separators=(",", ":")).encode() for t in TEXTS]


def test_a_large_object_calls_its_long_strings() -> None:
    compiler = SchemaCompiler(BIG)
    compiler.compile()
    assert compiler.rules.has_calls
    email = {"type": "string", "format": "email"}
    person = {"name": {"type": "string", "maxLength": 40}, "email": email}
    small = SchemaCompiler({"type": "object", "properties": person})
    small.compile()
    assert not small.rules.has_calls  # one rule, the very DFA it had (engines.py's person)


def _accepted(schema: Any) -> list[bool]:
    grammar = compile_json_schema(schema, GrammarOptions())
    return [grammar.accepts(text) for text in _texts()]


def test_calls_accept_what_inline_strings_did() -> None:
    split = _accepted(BIG)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_objects.terminals, "split", lambda rules, members: members)
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        inline = _accepted(BIG)
    assert split == inline == [True, True, False, False, False, False, False, True]


@pytest.mark.parametrize("by_byte", [False, True])
def test_real_token_masks_walk_the_called_strings(
    tokenizer_info_factory: Any, qwen_tokenizer: Any, by_byte: bool
) -> None:
    """Every token of a valid text is allowed and then a stop token; an invalid text is
    stopped somewhere (Qwen's own tokens, which cross the string/member boundaries, and
    one token a byte)."""
    info = tokenizer_info_factory("qwen")
    compiled = compile_grammar(compile_json_schema(BIG, GrammarOptions()), info, cache_dir="")
    single = {b: i for i, b in enumerate(info.token_bytes) if b is not None and len(b) == 1}
    for text, valid in zip(_texts(), _accepted(BIG), strict=True):
        if by_byte:
            tokens = [single[bytes([b])] for b in text]
        else:
            tokens = qwen_tokenizer.encode(text.decode(), add_special_tokens=False)
        assert token_walk(compiled, info, tokens) == valid, text


def test_only_strings_that_surely_generate_are_split() -> None:
    text = seq(literal('"'), repeat(literal("a"), 0, 60), literal('"'))
    assert json_terminals._string(text) and json_terminals.surely_nonempty(text)
    assert json_terminals._states(text, 1000) >= json_terminals.VALUE_STATES
    product = intersect(text, seq(literal('"'), literal("b"), literal('"')))
    assert json_terminals._string(product) and not json_terminals.surely_nonempty(product)
    assert not json_terminals._string(alt(text, literal("1")))
    empty = Automaton(compile_module.compile_ast(product, 100))
    assert not json_terminals.surely_nonempty(empty)
