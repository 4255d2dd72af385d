"""One decoding step's model call, and the logits it yields: full or selective LM head.

Selective LM head: when every active row allows only a few tokens, computing logits for
all V rows of the output projection is wasted work (V×H multiply-adds per token; 136M for
Qwen2.5-0.5B). Then only the union of allowed rows is projected and the rest stays -inf.
It needs the hidden state before the head, so it is used for architectures whose logits
are exactly `lm_head(final_hidden)` (no soft-capping or scaling); others use the full
model call.
"""

from __future__ import annotations

from typing import Any

from kor_cli.models import LoadedModel

PLAIN_HEAD_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
DEFAULT_SELECTIVE_LIMIT = 2048


def cache_argument(module: Any) -> str:
    """The KV-cache argument (and output field) of `module.forward`: `cache` from
    transformers 5 on, `past_key_values` before (5.x still accepts it, with a warning)."""
    import inspect

    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"


class ModelStep:
    """Runs the model for a step and turns its output into next-token logits."""

    def __init__(self, loaded: LoadedModel, selective_limit: int = DEFAULT_SELECTIVE_LIMIT):
        model = loaded.model
        config = getattr(model, "config", None)
        self.model = model
        self.split = (
            selective_limit > 0
            and getattr(config, "model_type", None) in PLAIN_HEAD_TYPES
            and hasattr(model, "model")
            and getattr(getattr(model, "lm_head", None), "bias", 0) is None
        )
        self.limit = selective_limit
        self.cache_arg = cache_argument(model.model if self.split else model)
        self.selective_steps = 0
        self.full_steps = 0

    def run(
        self, input_ids: Any, attention: Any, positions: Any, cache: Any, real: list[int]
    ) -> tuple[Any, Any]:
        """Forward pass; returns (per-row state at the last real position, new cache).

        The state is the final hidden state when the head is split off, else the logits.
        """
        import torch

        width = input_ids.shape[1]
        uniform = all(n in (0, width) for n in real)
        common = dict(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
        )
        common[self.cache_arg] = cache
        if self.split:
            out = self.model.model(**common)
            states = out.last_hidden_state
        else:
            out = self.model(**common, logits_to_keep=1 if uniform else 0)
            states = out.logits
        new_cache = out[self.cache_arg]
        if uniform:
            return states[:, -1], new_cache
        last = torch.tensor([max(n, 1) - 1 for n in real], device=input_ids.device)
        rows = torch.arange(len(real), device=input_ids.device)
        return states[rows, last], new_cache

    def logits(self, states: Any, allowed: list[Any] | None) -> Any:
        """Float logits [B, V]. `allowed`: per row the allowed ids (an empty tensor for a
        row whose logits do not matter), or None when some row needs the full projection."""
        import torch

        if not self.split:
            return states.float()
        head = self.model.lm_head
        if allowed is None or sum(int(ids.numel()) for ids in allowed) > self.limit:
            self.full_steps += 1
            return head(states).float()
        self.selective_steps += 1
        distinct = {id(ids): ids for ids in allowed if ids.numel()}
        # one shared id tensor (one row, or rows in the same state) needs no unique(), which
        # would cost a device sync on GPU
        union = (
            next(iter(distinct.values()))
            if len(distinct) == 1
            else torch.unique(torch.cat(allowed))
        )
        weight = head.weight.index_select(0, union)
        out = torch.full(
            (states.shape[0], head.weight.shape[0]), float("-inf"), device=states.device
        )
        out[:, union] = (states @ weight.T).float()
        return out
