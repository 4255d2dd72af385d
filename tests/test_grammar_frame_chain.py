"""frame_chain: the fast frames (a literal's byte, a string value's body) equal the frames
the general split builds."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_grammar_frame_returns import assert_frames_equal, schema_rules
from test_grammar_frame_walk import SCHEMAS, reachable, rules_and_tokens

from kor_cli.grammar import frame_masks
from kor_cli.grammar.ast import alt, literal, seq
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.frame_chain import closed_frame, going_rows, literal_frame, shared_groups
from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_masks import FrameMasks
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.rules import RuleSet, call
from kor_cli.grammar.stacks import Stacks
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import TOKENIZER_NAMES, recursive_schema


def _rows(frame: FrameMask) -> list[tuple[int, int, int]]:
    """A frame's escape rows (token, offset, byte there), sorted."""
    rows = zip(frame.tokens.tolist(), frame.offsets.tolist(), frame.firsts.tolist(), strict=True)
    return sorted(rows)


def literal_frames_equal(rules: RuleSet, info: TokenizerInfo, closed: bool = False) -> int:
    """For every reached (rule, state) with a fast frame (`closed`: a string value's body,
    else a literal's), assert it equals the general path's; return how many there were."""
    reached = reachable(rules)
    fast = FrameMasks(Stacks(rules), info)
    with (
        mock.patch.object(frame_masks, "literal_frame", return_value=None),
        mock.patch.object(frame_masks, "closed_frame", return_value=None),
    ):
        general = FrameMasks(Stacks(rules), info)
        taken = 0
        for rule_id in reached:
            table = fast.stacks.table(rule_id)
            for state in range(1, len(table.table)):
                if table.final[state]:
                    continue
                walker = fast._walker(rule_id, table)
                if not closed:
                    got = literal_frame(walker, table, state, info, fast.words, fast._calls)
                else:
                    got = closed_frame(walker, table, state, info) if fast._calls else None
                if got is None:
                    continue
                taken += 1
                want = general.get(rule_id, state)
                assert np.array_equal(got.stays, want.stays), (rule_id, state)
                assert got.stays.dtype == want.stays.dtype
                assert got.ends == want.ends, (rule_id, state)
                assert got.escape_bytes == want.escape_bytes, (rule_id, state)
                assert _rows(got) == _rows(want), (rule_id, state)
    return taken


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_literal_frames_equal_the_general_split(drawn) -> None:
    rules, token_bytes = drawn
    literal_frames_equal(rules, TokenizerInfo(token_bytes))


def test_duplicate_tokens_and_chains_past_the_walked_length() -> None:
    # tokens of equal bytes (both ids stay); a literal longer than a walked chain (64
    # bytes) with a token past that length, and tokens that go on past the chain's end
    # (both: the general path); "zz" is a shorter chain with a token running past it
    text = b"k" * 70
    tokens = [b"k", b"k" * 8, b"k" * 8, b"k" * 40, b"k" * 66, b"kz", b"z", b"zz", b"zzy", None]
    body = alt(seq(literal(text), call(1)), literal("zz"))
    rules = RuleSet(0, lambda k: compile_ast(body if k == 0 else literal("y")))
    assert literal_frames_equal(rules, TokenizerInfo(tokens, stop_ids=(9,))) > 0


SLOW = pytest.mark.slow
TOKENIZERS = [n if n == "qwen" else pytest.param(n, marks=SLOW) for n in TOKENIZER_NAMES]


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("schema", ["tree", "rpc", *SCHEMAS])
def test_literal_frames(name: str, schema: str, tokenizer_info_factory) -> None:
    compiled = compile_json_schema(
        recursive_schema(schema, closed=True) if schema in ("tree", "rpc") else SCHEMAS[schema]
    )
    taken = literal_frames_equal(compiled.rules, tokenizer_info_factory(name))
    assert taken > (4 if compiled.has_calls else 0)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_closed_string_frames(name: str, tokenizer_info_factory) -> None:
    # rpc's value strings end the value rule: their body's frame is the tokenizer's, made
    # at the first and shared (read-only) by the second compile's
    info = tokenizer_info_factory(name)
    for _ in range(2):
        compiled = compile_json_schema(recursive_schema("rpc", closed=True))
        assert literal_frames_equal(compiled.rules, info, closed=True) == 1


def test_closed_string_frames_drawn() -> None:
    tokens = [b'"', b'a"', b"ab", b'"a', b'a",', b"\\n", b"a\\", b"}", b'"}', None]
    info = TokenizerInfo(tokens, stop_ids=(9,))
    schema = {"type": "array", "items": {"anyOf": [{"type": "string"}, {"$ref": "#"}]}}
    compiled = compile_json_schema(schema)
    assert compiled.has_calls
    assert literal_frames_equal(compiled.rules, info, closed=True) >= 1


@pytest.mark.parametrize("name", TOKENIZERS)
def test_rows_past_a_byte_are_the_tokenizers(name: str, tokenizer_info_factory) -> None:
    # the tokens that go on past `}` are one row set per tokenizer, shared by every literal
    # frame that ends there (in any grammar), and told by identity for pushdown's groups
    info = tokenizer_info_factory(name)
    found: list[list[np.ndarray]] = []
    for _ in range(2):
        found.append([])
        rules = compile_json_schema(recursive_schema("rpc", closed=True)).rules
        frames = FrameMasks(Stacks(rules), info)
        for rule_id in reachable(rules):
            table = frames.stacks.table(rule_id)
            for state in range(1, len(table.table)):
                frame = frames.get(rule_id, state)
                if shared_groups(frame) is not None and frame.offsets.max(initial=0) == 1:
                    found[-1].append(frame.tokens)
    assert found[0] and {id(a) for a in found[0]} == {id(a) for a in found[1]}  # the same
    tokens = found[1][0]
    assert len(tokens) and not tokens.flags.writeable
    words = np.zeros((info.vocab_size + 31) // 32, "<u4")
    copied = FrameMask(words, False, tokens.copy(), np.ones(len(tokens), np.int64))
    assert shared_groups(copied) is None  # equal rows, not the tokenizer's: no memo


def _frames_with_and_without_going_rows(rules, info, rule_ids) -> int:
    """Build every frame of `rule_ids` with walked escape rows taken as the tokenizer's
    (`going_rows`) and without, assert them equal; return how many frames took them."""
    taken = 0

    def counting(*args):
        nonlocal taken
        found = going_rows(*args)
        taken += found is not None
        return found

    assert_frames_equal(rules, info, rule_ids, "going_rows", counting, lambda *args: None)
    return taken


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_walked_rows_as_the_tokenizers_equal_them_filtered_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    _frames_with_and_without_going_rows(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("tokenizer", ["qwen", "mistral-sp"])
def test_walked_rows_as_the_tokenizers_equal_them_filtered_on_rpc(
    tokenizer: str, tokenizer_info_factory
) -> None:
    # `}` at an object's start in rpc's value rule
    rules = schema_rules("rpc")
    info = tokenizer_info_factory(tokenizer)
    assert _frames_with_and_without_going_rows(rules, info, rules.reachable_rules()) > 0
