"""The matcher surface: packed bitmasks, state keys, termination, back-off, and that the
runtime modules use nothing else of the grammar engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from grammar_helpers import brute_allowed, literal_dfa, person_dfa
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar.surface import (
    CompiledGrammar,
    Grammar,
    GrammarMatcher,
    TokenizerInfo,
    allocate_token_bitmask,
    apply_token_bitmask_,
    compile_grammar,
    compile_regex,
    pack_bool_mask,
    unpack_row,
)

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ["constrain.py", "hf.py", "trace.py", "compare.py", "decode.py"]

VOCAB: list[bytes | None] = [bytes([b]) for b in range(32, 127)]
VOCAB += [b'{"', b'":', b'": "', b'",', b"na", b"me", b"\xc3", b"\xa9", b"\xc3\xa9", None]
STOP = len(VOCAB) - 1
WIDTH = len(VOCAB) + 40  # padded logits: two words past the tokens


def token(data: bytes) -> int:
    return VOCAB.index(data)


def compiled_of(dfa: object) -> CompiledGrammar:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP], vocab_size=WIDTH)
    return compile_grammar(Grammar(dfa, "regex"), info)  # type: ignore[arg-type]


@pytest.fixture
def person() -> GrammarMatcher:
    return GrammarMatcher(compiled_of(person_dfa()))


def test_runtime_modules_use_only_the_surface() -> None:
    for name in RUNTIME:
        tree = ast.parse((ROOT / "kor_cli" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
                if modules[0] == "kor_cli":
                    modules = [f"kor_cli.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                inside = module == "kor_cli.grammar" or module.startswith("kor_cli.grammar.")
                assert not inside or module == "kor_cli.grammar.surface", (name, module)


def test_the_surface_imports_no_torch() -> None:
    code = "import sys, kor_cli.grammar.surface; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_apply_equals_bool_masking_numpy_and_torch_bitmasks() -> None:
    rng = np.random.default_rng(0)
    vocab = 77
    masks = rng.random((3, vocab)) < 0.3
    masks[2] = True
    words = np.stack([pack_bool_mask(m, 3) for m in masks])
    logits = torch.randn(3, vocab)
    expected = logits.masked_fill(~torch.from_numpy(masks), float("-inf"))
    assert torch.equal(apply_token_bitmask_(logits.clone(), words), expected)
    assert torch.equal(apply_token_bitmask_(logits.clone(), torch.from_numpy(words)), expected)
    assert torch.equal(apply_token_bitmask_(logits[0].clone(), words[:1]), expected[0])
    from kor_cli.grammar.bitmask import unpack_on_device  # the accelerator way, on the CPU

    assert torch.equal(unpack_on_device(words, vocab, torch.device("cpu")), torch.from_numpy(masks))
    with pytest.raises(ValueError, match="cannot cover"):
        apply_token_bitmask_(torch.zeros(1, 97), words[:1])


def test_fill_writes_the_exact_mask_into_the_chosen_row(person: GrammarMatcher) -> None:
    dfa = person_dfa()
    written = b""
    numpy_mask = allocate_token_bitmask(3, WIDTH)
    torch_mask = allocate_token_bitmask(3, WIDTH, torch=True)
    assert numpy_mask.shape == (3, 5) and numpy_mask.dtype == np.int32
    for piece in (b'{"', b"na", b"me", b'": "'):
        person.fill_next_token_bitmask(numpy_mask, 1)
        person.fill_next_token_bitmask(torch_mask, 2)
        expected = np.zeros(WIDTH, dtype=bool)
        expected[: len(VOCAB)] = brute_allowed(dfa, VOCAB, [STOP], dfa.walk(dfa.start, written))
        assert np.array_equal(unpack_row(numpy_mask[1], WIDTH), expected)
        assert np.array_equal(unpack_row(torch_mask[2].numpy(), WIDTH), expected)
        assert np.array_equal(person.allowed_mask(), expected)
        assert (numpy_mask[0] == -1).all()  # other rows untouched
        assert person.accept_token(token(piece))
        written += piece


@pytest.mark.parametrize("words", [1, 5])
def test_fill_cuts_pads_or_refuses_a_bitmask_of_another_shape(words: int) -> None:
    # the usual fill is one numpy assignment that checks the row's width itself; a row of
    # another width is cut or zero-padded, a one-word mask is not spread over a wider row,
    # and other dtypes, ndims and read-only arrays are refused
    vocab: list[bytes | None] = [bytes([b]) for b in range(32, 31 + 32 * words)] + [None]
    info = TokenizerInfo(vocab, stop_ids=[len(vocab) - 1])
    matcher = GrammarMatcher(compile_grammar(compile_regex("[0-9 ~]+"), info))
    exact = allocate_token_bitmask(1, len(vocab))
    matcher.fill_next_token_bitmask(exact)
    assert exact.shape == (1, words) and exact.any()
    for width in (words - 1, words + 2):
        bitmask = np.full((2, width), -1, dtype=np.int32)
        matcher.fill_next_token_bitmask(bitmask, 1)
        n = min(width, words)
        assert (bitmask[1, :n] == exact[0, :n]).all() and not bitmask[1, n:].any()
        assert (bitmask[0] == -1).all()
    for wrong in (np.zeros((2, words), np.int64), np.zeros(words, np.int32)):
        with pytest.raises(ValueError, match="int32 \\[batch, words\\]"):
            matcher.fill_next_token_bitmask(wrong)
    with pytest.raises(ValueError, match="int32 \\[batch, words\\]"):
        matcher.fill_next_token_bitmask(np.zeros((2, 1, words), np.int32))
    frozen = np.zeros((1, words), np.int32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        matcher.fill_next_token_bitmask(frozen)


def test_a_stopped_matcher_allows_nothing_and_terminates(person: GrammarMatcher) -> None:
    assert person.accept_bytes(b'{"name": "x", "age": 7')
    assert not person.is_accepting and not person.is_terminated()
    assert person.accept_bytes(b"}") and person.is_accepting and person.is_terminated()
    assert not person.accept_bytes(b"}")
    assert person.accept_token(STOP) and person.is_terminated()
    bitmask = allocate_token_bitmask(1, WIDTH)
    person.fill_next_token_bitmask(bitmask)
    assert not bitmask.any() and person.forced_bytes() == b""
    person.rollback(2)
    assert not person.is_terminated() and not person.allowed_mask()[STOP]


def test_terminated_without_a_stop_when_nothing_can_follow() -> None:
    matcher = GrammarMatcher(compiled_of(literal_dfa([b"ab"])))
    assert not matcher.is_terminated()
    assert matcher.accept_bytes(b"ab")
    assert matcher.is_accepting and matcher.is_terminated()
    assert np.flatnonzero(matcher.allowed_mask()).tolist() == [STOP]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_equal_state_keys_mean_equal_masks(seed: int) -> None:
    """Random walks over allowed tokens: whenever two positions share a key, they share
    the mask; rollback and reset restore the key of the position they return to."""
    rng = np.random.default_rng(seed)
    matcher = GrammarMatcher(compiled_of(person_dfa()))
    seen: dict[object, bytes] = {}
    keys = []
    for _ in range(30):
        key, mask = matcher.state_key(), matcher.allowed_mask()
        assert seen.setdefault(key, mask.tobytes()) == mask.tobytes()
        keys.append(key)
        allowed = np.flatnonzero(mask)
        if not len(allowed):
            break
        assert matcher.accept_token(int(rng.choice(allowed)))
    if len(keys) == matcher.steps:
        keys.append(matcher.state_key())
    back = int(rng.integers(0, matcher.steps + 1))
    matcher.rollback(back)
    assert matcher.state_key() == keys[matcher.steps]
    matcher.reset()
    assert matcher.state_key() == keys[0] and matcher.steps == 0


def test_longer_tokens_for_back_off(person: GrammarMatcher) -> None:
    assert person.accept_bytes(b'{"na')
    # allowed now: "m" (1 byte) and "me" (2 bytes)
    assert person.allows_token_longer_than(1)
    assert not person.allows_token_longer_than(2)


def test_compiled_grammar_describes_itself() -> None:
    info = TokenizerInfo(VOCAB, stop_ids=[STOP], vocab_size=WIDTH)
    compiled = compile_grammar(compile_regex("[a-c]+"), info)
    assert compiled.vocab_size == WIDTH and compiled.words == 5
    assert compiled.kind == "regex" and compiled.warnings == ()
    assert compiled.is_stop(STOP) and not compiled.is_stop(0)
    assert compiled.token_bytes[token(b"na")] == b"na"
    other = compile_grammar(compile_regex("[a-d]+"), info)
    assert len(compiled.key) == 32 and compiled.key != other.key
    assert compiled.key == compile_grammar(compile_regex("[a-c]+"), info).key
