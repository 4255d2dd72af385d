"""What a new user trips over: user text shown verbatim, plurals, compare without gold, failed
records in the HTML report, and a bad -m on an empty batch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.compare import ModeStats
from kor_cli.console import plural
from kor_cli.errors import EXIT_MODEL
from kor_cli.report import render_html
from kor_cli.result import ExtractResult
from kor_cli.trace import summary

ROOT = Path(__file__).resolve().parents[1]
PERSON = str(ROOT / "schemas" / "person.yaml")


def test_error_messages_show_user_text_verbatim(tmp_path: Path) -> None:
    name = str(tmp_path / "my [red]schema[/red] :cat:.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "kor_cli", "schema", "show", name],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert name in done.stderr and "🐱" not in done.stderr


def test_batch_summary_shows_the_output_path_verbatim(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["batch", PERSON, "-", "-o", "o[bold]:cat:.jsonl"], input="")
    assert result.exit_code == 0, result.output
    assert "o[bold]:cat:.jsonl (0 rows)" in result.stderr


def test_plurals() -> None:
    assert [plural(1, "record"), plural(0, "record"), plural(2, "forward pass")] == [
        "1 record", "0 records", "2 forward passes",
    ]  # fmt: skip
    decoded = SimpleNamespace(tokens=1, forced_tokens=0, forward_passes=1, finish_reason="stop")
    assert summary([], decoded).startswith("1 token = 0 sampled + 0 forced, 1 forward pass,")


def test_empty_stdin_batch_still_checks_the_model(tmp_path: Path) -> None:
    args = ["batch", PERSON, "-", "-o", str(tmp_path / "out.jsonl"), "-m", "./no/such/model"]
    result = CliRunner().invoke(app, args, input="")
    assert result.exit_code == EXIT_MODEL
    assert "model path './no/such/model' does not exist" in result.stderr


def row(valid: bool, data: object, errors: list[str], record_id: str) -> ExtractResult:
    raw = None if data is None else "<json>" + json.dumps(data) + "</json>"
    result = ExtractResult(data, valid, errors, raw, "stop", "constrained", 5, 3, 2, 0.1)
    return result.__class__(**{**result.__dict__, "id": record_id})


def test_report_lists_failed_records_with_prediction_and_gold() -> None:
    stats = ModeStats("constrained")
    stats.add(row(True, {"person": {"name": "Ann"}}, [], "ok"), {"name": "Ann"}, "person")
    stats.add(row(True, {"person": {"name": "Bo"}}, [], "wrong"), {"name": "Cy <3"}, "person")
    stats.add(row(False, None, ["no <json> block"], "broken"), {"name": "Di"}, "person")
    failures = stats.to_dict()["failures"]
    assert [f["id"] for f in failures] == ["wrong", "broken"]
    assert failures[0]["predicted"] == {"person": {"name": "Bo"}}
    assert failures[0]["gold"] == {"name": "Cy <3"}
    report = {
        "schema": "person.yaml", "model": "m", "inputs": ["d.jsonl"], "records": 3,
        "input_errors": [], "gold_key": "gold", "settings": {},
        "modes": {"constrained": stats.to_dict()},
    }  # fmt: skip
    html = render_html(report)
    listed = html[html.index("<h2>Failed records</h2>") :]
    assert "constrained: 2 failed records" in listed
    assert "broken" in listed and "no &lt;json&gt; block" in listed
    assert "Cy &lt;3" in listed and "&quot;Bo&quot;" in listed and ">ok<" not in listed


def test_compare_without_gold_says_so_once(tmp_path: Path) -> None:
    data = tmp_path / "nogold.jsonl"
    data.write_text(
        json.dumps({"id": 1, "text": "Ann is 31."}) + "\n"
        + json.dumps({"id": 2, "text": "Bo lives in Oslo."}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    args = ["compare", PERSON, str(data), "--modes", "constrained", "--max-tokens", "40"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stderr.count("no gold: accuracy not computed") == 1
    assert "2 records, 0 input errors" in " ".join(result.stdout.split())
