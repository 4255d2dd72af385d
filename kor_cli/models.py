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
from kor_cli.reading import load_json, read_limited

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
    except (RuntimeError, ValueError, TypeError) as error:
        raise UsageError(f"unknown device {device!r}: {error}") from None
    if chosen.type not in ("cpu", "cuda"):
        raise UsageError(f"device {device!r} is not supported; choose auto, cpu, cuda or cuda:N")
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"device {device!r} requested but CUDA is not available")
        count = torch.cuda.device_count()
        if chosen.index is not None and chosen.index >= count:
            raise UsageError(f"device {device!r} does not exist: this machine has {count} GPU(s)")
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
    if name is not None and not name.strip():
        raise UsageError("-m/--model is empty: give a model folder or hub id")
    name = resolve_model_name(name)
    path = Path(name).expanduser()
    is_local = path.exists()
    if not is_local and (name.startswith((".", "/", "~")) or name.count("/") > 1 or local_only):
        raise ModelError(f"model path '{name}' does not exist")
    if is_local and not path.is_dir():
        raise ModelError(f"model path '{name}' is not a folder with a transformers model")
    return (str(path) if is_local else name), is_local


def load_model(
    name: str | None,
    *,
    device: str = "auto",
    dtype: str = "auto",
    local_only: bool = False,
    light: bool = True,
) -> LoadedModel:
    """Load model + tokenizer from a folder or hub id; raise ModelError on any failure.

    `light`: a plain Llama-family folder loads without transformers' modeling code
    (backends/light.py: no forward, no `generate`; what the decode loop needs). False
    always builds the transformers model."""
    source, is_local = locate_model(name, local_only=local_only)
    name = resolve_model_name(name)
    hub_options = {} if is_local else hub_load_options(name)
    chosen_device = pick_device(device)
    chosen_dtype = pick_dtype(dtype, chosen_device)
    if is_local:
        try:
            check_model_folder(Path(source))
        except ModelError as error:
            raise ModelError(f"cannot load model '{name}': {error}") from None
    try:  # the boundary: whatever a damaged model folder makes transformers raise
        import transformers

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()  # 5.x draws one while loading weights
        tokenizer = _load_tokenizer(source, is_local, hub_options)
        model = None
        if is_local and light:  # a plain Llama-family folder: no transformers modeling import
            from kor_cli.backends.light import load_light

            model = load_light(Path(source), chosen_dtype, chosen_device)
        if model is None:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(source, dtype=chosen_dtype, **hub_options)
            model.to(chosen_device)
            model.eval()
        generation_config = getattr(model, "generation_config", None)
        vocab_size = int(model.get_output_embeddings().weight.shape[0])
    except Exception as error:  # noqa: BLE001 - every load failure is a model error
        message = str(error).strip()
        first_line = message.splitlines()[0][:300] if message else type(error).__name__
        raise ModelError(f"cannot load model '{name}': {first_line}") from None
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=chosen_device,
        stop_ids=collect_stop_ids(tokenizer, generation_config),
        vocab_size=vocab_size,
        generation_config=generation_config,
    )


# tokenizer classes that load straight from tokenizer.json (AutoTokenizer would import
# transformers' config and model mappings first: seconds at startup)
DIRECT_TOKENIZERS = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})


def _load_tokenizer(source: str, is_local: bool, hub_options: dict[str, Any]) -> Any:
    """The folder's tokenizer: its class directly when it is a plain tokenizer.json one."""
    import transformers

    folder = Path(source)
    if is_local and (folder / "tokenizer.json").is_file():
        config = load_json_file(folder / "tokenizer_config.json")
        name = config.get("tokenizer_class") if isinstance(config, dict) else None
        if name in DIRECT_TOKENIZERS and hasattr(transformers, name):
            return getattr(transformers, name).from_pretrained(source)
    return transformers.AutoTokenizer.from_pretrained(source, **hub_options)


def load_json_file(path: Path) -> Any:
    """A small JSON file's value, or None when it is missing or not JSON."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# config.json sizes and counts that must be positive (a negative one builds a broken model)
_POSITIVE = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
    "num_key_value_heads",
    "max_position_embeddings",
    "n_layer",
    "n_head",
    "n_embd",
    "n_positions",
    "head_dim",
)


def check_model_folder(path: Path) -> None:
    """A local model folder needs a config.json holding an object with sane sizes."""
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelError(f"{path}: the folder has no config.json")
    data = read_limited(config_path, error=ModelError, what="model config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"{config_path}: not UTF-8 text") from None
    config = load_json(text, str(config_path), error=ModelError)
    if not isinstance(config, dict):
        raise ModelError(f"{config_path}: must hold a JSON object, not {type(config).__name__}")
    for section in (config, config.get("text_config")):
        if not isinstance(section, dict):
            continue
        for key in _POSITIVE:
            value = section.get(key)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ModelError(
                    f"{config_path}: '{key}' must be a positive integer, not {value!r}"
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
