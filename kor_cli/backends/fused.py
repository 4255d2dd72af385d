"""Fewer, larger ops for eager CPU steps of Llama-family layers (used by static_cache.py).

On CPU a one-token step of a small model is bound by the number of torch calls, not by
arithmetic: q/k/v are three projections of the same input, and so are an MLP's gate and
up. `fuse_layer` concatenates each group into one weight and makes the modules' own
parameters views into it (no second copy; the modules still work on their own), so a step
runs one GEMM per group. `rms_norm` is an RMSNorm module's float32 arithmetic as one op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# light.py's RMSNorm and transformers' ones: the same float32 arithmetic
RMS_NORMS = frozenset({"RMSNorm", "LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm"})


@dataclass
class Fused:
    """One weight (and bias) standing for several projections of one input."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    sizes: list[int]

    def __call__(self, hidden: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return F.linear(hidden, self.weight, self.bias).split(self.sizes, dim=-1)


@dataclass
class FusedLayer:
    """A decoder layer's fused q/k/v and gate/up projections, and its output projections
    and activation as plain functions (no module calls)."""

    qkv: Fused
    gate_up: Fused
    o_proj: Fused
    down: Fused
    act: Any

    def attention_out(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.o_proj.weight, self.o_proj.bias)


def fuse(linears: list[Any]) -> Fused | None:
    """Fuse plain `nn.Linear` modules of one input; None when they are anything else."""
    if not all(type(m) is torch.nn.Linear for m in linears):
        return None
    weights = [m.weight for m in linears]
    if len({(w.shape[1], w.dtype, w.device) for w in weights}) != 1:
        return None
    with torch.no_grad():
        weight = torch.cat([w.detach() for w in weights])
        bias = None
        if any(m.bias is not None for m in linears):
            bias = torch.cat([
                m.bias.detach() if m.bias is not None else weight.new_zeros(m.out_features)
                for m in linears
            ])  # fmt: skip
    sizes, start = [], 0
    for module in linears:
        size, grad = module.out_features, module.weight.requires_grad
        module.weight = torch.nn.Parameter(weight[start : start + size], requires_grad=grad)
        if module.bias is not None and bias is not None:
            module.bias = torch.nn.Parameter(bias[start : start + size], requires_grad=grad)
        sizes.append(size)
        start += size
    return Fused(weight, bias, sizes)


def fuse_layer(layer: Any) -> FusedLayer | None:
    """q/k/v and gate/up of one decoder layer fused (None: a layout we do not know)."""
    attn, mlp = layer.self_attn, layer.mlp
    if not all(hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj")):
        return None
    if not all(hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return None
    plain = (mlp.gate_proj, mlp.up_proj, mlp.down_proj, getattr(attn, "o_proj", None))
    if not all(type(m) is torch.nn.Linear for m in plain):
        return None
    qkv = fuse([attn.q_proj, attn.k_proj, attn.v_proj])
    gate_up = fuse([mlp.gate_proj, mlp.up_proj]) if qkv is not None else None
    if qkv is None or gate_up is None:
        return None
    silu = isinstance(mlp.act_fn, torch.nn.SiLU) or type(mlp.act_fn).__name__ == "SiLUActivation"
    act = F.silu if silu else mlp.act_fn
    return FusedLayer(qkv, gate_up, _plain(attn.o_proj), _plain(mlp.down_proj), act)


def _plain(linear: Any) -> Fused:
    """A linear module's own weight and bias (no copy) as a one-part `Fused`."""
    return Fused(linear.weight, linear.bias, [linear.out_features])


def mlp(module: Any, fused: FusedLayer | None, hidden: torch.Tensor) -> torch.Tensor:
    """A Llama-family MLP, down(act(gate(x)) · up(x)), with gate/up as one GEMM if fused."""
    if fused is None:
        return module(hidden)  # type: ignore[no-any-return]
    gate, up = fused.gate_up(hidden)
    return F.linear(fused.act(gate) * up, fused.down.weight, fused.down.bias)


def rms_norm(norm: Any, hidden: torch.Tensor) -> torch.Tensor:
    """`norm(hidden)`; a float32 Llama-family RMSNorm as one op (the same arithmetic:
    weight · x / sqrt(mean(x²) + eps))."""
    eps = getattr(norm, "variance_epsilon", None)
    plain = type(norm).__name__ in RMS_NORMS and isinstance(eps, float)
    if not plain or hidden.dtype != torch.float32 or norm.weight.dtype != torch.float32:
        return norm(hidden)  # type: ignore[no-any-return]
    return F.rms_norm(hidden, (hidden.shape[-1],), norm.weight, eps)
