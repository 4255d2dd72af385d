"""Pushdown matcher on the real tokenizers: masks equal the reference simulation's, a
call-free grammar gives TokenIndex's masks, split SchemaStore schemas give their DFA's masks;
rule masks come back from the disk cache; escape groups are kept per tokenizer (a string
value's) or shared by frames with equal rows (a frame's own)."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from pushdown_toys import GRAMMARS, TOY, TREE, check_along, rules_of, sample_texts

from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.frame_chain import shared_groups
from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.index_cache import save_cached_indexes
from kor_cli.grammar.matcher import GrammarMatcher as DfaMatcher
from kor_cli.grammar.pushdown import PushdownGrammar, PushdownMatcher, _by_second, pushdown_grammar
from kor_cli.grammar.trie import TokenTrie
from kor_cli.testing import TOKENIZER_NAMES, load_offline_tokenizer

SCHEMAS = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("grammar", ["tree", "rpc", "nullable"])
def test_real_masks_equal_the_reference(name: str, grammar: str, tokenizer_info_factory) -> None:
    info = tokenizer_info_factory(name)
    rules = rules_of(GRAMMARS[grammar])
    check_along(rules, info, sample_texts(rules, 2, seed=7, max_len=40), every=5)


@pytest.mark.slow
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_real_one_rule_schemas_give_the_token_index_masks(
    name: str, tokenizer_info_factory
) -> None:
    """A call-free grammar (a whole schema as one DFA) keeps exactly today's masks."""
    info = tokenizer_info_factory(name)
    for key in ("person", "reviews", "nested", "ui"):
        dfa = compile_json_schema(SCHEMAS[key]["schema"]).dfa
        grammar, index = pushdown_grammar(dfa, info), TokenIndex(dfa, info)
        for state in index.reachable_states()[:40]:
            frame = frozenset((grammar.stacks.push(0, grammar.rules.start, state),))
            assert np.array_equal(grammar.mask(frame), index.packed(state)), (key, state)


STORE = Path(__file__).resolve().parents[2] / "shared" / "testdata" / "schemastore"
SPLIT = ["aurora-2.0", "bitrise-step", "gematik-test-hcps", "rancher-fleet-0.8", "vespertide-model"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SPLIT)
def test_split_schemastore_schemas_give_the_masks_of_their_dfa(name: str, tokenizer_info_factory):
    """Large values split off into rules (no recursion): the pushdown masks along valid
    instances equal TokenIndex's over the inlined DFA (the same language)."""
    if not STORE.exists():
        pytest.skip("the SchemaStore test data is not here")
    schema = json.loads((STORE / "schemas" / f"{name}.json").read_text())
    grammar = compile_json_schema(schema, GrammarOptions(ref_dir=str(STORE / "schemas")))
    assert grammar.has_calls
    info = tokenizer_info_factory("qwen")
    tokenizer = load_offline_tokenizer("qwen")
    pushdown, index = PushdownGrammar(grammar.rules, info), TokenIndex(grammar.dfa, info)
    checked = 0
    for path in sorted((STORE / "valid" / name).glob("*.json"))[:2]:
        text = json.dumps(json.loads(path.read_text()), ensure_ascii=False, separators=(",", ":"))
        ours, theirs = PushdownMatcher(pushdown), DfaMatcher(index)
        for token in tokenizer.encode(text, add_special_tokens=False)[:300]:
            assert np.array_equal(ours.packed_mask(), theirs.packed_mask()), (path.name, checked)
            checked += 1
            if not theirs.accept_token(token):
                assert not ours.accept_token(token)
                break
            assert ours.accept_token(token)
    assert checked > 20


def test_rule_masks_come_back_from_the_disk_cache(tmp_path: Path) -> None:
    # the rules' token indexes (what dense states use) come back; structural states are
    # walked (frame_walk) and never read an index: turned off here
    off = mock.patch("kor_cli.grammar.frame_masks.walk_state", return_value=None)
    off.start()
    try:
        _rule_masks_come_back(tmp_path)
    finally:
        off.stop()


def _rule_masks_come_back(tmp_path: Path) -> None:
    rules = rules_of(TREE)
    texts = sample_texts(rules, 3, seed=5)

    def masks_along(grammar: PushdownGrammar) -> list[np.ndarray]:
        out = []
        for text in texts:
            matcher = PushdownMatcher(grammar)
            for at in range(len(text)):
                out.append(matcher.packed_mask().copy())
                assert matcher.accept_bytes(text[at : at + 1])
        return out

    grammar = PushdownGrammar(rules, TOY, tmp_path)
    first = masks_along(grammar)
    save_cached_indexes()  # what happens at exit
    assert list(tmp_path.glob("index-*"))
    with mock.patch.object(TokenTrie, "walk", side_effect=AssertionError("not from the cache")):
        second = masks_along(PushdownGrammar(rules_of(TREE), TOY, tmp_path))
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_a_string_values_escape_groups_are_kept_per_tokenizer(
    name: str, tokenizer_info_factory
) -> None:
    # a frame whose escapes are a string value's (`frame_chain.shared_groups`): its groups by
    # second byte equal `_by_second`'s, and a second grammar's such frame reads the first's
    info = tokenizer_info_factory(name)
    value = {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/v"}}, {"type": "string"}]}
    schema = {"type": "array", "items": {"$ref": "#/$defs/v"}, "$defs": {"v": value}}
    found = []
    for _ in range(2):
        grammar = PushdownGrammar(compile_json_schema(schema, GrammarOptions()).rules, info)
        matcher = PushdownMatcher(grammar)
        for token in (b'["', b"x"):
            matcher.packed_mask()
            assert matcher.accept_bytes(token)
        stack = next(iter(matcher.config))
        rule_id, state, _ = grammar.stacks.frame(stack)
        frame = grammar.frames.get(rule_id, state)
        bits = frame.escape_bytes
        assert bits
        for byte in (b for b in range(256) if bits >> b & 1):
            assert grammar._grouped(frame, byte) == _by_second(frame, byte)
        found.append(grammar._grouped(frame, bits.bit_length() - 1))
    assert found[0] is found[1]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_a_frames_own_escape_groups_are_shared_by_equal_rows(
    name: str, tokenizer_info_factory
) -> None:
    # frames whose escape rows are their own (after a value nested in arrays: Qwen's `]]`,
    # `],` ...): their groups by second byte equal `_by_second`'s, and a frame with the same
    # rows in other arrays reads the same object
    info = tokenizer_info_factory(name)
    value = {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/v"}}, {"type": "integer"}]}
    schema = {"type": "array", "items": {"$ref": "#/$defs/v"}, "$defs": {"v": value}}
    grammar = PushdownGrammar(compile_json_schema(schema, GrammarOptions()).rules, info)
    met = 0
    for text in (b"[[0", b"[[1", b"[[[3", b"[0,[1"):
        matcher = PushdownMatcher(grammar)
        assert matcher.accept_bytes(text)
        matcher.packed_mask()
        for stack in matcher.config:
            frame = grammar.frames.get(*grammar.stacks.frame(stack)[:2])
            bits = frame.escape_bytes if shared_groups(frame) is None else 0
            for byte in (b for b in range(256) if bits >> b & 1):
                found = grammar._grouped(frame, byte)
                assert found == _by_second(frame, byte)
                same = FrameMask(
                    frame.stays, frame.ends, frame.tokens.copy(), frame.offsets.copy(),
                    frame.firsts.copy(), frame.token_bytes, frame.escape_bytes,
                )  # fmt: skip
                assert grammar._grouped(same, byte) is found
                met += 1
    assert met or name != "qwen"
