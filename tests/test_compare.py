"""`kor-cli compare`: scoring against gold, per-mode tallies, table/JSON/HTML output, end to end
on the tiny random-weight model (a few records, a few tokens)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kor_cli import runner as runner_module
from kor_cli.cli import app
from kor_cli.compare import METRICS, MISSING, ModeStats, leaf_count, parse_modes, score, unwrap_gold
from kor_cli.errors import UsageError
from kor_cli.extract import ExtractResult
from kor_cli.report import render_html
from kor_cli.testing import simulated_stream, stream_of_batches

ROOT = Path(__file__).resolve().parents[1]
PERSON = str(ROOT / "schemas" / "person.yaml")
ANN = {"name": "Ann Lee", "age": 31, "city": "Paris"}

runner = CliRunner()


def row(data: Any, *, valid: bool = True, finish: str = "stop", tokens: int = 10) -> ExtractResult:
    errors = [] if valid else ["schema: bad"]
    return ExtractResult(data, valid, errors, "", finish, "prompt", tokens, tokens - 2, 2, 0.0)


@pytest.fixture()
def data_file(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"id": "a", "text": "Ann Lee, 31, lives in Paris.", "gold": ANN}),
        "{not json",
        json.dumps({"id": "b", "text": "Bo Ek, 5, Oslo.", "gold": {"person": ANN | {"age": 5}}}),
        json.dumps({"id": "c", "text": "No gold here."}),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


# --- scoring -----------------------------------------------------------------------------


def test_gold_is_the_value_or_the_whole_record() -> None:
    assert unwrap_gold({"person": ANN}, "person") == ANN
    assert unwrap_gold(ANN, "person") == ANN
    assert unwrap_gold([ANN], "person") == [ANN]


def test_field_scores_on_flat_records() -> None:
    assert score(ANN, ANN) == (3, 3, True)
    assert score(ANN, {"name": "  ann  LEE", "age": 31, "city": "Paris"}) == (3, 3, True)
    assert score(ANN, {"name": "Ann Lee", "age": 30}) == (1, 3, False)
    assert score(ANN, ANN | {"email": "a@b.c"}) == (3, 3, False)  # extra field: not exact
    assert score(ANN) == (0, 3, False)  # no (valid) prediction
    assert score({"ok": True, "n": 1}, {"ok": 1, "n": True}) == (0, 2, False)
    assert score({"n": 2}, {"n": 2.0}) == (1, 1, True)
    assert score({"n": 2}, {"n": "2"}) == (0, 1, False)


def test_nested_and_empty_values_are_leaves() -> None:
    gold = {"who": {"name": "Ann", "tags": []}, "note": None}
    assert leaf_count(gold) == 3
    assert score(gold, {"who": {"name": "Ann", "tags": []}, "note": None}) == (3, 3, True)
    assert score(gold, {"who": {"name": "Ann", "tags": ["x"]}}) == (1, 3, False)
    assert score({}, {}) == (1, 1, True)


def test_lists_are_paired_by_best_match_not_position() -> None:
    bob = {"name": "Bob", "age": 40}
    ann = {"name": "Ann", "age": 31}
    assert score([ann, bob], [bob, ann]) == (4, 4, True)
    assert score([ann, bob], [{"name": "Bob", "age": 41}]) == (1, 4, False)
    assert score([ann], [bob, ann]) == (2, 2, False)  # an extra item is not exact
    assert score(["a", "b", "a"], ["a", "a"]) == (2, 3, False)  # items are used once
    assert score([ann], ann) == (0, 2, False)


def test_mode_stats_count_rates_and_skip_input_errors() -> None:
    stats = ModeStats("constrained")
    stats.add(row({"person": ANN}), ANN, "person")
    stats.add(row({"person": ANN | {"age": 99}}), {"person": ANN}, "person")
    stats.add(row({"person": {"name": 3}}, valid=False), ANN, "person")  # parsed, invalid
    stats.add(row(None, valid=False, finish="length", tokens=20), ANN, "person")
    stats.add(row({"person": ANN}), ANN, "person")
    stats.add(row(None, valid=False, finish="input", tokens=0), ANN, "person")
    out = stats.to_dict()
    assert out["records"] == 5 and out["input_errors"] == 1
    assert (out["parsed"], out["valid"], out["truncated"]) == (4, 3, 1)
    assert (out["matched_fields"], out["gold_fields"], out["exact_matches"]) == (8, 15, 2)
    assert out["field_accuracy"] == round(8 / 15, 4) and out["exact_match"] == 0.4
    assert out["tokens_per_record"] == 12.0 and out["forced_tokens_per_record"] == 2.0
    assert out["finish_reasons"] == {"stop": 4, "length": 1}


def test_no_gold_and_no_records_give_undefined_rates() -> None:
    empty = ModeStats("prompt").to_dict()
    assert empty["parse_rate"] is None and empty["seconds_per_record"] is None
    stats = ModeStats("prompt")
    stats.add(row({"person": ANN}), MISSING, "person")
    out = stats.to_dict()
    assert out["valid_rate"] == 1.0 and out["field_accuracy"] is None and out["gold_records"] == 0


def test_modes_are_checked() -> None:
    assert parse_modes("prompt, constrained-nojump,prompt") == ("prompt", "constrained-nojump")
    for bad in ("fast", "", " , "):
        with pytest.raises(UsageError, match="--modes"):
            parse_modes(bad)


def test_html_escapes_and_draws_a_chart_per_metric() -> None:
    stats = ModeStats("prompt")
    stats.add(row({"person": ANN}), ANN, "person")
    report = {
        "schema": "<s>.yaml", "model": "m", "inputs": ["d.jsonl"], "records": 2,
        "input_errors": [{"id": 2, "line": 2, "error": "input: line 2: <bad>"}],
        "gold_key": "gold", "settings": {"max_tokens": 8},
        "modes": {"prompt": stats.to_dict(), "constrained": ModeStats("constrained").to_dict()},
    }  # fmt: skip
    html = render_html(report)
    assert "<s>" not in html and "&lt;s&gt;.yaml" in html and "&lt;bad&gt;" in html
    assert html.count("<svg") == len(METRICS)  # one chart per metric
    assert not any(word in html for word in ("<script", "src=", "href=", "@import"))
    assert "100.0% (3/3)" in html and "–" in html


# --- end to end ----------------------------------------------------------------------------


def test_cli_table_and_input_errors(tiny_model_dir: str, data_file: Path) -> None:
    code, out, err = invoke(
        "compare", PERSON, str(data_file), "-m", tiny_model_dir, "--max-tokens", "6"
    )
    assert code == 0, err
    for word in ("parse rate", "schema-valid rate", "field accuracy", "passes / record"):
        assert word in out
    assert "prompt" in out and "constrained" in out
    assert "4 records, 1 input error " in out
    assert "1 input error (not compared)" in err and "line 2: malformed JSON" in err


def test_cli_json_and_html_report(tiny_model_dir: str, data_file: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    code, out, err = invoke(
        "compare", PERSON, str(data_file), "-m", tiny_model_dir, "--max-tokens", "5",
        "--modes", "constrained,constrained-nojump", "--json", "--report", str(html),
        "--limit", "3", "--batch-size", "1",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert list(report["modes"]) == ["constrained", "constrained-nojump"]
    assert report["records"] == 3 and len(report["input_errors"]) == 1
    jump, nojump = report["modes"]["constrained"], report["modes"]["constrained-nojump"]
    assert jump["records"] == nojump["records"] == 2 and jump["gold_records"] == 2
    assert jump["tokens"] == 10 and jump["truncated"] == 2  # 5 tokens cannot finish a person
    assert jump["forced_tokens"] > 0 and nojump["forced_tokens"] == 0
    assert nojump["forward_passes"] == nojump["tokens"]
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<svg" in page
    assert "constrained-nojump" in page and "schema-valid rate" in page


def test_cli_scores_gold_through_the_real_run(
    tiny_model_dir: str, data_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random weights never extract anything: script the results to check the gold path."""

    def scripted(extractor: Any, texts: list[str]) -> list[ExtractResult]:
        def person(text: str) -> dict[str, Any]:
            return ANN if text.startswith("Ann") else ANN | {"name": "Bo Ek", "age": 5}

        return [
            ExtractResult({"person": person(t)}, True, [], "", "stop", "prompt", 9, 9, 0, 0.1)
            for t in texts
        ]

    monkeypatch.setattr(runner_module, "extract_stream", stream_of_batches(scripted))
    code, out, err = invoke(
        "compare", PERSON, str(data_file), "-m", tiny_model_dir, "--modes", "prompt", "--json"
    )
    assert code == 0, err
    stats = json.loads(out)["modes"]["prompt"]
    # a: exact; b: gold given as {"person": ...}, the name is wrong; c: no gold
    assert (stats["gold_records"], stats["matched_fields"], stats["gold_fields"]) == (2, 5, 6)
    assert stats["exact_matches"] == 1 and stats["valid_rate"] == 1.0


def test_cli_modes_stream_so_no_row_waits_for_its_slowest_batch_mate(
    tiny_model_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each mode's turn is one continuous-batching stream: slots stay full until the last
    rows (batch by batch, every batch would run down to its longest text)."""
    widths: list[int] = []
    steps = [1, 9, 2, 1, 3, 1, 8, 2, 1, 4, 2, 1]  # words per text, a text takes that many steps

    def answer(extractor: Any, text: str) -> ExtractResult:
        return ExtractResult({"person": ANN}, True, [], "", "stop", "prompt", 9, 9, 0, 0.1)

    simulated = simulated_stream(answer, lambda text: len(text.split()), widths)
    monkeypatch.setattr(runner_module, "extract_stream", simulated)
    data = tmp_path / "words.jsonl"
    lines = [json.dumps({"id": i, "text": "Ann " * n, "gold": ANN}) for i, n in enumerate(steps)]
    data.write_text("\n".join(lines) + "\n")
    code, out, err = invoke(
        "compare", PERSON, str(data), "-m", tiny_model_dir, "--modes", "prompt",
        "--batch-size", "3", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["modes"]["prompt"]["exact_matches"] == len(steps)
    assert widths == [3] * 11 + [2]  # batch by batch: 9 + 3 + 8 + 4 = 24 steps


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("-m", "x", "--modes", "fast"), 2, "unknown mode 'fast'"),
        (("-m", "x", "--report", "/no/such/dir/r.html"), 2, "--report"),
        (("-m", "./no/such/model"), 4, "does not exist"),
    ],
)
def test_cli_errors(data_file: Path, args: tuple[str, ...], code: int, message: str) -> None:
    exit_code, out, err = invoke("compare", PERSON, str(data_file), *args)
    assert exit_code == code and message in err and out == ""


def test_cli_no_usable_records(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": 1}\nnope\n')
    code, out, err = invoke("compare", PERSON, str(bad), "-m", "x")
    assert code == 2 and "no usable records, 2 input errors" in err and out == ""
    code, _, err = invoke("compare", PERSON, str(tmp_path / "missing.jsonl"), "-m", "x")
    assert code == 2 and "no such file" in err


def test_help_of_compare_and_trace_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kor_cli.cli import app\n"
        "for args in (['compare', '--help'], ['trace', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"
