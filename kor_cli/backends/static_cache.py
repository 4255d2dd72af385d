"""Our own KV cache and step function for Llama-family decoders (Llama, Mistral, Qwen2/3).

The transformers model keeps its weights and modules (projections, norms, MLPs, rotary
tables); this module runs them over a preallocated cache `[rows, kv_heads, length, head_dim]`
per layer where every row has its own length. So rows start, step and finish
independently (continuous batching) and the attention mask is one comparison of key
positions with each row's query positions — no per-step 4D mask building, no cache
objects, the same tensors every step (what CUDA graphs need, see graphs.py).

A step feeds `T` tokens per row (right-padded): row b's token i lands at position
`length[b] + i` and sees keys `<= length[b] + i`. Padding writes past a row's real
tokens are overwritten by its next step (its length only grows by its real count).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from kor_cli.backends.fused import FusedLayer, fuse_layer, mlp, rms_norm

SUPPORTED_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
STATIC_ROPE_TYPES = frozenset({"default", "linear", "llama3", "yarn"})
LENGTH_STEP = 256  # the cache grows in steps of this many positions


def rope_type(config: Any) -> str:
    """The rotary scaling kind, from transformers 4.x `rope_scaling` or 5.x `rope_parameters`."""
    for name in ("rope_parameters", "rope_scaling"):
        params = getattr(config, name, None)
        if isinstance(params, dict):
            return str(params.get("rope_type") or params.get("type") or "default")
    return "default"


def unsupported_reason(model: Any) -> str | None:
    """Why our step function cannot run `model` (None when it can)."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED_TYPES:
        return f"architecture {kind!r} (supported: {', '.join(sorted(SUPPORTED_TYPES))})"
    if rope_type(config) not in STATIC_ROPE_TYPES:
        return f"rotary scaling {rope_type(config)!r}"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "rotary_emb") or not hasattr(inner, "layers"):
        return "unexpected module layout"
    return None


class StaticCacheModel:
    """Runs a Llama-family transformers model over an owned, per-row-length KV cache."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.inner = model.model
        config = model.config
        self.layers = list(self.inner.layers)
        attention = self.layers[0].self_attn
        self.head_dim = int(
            getattr(attention, "head_dim", config.hidden_size // config.num_attention_heads)
        )
        self.scaling = float(getattr(attention, "scaling", self.head_dim**-0.5))
        self.kv_heads = int(config.num_key_value_heads)
        self.qk_norm = hasattr(attention, "q_norm")
        window = getattr(config, "sliding_window", None)
        self.window = window if window and getattr(config, "use_sliding_window", True) else None
        weight = model.lm_head.weight
        self.device, self.dtype = weight.device, weight.dtype
        # CPU steps are bound by the number of torch calls: fused q/k/v and gate/up GEMMs
        self.fused: list[FusedLayer | None] = [None] * len(self.layers)
        if self.device.type == "cpu":
            self.fused = [fuse_layer(layer) for layer in self.layers]
        self.rows = 0
        self.length = 0
        self.generation = 0  # bumped whenever the cache tensors are replaced
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.cos = self.sin = torch.empty(0)  # sin with its first half negated (see _rope)
        self.lengths = torch.zeros(0, dtype=torch.long, device=self.device)

    def allocate(self, rows: int, length: int) -> None:
        """A cache for `rows` rows of up to `length` positions (rounded up), every row
        empty. The same shape as before keeps the same tensors (captured graphs stay valid)."""
        length = -(-max(length, 1) // LENGTH_STEP) * LENGTH_STEP
        if (rows, length) == (self.rows, self.length):
            self.lengths.zero_()
            return
        self.generation += 1
        shape = (rows, self.kv_heads, length, self.head_dim)
        options = {"device": self.device, "dtype": self.dtype}
        self.keys = [torch.zeros(shape, **options) for _ in self.layers]
        self.values = [torch.zeros(shape, **options) for _ in self.layers]
        self.lengths = torch.zeros(rows, dtype=torch.long, device=self.device)
        self.rows, self.length = rows, length
        self._rotary_tables(length)

    def ensure_length(self, needed: int) -> bool:
        """Grow every row to hold `needed` positions (contents kept); True if it grew."""
        if needed <= self.length:
            return False
        old_keys, old_values, old_lengths, old = self.keys, self.values, self.lengths, self.length
        self.allocate(self.rows, needed)
        for new, prev in zip(self.keys + self.values, old_keys + old_values, strict=True):
            new[:, :, :old] = prev
        self.lengths.copy_(old_lengths)
        return True

    def _rotary_tables(self, length: int) -> None:
        positions = torch.arange(length, device=self.device)[None]
        probe = torch.empty(1, device=self.device, dtype=self.dtype)
        cos, sin = self.inner.rotary_emb(probe, positions)
        half = sin.shape[-1] // 2
        self.cos, self.sin = cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1)

    def move(self, source: int, target: int) -> None:
        """Copy row `source`'s cache and length into row `target`."""
        for cache in self.keys + self.values:
            cache[target] = cache[source]
        self.lengths[target] = self.lengths[source]

    def forward(
        self, first: int, tokens: torch.Tensor, counts: torch.Tensor, keys_upto: int | None
    ) -> torch.Tensor:
        """Run rows `first .. first+B-1` over `tokens` [B, T] (row b's first `counts[b]`
        real); returns final hidden states [B, T, H]; lengths grow by `counts`.

        `keys_upto`: attend over this many cache positions (None: all, as graphs do).
        """
        batch, width = tokens.shape
        rows = slice(first, first + batch)
        start = self.lengths[rows]
        offsets = torch.arange(width, device=tokens.device)
        positions = (start[:, None] + offsets[None, :]).clamp(max=self.length - 1)
        span = self.length if keys_upto is None else min(keys_upto, self.length)
        key_positions = torch.arange(span, device=tokens.device)
        mask = key_positions[None, None, :] <= positions[:, :, None]
        if self.window is not None:
            mask = mask & (key_positions[None, None, :] > positions[:, :, None] - self.window)
        mask = mask[:, None]
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        index = torch.arange(batch, device=tokens.device)[:, None]

        def attend(layer: int, attn: Any, fused: FusedLayer | None, hidden: Any) -> Any:
            query, key, value = self._qkv(attn, fused, hidden, cos, sin)
            key_cache, value_cache = self.keys[layer][rows], self.values[layer][rows]
            key_cache[index, :, positions] = key.transpose(1, 2)
            value_cache[index, :, positions] = value
            out = F.scaled_dot_product_attention(
                query,
                key_cache[:, :, :span],
                value_cache[:, :, :span],
                attn_mask=mask,
                scale=self.scaling,
                enable_gqa=True,
            )
            return attn.o_proj(out.transpose(1, 2).reshape(batch, width, -1))

        hidden = self._layers(self.inner.embed_tokens(tokens), attend)
        self.lengths[rows] = start + counts
        return hidden

    def forward_one(self, row: int, token: torch.Tensor, position: int) -> torch.Tensor:
        """One token [1, 1] for physical row `row` whose length is `position` (known on
        the host): no mask, no index tensors — the keys are sliced to the row's own.
        Returns the hidden state [1, 1, H]."""
        cos, sin = self.cos[position : position + 1], self.sin[position : position + 1]
        low = 0 if self.window is None else max(0, position + 1 - self.window)

        def attend(layer: int, attn: Any, fused: FusedLayer | None, hidden: Any) -> Any:
            query, key, value = self._qkv(attn, fused, hidden, cos, sin)
            key_cache, value_cache = self.keys[layer], self.values[layer]
            key_cache[row, :, position] = key[0, :, 0]
            value_cache[row, :, position] = value[0, 0]
            out = F.scaled_dot_product_attention(
                query,
                key_cache[row : row + 1, :, low : position + 1],
                value_cache[row : row + 1, :, low : position + 1],
                scale=self.scaling,
                enable_gqa=True,
            )
            out = out.transpose(1, 2).reshape(1, 1, -1)
            return attn.o_proj(out) if fused is None else fused.attention_out(out)

        hidden = self._layers(self.inner.embed_tokens(token), attend)
        self.lengths[row] += 1
        return hidden

    def _layers(self, hidden: torch.Tensor, attend: Any) -> torch.Tensor:
        """The decoder layers and final norm, with `attend(layer index, attention module,
        fused projections, normed hidden)` as each layer's attention."""
        for at, (layer, fused) in enumerate(zip(self.layers, self.fused, strict=True)):
            normed = rms_norm(layer.input_layernorm, hidden)
            hidden = hidden + attend(at, layer.self_attn, fused, normed)
            normed = rms_norm(layer.post_attention_layernorm, hidden)
            hidden = hidden + mlp(layer.mlp, fused, normed)
        return rms_norm(self.inner.norm, hidden)

    def _qkv(
        self,
        attn: Any,
        fused: FusedLayer | None,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Query and key [B, heads, T, D] (normed, rotated) and value [B, T, heads, D]."""
        batch, width, _ = hidden.shape
        shape = (batch, width, -1, self.head_dim)
        if fused is not None and not self.qk_norm:  # q and k rotated together
            qkv = F.linear(hidden, fused.qkv.weight, fused.qkv.bias).view(shape)
            heads = fused.qkv.sizes[0] // self.head_dim
            keys = heads + fused.qkv.sizes[1] // self.head_dim
            rotated = _rope(qkv[:, :, :keys].transpose(1, 2), cos, sin)
            return rotated[:, :heads], rotated[:, heads:], qkv[:, :, keys:]
        if fused is not None:
            query, key, value = (part.view(shape) for part in fused.qkv(hidden))
        else:
            query = attn.q_proj(hidden).view(shape)
            key = attn.k_proj(hidden).view(shape)
            value = attn.v_proj(hidden).view(shape)
        if self.qk_norm:
            query, key = attn.q_norm(query), attn.k_norm(key)
        query, key = _rope(query.transpose(1, 2), cos, sin), _rope(key.transpose(1, 2), cos, sin)
        return query, key, value


def _rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding x·cos + rotate_half(x)·sin, where rotate_half(x) = (-x₂, x₁) is
    roll(x)·(-1, 1) with the signs folded into the sin table (the same products exactly)."""
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * signed_sin
