"""Plain Llama-family folders load without transformers' modeling code (backends/light.py):
the same parameters, rotary tables and decoding as the transformers model, and a fast start
(`kor-cli extract` imports no transformers modeling module on the demo model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from kor_cli.backends.light import load_light
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.models import LoadedModel, encode_prompt, load_model
from kor_cli.testing import load_offline_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SIZES = {
    "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
}  # fmt: skip


def save_random(folder: Path, kind: str, tokenizer: Any, **extra: Any) -> Path:
    """A random-weight model of type `kind` saved by transformers, with the tokenizer."""
    import transformers

    config_class = {
        "llama": transformers.LlamaConfig,
        "qwen2": transformers.Qwen2Config,
        "qwen3": transformers.Qwen3Config,
    }[kind]
    torch.manual_seed(0)
    config = config_class(vocab_size=len(tokenizer), **SIZES, **extra)
    model = transformers.AutoModelForCausalLM.from_config(config)
    for parameter in model.parameters():  # biases and norms away from their 0/1 starts
        parameter.data.add_(torch.randn_like(parameter) * 0.02)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_offline_tokenizer("mistral-sp")


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("llama", {"tie_word_embeddings": True}),
        ("llama", {"tie_word_embeddings": False, "attention_bias": True, "mlp_bias": True}),
        ("qwen2", {}),  # q/k/v biases
        ("qwen3", {"head_dim": 24}),  # q/k norms, head_dim apart from hidden / heads
    ],
)
def test_light_model_equals_the_transformers_one(
    kind: str, extra: dict[str, Any], tokenizer: Any, tmp_path: Path
) -> None:
    import transformers

    folder = save_random(tmp_path / kind, kind, tokenizer, **extra)
    light = load_light(folder, torch.float32, torch.device("cpu"))
    assert light is not None
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ours, theirs = light.state_dict(), reference.state_dict()
    assert set(ours) == set(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in theirs)
    positions = torch.arange(40)[None]
    probe = torch.empty(1)
    for a, b in zip(light.model.rotary_emb(probe, positions),
                    reference.model.rotary_emb(probe, positions), strict=True):  # fmt: skip
        assert torch.equal(a, b)
    prompts = ["Input: Ann, 31, Paris\nOutput:", "x"]
    options = SamplingOptions(max_new_tokens=8)
    decoded = []
    for model in (light, reference):
        loaded = LoadedModel(kind, model, tokenizer, torch.device("cpu"), (2,), len(tokenizer))
        ids = [encode_prompt(loaded, text, chat=False) for text in prompts]
        decoded.append([r.token_ids for r in Decoder(loaded).generate_batch(ids, options)])
    assert decoded[0] == decoded[1]


@pytest.mark.parametrize(
    "change",
    [
        {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
        {"hidden_act": "gelu"},
        {"model_type": "gpt2"},
        {"sliding_window": 64, "use_sliding_window": True},
        {"num_hidden_layers": 3},  # the weights do not fit the config
    ],
)  # fmt: skip
def test_anything_else_loads_through_transformers(
    change: dict[str, Any], tokenizer: Any, tmp_path: Path
) -> None:
    folder = save_random(tmp_path / "m", "llama", tokenizer)
    config = json.loads((folder / "config.json").read_text())
    config.pop("rope_parameters", None) if "rope_scaling" in change else None
    (folder / "config.json").write_text(json.dumps(config | change))
    assert load_light(folder, torch.float32, torch.device("cpu")) is None


def test_the_demo_model_loads_light_with_its_tokenizer_and_stops() -> None:
    loaded = load_model(None)
    assert type(loaded.model).__name__ == "LightCausalLM"
    assert loaded.stop_ids == (1,) and loaded.vocab_size == 3072


STARTUP = """
import sys
from typer.testing import CliRunner
from kor_cli.cli import app
args = ['extract', 'schemas/person.yaml', 'samples/person.txt', '--max-tokens', '2', '--mode']
result = CliRunner().invoke(app, args + [sys.argv[1]])
assert '"finish_reason"' in result.output, result.output
tables = ('kor_cli.grammar.json_drafts', 'kor_cli.grammar.json_formats')  # schema loading's
grammar = any(n.startswith('kor_cli.grammar.') and n not in tables for n in sys.modules)
print(grammar, 'transformers.modeling_utils' in sys.modules, 'torch._dynamo' in sys.modules)
"""


@pytest.mark.parametrize(("mode", "grammar"), [("prompt", False), ("constrained", True)])
def test_extract_imports_only_what_the_demo_model_and_mode_need(mode: str, grammar: bool) -> None:
    out = subprocess.run(
        [sys.executable, "-c", STARTUP, mode], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.split() == [str(grammar), "False", "False"]
