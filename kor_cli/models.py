"""Loading a causal LM and its tokenizer from a local folder or a hub id.

Device `auto` picks CUDA when present, else CPU; dtype `auto` picks bf16 on GPU, fp32 on
CPU. Every failure becomes a `ModelError` (exit code 4) with one line naming the model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kor_cli.errors import ModelError, UsageError

MODEL_ENV = "KOR_CLI_MODEL"


@dataclass
class LoadedModel:
    """A model ready for decoding: weights, tokenizer, device and every stop id."""

    name: str
    model: Any
    tokenizer: Any
    device: Any
    stop_ids: tuple[int, ...]
    vocab_size: int
    generation_config: Any = None
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))


def demo_model_path() -> str:
    """The packaged demo model: a tiny stand-in trained on the sample schemas only."""
    return str(Path(__file__).resolve().parent / "resources" / "demo_model")


def resolve_model_name(model: str | None) -> str:
    """The model to use: `-m`, else $KOR_CLI_MODEL, else the packaged demo model."""
    return model or os.environ.get(MODEL_ENV) or demo_model_path()


def pick_device(device: str = "auto") -> Any:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError as error:
        raise UsageError(f"unknown device {device!r}: {error}") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r} requested but CUDA is not available")
    return chosen


def pick_dtype(dtype: str, device: Any) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise UsageError(f"unknown dtype {dtype!r}; choose auto, float32, bfloat16 or float16")
    return table[dtype]


def collect_stop_ids(tokenizer: Any, generation_config: Any) -> tuple[int, ...]:
    """Every id that ends generation: tokenizer EOS plus generation_config's (int or list)."""
    ids: list[int] = []
    candidates = [getattr(tokenizer, "eos_token_id", None)]
    if generation_config is not None:
        candidates.append(getattr(generation_config, "eos_token_id", None))
    for candidate in candidates:
        for value in candidate if isinstance(candidate, (list, tuple)) else [candidate]:
            if isinstance(value, int) and value not in ids:
                ids.append(value)
    return tuple(ids)


HUB_PROBE_SECONDS = 3.0
TRUE_WORDS = {"1", "true", "yes", "on"}
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable() -> bool:
    """False when offline mode is set or a quick TCP connect to the hub fails (no network:
    transformers would retry for about a minute). Behind a proxy the probe is skipped."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(var, "").lower() in TRUE_WORDS for var in OFFLINE_VARS):
        return False
    if any(os.environ.get(var) for var in PROXY_VARS):
        return True
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_SECONDS).close()
    except OSError:
        return False
    return True


def hub_load_options(name: str) -> dict[str, Any]:
    """`from_pretrained` options for hub id `name`: the local cache only when the hub is out of
    reach, and a one-line ModelError at once when the model is not cached either."""
    if hub_reachable():
        return {}
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    except (ImportError, ValueError):  # ValueError: not a valid repo id
        cached = False
    if not cached:
        raise ModelError(
            f"cannot load model '{name}': it is not in the local Hugging Face cache and the hub "
            "cannot be reached (offline); pass a local folder, or download it once online"
        )
    return {"local_files_only": True}


def locate_model(name: str | None, *, local_only: bool = False) -> tuple[str, bool]:
    """(source for from_pretrained, is a local folder) for `-m NAME`, without loading
    anything; ModelError for a path that does not exist or is not a folder."""
    name = resolve_model_name(name)
    path = Path(name).expanduser()
    is_local = path.exists()
    if not is_local and (name.startswith((".", "/", "~")) or name.count("/") > 1 or local_only):
        raise ModelError(f"model path '{name}' does not exist")
    if is_local and not path.is_dir():
        raise ModelError(f"model path '{name}' is not a folder with a transformers model")
    return (str(path) if is_local else name), is_local


def load_model(
    name: str | None, *, device: str = "auto", dtype: str = "auto", local_only: bool = False
) -> LoadedModel:
    """Load model + tokenizer from a folder or hub id; raise ModelError on any failure."""
    name = resolve_model_name(name)
    source, is_local = locate_model(name, local_only=local_only)
    hub_options = {} if is_local else hub_load_options(name)
    chosen_device = pick_device(device)
    chosen_dtype = pick_dtype(dtype, chosen_device)
    try:
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()  # 5.x draws one while loading weights
        tokenizer = AutoTokenizer.from_pretrained(source, **hub_options)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=chosen_dtype, **hub_options)
    except (OSError, ValueError, KeyError, RuntimeError, ImportError) as error:
        message = str(error).strip()
        first_line = message.splitlines()[0] if message else type(error).__name__
        raise ModelError(f"cannot load model '{name}': {first_line}") from None
    model.to(chosen_device)
    model.eval()
    generation_config = getattr(model, "generation_config", None)
    vocab_size = int(model.get_output_embeddings().weight.shape[0])
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=chosen_device,
        stop_ids=collect_stop_ids(tokenizer, generation_config),
        vocab_size=vocab_size,
        generation_config=generation_config,
    )


def encode_prompt(loaded: LoadedModel, prompt: str, *, chat: bool | None = None) -> list[int]:
    """Token ids of `prompt`, wrapped in the chat template when wanted and available.

    `chat=None` means: use the chat template when the tokenizer has one.
    """
    tokenizer = loaded.tokenizer
    use_chat = loaded.has_chat_template if chat is None else chat
    if use_chat:
        if not loaded.has_chat_template:
            raise UsageError(f"model '{loaded.name}' has no chat template; use --no-chat")
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        return list(ids["input_ids"] if isinstance(ids, dict) else ids)
    return list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
