"""`kor-cli trace` and the decode loop's observer hook, on the tiny random-weight model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.extract import ExtractOptions, Extractor
from kor_cli.models import LoadedModel, load_model
from kor_cli.schema import Schema, load_schema
from kor_cli.trace import TraceStep, run_trace

TEXT = "Ann Lee, 31, ordered the green one (code AB3)."
PICK = {
    "title": "pick",
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
        "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
        "ok": {"type": "boolean"},
    },
    "required": ["color", "n", "code", "ok"],
}

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: str) -> LoadedModel:
    return load_model(tiny_model_dir)


@pytest.fixture(scope="module")
def pick_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("trace") / "pick.json"
    path.write_text(json.dumps(PICK))
    return str(path)


@pytest.fixture(scope="module")
def pick(pick_path: str) -> Schema:
    return load_schema(pick_path)


def options(**kwargs: Any) -> ExtractOptions:
    sampling = kwargs.pop("sampling", SamplingOptions(max_new_tokens=120))
    return ExtractOptions(sampling=sampling, **kwargs)


def check_steps(steps: list[TraceStep], tokens: int, forced: int) -> None:
    """Steps add up to the decode result; per-step figures are in range."""
    emitted = [step for step in steps if step.kind != "stop"]
    assert sum(len(step.token_ids) for step in emitted) == tokens
    assert sum(len(step.token_ids) for step in steps if step.kind == "forced") == forced
    for step in steps:
        if step.kind == "forced":
            assert step.allowed is None and step.mass is None and step.token_ids
        else:
            assert step.allowed is not None and step.allowed > 0 and len(step.token_ids) == 1
            assert step.mass is not None and step.p_token is not None
            assert 0.0 <= step.p_token <= step.mass + 1e-6 and step.mass <= 1.0


def test_observer_sees_full_logits_and_changes_nothing(tiny: LoadedModel, pick: Schema) -> None:
    extractor = Extractor(pick, tiny, options())
    prompts = [extractor.prompt_ids(TEXT), extractor.prompt_ids("Nothing.")]
    sampling = SamplingOptions(max_new_tokens=120)
    factory = extractor.constraints
    assert factory is not None
    calls: list[tuple[int, int]] = []

    def observer(row: int, logits: Any, token: int) -> None:
        assert logits.shape == (tiny.vocab_size,) and bool(torch.isfinite(logits).all())
        calls.append((row, token))

    decoder = Decoder(tiny)
    plain = decoder.generate_batch(prompts, sampling, constraints=[factory.new(), factory.new()])
    seen = decoder.generate_batch(
        prompts, sampling, constraints=[factory.new(), factory.new()], observer=observer
    )
    assert [r.token_ids for r in seen] == [r.token_ids for r in plain]
    assert decoder.step.selective_steps > 0  # the hook still gets full logits then
    for row, result in enumerate(seen):
        sampled = [token for r, token in calls if r == row]
        stop_sampled = sampled[-1] in tiny.stop_ids
        assert len(sampled) - stop_sampled == result.tokens - result.forced_tokens


def test_trace_adds_up_and_matches_untraced_decoding(tiny: LoadedModel, pick: Schema) -> None:
    steps, decoded, _ = run_trace(pick, tiny, TEXT, options())
    assert decoded.finish_reason == "stop" and decoded.forced_tokens > 0
    check_steps(steps, decoded.tokens, decoded.forced_tokens)
    assert steps[0].kind == "forced" and steps[0].text.startswith(" <json>{")
    assert "".join(step.text for step in steps if step.kind != "stop").endswith("</json>")
    untraced = Extractor(pick, tiny, options()).extract(TEXT)
    assert untraced.raw == decoded.text and untraced.valid


def test_trace_without_jump_has_no_forced_steps(tiny: LoadedModel, pick: Schema) -> None:
    sampling = SamplingOptions(temperature=1.0, seed=5, max_new_tokens=120)
    steps, decoded, _ = run_trace(pick, tiny, TEXT, options(jump=False, sampling=sampling))
    assert decoded.forced_tokens == 0 and all(step.kind != "forced" for step in steps)
    check_steps(steps, decoded.tokens, 0)
    assert decoded.forward_passes == decoded.tokens


def test_cli_json_steps(tiny_model_dir: str, pick_path: str) -> None:
    result = runner.invoke(
        app, ["trace", pick_path, "-", "-m", tiny_model_dir, "--json"], input=TEXT
    )
    assert result.exit_code == 0, result.stderr
    steps = json.loads(result.stdout)
    assert steps[0]["step"] == 0 and steps[0]["kind"] == "forced"
    assert {"token_ids", "text", "allowed", "mass", "p_token"} <= set(steps[1])
    assert "forced" in result.stderr and "output: <json>{" in result.stderr


def test_cli_table_and_truncation_exit_code(
    tiny_model_dir: str, pick_path: str, tmp_path: Path
) -> None:
    text = tmp_path / "in.txt"
    text.write_text(TEXT)
    result = runner.invoke(
        app, ["trace", pick_path, str(text), "-m", tiny_model_dir, "--max-tokens", "12"]
    )
    assert result.exit_code == 1, result.stderr
    for word in ("allowed", "mass kept", "forced ×", '{"pick": {"color": "', "finish: length"):
        assert word in result.stdout
