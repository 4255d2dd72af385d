"""The "any value" (`{}`, `true`, free items and members) is one recursive rule: any depth,
exact (canonical JSON text and nothing else), masks equal to a brute-force reference; under
products and with `bounded_any` it is the former bounded DFA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pushdown_toys import TOY, check_along

from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_containers import ANY_RULE
from kor_cli.grammar.surface import GrammarMatcher, allocate_token_bitmask, compile_grammar

FREE = [
    {},
    True,
    {"type": "object"},
    {"type": "array"},
    {"type": "array", "items": {}},
    {"type": "object", "additionalProperties": True},
    {"type": "object", "properties": {"m": {}}, "additionalProperties": False},
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """`leaf` under `depth` containers, arrays and objects in turn."""
    value = leaf
    for level in range(depth):
        value = [value, level] if level % 2 else {"k": value, "n": None}
    return value


def wrap(schema: Any, value: Any) -> Any:
    """`value` where `schema` (one of FREE) takes an unconstrained value."""
    if schema == {"type": "object", "properties": {"m": {}}, "additionalProperties": False}:
        return {"m": value}
    if isinstance(schema, dict) and schema.get("type") == "array":
        return [value, 2]
    if isinstance(schema, dict) and schema.get("type") == "object":
        return {"x": value}
    return value


@pytest.mark.parametrize("schema", FREE, ids=json.dumps)
def test_free_values_nest_without_bound(schema: Any) -> None:
    grammar = compile_json_schema(schema)
    assert grammar.has_calls and ANY_RULE in grammar.rules.names.values()
    for depth in (0, 3, 4, 50):
        assert grammar.accepts(serialize(wrap(schema, nested(depth))).encode()), depth
    assert not grammar.accepts(serialize(wrap(schema, nested(50))).encode()[:-1])
    # the bounded form (one DFA, the former engine) stops at max_any_depth
    bounded = compile_json_schema(schema, GrammarOptions(bounded_any=True))
    assert not bounded.has_calls
    assert bounded.accepts(serialize(wrap(schema, nested(2))).encode())
    assert not bounded.accepts(serialize(wrap(schema, nested(4))).encode())


def test_one_shared_rule_per_grammar_and_one_per_named_location() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {"type": "array"}, "c": {"type": "object"}, "d": True},
    }
    names = list(compile_json_schema(schema).rules.names.values())
    assert names.count(ANY_RULE) == 1
    # an anyOf branch names `x` at the location of `o`: free objects put `x` first there
    inner = {"properties": {"x": {"type": "integer"}}}
    named = {"anyOf": [{"properties": {"o": inner}}, {}]}
    grammar = compile_json_schema(named)
    assert list(grammar.rules.names.values()).count(ANY_RULE) == 2
    assert grammar.accepts(serialize({"o": {"x": nested(30), "y": nested(30)}}).encode())
    assert grammar.accepts(b'{"o":{"x":2,"y":1}}')
    assert not grammar.accepts(b'{"o":{"y":1,"x":2}}')  # not the canonical member order


def test_products_keep_the_bounded_value() -> None:
    """Under `not` (a DFA difference) "any value" nests at most max_any_depth deep."""
    schema = {"not": {"const": 1}}
    grammar = compile_json_schema(schema)
    assert grammar.accepts(serialize(nested(3)).encode())
    assert not grammar.accepts(serialize(nested(4)).encode())
    deeper = compile_json_schema(schema, GrammarOptions(max_any_depth=5))
    assert deeper.accepts(serialize(nested(5)).encode()) and not deeper.accepts(b"1")


def canonical(text: bytes) -> bool:
    """Independent oracle of the language of `{}`: `text` is a JSON text written the
    canonical way (`serialize`: separators, string escapes; duplicate member names allowed,
    as the grammar does), each number in a spelling `{"type": "number"}` accepts alone."""
    try:
        pairs = json.loads(
            text.decode(),
            object_pairs_hook=_Pairs,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_refuse,
        )
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return _write(pairs) == text.decode()


class _Pairs(list):  # type: ignore[type-arg]
    """An object's members in order (duplicates kept)."""


class _Number(str):
    """A number's text as written."""


def _refuse(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _write(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(serialize(k) + ":" + _write(v) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write(v) for v in value) + "]"
    if isinstance(value, _Number):
        number = compile_json_schema({"type": "number"})
        return str(value) if number.accepts(value.encode()) else "(a spelling it refuses)"
    return serialize(value)


@settings(max_examples=150, deadline=None)
@given(VALUES)
def test_random_values_are_accepted(value: Any) -> None:
    text = serialize(value).encode()
    assert canonical(text)
    assert compile_json_schema({}).accepts(text)
    assert compile_json_schema({"type": "array"}).accepts(b"[" + text + b"]")


@settings(max_examples=300, deadline=None)
@given(VALUES, st.integers(0, 200), st.sampled_from(list(b'[]{},:"\\1.-e0 ')), st.integers(0, 2))
def test_edited_texts_are_accepted_exactly_when_canonical(
    value: Any, at: int, byte: int, edit: int
) -> None:
    text = bytearray(serialize(value).encode())
    at %= len(text) + 1
    if edit == 0:
        text[at:at] = bytes([byte])
    elif edit == 1:
        del text[at : at + 1]
    else:
        text[at : at + 1] = bytes([byte])
    assert compile_json_schema({}).accepts(bytes(text)) == canonical(bytes(text))


@pytest.mark.parametrize("schema", [{}, FREE[-1]], ids=json.dumps)
def test_masks_equal_the_reference(schema: Any) -> None:
    rules = compile_json_schema(schema).rules
    texts = [serialize(wrap(schema, nested(d, "a"))).encode() for d in (0, 2, 7)]
    check_along(rules, TOY, [*texts, serialize(wrap(schema, [[], {}, {"a": [1, "b"]}])).encode()])


@pytest.mark.parametrize("schema", [{}, FREE[-1]], ids=json.dumps)
def test_the_qwen_mask_allows_a_value_50_deep(
    schema: Any, tokenizer_info_factory, qwen_tokenizer, tmp_path: Path
) -> None:
    info = tokenizer_info_factory("qwen")
    compiled = compile_grammar(compile_json_schema(schema), info, cache_dir=tmp_path)
    matcher = GrammarMatcher(compiled)
    text = serialize(wrap(schema, nested(50, "deep")))
    ids = qwen_tokenizer(text, add_special_tokens=False).input_ids
    assert b"".join(info.token_bytes[i] for i in ids) == text.encode()
    bitmask = allocate_token_bitmask(1, info.vocab_size)
    for token in ids:
        matcher.fill_next_token_bitmask(bitmask)
        assert np.asarray(bitmask)[0, token >> 5] >> (token & 31) & 1, token
        assert matcher.accept_token(token)
    assert matcher.is_accepting and matcher.accept_token(info.stop_ids[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen", "mistral-sp"])
def test_real_masks_equal_the_reference(name: str, tokenizer_info_factory) -> None:
    rules = compile_json_schema({}).rules
    texts = [serialize(nested(6, "ab")), serialize([{"k": [], "a": {}}, "x y", -1.5])]
    check_along(rules, tokenizer_info_factory(name), [t.encode() for t in texts], every=4)
