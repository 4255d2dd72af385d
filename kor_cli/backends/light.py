"""Llama-family checkpoints loaded without transformers' modeling code, for a fast start.

Importing transformers' modeling stack (modeling_utils, its masking, torch._dynamo,
quantizers, losses, ...) costs seconds before the first token, yet the decode loop runs
our own step function (static_cache.py) over the model's weights and needs none of it.
For a local folder holding a plain Llama-family model (llama, mistral, qwen2, qwen3 in
safetensors; default rotary, SiLU, no sliding window in effect, no quantisation)
`load_light` builds the few modules static_cache.py and fused.py use — the same
parameters, the same arithmetic (RMSNorm, rotary tables) as transformers' classes — and
loads the weights. Anything else returns None and loads through transformers.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from kor_cli.models import load_json_file

LIGHT_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})
# Architectures whose q/k/v projections always carry a bias (attention_bias does not say).
QKV_BIAS_TYPES = frozenset({"qwen2"})
# transformers' default use_sliding_window per type (a window is in effect only when on)
WINDOW_DEFAULT = {"llama": True, "mistral": True, "qwen2": False, "qwen3": False}


class RMSNorm(nn.Module):
    """weight · x / sqrt(mean(x²) + eps), computed in float32 (as transformers' RMSNorms)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.variance_epsilon = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        dtype = hidden.dtype
        hidden = hidden.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden.to(dtype)


class Rotary(nn.Module):
    """Default rotary embedding: (cos, sin) [1, T, head_dim] for positions [1, T]."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        steps = torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim
        self.inv_freq = nn.Buffer(1.0 / (theta**steps), persistent=False)

    def forward(self, probe: torch.Tensor, positions: torch.Tensor) -> tuple[Any, Any]:
        freqs = positions[..., None].float() * self.inv_freq.to(probe.device, torch.float)
        table = torch.cat((freqs, freqs), dim=-1)
        return table.cos().to(probe.dtype), table.sin().to(probe.dtype)


class Attention(nn.Module):
    """The projections of one attention block (static_cache.py runs the attention)."""

    def __init__(self, config: Any, head_dim: int, qkv_bias: bool, qk_norm: bool) -> None:
        super().__init__()
        hidden, heads, kv = (
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
        )
        self.head_dim = head_dim
        self.scaling = head_dim**-0.5
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, kv * head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, kv * head_dim, bias=qkv_bias)
        # qwen2: biased q/k/v, never o; the others: attention_bias for all four
        out_bias = config.model_type not in QKV_BIAS_TYPES and qkv_bias
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=out_bias)
        if qk_norm:
            self.q_norm = RMSNorm(head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(head_dim, config.rms_norm_eps)


class MLP(nn.Module):
    """down(silu(gate(x)) · up(x))."""

    def __init__(self, hidden: int, inner: int, bias: bool) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(hidden)) * self.up_proj(hidden))


class Layer(nn.Module):
    def __init__(self, config: Any, head_dim: int) -> None:
        super().__init__()
        kind = config.model_type
        qkv_bias = kind in QKV_BIAS_TYPES or bool(getattr(config, "attention_bias", False))
        self.self_attn = Attention(config, head_dim, qkv_bias, qk_norm=kind == "qwen3")
        self.mlp = MLP(
            config.hidden_size, config.intermediate_size, bool(getattr(config, "mlp_bias", False))
        )
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class Embedding(nn.Embedding):
    """An embedding built without random initialisation (its weight is loaded): on the
    meta device normal_ would import torch._dynamo, seconds at startup."""

    def reset_parameters(self) -> None:
        pass


class Decoder(nn.Module):
    def __init__(self, config: Any, head_dim: int) -> None:
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            Layer(config, head_dim) for _ in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb: Rotary | None = None  # set off the meta device (load_light)


class LightCausalLM(nn.Module):
    """`model` (the decoder), `lm_head`, `config` and `generation_config`: what the
    transformers backend reads of a Llama-family model."""

    def __init__(self, config: Any, head_dim: int) -> None:
        super().__init__()
        self.config = config
        self.generation_config: Any = None
        self.model = Decoder(config, head_dim)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head


def _read_json(path: Path) -> dict[str, Any] | None:
    data = load_json_file(path)
    return data if isinstance(data, dict) else None


def _rope_theta(config: dict[str, Any]) -> float | None:
    """rope_theta when the rotary embedding is the default one, else None."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if not isinstance(params, dict):
        return None
    kind = params.get("rope_type") or params.get("type") or "default"
    factor = config.get("partial_rotary_factor", params.get("partial_rotary_factor", 1.0))
    if kind != "default" or factor != 1.0:
        return None
    theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
    return float(theta) if isinstance(theta, (int, float)) else None


def light_config(folder: Path) -> tuple[Any, float] | None:
    """(config, rope theta) when the folder holds a model `load_light` can build."""
    config = _read_json(folder / "config.json")
    if config is None or config.get("model_type") not in LIGHT_TYPES:
        return None
    kind = config["model_type"]
    window = config.get("sliding_window") and config.get("use_sliding_window", WINDOW_DEFAULT[kind])
    if (
        config.get("hidden_act", "silu") != "silu"
        or config.get("quantization_config")
        or config.get("pretraining_tp", 1) != 1
        or window
        or not any((folder / name).is_file() for name in _WEIGHT_FILES)
    ):
        return None
    theta = _rope_theta(config)
    required = ("hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
                "intermediate_size", "rms_norm_eps")  # fmt: skip
    if theta is None or not all(key in config for key in required):
        return None
    config.setdefault("num_key_value_heads", config["num_attention_heads"])
    config.setdefault("max_position_embeddings", 2048)
    config["use_sliding_window"] = False
    return SimpleNamespace(**config), theta


_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    index = _read_json(folder / "model.safetensors.index.json")
    if index is None:
        return load_file(str(folder / "model.safetensors"))
    state: dict[str, torch.Tensor] = {}
    for name in sorted(set(index.get("weight_map", {}).values())):
        state.update(load_file(str(folder / name)))
    return state


def load_light(folder: Path, dtype: torch.dtype, device: Any) -> LightCausalLM | None:
    """The model in `folder` built without transformers, or None when it is not a plain
    Llama-family safetensors checkpoint (or its tensors do not fit the config)."""
    found = light_config(folder)
    if found is None:
        return None
    config, theta = found
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    with torch.device("meta"):
        model = LightCausalLM(config, int(head_dim))
    state = {
        name: tensor for name, tensor in _weights(folder).items()
        if not name.endswith("rotary_emb.inv_freq")
    }  # fmt: skip
    tied = "lm_head.weight" not in state
    if tied and not getattr(config, "tie_word_embeddings", True):
        return None
    wanted = {
        name: p for name, p in model.state_dict().items() if not (tied and name == "lm_head.weight")
    }
    if set(state) != set(wanted) or any(state[n].shape != p.shape for n, p in wanted.items()):
        return None
    state = {name: tensor.to(dtype) for name, tensor in state.items()}
    model.load_state_dict(state, strict=False, assign=True)
    if tied:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb = Rotary(int(head_dim), theta)  # arange on meta imports dynamo
    model.generation_config = _generation_config(folder, config)
    return model.to(device).eval()


def _generation_config(folder: Path, config: Any) -> Any:
    """generation_config.json, else its ids from the model config (as transformers does)."""
    data = _read_json(folder / "generation_config.json")
    if data is None:
        ids = ("bos_token_id", "eos_token_id", "pad_token_id")
        data = {key: getattr(config, key) for key in ids if hasattr(config, key)}
    return SimpleNamespace(**data)
