"""Schema → DFA → TokenIndex → GrammarMatcher with the real tokenizers.

Valid instances, serialised and tokenized as a model would emit them, are accepted token
by token with a stop allowed at the end; random walks over allowed tokens always end in
JSON that validates against the schema (or hit the step cap).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

compile_module = pytest.importorskip("kor_cli.grammar.compile")
jsonschema = pytest.importorskip("jsonschema")

from kor_cli.grammar.index import TokenIndex  # noqa: E402
from kor_cli.grammar.matcher import GrammarMatcher  # noqa: E402
from kor_cli.grammar.vocab import TokenizerInfo  # noqa: E402
from kor_cli.testing import TOKENIZER_NAMES  # noqa: E402

DATA = json.loads((Path(__file__).parent / "data" / "grammar_schemas.json").read_text())
SCHEMAS = {name: entry for name, entry in DATA.items() if not name.startswith("_")}
WALKS = 6
CAP = 160

pytestmark = pytest.mark.slow


def model_tokens(tokenizer: Any, info: TokenizerInfo, text: str) -> list[int]:
    """The tokens of `text` as a model continuing a prompt emits them. SentencePiece puts a
    space before the first word, which a model need not produce: there, tokenize after a
    newline and drop the tokens of that prefix."""

    def spell(ids: list[int]) -> bytes:
        return b"".join(info.token_bytes[i] or b"" for i in ids)

    ids = list(tokenizer(text, add_special_tokens=False).input_ids)
    if spell(ids) != text.encode():
        ids = list(tokenizer("\n" + text, add_special_tokens=False).input_ids)
        cut = next(k for k in range(len(ids)) if spell(ids[:k]) in (b"\n", b" \n"))
        ids = ids[cut:]
    assert spell(ids) == text.encode()
    return ids


def accept_all(index: TokenIndex, ids: list[int]) -> GrammarMatcher:
    matcher = GrammarMatcher(index)
    for step, token in enumerate(ids):
        assert matcher.allowed_mask()[token], (step, index.info.token_bytes[token])
        assert matcher.accept_token(token), step
    return matcher


def random_walk(index: TokenIndex, rng: np.random.Generator, closers: np.ndarray) -> bytes | None:
    """Random allowed tokens until a stop (None if the cap comes first). Stops are taken
    with probability 0.5 when allowed; closing punctuation is favoured so walks end."""
    matcher, out = GrammarMatcher(index), bytearray()
    stops = list(index.info.stop_ids)
    for _ in range(CAP):
        allowed = matcher.allowed_mask().copy()
        if allowed[stops].any() and (rng.random() < 0.5 or allowed.sum() == len(stops)):
            assert matcher.accept_token(stops[0]) and matcher.is_finished
            return bytes(out)
        allowed[stops] = False
        favoured = allowed & closers
        pool = favoured if favoured.any() and rng.random() < 0.3 else allowed
        token = int(rng.choice(np.flatnonzero(pool)))
        assert matcher.accept_token(token)
        out += index.info.token_bytes[token] or b""
    return None


@pytest.fixture(scope="module")
def grammars() -> dict[str, Any]:
    return {name: compile_module.compile_json_schema(e["schema"]) for name, e in SCHEMAS.items()}


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_serialized_instances_are_accepted(
    name, grammars, tokenizer_factory, tokenizer_info_factory
):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    for schema_name, entry in SCHEMAS.items():
        index = TokenIndex(grammars[schema_name].dfa, info)
        for instance in entry["instances"]:
            jsonschema.validate(instance, entry["schema"])
            text = compile_module.serialize(instance)
            matcher = accept_all(index, model_tokens(tokenizer, info, text))
            assert matcher.is_accepting, (schema_name, text)
            assert matcher.allowed_mask()[list(info.stop_ids)].all()
            assert matcher.accept_token(info.stop_ids[0]) and matcher.is_finished


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_random_walks_yield_valid_json(name, grammars, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    closers = np.zeros(info.vocab_size, dtype=bool)
    closers[[i for i, b in enumerate(info.token_bytes) if b in (b'"', b"]", b"}", b"0")]] = True
    rng = np.random.default_rng(sum(map(ord, name)))
    finished = 0
    for schema_name, entry in SCHEMAS.items():
        index = TokenIndex(grammars[schema_name].dfa, info)
        checker = jsonschema.Draft202012Validator(
            entry["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
        for _ in range(WALKS):
            data = random_walk(index, rng, closers)
            if data is None:
                continue
            finished += 1
            instance = json.loads(data.decode("utf-8"))
            checker.validate(instance)
            # the instance, re-serialised and re-tokenized, walks the grammar again
            text = compile_module.serialize(instance)
            assert accept_all(index, model_tokens(tokenizer, info, text)).is_accepting
    assert finished >= len(SCHEMAS) * WALKS // 2


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_choice_and_regex_grammars(name, tokenizer_factory, tokenizer_info_factory):
    tokenizer, info = tokenizer_factory(name), tokenizer_info_factory(name)
    choices = ["positive", "negative", "très négatif", "中立"]
    index = TokenIndex(compile_module.compile_choice(choices).dfa, info)
    for choice in choices:
        assert accept_all(index, model_tokens(tokenizer, info, choice)).is_accepting
    assert GrammarMatcher(index).forced_bytes() == b""
    date = TokenIndex(compile_module.compile_regex(r"\d{4}-\d{2}-\d{2}").dfa, info)
    matcher = accept_all(date, model_tokens(tokenizer, info, "2024-02-29"))
    assert np.flatnonzero(matcher.allowed_mask()).tolist() == sorted(info.stop_ids)
