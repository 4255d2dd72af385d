"""The transformers backend: a `LoadedModel` behind the `Backend` interface.

Llama-family models (Llama, Mistral, Qwen2/3) run on our own static KV cache and step
function (static_cache.py): rows start and finish independently, so the decode loop refills
freed slots at once (continuous batching), and on CUDA one-token steps replay captured
graphs (graphs.py). Other architectures run through the model's own forward with a
transformers cache (hf_cache.py): rows of a run start together.

Selective LM head: when the states are hidden states, `project(states, ids)` multiplies
only the given vocabulary rows (the decode loop passes the union of allowed tokens). On CPU
the full head runs as weight @ statesᵀ (logits as a transposed view).
"""

from __future__ import annotations

from typing import Any

from kor_cli.models import LoadedModel

PLAIN_HEAD_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


class TransformersBackend:
    """A transformers causal LM with a KV cache of `capacity` rows."""

    def __init__(self, loaded: LoadedModel, *, compile: bool | None = None) -> None:
        from kor_cli.backends.static_cache import unsupported_reason

        self.loaded = loaded
        model = loaded.model
        config = getattr(model, "config", None)
        plain_head = (
            getattr(config, "model_type", None) in PLAIN_HEAD_TYPES
            and hasattr(model, "model")
            and getattr(getattr(model, "lm_head", None), "bias", 0) is None
        )
        self.splits_head = plain_head
        self.reason = unsupported_reason(model) if plain_head else "no plain LM head"
        self.runner: Any
        if self.reason is None:
            from kor_cli.backends.owned import OwnedRunner

            self.runner = OwnedRunner(model, _want_graphs(loaded, compile))
        else:
            from kor_cli.backends.hf_cache import HFCacheRunner

            self.runner = HFCacheRunner(model, self.splits_head, self.pad_id)
        self.refills = bool(self.runner.refills)

    @property
    def pad_id(self) -> int:
        pad = getattr(self.loaded.tokenizer, "pad_token_id", None)
        return int(pad) if pad is not None else (self.loaded.stop_ids or (0,))[0]

    def start(self, capacity: int, max_new_tokens: int) -> None:
        self.runner.start(capacity, max_new_tokens)

    def prefill(self, rows: list[int], prompts: list[list[int]]) -> Any:
        return self.runner.prefill(rows, prompts)

    def step(self, rows: list[int], tokens: list[list[int]]) -> Any:
        return self.runner.step(rows, tokens)

    def free(self, rows: list[int]) -> None:
        self.runner.free(rows)

    def project(self, states: Any, ids: Any = None) -> Any:
        """Float logits [B, V]; with `ids` only those rows of the LM head (others -inf)."""
        import torch

        if not self.splits_head:
            return states.float()
        head = self.loaded.model.lm_head
        if ids is None:
            if states.device.type == "cpu":
                # [V, H] @ [H, B]: a CPU GEMM with few rows runs 2-3x faster this way round
                # (the weight is read once; a [B, H] @ [H, V] with B = 2..7 is not blocked)
                return torch.matmul(head.weight, states.T).T.float()
            return head(states).float()
        weight = head.weight.index_select(0, ids)
        out = torch.full(
            (states.shape[0], head.weight.shape[0]), float("-inf"), device=states.device
        )
        out[:, ids] = (states @ weight.T).float()
        return out


def _want_graphs(loaded: LoadedModel, compile: bool | None) -> bool:
    """CUDA graphs for one-token steps: on by default on CUDA, never elsewhere."""
    on_cuda = getattr(loaded.device, "type", "cpu") == "cuda"
    if compile and not on_cuda:
        from kor_cli.console import info

        info("kor-cli: --compile needs a CUDA device; decoding eagerly")
    return on_cuda and compile is not False
