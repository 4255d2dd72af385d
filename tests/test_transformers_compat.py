"""What keeps kor-cli working on transformers 4.57+ and 5.x alike (CI runs the suite on 5.x)."""

from __future__ import annotations

from typing import Any

import pytest

from kor_cli.backends.hf_cache import cache_argument
from kor_cli.testing import _bpe_parts, byte_level_bpe


class Before5:
    def forward(self, input_ids: Any = None, past_key_values: Any = None, use_cache: Any = None):
        return None


class From5:
    def forward(self, input_ids: Any = None, cache: Any = None, use_cache: Any = None):
        return None


def test_cache_argument_follows_the_forward_signature() -> None:
    assert cache_argument(Before5()) == "past_key_values"
    assert cache_argument(From5()) == "cache"


def test_installed_transformers_takes_the_detected_cache_argument(tiny_model_dir: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    arg = cache_argument(model)
    with torch.no_grad():
        first = model(input_ids=torch.tensor([[1, 5, 6]]), use_cache=True)
        cache = first[arg]
        second = model(input_ids=torch.tensor([[7]]), use_cache=True, **{arg: cache})
        whole = model(input_ids=torch.tensor([[1, 5, 6, 7]]))
    assert torch.allclose(second.logits[0, -1], whole.logits[0, -1], atol=1e-4)


RANKS = {b"a": 0, b"b": 1, b"c": 2, b" ": 3, b"bc": 4, b"ab": 5, b"abc": 6}


def test_merge_recovery_replays_rank_order() -> None:
    # "abc" is made from a + bc, since bc (4) merges before ab (5)
    assert _bpe_parts(b"abc", RANKS, RANKS[b"abc"]) == [b"a", b"bc"]
    assert _bpe_parts(b"ab", RANKS, RANKS[b"ab"]) == [b"a", b"b"]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("abc", [6]),  # a whole pre-token in the vocabulary
        ("abcbc", [6, 4]),  # not in it: BPE by rank: a·bc·bc, then a+bc
        ("cab abc", [2, 5, 3, 6]),
        ("a<s>b", [0, 7, 1]),
    ],
)
def test_byte_level_bpe_encodes_by_rank(text: str, ids: list[int]) -> None:
    tokenizer = byte_level_bpe(RANKS, r" ?[a-z]+|\s+", {"<s>": 7})
    assert tokenizer.encode(text).ids == ids
    assert tokenizer.decode(ids, skip_special_tokens=False) == text
