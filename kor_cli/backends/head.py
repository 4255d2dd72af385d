"""Next-token logits from a backend's states: full or selective LM head, packed masks.

Selective LM head: when every live row allows only a few tokens, computing logits for all
V rows of the output projection is wasted work (V×H multiply-adds per token; 136M for
Qwen2.5-0.5B). Then only the union of allowed rows is projected and the rest stays -inf.
It needs the hidden state before the head (`backend.splits_head`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


SHIFTS: dict[str, Any] = {}


def apply_packed_masks(logits: Any, words: np.ndarray) -> Any:
    """Set logits of tokens whose bit is 0 to -inf: `words` uint32 [B, ceil(V/32)]
    (bit i % 32 of word i // 32 for token i). On CPU the bits are unpacked by numpy; on an
    accelerator the packed words are copied once (1/8 of a bool mask) and unpacked there."""
    import torch

    width = logits.shape[-1]
    if logits.device.type == "cpu":
        bits = np.unpackbits(words.view(np.uint8), axis=-1, count=width, bitorder="little")
        return logits.masked_fill_(~torch.from_numpy(bits.view(bool)), float("-inf"))
    allowed = unpack_on_device(words, width, logits.device)
    return logits.masked_fill_(~allowed, float("-inf"))


def unpack_on_device(words: np.ndarray, width: int, device: Any) -> Any:
    """Bool [B, width] from packed words, copied once to `device` and unpacked there."""
    import torch

    shifts = SHIFTS.get(str(device))
    if shifts is None:
        shifts = SHIFTS[str(device)] = torch.arange(32, dtype=torch.int32, device=device)
    packed = torch.from_numpy(words.view(np.int32)).to(device, non_blocking=True)
    bits = (packed[:, :, None] >> shifts) & 1
    return bits.view(packed.shape[0], -1)[:, :width].bool()


def pack_bool_mask(mask: Any, words: int) -> np.ndarray:
    """A bool [V] tensor or array as `words` packed uint32 words."""
    flat = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask, dtype=bool)
    packed = np.packbits(flat, bitorder="little")
    out = np.zeros(words * 4, dtype=np.uint8)
    out[: packed.size] = packed[: words * 4]
    return out.view("<u4")
