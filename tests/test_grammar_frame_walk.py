"""frame_walk: the pruned walk of the sorted tokens splits them exactly as defined, and frame
masks built with it equal those built from the rules' token indexes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import frame_rows, frame_walk, token_arrays
from kor_cli.grammar.ast import Node, alt, literal, opt, repeat, seq
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.grammar.frame_masks import FrameMasks
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.rules import RuleSet, call
from kor_cli.grammar.stacks import CONTEXT, REACHES_CONTEXT, RuleTable, Stacks
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import TOKENIZER_NAMES, recursive_schema

ALPHABET = b'[]{},:"1ax'
FIVE = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())
SCHEMAS = {name: entry["schema"] for name, entry in FIVE.items() if name != "_comment"}


def reads_and_follow(stacks: Stacks, rule_id: int) -> tuple[list[list[int]], list[int]]:
    """Each state's bytes, and the bytes that can follow at a crossing state (from a base
    frame there over an unknown caller: any where it can end)."""
    table = stacks.table(rule_id)
    reads = [np.flatnonzero(row).tolist() for row in table.table]
    follow = []
    for state, accepting in enumerate(table.accepting):
        base = stacks.push(CONTEXT, rule_id, state) if state else CONTEXT
        if not state or not (accepting or state in table.calls):
            follow.append(0)
        elif accepting or stacks.closure(base)[1] & REACHES_CONTEXT:
            follow.append(frame_walk.ANY)
        else:
            follow.append(stacks.next_bytes((base,)))
    return reads, follow


def brute_split(
    table: RuleTable, follow: list[int], state: int, tokens: list[bytes]
) -> tuple[set[int], set[int]]:
    """Positions read by bytes alone; positions whose byte path meets, after a byte, a
    crossing state that can read the next byte, and dies by bytes later (token by token)."""
    stays, candidates = set(), set()
    for position, data in enumerate(tokens):
        now, crossed = state, False
        for offset, byte in enumerate(data):
            crossed |= bool(offset) and bool(follow[now] >> byte & 1)
            now = int(table.table[now, byte])
            if not now:
                break
        if now:
            stays.add(position)
        elif crossed:
            candidates.add(position)
    return stays, candidates


def escape_depth(table: RuleTable, follow: list[int], state: int, data: bytes) -> int | None:
    """Where `data`'s byte path from `state` reaches a final state, when it meets no crossing
    state that can read its next byte before (after its first byte) and has bytes left."""
    for offset, byte in enumerate(data):
        if offset and table.final[state]:
            return offset
        if offset and follow[state] >> byte & 1:
            return None
        state = int(table.table[state, byte])
        if not state:
            return None
    return None


def reachable(rules: RuleSet) -> list[int]:
    """The reachable rules of a drawn rule set (left-recursive draws are discarded)."""
    try:
        return rules.reachable_rules()
    except GrammarError as error:
        assume("left recursion" not in str(error))
        raise


@st.composite
def rules_and_tokens(draw: st.DrawFn) -> tuple[RuleSet, list[bytes | None]]:
    pieces = st.binary(min_size=0, max_size=3).map(lambda b: bytes(ALPHABET[x % 10] for x in b))
    count = draw(st.integers(1, 3))

    def node(depth: int) -> Node:
        kinds = ["lit", "call", "body", "seq", "alt", "opt", "rep"]
        kind = draw(st.sampled_from(kinds if depth else kinds[:3]))
        if kind == "lit":
            return literal(draw(pieces))
        if kind == "body":  # a state reading many bytes, as a string body does
            return repeat(alt(*(literal(bytes([c])) for c in ALPHABET if c != ord('"'))), 0, None)
        if kind == "call":
            return call(draw(st.integers(0, count - 1)))
        if kind == "seq":
            return seq(node(depth - 1), node(depth - 1))
        if kind == "alt":
            return alt(node(depth - 1), node(depth - 1))
        if kind == "opt":
            return opt(node(depth - 1))
        return repeat(node(depth - 1), draw(st.integers(0, 1)), None, literal(","))

    bodies = {k: alt(literal("x"), seq(literal(draw(pieces)), node(3))) for k in range(count)}
    rules = RuleSet(0, lambda k: compile_ast(bodies[k]))
    token = st.binary(min_size=1, max_size=6).map(lambda b: bytes(ALPHABET[x % 10] for x in b))
    tokens = draw(st.lists(st.one_of(token, st.none()), min_size=10, max_size=200))
    return rules, tokens


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules_and_tokens(),
    st.integers(1, 400),
    st.integers(0, 3),
    st.booleans(),
    st.sampled_from([2, 16]),
)
def test_the_walk_splits_tokens_as_defined(
    drawn, budget: int, dense: int, arrays: bool, width: int
) -> None:
    # dense 0 with arrays: every start state is walked as arrays (`_walk_start`); width 2:
    # the padded matrix holds two bytes of each token, the rest is walked one by one
    rules, token_bytes = drawn
    reached = reachable(rules)
    info = TokenizerInfo(token_bytes)
    sorted_ = token_arrays.SortedTokens(info)
    with (
        mock.patch.object(frame_walk, "VECTOR_MIN", 0 if arrays else frame_walk.VECTOR_MIN),
        mock.patch.object(token_arrays, "WIDTH", width),
    ):
        check_splits(rules, reached, sorted_, budget, dense, arrays)


def check_splits(
    rules: RuleSet,
    reached: list[int],
    sorted_: token_arrays.SortedTokens,
    budget: int,
    dense: int,
    arrays: bool,
) -> None:
    """Every state's walk (when it does not give up) splits the tokens as defined."""
    stacks = Stacks(rules)
    for rule_id in reached:
        table = stacks.table(rule_id)
        reads, follow = reads_and_follow(stacks, rule_id)
        lazy = [frame_walk.UNKNOWN if s in table.calls and f else f for s, f in enumerate(follow)]
        for state in range(1, len(table.table)):
            crossing = np.asarray([[bool(f >> b & 1) for b in range(256)] for f in follow])
            split = frame_walk.walk_state(
                sorted_,
                table.flat,
                reads,
                list(lazy),
                state,
                follow.__getitem__,
                (table.table, crossing) if arrays else None,
                budget,
                dense,
                table.final,
            )
            if split is None:  # over budget or dense: the caller uses the token indexes
                assert budget < 400 or len(reads[state]) > dense
                continue
            stays, candidates = brute_split(table, follow, state, sorted_.tokens)
            assert sorted(split.stays) == sorted(stays)
            assert len(split.stays) == len(set(split.stays))
            found = {p for lo, hi in split.ranges for p in range(lo, hi)} | set(split.singles)
            escaping = {p: depth for lo, hi, depth in split.escapes for p in range(lo, hi)}
            assert not found & escaping.keys()
            assert (found | escaping.keys()) - stays == candidates
            for position, depth in escaping.items():  # a final state first met at `depth`
                assert escape_depth(table, follow, state, sorted_.tokens[position]) == depth
            check_crossing_candidates(sorted_, table, follow, state, candidates)
            words = int(sorted_.ids.max(initial=0)) // 32 + 1
            got_stays, got_candidates = frame_rows.split_words(sorted_, split, words)
            ids = sorted_.ids
            assert set(np.flatnonzero(unpack(got_stays))) == {int(ids[p]) for p in stays}
            walked = candidates - escaping.keys()
            got = set() if got_candidates is None else set(np.flatnonzero(unpack(got_candidates)))
            assert got == {int(ids[p]) for p in walked}
            assert (got_candidates is None) == (not split.ranges and not split.singles)


def check_crossing_candidates(
    sorted_: token_arrays.SortedTokens,
    table: RuleTable,
    follow: list[int],
    state: int,
    candidates: set[int],
) -> None:
    """The dense states' way to the candidates finds the same ones (or gives up)."""
    crossing = np.asarray(
        [[bool(bits >> byte & 1) for byte in range(256)] for bits in follow], dtype=bool
    )
    reached, todo = {state}, [state]
    while todo:
        nexts = set(table.table[todo].ravel().tolist()) - reached - {0}
        reached |= nexts
        todo = list(nexts)
    entries = sorted({b for s in reached for b in range(256) if follow[int(table.table[s, b])]})
    ids = token_arrays.crossing_candidates(sorted_, table.table, crossing, state, entries)
    assert ids is not None
    assert set(ids.tolist()) == {int(sorted_.ids[p]) for p in candidates}
    assert (
        token_arrays.crossing_candidates(sorted_, table.table, crossing, state, entries, limit=-1)
        is None
    )


def unpack(words: np.ndarray) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), bitorder="little")


def test_dense_states_and_long_walks_are_left_to_the_token_indexes() -> None:
    info = TokenizerInfo([bytes([b]) for b in range(32, 127)] + [b"ab", b"abc"])
    sorted_ = token_arrays.SortedTokens(info)
    stacks = Stacks(RuleSet(0, lambda k: compile_ast(literal("q"))))
    table = stacks.table(0)
    dense = [list(range(32, 127))] + [[]] * (len(table.table) - 1)
    with mock.patch.object(frame_walk, "VECTOR_MAX", 50):  # 95 tokens start there: many
        assert frame_walk.walk_state(sorted_, table.flat, dense, [0] * 9, 0) is None
    few = frame_walk.walk_state(sorted_, table.flat, dense, [0] * 9, 0)  # few: walked anyway
    assert few is not None
    reads, follow = reads_and_follow(stacks, 0)
    start = table.start
    assert frame_walk.walk_state(sorted_, table.flat, reads, follow, start, budget=0) is None
    split = frame_walk.walk_state(sorted_, table.flat, reads, follow, start)
    assert split is not None and [sorted_.tokens[p] for p in split.stays] == [b"q"]


def frames_both_ways(rules: RuleSet, info: TokenizerInfo) -> int:
    """Build every frame mask of every reached rule with the walk (and the dense states'
    candidates walked as one array) and with the token indexes only; assert they are
    equal; return how many frames."""
    walked = FrameMasks(Stacks(rules), info)
    with (
        mock.patch("kor_cli.grammar.frame_masks.walk_state", return_value=None),
        mock.patch("kor_cli.grammar.frame_masks.crossing_candidates", return_value=None),
    ):
        indexed = FrameMasks(Stacks(rules), info)
        frames = 0
        for rule_id in rules.reachable_rules():
            for state in range(len(walked.stacks.table(rule_id).table)):
                want = indexed.get(rule_id, state)
                got = walked.get(rule_id, state)
                assert np.array_equal(got.stays, want.stays), (rule_id, state)
                assert got.ends == want.ends and got.escapes() == want.escapes(), (rule_id, state)
                frames += 1
    return frames


SCHEMA_NAMES = ["reviews", "nested", "ui"]


@pytest.mark.parametrize("schema", ["tree", "rpc", *SCHEMA_NAMES])
def test_frames_walked_equal_frames_indexed_on_qwen(schema: str, tokenizer_info_factory) -> None:
    compiled = compile_json_schema(
        recursive_schema(schema, closed=True) if schema in ("tree", "rpc") else SCHEMAS[schema]
    )
    # nested has no calls since strings are shared automata (one rule: the masks are the
    # token index's, no candidates); the others call rules
    assert compiled.has_calls == (schema != "nested")
    assert frames_both_ways(compiled.rules, tokenizer_info_factory("qwen")) > 20


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in TOKENIZER_NAMES if n != "qwen"])
@pytest.mark.parametrize("schema", ["tree", "rpc", *SCHEMA_NAMES])
def test_frames_walked_equal_frames_indexed(name: str, schema: str, tokenizer_info_factory) -> None:
    compiled = compile_json_schema(
        recursive_schema(schema, closed=True) if schema in ("tree", "rpc") else SCHEMAS[schema]
    )
    assert frames_both_ways(compiled.rules, tokenizer_info_factory(name)) > 20


def test_rules_of_one_subschema_share_their_frames(tokenizer_info_factory) -> None:
    # JSON-RPC's `value` is reached from several places (params, array items, object
    # members): rules with one table; their frames are built once and equal frames built
    # apart. (Bare `$ref`s are merged into one rule by json_rules; a no-op sibling keeps
    # the references apart, so the rules are distinct with one table.)
    schema = recursive_schema("rpc", closed=True)
    branches = schema["$defs"]["value"]["anyOf"]
    branches[1]["items"]["minItems"] = 0
    branches[2]["additionalProperties"]["minItems"] = 0
    rules = compile_json_schema(schema).rules
    info = tokenizer_info_factory("qwen")
    shared = FrameMasks(Stacks(rules), info)
    reached = rules.reachable_rules()
    groups: dict[int, list[int]] = {}
    same_of = {rule_id: shared.same_rule(rule_id) for rule_id in reached}
    for rule_id, same in same_of.items():
        groups.setdefault(same, []).append(rule_id)
    assert max(map(len, groups.values())) >= 2
    frames = {
        (rule_id, state): shared.get(rule_id, state)
        for same, members in groups.items()
        for state in range(len(shared.stacks.table(same).table))
        for rule_id in members
    }
    with mock.patch.object(FrameMasks, "same_rule", side_effect=lambda rule_id: rule_id):
        apart = FrameMasks(Stacks(rules), info)
        for (rule_id, state), got in frames.items():
            want = apart.get(rule_id, state)
            assert got is frames[(same_of[rule_id], state)]
            assert np.array_equal(got.stays, want.stays)
            assert got.ends == want.ends and got.escapes() == want.escapes()
    assert len({id(frame) for frame in frames.values()}) < len(frames)


@pytest.mark.parametrize("dense", [0, 2, 8])
def test_dense_states_inside_a_walk_are_walked_as_one_array(dense: int) -> None:
    body = repeat(alt(*(literal(bytes([c])) for c in b"1ax[]{},")), 0, None)
    bodies = {
        0: seq(literal("["), opt(repeat(call(1), 1, None, literal(","))), literal("]")),
        1: alt(seq(literal('"'), body, literal('"')), seq(literal("{"), call(0), literal("}"))),
    }
    rules = RuleSet(0, lambda k: compile_ast(bodies[k]))
    tokens = [bytes(p) for n in (1, 2, 3) for p in itertools.product(ALPHABET, repeat=n)]
    sorted_ = token_arrays.SortedTokens(TokenizerInfo(tokens))
    with mock.patch.object(frame_walk, "VECTOR_MIN", 0):
        check_splits(rules, rules.reachable_rules(), sorted_, 10**6, dense, True)


def by_bytes(table: RuleTable, state: int, data: bytes) -> tuple[bool, int]:
    """Reference: (settled, offsets): the byte path dies meeting no call state after its
    first byte (offsets: bit k where it stood at an accepting state before byte k)."""
    offsets = 0
    for at, byte in enumerate(data):
        if at:
            if state in table.calls:
                return False, 0
            if table.accepting[state]:
                offsets |= 1 << at
        state = int(table.table[state, byte])
        if not state:
            return True, offsets
    return False, 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules_and_tokens(), st.sampled_from([2, 16]))
def test_escape_offsets_read_tokens_as_the_byte_walk_does(drawn, width: int) -> None:
    rules, token_bytes = drawn
    reached = reachable(rules)
    sorted_ = token_arrays.SortedTokens(TokenizerInfo(token_bytes))
    ids = np.unique(sorted_.ids)
    with mock.patch.object(token_arrays, "WIDTH", width):
        stacks = Stacks(rules)
        for rule_id in reached:
            table = stacks.table(rule_id)
            accepting = np.asarray(table.accepting, dtype=bool)
            calls = np.zeros(len(table.table), dtype=bool)
            calls[list(table.calls)] = True
            for state in range(1, len(table.table)):
                settled, where = token_arrays.escape_offsets(
                    sorted_, ids, state, table.table, accepting, calls
                )
                for token, done, offsets in zip(ids, settled, where, strict=True):
                    data = token_bytes[token]
                    want = by_bytes(table, state, data)
                    if len(data) > width:  # left to the simulation
                        assert not done
                    else:
                        assert (bool(done), int(offsets) if done else 0) == want


def test_sorted_tokens_from_a_restored_trie_convert_on_first_use() -> None:
    """A trie restored from the disk cache keeps its tokens packed; `SortedTokens` turns them
    into a list only when a walk needs them (a matcher whose masks all come from the cache
    never does), and then gives the same tokens, starts and matrix as from a list."""
    from types import SimpleNamespace

    from kor_cli.grammar.table_cache import PackedBytes
    from kor_cli.grammar.token_tables import token_trie

    info = TokenizerInfo([b"a", b"ab", b"b", b"ba\xff", b"c" * 20, None], stop_ids=(5,))
    trie = token_trie(info)
    tokens = list(trie.tokens)
    packed = PackedBytes(b"".join(tokens), np.array([len(t) for t in tokens], dtype=np.int64))
    restored = SimpleNamespace(tokens=packed, token_ids=trie.token_ids)
    plain = token_arrays.SortedTokens(info)
    with (
        mock.patch.object(token_arrays, "token_trie", return_value=restored),
        mock.patch.object(token_arrays, "_as_list", wraps=token_arrays._as_list) as convert,
    ):
        lazy = token_arrays.SortedTokens(info)
        assert convert.call_count == 0
        assert lazy.tokens == plain.tokens == tokens
        assert lazy.starts() == plain.starts()
        assert all(np.array_equal(a, b) for a, b in zip(lazy.matrix(), plain.matrix(), strict=True))
        assert convert.call_count == 1


ODD_BYTES = b'"\\,\xc3\x00'  # a quote, a backslash, a comma, a UTF-8 lead, a control


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_plain_tails_in_loop_states_end_as_the_byte_walk_does(data) -> None:
    # rows standing in a state where every plain byte loops (a string body) and reading
    # only plain bytes to their end stop at once: each token's end state and crossing are
    # still those of a byte-by-byte walk (tokens past WIDTH, loops with and without a
    # crossing on plain bytes)
    size = data.draw(st.integers(2, 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    table = rng.integers(0, size, (size, 256)).astype(np.int32)
    table[0] = 0
    crossing = rng.random((size, 256)) < 0.03
    plain = np.flatnonzero(token_arrays._PLAIN)
    for state in range(1, size):
        if rng.random() < 0.6:
            table[state, plain] = state
            crossing[state, plain] = False
            if rng.random() < 0.5:  # not a loop to end at once: a plain byte crosses
                crossing[state, rng.choice(list(b"ab {"))] = True
    alphabet = st.sampled_from([*b"ab {ab {", *ODD_BYTES])
    words = st.lists(alphabet, min_size=1, max_size=22).map(bytes)
    tokens = sorted(set(data.draw(st.lists(words, min_size=1, max_size=40))))
    sorted_ = token_arrays.SortedTokens(TokenizerInfo(tokens))
    positions = np.arange(len(sorted_.tokens))
    start, started = data.draw(st.integers(1, size - 1)), data.draw(st.booleans())
    with mock.patch.object(token_arrays, "LOOP_ROWS", 0):
        now, crossed = token_arrays.walk_positions(
            sorted_, positions, 0, start, table, crossing, started
        )
    for row, token in enumerate(sorted_.tokens):
        state, met = start, False
        for at, byte in enumerate(token):
            if at or started:
                met |= bool(crossing[state, byte])
            state = int(table[state, byte])
            if not state:
                break
        assert (int(now[row]), bool(crossed[row])) == (state, met), token
