"""A mask depends only on the bytes read, never on how they were cut into tokens.

Random walks over a vocabulary of multi-byte JSON pieces (so tokens cross rule boundaries:
`[{`, `},`, `"}]`, ...) on the recursive schemas: after every step the walking matcher's
mask equals that of a fresh matcher fed the same bytes one byte at a time, and equals it
again after rolling back and replaying the last tokens (warm caches, other stacks).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from kor_cli.grammar.surface import (
    GrammarMatcher,
    TokenizerInfo,
    allocate_token_bitmask,
    compile_grammar,
    compile_json_schema,
)
from kor_cli.testing import RECURSIVE_NAMES, recursive_schema

PIECES = [
    b"[{", b"}]", b"},", b"],", b"[[", b"]]", b"{}", b"[]", b'{"', b'":', b'",', b'"}',
    b'"]', b'"}]', b"}}", b'":{', b'":[', b'":"', b'"v":', b'"kids":[', b'"children":[',
    b'"type":"', b"1,", b"12", b"true", b"null", b"ab", b'a"', b'\\"',
]  # fmt: skip
VOCAB = [bytes([b]) for b in range(256)] + PIECES + [None]
STOP = len(VOCAB) - 1
TOKENIZER = TokenizerInfo(VOCAB, stop_ids=[STOP], vocab_size=len(VOCAB))
DATA = Path(__file__).parent / "data" / "grammar_schemas.json"
UI = json.loads(DATA.read_text())["ui"]["schema"]
SCHEMAS = {name: recursive_schema(name) for name in RECURSIVE_NAMES} | {"ui": UI}


def mask_of(matcher: GrammarMatcher) -> np.ndarray:
    bitmask = allocate_token_bitmask(1, TOKENIZER.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return np.asarray(bitmask)[0].copy()


def allowed(mask: np.ndarray) -> list[int]:
    ids = np.arange(TOKENIZER.vocab_size)
    return [int(i) for i in ids[(mask[ids >> 5] >> (ids & 31)) & 1 == 1]]


def fresh_mask(data: bytes, name: str) -> np.ndarray:
    matcher = GrammarMatcher(COMPILED[name])
    for byte in data:
        assert matcher.accept_token(byte)
    return mask_of(matcher)


def pick(rng: random.Random, choices: list[int], deepen: bool) -> int:
    """Prefer pieces that open a value (to nest deep), then other multi-byte pieces
    (they cross rule boundaries), then anything."""
    pieces = [t for t in choices if t > 255]
    openers = [t for t in pieces if VOCAB[t][-1:] in (b"{", b"[", b":")]  # type: ignore[index]
    roll = rng.random()
    if deepen and openers and roll < 0.5:
        return rng.choice(openers)
    if pieces and roll < 0.8:
        return rng.choice(pieces)
    return rng.choice(choices)


COMPILED = {
    name: compile_grammar(compile_json_schema(schema), TOKENIZER)
    for name, schema in SCHEMAS.items()
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("seed", range(4))
def test_masks_depend_only_on_the_bytes_read(name: str, seed: int) -> None:
    rng = random.Random(seed)
    walker = GrammarMatcher(COMPILED[name])
    tokens: list[int] = []
    for step in range(120):
        text = b"".join(VOCAB[t] for t in tokens)  # type: ignore[misc]
        mask = mask_of(walker)
        assert np.array_equal(mask, fresh_mask(text, name)), (name, text)
        choices = [t for t in allowed(mask) if t != STOP]
        if not choices:
            break
        token = pick(rng, choices, deepen=step < 90)
        assert walker.accept_token(token)
        tokens.append(token)
        if step % 7 == 6:
            walker.rollback(2)
            del tokens[-2:]
            shorter = b"".join(VOCAB[t] for t in tokens)  # type: ignore[misc]
            assert np.array_equal(mask_of(walker), fresh_mask(shorter, name)), (name, shorter)
