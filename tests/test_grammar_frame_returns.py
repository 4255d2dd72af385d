"""frame_masks: the callees' escaping tokens at a call state, decided from the return state
(`frame_returns.decide_returns`), give the frame masks the stack simulation gives."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grammar_frame_walk import ALPHABET, reachable, rules_and_tokens

from kor_cli.grammar import frame_masks, frame_offsets, frame_returns
from kor_cli.grammar.ast import alt, literal, repeat, seq
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.frame_indexes import split_beside
from kor_cli.grammar.frame_masks import FrameMasks
from kor_cli.grammar.frame_offsets import byte_offsets
from kor_cli.grammar.frame_returns import called_rows, decide_returns, read_calls, twin_frame
from kor_cli.grammar.frame_walk import walk_state
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.rules import RuleSet, call
from kor_cli.grammar.stacks import Stacks
from kor_cli.grammar.token_arrays import SortedTokens
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import recursive_schema

FIVE = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())


def simulate_all(self: FrameMasks, table, state, ids, through, settled, where, stays) -> np.ndarray:
    """The behaviour without `decide_returns`: every callee escape goes to the simulation."""
    settled[through] = False
    return ~settled


def frames_both_ways(rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]) -> int:
    """Build every frame of `rule_ids` with and without `decide_returns`, assert them equal and
    return how many tokens `decide_returns` decided without the simulation."""
    decided = 0

    def counting(frames, table, state, ids, through, settled, where, stays):
        nonlocal decided
        slow = decide_returns(frames, table, state, ids, through, settled, where, stays)
        decided += int((through & ~slow).sum())
        return slow

    with mock.patch.object(frame_masks, "FEW_CALLED", 0):  # no call state read as lists
        assert_frames_equal(rules, info, rule_ids, "decide_returns", counting, simulate_all)
    return decided


def assert_frames_equal(
    rules: RuleSet,
    info: TokenizerInfo,
    rule_ids: list[int],
    name: str,
    fast_path,
    baseline,
    module=frame_masks,
) -> None:
    """Build every frame of `rule_ids` with `module.<name>` (`frame_masks`' by default)
    patched to `fast_path`, then to `baseline`, and assert the two builds equal state by
    state."""
    with mock.patch.object(module, name, fast_path):
        fast = FrameMasks(Stacks(rules), info)
        for rule_id in rule_ids:
            for state in range(len(fast.stacks.table(rule_id).table)):
                fast.get(rule_id, state)
    with mock.patch.object(module, name, baseline):
        slow = FrameMasks(Stacks(rules), info)
        for rule_id in rule_ids:
            for state in range(len(slow.stacks.table(rule_id).table)):
                want, got = slow.get(rule_id, state), fast.get(rule_id, state)
                assert np.array_equal(got.stays, want.stays), (rule_id, state)
                assert got.ends == want.ends, (rule_id, state)
                assert got.escapes() == want.escapes(), (rule_id, state)


def schema_rules(schema: str) -> RuleSet:
    """The rules of a recursive schema (tree, rpc) or one of engines.py's five."""
    source = (
        recursive_schema(schema, closed=True)
        if schema in ("tree", "rpc")
        else FIVE[schema]["schema"]
    )
    return compile_json_schema(source).rules


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_returns_decide_as_the_simulation_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_both_ways(rules, TokenizerInfo(token_bytes), reachable(rules))


def frames_with_and_without_lists(rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]) -> int:
    """Build every frame of `rule_ids` with the call states that read no byte read as lists
    (`called_rows`, whatever their count) and by arrays (`decide_returns`), assert them
    equal and return how many candidates the lists read."""
    read = 0

    def counting(frames, table, state, ids, stays):
        nonlocal read
        read += len(ids)
        return called_rows(frames, table, state, ids, stays)

    with mock.patch.object(frame_masks, "called_rows", counting):
        assert_frames_equal(rules, info, rule_ids, "FEW_CALLED", 1 << 30, 0)
    return read


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_call_states_as_lists_equal_the_arrays_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_lists(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("tokenizer", ["qwen", "mistral-sp"])
def test_call_states_as_lists_equal_the_arrays_on_rpc(
    tokenizer: str, tokenizer_info_factory
) -> None:
    # rpc's array and object items: 72 (Qwen) and 10 (mistral-sp) candidates a state
    rules = schema_rules("rpc")
    info = tokenizer_info_factory(tokenizer)
    assert frames_with_and_without_lists(rules, info, rules.reachable_rules()) > 0


@pytest.mark.parametrize("schema", ["tree", "rpc", "ui", "reviews"])
def test_returns_decide_as_the_simulation_on_qwen(schema: str, tokenizer_info_factory) -> None:
    rules = schema_rules(schema)
    decided = frames_both_ways(rules, tokenizer_info_factory("qwen"), rules.reachable_rules())
    # the call states' `]`, `}`, `,` tokens are decided from the return state (reviews'
    # calls are its large values: no token leaves one and goes on in its caller there;
    # tree and ui, one rule calling itself since json_rules closes their recursion on the
    # root, decide none)
    assert (decided > 0) == (schema == "rpc")


def no_reader(frames, table, state, ids, stays):
    """The behaviour without `read_calls`: every token it would read goes to the simulation."""
    return (np.zeros(0, np.int64), np.zeros(0, np.int64)), ids


def frames_with_and_without_reader(rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]) -> int:
    """Build every frame of `rule_ids` with and without `read_calls`, assert them equal and
    return how many tokens it decided without the simulation."""
    decided = 0

    def counting(frames, table, state, ids, stays):
        nonlocal decided
        rows, slow = read_calls(frames, table, state, ids, stays)
        decided += len(ids) - len(slow)
        return rows, slow

    with mock.patch.object(frame_masks, "byte_offsets", stopping):  # all calls to the reader
        assert_frames_equal(rules, info, rule_ids, "read_calls", counting, no_reader)
    return decided


def stopping(sorted_, ids, state, table, kinds, tables=None, staying=None):
    """`byte_offsets` stopping at every call (the tokens a callee's bytes decide are read by
    `read_calls` or the simulation)."""
    return byte_offsets(sorted_, ids, state, table, kinds)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_call_reader_decides_as_the_simulation_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_reader(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("schema", ["tree", "rpc", "ui"])
def test_call_reader_decides_as_the_simulation_on_qwen(schema: str, tokenizer_info_factory) -> None:
    rules = schema_rules(schema)
    info = tokenizer_info_factory("qwen")
    assert frames_with_and_without_reader(rules, info, rules.reachable_rules()) > 0


def frames_with_and_without_returns(
    rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]
) -> int:
    """Build every frame of `rule_ids` with `byte_offsets` following callees' returns
    (`frame_offsets.RETURNS`) and without (those tokens left to `read_calls` and the
    simulation), assert them equal and return how many returns were read to a decision."""
    decided = 0
    returned = frame_offsets._returned

    def counting(back, q, data, at):
        nonlocal decided
        way = returned(back, q, data, at)
        decided += way != frame_offsets.OPEN
        return way

    with mock.patch.object(frame_offsets, "_returned", counting):
        assert_frames_equal(rules, info, rule_ids, "RETURNS", True, False, frame_offsets)
    return decided


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_byte_offsets_returns_decide_as_the_reader_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_returns(rules, TokenizerInfo(token_bytes), reachable(rules))


def returning_rules() -> RuleSet:
    """Rule 0: `{`, members `"key":value` apart by `,`, `}` (keys of `a`-`e`, several bytes a
    state: no `next_frame`); rule 1, the value: `""` or `1`, each ending in a final state. A
    token past a value's end (`":"","` from a key's body) returns into rule 0."""
    key = seq(literal('"'), repeat(alt(*(literal(c) for c in "abcde")), 0, None), literal('"'))
    member = seq(key, literal(":"), call(1))
    members = seq(member, repeat(seq(literal(","), member), 0, None))
    bodies = {0: seq(literal("{"), members, literal("}")), 1: alt(literal('""'), literal("1"))}
    return RuleSet(0, lambda k: compile_ast(bodies[k]))


PIECES = [b"{", b"}", b'"', b":", b",", b"1", b"a", b"x", b'""', b'":', b'",']
PAST_VALUES = st.tuples(  # a key's end, a value or part of one, then anything
    st.sampled_from([b'":', b'a":', b'"a":']),
    st.sampled_from([b'""', b"1", b'"', b""]),
    st.lists(st.sampled_from(PIECES), max_size=3).map(b"".join),
).map(b"".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(PAST_VALUES, st.lists(st.sampled_from(PIECES), min_size=1, max_size=5)
                          .map(b"".join)), min_size=5, max_size=120))  # fmt: skip
def test_byte_offsets_returns_decide_as_the_reader_on_drawn_tokens(tokens) -> None:
    frames_with_and_without_returns(returning_rules(), TokenizerInfo(tokens), [0, 1])


def test_byte_offsets_returns_decide_tokens_past_a_value() -> None:
    # from a key's body: `":"","a` stays (the value `""` returns, `,"a` is read by rule 0),
    # `":"",x` and `":1x` die, `":1}` reaches rule 0's final state (left to the reader)
    tokens = [bytes([b]) for b in b'{}",:1abx'] + [b'":"","a', b'":"",x', b'":1x', b'":1}']
    assert frames_with_and_without_returns(returning_rules(), TokenizerInfo(tokens), [0, 1]) >= 3


@pytest.mark.parametrize("schema", ["tree", "rpc"])
def test_byte_offsets_returns_decide_as_the_reader_on_qwen(
    schema: str, tokenizer_info_factory
) -> None:
    # rpc: `":"","` (stays: its value `""` returns before `,"`) and `":"",\n` (dies) after
    # a key's closing quote; tree's recursion is closed on the root: no such return
    rules = schema_rules(schema)
    info = tokenizer_info_factory("qwen")
    decided = frames_with_and_without_returns(rules, info, rules.reachable_rules())
    assert (decided > 0) == (schema == "rpc")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_byte_offsets_in_python_equal_the_array_walk(drawn) -> None:
    # few tokens are walked one by one in Python: same settled tokens and offsets
    rules, token_bytes = drawn
    sorted_ = SortedTokens(TokenizerInfo(token_bytes))
    ids = np.unique(sorted_.ids)
    stacks = Stacks(rules)
    for rule_id in reachable(rules):
        table = stacks.table(rule_id)
        calls = np.zeros(len(table.table), dtype=bool)
        calls[list(table.calls)] = True
        kinds = np.asarray(table.accepting, dtype=bool), calls
        for state in range(1, len(table.table)):
            found = []
            for rows in (0, len(ids)):  # (the array walk takes the kinds made on use too)
                for passed in (kinds, partial(tuple, kinds)):
                    with mock.patch.object(frame_offsets, "PYTHON_ROWS", rows):
                        settled, where = byte_offsets(sorted_, ids, state, table, passed)
                    found.append((settled.tolist(), np.where(settled, where, 0).tolist()))
            assert found[0] == found[1] == found[2] == found[3]


@pytest.mark.parametrize("schema", ["tree", "rpc"])
def test_recursive_starts_need_no_simulation_on_qwen(schema: str, tokenizer_info_factory) -> None:
    # `[[`, `["`, `[]{"` at a recursive rule's start (its own frame still being built, or a
    # rest that is no token) are read by the callee's table, not simulated
    rules = compile_json_schema(recursive_schema(schema, closed=True)).rules
    frames = FrameMasks(Stacks(rules), tokenizer_info_factory("qwen"))
    simulated = []
    simulate = FrameMasks._simulate

    def counting(self, rule_id, state, ids, stays):
        simulated.extend(ids)
        return simulate(self, rule_id, state, ids, stays)

    with mock.patch.object(FrameMasks, "_simulate", counting):
        for rule_id in rules.reachable_rules():  # the starts first, as a walk builds them
            frames.get(rule_id, frames.stacks.table(rule_id).start)
        for rule_id in rules.reachable_rules():
            for state in range(len(frames.stacks.table(rule_id).table)):
                frames.get(rule_id, state)
    assert frames.candidates > 0 and not simulated


def frames_with_and_without(
    rules: RuleSet, info: TokenizerInfo, rule_ids: list[int], name: str, build
) -> int:
    """Build every frame of `rule_ids` with and without the fast path `frame_masks.<name>`
    (`build`), assert them equal and return how many frames it made."""
    made = 0

    def counting(frames, rule_id, table, state):
        nonlocal made
        found = build(frames, rule_id, table, state)
        made += found is not None
        return found

    assert_frames_equal(rules, info, rule_ids, name, counting, lambda *_: None)
    return made


def frames_with_and_without_twins(rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]) -> int:
    """`frames_with_and_without` of `twin_frame`."""
    return frames_with_and_without(rules, info, rule_ids, "twin_frame", twin_frame)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_twin_frames_equal_the_built_ones_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_twins(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("few", [0, 64])
def test_twin_frames_equal_the_built_ones_on_mistral_rpc(few: int, tokenizer_info_factory) -> None:
    # rpc's `[` on mistral-sp: 32 tokens go on past `]` (read in Python below 64; `few` 0:
    # by the array form)
    rules = schema_rules("rpc")
    info = tokenizer_info_factory("mistral-sp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_returns, "_FEW_LONGER", few)
        assert frames_with_and_without_twins(rules, info, rules.reachable_rules()) > 0


@pytest.mark.parametrize("schema", ["tree", "rpc", "reviews"])
def test_twin_frames_equal_the_built_ones_on_qwen(schema: str, tokenizer_info_factory) -> None:
    # rpc's array `[` (`]` or its first item) is its `,` state's frame (the next item) and
    # the `]` tokens (tree's and reviews' arrays read their items inline: no twins)
    rules = schema_rules(schema)
    info = tokenizer_info_factory("qwen")
    made = frames_with_and_without_twins(rules, info, rules.reachable_rules())
    assert (made > 0) == (schema == "rpc")


@st.composite
def arrays_and_tokens(draw: st.DrawFn) -> tuple[RuleSet, list[bytes | None]]:
    """Rules that are a literal or an array of calls (`[`, items split by `,`, `]`: the
    `[` state has a twin), and tokens over the JSON-ish alphabet."""
    count = draw(st.integers(1, 3))
    piece = st.binary(min_size=1, max_size=3).map(lambda b: bytes(ALPHABET[x % 10] for x in b))

    def body() -> object:
        item = call(draw(st.integers(0, count - 1)))
        array = seq(literal("["), repeat(item, draw(st.integers(0, 1)), None, literal(",")))
        return alt(literal(draw(piece)), seq(array, literal("]")))

    bodies = {k: body() for k in range(count)}
    rules = RuleSet(0, lambda k: compile_ast(bodies[k]))
    token = st.binary(min_size=1, max_size=6).map(lambda b: bytes(ALPHABET[x % 10] for x in b))
    return rules, draw(st.lists(st.one_of(token, st.none()), min_size=10, max_size=200))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrays_and_tokens())
def test_twin_frames_equal_the_built_ones_on_drawn_arrays(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_twins(rules, TokenizerInfo(token_bytes), reachable(rules))


def frames_with_and_without_callee_bytes(
    rules: RuleSet, info: TokenizerInfo, rule_ids: list[int]
) -> int:
    """Build every frame of `rule_ids` with `byte_offsets` reading past calls by the callees'
    bytes and without (it stops at every call), assert them equal and return how many more
    tokens it settled."""
    settled_more = 0

    def counting(sorted_, ids, state, table, kinds, tables, staying):
        nonlocal settled_more
        settled, where = byte_offsets(sorted_, ids, state, table, kinds, tables, staying)
        plain = byte_offsets(sorted_, ids, state, table, kinds)[0]
        assert not (plain & ~settled).any()  # it settles a superset
        settled_more += int(settled.sum() - plain.sum())
        return settled, where

    assert_frames_equal(rules, info, rule_ids, "byte_offsets", counting, stopping)
    return settled_more


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_callee_bytes_decide_as_the_simulation_on_drawn_rules(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_callee_bytes(rules, TokenizerInfo(token_bytes), reachable(rules))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrays_and_tokens())
def test_callee_bytes_decide_as_the_simulation_on_drawn_arrays(drawn) -> None:
    rules, token_bytes = drawn
    frames_with_and_without_callee_bytes(rules, TokenizerInfo(token_bytes), reachable(rules))


@pytest.mark.parametrize("tokenizer", ["qwen", "tekken", "mistral-sp"])
@pytest.mark.parametrize("schema", ["tree", "rpc", "reviews"])
def test_callee_bytes_decide_as_the_simulation(
    schema: str, tokenizer: str, tokenizer_info_factory
) -> None:
    # rpc's value start: `[name`, `[],` die or escape in `[`'s callee, `[n`, `["` stay in it
    rules = schema_rules(schema)
    info = tokenizer_info_factory(tokenizer)
    settled = frames_with_and_without_callee_bytes(rules, info, rules.reachable_rules())
    assert settled > 0 or schema != "rpc"


@pytest.mark.parametrize("schema", ["rpc", "rpc-apart", "ui", "reviews"])
def test_same_rule_is_the_first_rule_with_equal_tables(schema: str) -> None:
    # checksums only within a group of equal size and accepting states: same answers as
    # comparing every earlier rule's table, accepting states and calls (rpc-apart: `value`
    # reached as three rules with one table, as in test_grammar_frame_walk)
    if schema == "rpc-apart":
        source = recursive_schema("rpc", closed=True)
        branches = source["$defs"]["value"]["anyOf"]
        branches[1]["items"]["minItems"] = 0
        branches[2]["additionalProperties"]["minItems"] = 0
        rules = compile_json_schema(source).rules
    else:
        rules = schema_rules(schema)
    frames = FrameMasks(Stacks(rules), TokenizerInfo([b"a"]))
    seen: list[int] = []
    for rule_id in rules.reachable_rules():
        table = frames.stacks.table(rule_id)
        want = next(
            (
                other
                for other in seen
                if np.array_equal(frames.stacks.table(other).table, table.table)
                and frames.stacks.table(other).accepting == table.accepting
                and frames.stacks.table(other).calls == table.calls
            ),
            rule_id,
        )
        if want == rule_id:
            seen.append(rule_id)
        assert frames.same_rule(rule_id) == want
    assert schema != "rpc-apart" or len(seen) < len(rules.reachable_rules())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens())
def test_a_state_that_reads_no_byte_splits_no_token(drawn) -> None:
    # `FrameMasks._split` returns empty words for a state without byte edges at once: the
    # string-body tables and the pruned walk it skips find nothing there either
    rules, token_bytes = drawn
    rule_ids = reachable(rules)
    frames = FrameMasks(Stacks(rules), TokenizerInfo(token_bytes))
    for rule_id in rule_ids:
        table = frames.stacks.table(rule_id)
        walker = frames._walker(rule_id, table)
        for state in range(1, len(table.table)):
            if table.reads[state]:
                continue
            stays, crossing, rows = frames._split(rule_id, table, state)
            assert not stays.any() and crossing is None and rows == []
            sorted_ = frames._sorted
            indexes = partial(frames._rule_indexes, rule_id, table)
            assert split_beside(sorted_, walker, table, state, indexes, frames.words) is None
            split = walk_state(
                sorted_, table.flat, walker.reads, walker.follow, state, walker.resolve,
                walker.walk_arrays, final=table.final,
            )  # fmt: skip
            assert split is not None
            assert not (split.stays or split.ranges or split.singles or split.escapes)
