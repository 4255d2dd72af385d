"""Free strings' frame splits from the tokenizer's tables (`free_string`)."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from kor_cli.grammar import frame_indexes
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.frame_indexes import _free_prefix, free_split
from kor_cli.grammar.frame_walk import RuleWalker
from kor_cli.grammar.free_string import STRING, free_body_states, free_states
from kor_cli.grammar.pushdown import PushdownGrammar
from kor_cli.grammar.stacks import Stacks
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.testing import TOKENIZER_NAMES, recursive_schema

SCHEMA = {  # free strings (values, keys) beside bounded ones, inside rules with calls
    "type": "object",
    "properties": {
        "method": {"type": "string"},
        "short": {"type": "string", "maxLength": 3},
        "tag": {"type": "string", "pattern": "^[^x]*$"},
        "params": {"$ref": "#/$defs/v"},
    },
    "required": ["method", "short", "tag", "params"],
    "$defs": {
        "v": {
            "anyOf": [
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}},
                {"type": "array", "items": {"$ref": "#/$defs/v"}},
                {"type": "string"},
            ]
        }
    },
}


def test_string_automaton_reads_canonical_escapes() -> None:
    def reads(data: bytes) -> bool:
        at = 0
        for byte in data:
            at = STRING[at][byte]
            if at < 0:
                return False
        return at == 0

    assert all(reads(e) for e in (b"\\n", b'\\"', b"\\\\", b"\\u001f", b"\\u0000", b"\xe2\x82\xac"))
    assert not any(reads(e) for e in (b"\\/", b"\\u0041", b"\\u000a", b"\xc0\x80", b"\xed\xa0\x80"))


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_free_split_equals_the_two_index_lookups(name: str, tokenizer_info_factory) -> None:
    # from a free string's body, and from a state one byte before it (a quote, UTF-8
    # continuation bytes, an escape's last byte; the tokens that start with those bytes):
    # exactly the masks of
    # the rule's two token indexes (tokens living by bytes, and those dying by bytes
    # after reaching a crossing state: candidates, or escapes where a final state came
    # first), with the tokenizer's tables
    info = tokenizer_info_factory(name)
    grammar = compile_json_schema(SCHEMA, GrammarOptions())
    frames = PushdownGrammar(grammar.rules, info).frames
    sorted_ = sorted_tokens(info)
    body = sorted_.free_strings()[0]
    starts = sorted_.starts()
    free = bounded = opened = continued = escaped_ = 0
    for rule_id in grammar.rules.reachable_rules():
        table = frames.stacks.table(rule_id)
        walker = RuleWalker(frames.stacks, rule_id, table)
        indexes = frames._rule_indexes(rule_id, table)
        assert indexes.crossing is not None
        for state in range(1, indexes.size):
            stays = indexes.by_bytes.packed(state) & frames._keep
            crossing = indexes.crossing.packed(indexes.size + state) & frames._keep & ~stays
            if free_states(*walker.arrays(), state):
                split = body.split(*walker.arrays(), state, walker.finals(), walker.reads)
                plain = body.split(*walker.arrays(), state, walker.finals())  # children all
                assert all(np.array_equal(a, b) for a, b in zip(split[:2], plain[:2], strict=True))
                escaped = _words(split[2], len(stays))
                assert np.array_equal(split[0], stays)
                assert np.array_equal(split[1] | escaped, crossing)
                assert not (split[1] & escaped).any()
                free += 1
            elif len(walker.reads[state]) >= 90:  # a bounded string's body
                bounded += 1
            found = _free_prefix(sorted_, walker, table, state, frames.words)
            if found is not None:  # on the tokens that start with a byte into the body
                prefixed = np.zeros(len(stays) * 32, dtype=bool)
                for byte in range(256):
                    into = table.flat[state << 8 | byte]
                    if into and walker.reads[into] and len(walker.reads[into]) >= 90:
                        prefixed[sorted_.ids[starts[byte] : starts[byte + 1]]] = True
                first = np.packbits(prefixed, bitorder="little").view("<u4")
                escaped = _words(found[2], len(stays)) & first
                assert np.array_equal(found[0] & first, stays & first)
                assert np.array_equal((found[1] & first) | escaped, crossing & first)
                opened += table.byte_set(state) >> 34 & 1
                continued += table.byte_set(state) >> 0x80 & 1
                escaped_ += table.byte_set(state) >> ord("\\") & 1
    assert free >= 2 and bounded >= 2 and opened >= 2 and continued >= 2 and escaped_ >= 2


def test_free_body_states_equal_free_states_of_each_state() -> None:
    # a rule's free string bodies found at once == `free_states` state by state, on the
    # schema's rules and on copies with cells, crossing states changed near their bodies
    grammar = compile_json_schema(SCHEMA, GrammarOptions())
    stacks = Stacks(grammar.rules)
    rng = np.random.default_rng(7)
    found = changed = 0
    for rule_id in grammar.rules.reachable_rules():
        walker = RuleWalker(stacks, rule_id, stacks.table(rule_id))
        flat, crossing = walker.arrays()
        bodies = sorted(free_body_states(flat, crossing))
        found += len(bodies)
        size = len(flat) >> 8
        for trial in range(300):
            table, crosses = flat.copy(), crossing.copy()
            for _ in range(int(rng.integers(1, 4))):
                if rng.random() < 0.2:
                    crosses[rng.integers(size)] ^= True
                    continue
                at = int(rng.choice(bodies)) if bodies and rng.random() < 0.6 else 0
                for byte in rng.choice(list(b"\\u0\xe0\xc3\x80\xf0n"), int(rng.integers(0, 5))):
                    at = int(table[at << 8 | byte]) or at
                table[at << 8 | int(rng.integers(256))] = rng.integers(size)
            want = {s for s in range(1, size) if free_states(table, crosses, s)}
            got = free_body_states(table, crosses)
            assert got == want, (rule_id, trial)
            changed += got != set(bodies)
    assert found >= 2 and changed >= 100


def _words(rows: list[tuple[np.ndarray, np.ndarray]], words: int) -> np.ndarray:
    """Packed words of the tokens of escape rows."""
    bits = np.zeros(words * 32, dtype=bool)
    for tokens, _ in rows:
        bits[tokens] = True
    return np.packbits(bits, bitorder="little").view("<u4")


@pytest.mark.parametrize("name", ["qwen", "mistral-sp"])
def test_free_splits_kept_per_rule_give_the_frames_made_anew(
    name: str, tokenizer_info_factory
) -> None:
    # `frame_indexes.free_split` keeps a body's split for the states one byte before it:
    # every frame equals the frame built with each split made anew, and some are reused
    info = tokenizer_info_factory(name)
    reused = 0

    def anew(walker, tables, state):
        return tables.split(*walker.arrays(), state, walker.finals(), walker.reads)

    def counting(walker, tables, state):
        nonlocal reused
        reused += (id(tables), state) in walker.splits
        return free_split(walker, tables, state)

    for schema in (SCHEMA, recursive_schema("rpc", closed=True)):
        rules = compile_json_schema(schema, GrammarOptions()).rules
        built = []
        for split in (counting, anew):
            with mock.patch.object(frame_indexes, "free_split", split):
                frames = PushdownGrammar(rules, info).frames
                built.append([frames.get(rule_id, state) for rule_id, state in _states(frames)])
        for got, want in zip(*built, strict=True):
            assert np.array_equal(got.stays, want.stays)
            assert got.ends == want.ends and got.escapes() == want.escapes()
    assert reused >= 2


def _states(frames) -> list[tuple[int, int]]:
    rules = frames.stacks.rules
    return [
        (rule_id, state)
        for rule_id in rules.reachable_rules()
        for state in range(len(frames.stacks.table(rule_id).table))
    ]
