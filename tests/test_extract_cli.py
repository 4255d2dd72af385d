"""`kor-cli extract` end to end through the real code path (tiny random-weight model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
PERSON = str(ROOT / "schemas" / "person.yaml")
TEXT = str(ROOT / "samples" / "person.txt")
RESULT_KEYS = {
    "data",
    "valid",
    "errors",
    "raw",
    "finish_reason",
    "mode",
    "tokens",
    "forward_passes",
    "forced_tokens",
    "seconds",
    "refusal",
    "empty",
}

runner = CliRunner()


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_prompt_mode_garbage_is_reported_invalid(tiny_model_dir: str) -> None:
    code, out, err = invoke(
        "extract", PERSON, TEXT, "-m", tiny_model_dir, "--mode", "prompt", "--max-tokens", "12"
    )
    result = json.loads(out)
    assert set(result) == RESULT_KEYS
    assert code == 1 and result["valid"] is False
    assert result["mode"] == "prompt" and result["tokens"] <= 12
    assert result["errors"] and result["errors"][0].startswith("parse:")
    assert result["data"] is None
    assert "no valid record" in err


def test_stdin_input_and_sampling(tiny_model_dir: str) -> None:
    args = (
        "extract",
        PERSON,
        "-",
        "-m",
        tiny_model_dir,
        "--mode",
        "prompt",
        "--max-tokens",
        "6",
        "--temperature",
        "1",
        "--seed",
        "3",
    )
    first = invoke(*args, stdin="Ann is 31.")
    second = invoke(*args, stdin="Ann is 31.")
    assert json.loads(first[1])["raw"] == json.loads(second[1])["raw"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("extract", "missing.yaml", TEXT, "-m", "x"), 2, "missing.yaml"),
        (("extract", PERSON, "missing.txt", "-m", "x"), 2, "missing.txt: no such file"),
        (("extract", PERSON, TEXT, "-m", "./no/such/model"), 4, "does not exist"),
        (("extract", PERSON, TEXT, "-m", "x", "--mode", "fast"), 2, "unknown mode"),
        (("schema", "show", PERSON, "--as", "xml"), 2, "--as must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_code(
    args: tuple[str, ...], code: int, message: str
) -> None:
    exit_code, out, err = invoke(*args)
    assert exit_code == code
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""


def test_bad_text_files(tmp_path: Path, tiny_model_dir: str) -> None:
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\x80abc")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    for path, message in ((binary, "not valid UTF-8"), (empty, "empty")):
        code, _, err = invoke("extract", PERSON, str(path), "-m", tiny_model_dir)
        assert code == 2 and message in err


def test_broken_schema_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("id: person\nattributes:\n  - id: name\n   description: [oops\n")
    typo = tmp_path / "typo.yaml"
    typo.write_text("id: person\nattributes:\n  - id: name\n    descripton: The name\n")
    for path, message in ((broken, "broken.yaml"), (typo, "descripton")):
        code, _, err = invoke("prompt", str(path), TEXT)
        assert code == 2 and message in err and "Traceback" not in err


def test_model_folder_that_will_not_load(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "no-such-architecture"}')
    code, _, err = invoke("extract", PERSON, TEXT, "-m", str(tmp_path))
    assert code == 4 and "cannot load model" in err


def test_prompt_and_schema_show_print_to_stdout() -> None:
    code, out, _ = invoke("prompt", PERSON, TEXT)
    # the file's final newline is part of the text, as Kor keeps it
    assert code == 0 and out.endswith("since 2015.\n\nOutput:\n")
    code, out, _ = invoke("schema", "show", PERSON, "--as", "json-schema")
    assert code == 0 and json.loads(out)["required"] == ["person"]
    code, out, _ = invoke("schema", "show", PERSON)
    assert code == 0 and out.startswith("```TypeScript\n\nperson: {")
