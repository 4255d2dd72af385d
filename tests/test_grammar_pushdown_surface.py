"""Recursive schemas through the matcher surface: compile_grammar picks the pushdown matcher,
the record envelope keeps the recursion, and a tiny model generates valid deep records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from kor_cli.constrain import record_grammar
from kor_cli.envelope import DEFAULT_ENVELOPE
from kor_cli.grammar.compile import serialize
from kor_cli.grammar.surface import (
    GrammarMatcher,
    TokenizerInfo,
    allocate_token_bitmask,
    compile_grammar,
    compile_json_schema,
)
from kor_cli.testing import recursive_schema

TREE = recursive_schema("tree")
STOP = 256
BYTES = TokenizerInfo([bytes([b]) for b in range(256)] + [None], stop_ids=[STOP], vocab_size=260)


def deep(depth: int, leaf: Any = 0) -> dict[str, Any]:
    node: dict[str, Any] = {"v": leaf}
    for level in range(depth):
        node = {"v": level, "kids": [{"v": -1}, node]}
    return node


def feed(matcher: GrammarMatcher, data: bytes) -> int | None:
    """Feed one byte token at a time, checking each against the mask; the offset of the
    first byte the mask forbids (None: all allowed)."""
    bitmask = allocate_token_bitmask(1, BYTES.vocab_size)
    for at, byte in enumerate(data):
        matcher.fill_next_token_bitmask(bitmask)
        allowed = bool(np.asarray(bitmask)[0, byte >> 5] >> (byte & 31) & 1)
        assert matcher.accept_token(byte) == allowed
        if not allowed:
            return at
    return None


def test_a_recursive_schema_runs_on_the_pushdown_matcher_at_any_depth() -> None:
    grammar = compile_json_schema(TREE)
    assert grammar.has_calls
    compiled = compile_grammar(grammar, BYTES)
    matcher = GrammarMatcher(compiled)
    assert feed(matcher, serialize(deep(40)).encode()) is None
    assert matcher.is_accepting and matcher.accept_token(STOP) and matcher.is_terminated()
    bad = serialize(deep(40, leaf="x")).encode()
    matcher.reset()
    assert feed(matcher, bad) == bad.index(b'"x"')


def test_the_record_envelope_keeps_the_recursion() -> None:
    grammar = record_grammar(TREE)
    assert grammar.has_calls
    matcher = GrammarMatcher(compile_grammar(grammar, BYTES))
    record = DEFAULT_ENVELOPE.encode(deep(12))
    text = record.encode()
    assert feed(matcher, text if text.startswith(b" ") else b" " + text) is None
    assert matcher.is_accepting and not matcher.accept_bytes(b"}")


def test_forced_bytes_and_rollback_through_the_surface() -> None:
    matcher = GrammarMatcher(compile_grammar(compile_json_schema(TREE), BYTES))
    assert matcher.forced_bytes() == b'{"v":'
    assert matcher.accept_bytes(b'{"v":1,"kids":[{"v":2}]')
    assert matcher.forced_bytes() == b"}"
    key = matcher.state_key()
    assert matcher.accept_bytes(b"}") and matcher.is_terminated()
    matcher.rollback(1)
    assert matcher.state_key() == key and not matcher.is_terminated()


@pytest.mark.slow
def test_a_tiny_model_writes_valid_deep_records(tiny_model_dir: str, tmp_path: Path) -> None:
    from kor_cli.decode import SamplingOptions
    from kor_cli.extract import ExtractOptions, Extractor
    from kor_cli.models import load_model
    from kor_cli.schema import load_schema

    path = tmp_path / "tree.json"
    path.write_text(json.dumps({"title": "tree", **TREE}))
    schema = load_schema(str(path))
    loaded = load_model(tiny_model_dir)
    depths: list[int] = []
    for seed in range(3):
        sampling = SamplingOptions(temperature=1.0, seed=seed, max_new_tokens=200)
        options = ExtractOptions(sampling=sampling)
        for result in Extractor(schema, loaded, options).extract_batch(["a tree"] * 4):
            if result.finish_reason == "stop":
                assert result.valid, result.errors
                jsonschema.validate(result.data, schema.json_schema())
                depths.append(serialize(result.data).count("["))
            else:
                assert result.finish_reason == "length" and not result.valid
    assert depths  # some records finished
