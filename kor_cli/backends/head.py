"""Next-token logits from a backend's states: full or selective LM head.

Selective LM head: when every live row allows only a few tokens, computing logits for all
V rows of the output projection is wasted work (V×H multiply-adds per token; 136M for
Qwen2.5-0.5B). Then only the union of allowed rows is projected and the rest stays -inf.
It needs the hidden state before the head (`backend.splits_head`). Masking the logits with
packed bitmasks is `kor_cli.grammar.surface.apply_token_bitmask_`.
"""

from __future__ import annotations

from typing import Any

DEFAULT_SELECTIVE_LIMIT = 2048


class SelectiveHead:
    """Turns states into float logits [B, V], projecting only allowed rows when few."""

    def __init__(self, backend: Any, limit: int = DEFAULT_SELECTIVE_LIMIT) -> None:
        self.backend = backend
        self.limit = limit if backend.splits_head else 0  # 0: always the full head
        self.selective_steps = 0
        self.full_steps = 0
        self.mixed_steps = 0

    def logits(self, states: Any, allowed: list[Any] | None) -> Any:
        """`allowed`: per row the allowed ids, or None when some row needs every token.

        Few allowed tokens in all: only their rows of the head. Otherwise, when some rows
        allow few (≤ limit/8: keys, numbers, enums) and others many (free text), the many
        get the full head and the few share a selective one."""
        if not self.limit or allowed is None:
            self.full_steps += 1
            return self.backend.project(states)
        counts = [int(ids.numel()) for ids in allowed]
        if sum(counts) <= self.limit:
            self.selective_steps += 1
            return self.backend.project(states, _union(allowed))
        narrow = [i for i, n in enumerate(counts) if n <= self.limit // 8]
        if not narrow or len(narrow) == len(counts):
            self.full_steps += 1
            return self.backend.project(states)
        import torch

        self.mixed_steps += 1
        wide = [i for i, n in enumerate(counts) if n > self.limit // 8]
        few = torch.tensor(narrow, device=states.device)
        many = torch.tensor(wide, device=states.device)
        full = self.backend.project(states.index_select(0, many))
        out = full.new_empty((states.shape[0], full.shape[1]))
        out.index_copy_(0, many, full)
        union = _union([allowed[i] for i in narrow])
        out.index_copy_(0, few, self.backend.project(states.index_select(0, few), union))
        return out


def _union(allowed: list[Any]) -> Any:
    """The allowed ids of several rows together."""
    import torch

    distinct = {id(ids): ids for ids in allowed if ids.numel()}
    if len(distinct) == 1:  # one shared id tensor needs no unique() (a device sync on GPU)
        return next(iter(distinct.values()))
    return torch.unique(torch.cat(allowed))
