"""Any causal LM through its own forward and a transformers cache (the general fallback).

Prompts of a run are left-padded and start together; every step runs all rows of the
run (attention mask, explicit positions), a row without tokens rides along as masked
padding. Rows whose step is shorter are right-padded with masked positions, so rows finish
and jump independently. New rows wait until every row of the run has finished.
"""

from __future__ import annotations

from typing import Any

import torch


def cache_argument(module: Any) -> str:
    """The KV-cache argument (and output field) of `module.forward`: `cache` from
    transformers 5 on, `past_key_values` before (5.x still accepts it, with a warning)."""
    import inspect

    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


class HFCacheRunner:
    """Runs `model(...)` (or `model.model(...)` when the head is split off) with a cache."""

    refills = False

    def __init__(self, model: Any, split: bool, pad_id: int) -> None:
        self.model = model
        self.split = split
        self.pad_id = pad_id
        self.device = next(model.parameters()).device
        self.cache_arg = cache_argument(model.model if split else model)
        self.index: dict[int, int] = {}  # slot -> row of this run
        self.freed: set[int] = set()
        self.cache: Any = None
        self.attention: Any = None
        self.next_position: Any = None

    def start(self, capacity: int, max_new_tokens: int) -> None:
        self.index.clear()
        self.freed.clear()
        self.cache = self.attention = self.next_position = None

    def prefill(self, rows: list[int], prompts: list[list[int]]) -> Any:
        if self.index:
            raise RuntimeError("this backend starts rows only when every row has finished")
        self.index = {slot: at for at, slot in enumerate(rows)}
        width = max(len(p) for p in prompts)
        ids = [[self.pad_id] * (width - len(p)) + p for p in prompts]
        self.attention = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device
        )
        positions = (self.attention.cumsum(-1) - 1).clamp(min=0)
        self.next_position = self.attention.sum(-1)
        self.cache = None
        return self._forward(ids, positions, [width] * len(rows))

    def step(self, rows: list[int], tokens: list[list[int]]) -> Any:
        steps: list[list[int]] = [[] for _ in self.index]
        for slot, ids in zip(rows, tokens, strict=True):
            steps[self.index[slot]] = ids
        length = max(len(step) for step in steps)
        ids = [step + [self.pad_id] * (length - len(step)) for step in steps]
        real = torch.tensor([len(step) for step in steps], device=self.device)
        offsets = torch.arange(length, device=self.device)
        step_mask = (offsets[None, :] < real[:, None]).long()
        self.attention = torch.cat([self.attention, step_mask], dim=1)
        positions = self.next_position[:, None] + offsets[None, :]
        self.next_position = self.next_position + real
        states = self._forward(ids, positions, real.tolist())
        return states[torch.tensor([self.index[r] for r in rows], device=self.device)]

    def free(self, rows: list[int]) -> None:
        """Finished rows ride along as padding until the whole run has finished."""
        self.freed.update(rows)
        if self.freed >= set(self.index):
            self.index.clear()
            self.freed.clear()

    def _forward(self, ids: list[list[int]], positions: Any, real: list[int]) -> Any:
        """Forward pass; per row the state at its last real position (hidden or logits)."""
        input_ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        width = input_ids.shape[1]
        uniform = all(n in (0, width) for n in real)
        common = dict(
            input_ids=input_ids,
            attention_mask=self.attention,
            position_ids=positions,
            use_cache=True,
        )
        common[self.cache_arg] = self.cache
        if self.split:
            out = self.model.model(**common)
            states = out.last_hidden_state
        else:
            out = self.model(**common, logits_to_keep=1 if uniform else 0)
            states = out.logits
        self.cache = out[self.cache_arg]
        if uniform:
            return states[:, -1]
        last = torch.tensor([max(n, 1) - 1 for n in real], device=self.device)
        rows = torch.arange(len(real), device=self.device)
        return states[rows, last]
