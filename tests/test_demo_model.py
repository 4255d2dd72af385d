"""The packaged demo model: the default when no model is given, loads offline through the
same `-m` code path, extracts a valid record in constrained mode; its training script runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.models import MODEL_ENV, LoadedModel, demo_model_path, load_model

ROOT = Path(__file__).resolve().parents[1]
DEMO = Path(demo_model_path())
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json")


@pytest.fixture(scope="module")
def demo() -> LoadedModel:
    return load_model(None, device="cpu")


def test_demo_model_is_packaged_and_small() -> None:
    assert DEMO == ROOT / "kor_cli" / "resources" / "demo_model"
    for name in FILES:
        assert (DEMO / name).is_file(), name
    total = sum(path.stat().st_size for path in DEMO.iterdir())
    assert total < 25 * 2**20


def test_default_model_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    loaded = load_model(None, device="cpu")
    assert loaded.name == str(DEMO)
    assert loaded.stop_ids == (loaded.tokenizer.eos_token_id,)
    assert not loaded.has_chat_template
    assert loaded.vocab_size == len(loaded.tokenizer)


def test_tokenizer_covers_bytes_and_keeps_json_tags(demo: LoadedModel) -> None:
    tokenizer = demo.tokenizer
    for text in ("这家火锅店的牛肉很新鲜", "Größe 🙂 ½", ' <json>{"a": [1, 2]}</json>'):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    assert len(tokenizer(" <json>", add_special_tokens=False)["input_ids"]) == 1
    assert len(tokenizer("</json>", add_special_tokens=False)["input_ids"]) == 1
    assert len(tokenizer('": "', add_special_tokens=False)["input_ids"]) == 1
    assert tokenizer("x")["input_ids"][0] == tokenizer.bos_token_id


def test_extract_with_no_model_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV, raising=False)
    args = ["extract", str(ROOT / "schemas/person.yaml"), str(ROOT / "samples/person.txt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["valid"] is True
    assert record["mode"] == "constrained"
    assert set(record["data"]["person"]) == {"name", "age", "city"}


def test_training_script_smoke(tmp_path: Path) -> None:
    started = time.monotonic()
    out = tmp_path / "model"
    script = str(ROOT / "scripts" / "train_demo_model.py")
    command = [sys.executable, script, "--smoke", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "step 3/3" in done.stderr
    assert time.monotonic() - started < 60
    loaded = load_model(str(out), device="cpu")
    assert loaded.model.config.num_hidden_layers == 1
    summary = json.loads((out / "training.json").read_text())
    assert summary["config"]["steps"] == 3
