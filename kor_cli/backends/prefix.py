"""Shared prompt starts: the keys/values of one prompt, reused by prompts that begin alike.

Every record of a run is prompted with the same instructions, schema and examples before
its own text (~400 tokens for the person schema), so prefilling each record from scratch
recomputes the same keys and values. `PrefixCache` keeps the cache rows of one prompt and,
for a new prompt, copies the positions both share into the new row, whose prefill then
runs only the rest. Keys and values at a position depend only on the tokens up to it, so
the copy is what the prefill would compute. The kept prompt is replaced by the next one
that shares too little with it (another schema).
"""

from __future__ import annotations

from typing import Any

import torch

MIN_SHARED = 32  # fewer shared tokens are not worth a copy
MAX_KEPT = 8192  # positions kept at most


class PrefixCache:
    """The keys/values of one prompt's first positions, per layer."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.keys: list[torch.Tensor] = []  # per layer [kv_heads, positions, head_dim]
        self.values: list[torch.Tensor] = []
        self.reused = 0  # prompt tokens not prefilled thanks to the cache

    def shared(self, prompt: list[int]) -> int:
        """Leading tokens of `prompt` the kept ones supply (0 when under MIN_SHARED); the
        last prompt token is always left to run (its state starts the output)."""
        limit = min(len(self.tokens), len(prompt) - 1)
        count = 0
        while count < limit and self.tokens[count] == prompt[count]:
            count += 1
        return count if count >= MIN_SHARED else 0

    def copy_into(self, model: Any, row: int, count: int) -> None:
        """Write the first `count` kept positions into physical row `row` of `model`."""
        for cache, kept in zip(model.keys + model.values, self.keys + self.values, strict=True):
            cache[row, :, :count] = kept[:, :count]
        self.reused += count

    def keep(self, model: Any, row: int, prompt: list[int]) -> None:
        """Keep `prompt`'s positions from physical row `row` (just prefilled with it)."""
        count = min(len(prompt), MAX_KEPT)
        self.tokens = list(prompt[:count])
        self.keys = [cache[row, :, :count].clone() for cache in model.keys]
        self.values = [cache[row, :, :count].clone() for cache in model.values]
