"""frame_next: a punctuation state's frame read off the frames its bytes lead to equals the
frame the general build makes (`next_frame`), and `tails` names each token's rest."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from test_grammar_frame_returns import FIVE, arrays_and_tokens, frames_with_and_without
from test_grammar_frame_walk import reachable, rules_and_tokens

from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.frame_next import next_frame, tails
from kor_cli.grammar.rules import RuleSet
from kor_cli.grammar.token_arrays import SortedTokens
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import recursive_schema


def frames_with_and_without_next(rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]) -> int:
    """`frames_with_and_without` of `next_frame`."""
    return frames_with_and_without(rules, info, rule_ids, "next_frame", next_frame)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_next_frames_equal_the_built_ones_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_next(rules, TokenizerInfo(token_bytes), reachable(rules))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrays_and_tokens())
def test_next_frames_equal_the_built_ones_on_drawn_arrays(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_next(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("tokenizer", ["qwen", "tekken", "mistral-sp"])
@pytest.mark.parametrize("schema", ["tree", "rpc", "reviews"])
def test_next_frames_equal_the_built_ones(schema: str, tokenizer: str, tokenizer_info_factory):
    # rpc's `,`/`]` after an array item (the next item's call state) and its `"` `:` before
    # the params value
    source = (
        recursive_schema(schema, closed=True) if schema != "reviews" else FIVE[schema]["schema"]
    )
    rules = compile_json_schema(source).rules
    info = tokenizer_info_factory(tokenizer)
    made = frames_with_and_without_next(rules, info, rules.reachable_rules())
    assert made > 0 or schema != "rpc"


def test_tails_name_each_tokens_rest() -> None:
    token_bytes = [b",", b",a", b"a", b",ab", b",b", b"ab", b"b", None, b",,", b",a", b",c"]
    sorted_ = SortedTokens(TokenizerInfo(token_bytes))
    starts, (_, bounds) = sorted_.starts(), sorted_.alone()
    comma = ord(",")
    lo, hi = starts[comma] + bounds[comma + 1] - bounds[comma], starts[comma + 1]
    for position, rest in zip(range(lo, hi), tails(sorted_, comma).tolist(), strict=True):
        want = sorted_.tokens[position][1:]
        assert (token_bytes[rest] if rest >= 0 else None) == (want if want in token_bytes else None)
