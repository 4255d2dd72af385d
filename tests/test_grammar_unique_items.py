"""`uniqueItems` over items with many values, enforced at run time on the pushdown matcher
(`kor_cli.grammar.unique_check`): no accepted output holds two equal items, every valid
array is accepted, masks are exact (the small-finite DFA path is an independent oracle;
the candidate filter is checked against walking every token), no dead ends, rollback."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import json_containers
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.pushdown import MAX_STACKS, PushdownGrammar, PushdownMatcher
from kor_cli.grammar.unique_matcher import UniqueMatcher
from kor_cli.grammar.vocab import TokenizerInfo

SCHEMAS: dict[str, dict[str, Any]] = {
    "strings": {"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": True},
    "numbers": {"type": "array", "items": {"type": "number"}, "uniqueItems": True},
    "enum10": {
        "type": "array", "items": {"enum": list("abcdefghij")}, "uniqueItems": True,
        "minItems": 2,
    },
    "bounded": {
        "type": "array", "items": {"type": "number", "minimum": 0, "maximum": 2},
        "uniqueItems": True, "maxItems": 4,
    },
    "mixed": {"type": "array", "items": {"type": ["boolean", "integer"]}, "uniqueItems": True},
    "objects": {
        "type": "array", "uniqueItems": True,
        "items": {"type": "object", "properties": {"a": {"type": "integer"},
                                                     "b": {"type": "boolean"}}},
    },
    "nested": {
        "type": "object", "properties": {"tags": {
            "type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 1}},
        "required": ["tags"],
    },
}  # fmt: skip
ITEMS: dict[str, st.SearchStrategy[Any]] = {
    "strings": st.text('ab"é', max_size=3),
    "numbers": st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1.0, -2.0, 1e20])),
    "enum10": st.sampled_from(list("abcdefghij")),
    "bounded": st.sampled_from([0, 1, 2, 0.5, 1.0, 1.5, 2.0, 0.25]),
    "mixed": st.one_of(st.booleans(), st.integers(-2, 2)),
    "objects": st.fixed_dictionaries({}, optional={"a": st.integers(0, 2), "b": st.booleans()}),
}
# a vocabulary with every byte and tokens that cross items: `","`, `1,1`, `"]`, ...
MULTI = [b'","', b'"]', b"1,1", b"0,0", b"[1,1]", b'["', b'"a"', b'"a","a"', b"true,", b'"},{"',
         b',"', b"a", b"ab", b'":', b"1.0", b"e0", b'{"a":1}', b'[""', b"tr", b"ue"]  # fmt: skip
TOY = TokenizerInfo([bytes([b]) for b in range(256)] + MULTI + [None], stop_ids=[256 + len(MULTI)])


def _checked(name: str) -> PushdownGrammar:
    grammar = compile_json_schema(SCHEMAS[name])
    assert grammar.has_calls and grammar.rules.checked
    return PushdownGrammar(grammar.rules, TOY)


def _number(text: str) -> tuple[str, int, str, int]:
    """A JSON number as ("n", sign, significant digits, exponent): equal for equal
    values, exact at any exponent (`Decimal` refuses exponents past ~1e18)."""
    match = re.fullmatch(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?", text)
    assert match, text
    sign, whole, fraction, exponent = match.groups(default="")
    digits = (whole + fraction).lstrip("0")
    power = int(exponent or 0) - len(fraction) + len(digits) - len(digits.rstrip("0"))
    digits = digits.rstrip("0")
    return ("n", -1 if sign and digits else 1, digits, power if digits else 0)


def _exact(value: Any) -> Any:
    """A hashable form equal for equal JSON values (numbers exact: `_number`)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, list):
        return ("a", tuple(_exact(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, _exact(v)) for k, v in value.items()))
    return ("v", value)


def _valid_and_distinct(text: bytes, schema: dict[str, Any]) -> bool:
    """The output validates (jsonschema) and no array in it holds equal items, compared
    exactly (jsonschema compares Python floats: 3e-99999 == 0.0 there)."""
    jsonschema.validate(
        json.loads(text), json.loads(json.dumps(schema).replace("uniqueItems", "x"))
    )
    exact = json.loads(text, parse_float=_number, parse_int=_number)
    arrays = [exact] if isinstance(exact, list) else list(exact.values())
    return all(len({_exact(v) for v in a}) == len(a) for a in arrays)


@pytest.mark.parametrize("name", sorted(ITEMS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_accepted_iff_valid(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    items = data.draw(st.lists(ITEMS[name], max_size=5))
    text = serialize(json.loads(json.dumps(items, sort_keys=True))).encode()  # schema order
    valid = jsonschema.Draft202012Validator(schema).is_valid(items)
    assert compile_json_schema(schema).accepts(text) == valid, text


def _allowed_by_walking(matcher: UniqueMatcher) -> np.ndarray:
    """The brute-force mask: every token walked with the uniqueness check."""
    grammar, checks = matcher.grammar, matcher.masks.checks
    out = np.zeros(grammar.vocab_size, dtype=bool)
    for token, data in enumerate(grammar.info.token_bytes):
        if data:
            out[token] = bool(checks.walk(matcher.uconfig, data))
    if matcher.is_accepting:
        out[list(grammar.info.stop_ids)] = True
    return out


def _walk(matcher: Any, rng: np.random.Generator, check: Any = None, limit: int = 400) -> bytes:
    """A random walk over the masks to a stop token (fails on a dead end)."""
    info = matcher.grammar.info
    out = bytearray()
    for step in range(limit):
        allowed = matcher.allowed_mask()
        if check is not None:
            check(matcher, allowed)
        choices = np.flatnonzero(allowed)
        assert len(choices), f"dead end after {bytes(out)!r}"
        stops = [t for t in choices if info.token_bytes[t] is None]
        if stops and (step > limit // 2 or rng.random() < 0.2):
            assert matcher.accept_token(int(stops[0]))
            return bytes(out)
        closers = [t for t in choices if info.token_bytes[t] and info.token_bytes[t][-1:] in b']"}']
        pool = closers if step > 8 and closers and rng.random() < 0.5 else choices
        token = int(rng.choice(pool))
        assert matcher.accept_token(token)
        if info.token_bytes[token] is None:
            return bytes(out)
        out += info.token_bytes[token]
    raise AssertionError(f"no end after {limit} tokens: {bytes(out)!r}")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_end_and_validate(name: str) -> None:
    grammar = _checked(name)
    rng = np.random.default_rng(7)
    for _ in range(15):
        matcher = PushdownMatcher(grammar)
        assert isinstance(matcher, UniqueMatcher)
        text = _walk(matcher, rng)
        assert _valid_and_distinct(text, SCHEMAS[name]), text


@pytest.mark.parametrize("name", ["strings", "enum10", "bounded", "mixed"])
def test_masks_equal_walking_every_token(name: str) -> None:
    grammar = _checked(name)

    def check(matcher: Any, allowed: np.ndarray) -> None:
        want = _allowed_by_walking(matcher)
        assert np.array_equal(allowed, want), np.flatnonzero(allowed != want)[:10]
        row = np.zeros((1, len(matcher.packed_mask())), dtype=np.int32)
        matcher.fill_next_token_bitmask(row)  # the used values count in a filled row too
        assert np.array_equal(row[0].view("<u4"), matcher.packed_mask())

    rng = np.random.default_rng(3)
    for _ in range(4):
        _walk(PushdownMatcher(grammar), rng, check, limit=60)


def test_masks_equal_the_small_finite_dfa(monkeypatch: pytest.MonkeyPatch) -> None:
    """An enum of 4 values: the exact distinct-sequence DFA and the run-time check allow the
    same tokens everywhere (minItems 3: the check must count unused values)."""
    schema = {"type": "array", "items": {"enum": ["x", "y", 1, 1.5]}, "uniqueItems": True,
              "minItems": 3}  # fmt: skip
    exact = compile_json_schema(schema, GrammarOptions(max_states=50_001))
    assert not exact.has_calls
    monkeypatch.setattr(json_containers, "finite_texts", lambda dfa: None)
    checked = compile_json_schema(schema, GrammarOptions(max_states=50_002))
    assert checked.rules.checked
    dfa_matcher = PushdownMatcher(PushdownGrammar(exact.rules, TOY))
    run_matcher = PushdownMatcher(PushdownGrammar(checked.rules, TOY))
    rng = np.random.default_rng(5)
    for _ in range(20):
        dfa_matcher.reset()
        run_matcher.reset()
        for _ in range(40):
            want, got = dfa_matcher.allowed_mask(), run_matcher.allowed_mask()
            assert np.array_equal(want, got), np.flatnonzero(want != got)
            token = int(rng.choice(np.flatnonzero(want)))
            assert dfa_matcher.accept_token(token) and run_matcher.accept_token(token)
            if dfa_matcher.is_finished:
                break


def test_an_ambiguous_grammar_with_checked_arrays_keeps_at_most_max_stacks() -> None:
    """As the plain matcher (`PushdownGrammar.bounded`): `anyOf` branches calling
    overlapping recursive rules double the parses per level (2^16 stacks took 7 s at
    depth 16 before the bound); past `MAX_STACKS` the oldest are kept, masks equal walking
    every token, and deep documents complete, a checked array's duplicates still refused.
    (a's no-op `minItems` keeps its items a rule apart from b's: bare `$ref`s merge.)"""
    schema = {
        "$defs": {
            "a": {"type": "array", "items": {"$ref": "#/$defs/n", "minItems": 0}},
            "b": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 5},
            "n": {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}, {"const": 1},
                            {"type": "array", "items": {"type": "string"}, "uniqueItems": True}]},
        },
        "$ref": "#/$defs/n",
    }  # fmt: skip
    compiled = compile_json_schema(schema)
    assert compiled.rules.checked
    matcher = PushdownMatcher(PushdownGrammar(compiled.rules, TOY))
    assert isinstance(matcher, UniqueMatcher)
    depth = 40
    for level in range(depth):
        assert matcher.accept_token(ord("["))
        assert len(matcher.uconfig) <= min(MAX_STACKS, 2 ** (level + 1))
        allowed = matcher.allowed_mask()
        if level % 10 == 9:
            assert np.array_equal(allowed, _allowed_by_walking(matcher))
        for token in np.flatnonzero(allowed)[::16]:  # a mask's tokens step on
            assert matcher.accept_token(int(token)), TOY.token_bytes[token]
            matcher.rollback(1)
    assert len(matcher.uconfig) == MAX_STACKS
    assert not matcher.accept_bytes(b'["x","x"')
    assert matcher.accept_bytes(b'["x","y"]' + b"]" * depth) and matcher.is_accepting
    text = b"[" * depth + b'["x","y"]' + b"]" * depth
    jsonschema.validate(json.loads(text), schema)


def test_rollback_restores_the_used_values() -> None:
    matcher = PushdownMatcher(_checked("strings"))
    assert matcher.accept_bytes(b'["a","b"')
    used = matcher.uconfig
    comma = 256 + MULTI.index(b',"')
    assert matcher.accept_token(comma) and matcher.accept_bytes(b'c"')
    assert not matcher.accept_bytes(b',"a"')
    matcher.rollback(2)
    assert matcher.uconfig == used
    assert not matcher.accept_bytes(b',"b"')
    assert matcher.accept_bytes(b',"c"]')
    matcher.rollback(1)
    assert matcher.uconfig == used and not matcher.allowed_mask()[256 + MULTI.index(b'"a","a"')]


def test_a_token_holding_two_equal_items_is_refused() -> None:
    matcher = PushdownMatcher(_checked("numbers"))
    assert not matcher.allowed_mask()[256 + MULTI.index(b"[1,1]")]
    assert matcher.accept_bytes(b"[")
    assert matcher.allowed_mask()[256 + MULTI.index(b"1,1")]  # [1,12] may follow
    assert matcher.accept_bytes(b"1.0,2")
    assert not matcher.accept_bytes(b",1]") and matcher.accept_bytes(b",3]")


def test_a_token_finishing_a_duplicate_string_is_refused() -> None:
    matcher = PushdownMatcher(_checked("strings"))
    assert matcher.accept_bytes(b"[")
    assert not matcher.allowed_mask()[256 + MULTI.index(b'"a","a"')]
    assert matcher.accept_bytes(b'"a",')
    assert not matcher.allowed_mask()[256 + MULTI.index(b'"a"')]
    assert matcher.allowed_mask()[ord('"')]
    assert matcher.accept_bytes(b'"')
    assert matcher.allowed_mask()[ord("a")]  # "ab" may follow
    assert not matcher.accept_bytes(b'a"') and matcher.accept_bytes(b'ab"')


def test_finite_items_stop_when_every_value_is_used() -> None:
    matcher = PushdownMatcher(_checked("enum10"))
    text = b"[" + b",".join(b'"%c"' % c for c in b"abcdefghij")
    assert matcher.accept_bytes(text)
    assert matcher.forced_bytes() == b"]"


def test_under_a_product_it_stays_a_named_refusal() -> None:
    items = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    with pytest.raises(GrammarError, match="uniqueItems"):
        compile_json_schema({"not": {"type": "null"}, **items, "oneOf": [items, {"minItems": 9}]})


def test_fewer_values_than_min_items_is_empty() -> None:
    schema = {"type": "array", "items": {"enum": list("abcdefg")}, "uniqueItems": True,
              "minItems": 8}  # fmt: skip
    with pytest.raises(GrammarError, match="matches no"):
        compile_json_schema(schema)


SCHEMASTORE = Path(__file__).resolve().parents[1] / "../shared/testdata/schemastore"


@pytest.mark.skipif(not SCHEMASTORE.is_dir(), reason="SchemaStore test data absent")
def test_schemastore_cheatsheets_duplicate_tags_is_rejected() -> None:
    schema = json.loads((SCHEMASTORE / "schemas/cheatsheets.json").read_text())
    grammar = compile_json_schema(schema, GrammarOptions(ref_dir=str(SCHEMASTORE / "schemas")))
    bad = json.loads((SCHEMASTORE / "invalid/cheatsheets/duplicate-tags.json").read_text())
    assert not grammar.accepts(serialize(bad).encode())
    for good in sorted((SCHEMASTORE / "valid/cheatsheets").glob("*.json")):
        assert grammar.accepts(serialize(json.loads(good.read_text())).encode()), good.name


@pytest.mark.slow
def test_qwen_masks_equal_walking_every_token(
    tokenizer_info_factory: Any,
) -> None:
    info = tokenizer_info_factory("qwen")
    grammar = PushdownGrammar(compile_json_schema(SCHEMAS["nested"]).rules, info)
    matcher = PushdownMatcher(grammar)
    assert matcher.accept_bytes(b'{"tags":["ab","c"')
    for extra in (b"", b',"a', b"b"):  # between items, in a new one, at a used prefix
        assert matcher.accept_bytes(extra)
        assert np.array_equal(matcher.allowed_mask(), _allowed_by_walking(matcher))


def test_the_disk_cache_keeps_the_check(tmp_path: Path) -> None:
    from kor_cli.grammar.rule_cache import CachedRules, save_cached_rules
    from kor_cli.grammar.surface import cached_grammar

    schema = {**SCHEMAS["nested"], "title": "disk"}
    source = ["json-schema", json.dumps(schema), "test"]
    first = cached_grammar(source, lambda: compile_json_schema(schema), cache_dir=tmp_path)
    assert first.accepts(b'{"tags":["a","b"]}')  # builds the array's rules
    save_cached_rules()
    second = cached_grammar(source, lambda: compile_json_schema(schema), cache_dir=tmp_path)
    assert isinstance(second.rules, CachedRules) and second.rules.checked
    assert not second.accepts(b'{"tags":["a","a"]}') and second.accepts(b'{"tags":["b","a"]}')


ITEM_SCHEMAS = st.one_of(
    st.builds(lambda n: {"enum": [f"v{i}" for i in range(n)]}, st.integers(7, 12)),
    st.builds(
        lambda lo, width: {"type": "integer", "minimum": lo, "maximum": lo + width},
        st.integers(-12, 5), st.integers(6, 14),
    ),
    st.builds(
        lambda lo, width: {"type": "number", "minimum": lo, "maximum": lo + width},
        st.integers(-3, 3), st.integers(0, 2),
    ),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(1, 3)),
    st.just({"type": ["boolean", "null", "integer"], "maximum": 9, "minimum": 0}),
    st.just({"type": "array", "items": {"type": "boolean"}, "maxItems": 3}),
)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(item=ITEM_SCHEMAS, least=st.integers(0, 7), seed=st.integers(0, 2**16))
@example(item={"type": "number", "minimum": 0, "maximum": 1}, least=2, seed=592)  # 4.5E-68...31
def test_random_item_languages_never_dead_end(item: dict[str, Any], least: int, seed: int) -> None:
    """Random walks over random item languages (finite ones past 6 values, bounded numbers
    whose texts are endless, free strings) always end, with distinct valid items."""
    schema = {"type": "array", "items": item, "uniqueItems": True, "minItems": least}
    try:
        grammar = compile_json_schema(schema)
    except GrammarError as error:  # fewer values than minItems: an empty language
        assert "matches no" in str(error) and not jsonschema.Draft202012Validator(schema).is_valid(
            []
        )
        return
    if not grammar.has_calls:  # at most 6 values: the DFA path
        return
    matcher = PushdownMatcher(PushdownGrammar(grammar.rules, TOY))
    text = _walk(matcher, np.random.default_rng(seed))
    assert _valid_and_distinct(text, schema), text
