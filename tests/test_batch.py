"""`kor-cli batch` end to end on a tiny random-weight model (prompt mode, --max-tokens 8).

Random weights never produce a valid record, so tests that need valid rows replace the
extraction seam `kor_cli.runner.extract_stream` with a scripted one; everything else
(inputs, planning, chunking, model loading, the sink) runs for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kor_cli import runner as runner_module
from kor_cli.cli import app
from kor_cli.extract import ExtractResult
from kor_cli.sink import OutputSink
from kor_cli.testing import (
    build_tiny_model,
    load_offline_tokenizer,
    simulated_stream,
    stream_of_batches,
)

runner = CliRunner()

PERSON = """\
id: person
attributes:
  - id: name
  - id: age
    type: integer
    required: false
examples:
  - text: Bob is 42.
    output: {name: Bob, age: 42}
"""
PEOPLE = """\
id: people
many: true
attributes:
  - id: name
examples:
  - text: Bob and Ann.
    output: [{name: Bob}, {name: Ann}]
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("batch")
    build_tiny_model(load_offline_tokenizer("mistral-sp"), folder / "model")
    (folder / "person.yaml").write_text(PERSON)
    (folder / "people.yaml").write_text(PEOPLE)
    return {
        "model": folder / "model",
        "person": folder / "person.yaml",
        "people": folder / "people.yaml",
    }


def invoke(env: dict[str, Path], schema: str, *args: str, stdin: str | None = None) -> Any:
    base = ["batch", str(env[schema]), "-m", str(env["model"]), "--max-tokens", "8"]
    return runner.invoke(app, [*base, *args], input=stdin)


def said(result: Any) -> str:
    """stderr with rich's line wrapping undone."""
    return " ".join(result.stderr.split())


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def script(extractor: Any, texts: list[str]) -> list[ExtractResult]:
    """Every text gives a valid record naming its capitals."""
    results = []
    for text in texts:
        names = [w.strip(".,") for w in text.split() if w[:1].isupper()]
        root = extractor.schema.root
        value: Any = [{"name": n} for n in names] if root.many else {"name": names[0]}
        results.append(
            ExtractResult({root.id: value}, True, [], "<json/>", "stop", "prompt", 1, 1, 0, 0.0)
        )
    return results


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace the extraction seam with `script`; returns the texts it saw."""
    seen: list[str] = []

    def fake(extractor: Any, texts: list[str]) -> list[ExtractResult]:
        seen.extend(texts)
        return script(extractor, texts)

    monkeypatch.setattr(runner_module, "extract_stream", stream_of_batches(fake))
    return seen


def test_order_bad_lines_keep_and_exit_3(env: dict[str, Path], tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "in.jsonl",
        [{"id": f"r{i}", "text": f"Ann is {i}.", "gold": i, "source": "s"} for i in range(3)]
        + ["{broken", {"id": "no-text"}, {"text": ["x"]}]
        + [{"id": f"r{i}", "text": f"Bo is {i}."} for i in range(3, 6)],
    )
    out = tmp_path / "out.jsonl"
    result = invoke(env, "person", str(data), "-o", str(out), "--batch-size", "4", "--keep", "gold")
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # data only in -o; progress and summary on stderr
    assert "kor-cli batch" in said(result) and "3 input errors" in said(result)
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ["r0", "r1", "r2", 4, "no-text", 6, "r3", "r4", "r5"]
    assert [r["line"] for r in rows] == list(range(1, 10))
    assert rows[0]["gold"] == 0 and "source" not in rows[0] and "gold" not in rows[6]
    for key in ("data", "valid", "errors", "raw", "finish_reason", "tokens", "forward_passes"):
        assert key in rows[0] and key in rows[3]
    assert rows[0]["finish_reason"] in ("stop", "length") and rows[0]["tokens"] <= 8
    assert rows[3]["errors"] == [
        "input: line 4: malformed JSON: Expecting property name "
        "enclosed in double quotes at column 2"
    ]
    assert rows[4]["errors"] == ["input: line 5: missing text key 'text'"]
    assert rows[5]["finish_reason"] == "input" and not rows[5]["valid"]


def test_all_valid_exit_0_resume_skips_and_overwrite(
    env: dict[str, Path], tmp_path: Path, scripted: list[str]
) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": f"Ann met Bo {i}."} for i in range(5)])
    out = tmp_path / "out.jsonl"
    assert invoke(env, "person", str(data), "-o", str(out), "--limit", "3").exit_code == 0
    assert len(scripted) == 3
    assert invoke(env, "person", str(data), "-o", str(out)).exit_code == 0
    assert len(scripted) == 5  # only records 4 and 5 were new
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["data"] == {"person": {"name": "Ann"}}
    again = invoke(env, "person", str(data), "-o", str(out))
    assert again.exit_code == 0 and len(scripted) == 5 and "skipped 5" in said(again)
    assert invoke(env, "person", str(data), "-o", str(out), "--overwrite").exit_code == 0
    assert len(scripted) == 10 and len(read_rows(out)) == 5


def test_folders_globs_and_stdin(env: dict[str, Path], tmp_path: Path, scripted: list[str]) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "b.txt").write_text("Bea writes.")
    (docs / "a.txt").write_text("Al reads.")
    (docs / "sub" / "c.txt").write_text("Cy sings.")
    out = tmp_path / "out.jsonl"
    assert invoke(env, "person", str(docs), "-o", str(out)).exit_code == 0
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [
        str(docs / "a.txt"),
        str(docs / "b.txt"),
        str(docs / "sub/c.txt"),
    ]
    assert rows[0]["input"] == rows[0]["id"] and rows[0]["line"] is None
    assert rows[1]["data"] == {"person": {"name": "Bea"}}

    glob_out = tmp_path / "glob.jsonl"
    assert invoke(env, "person", str(docs / "**" / "c.*"), "-o", str(glob_out)).exit_code == 0
    assert [r["id"] for r in read_rows(glob_out)] == [str(docs / "sub/c.txt")]

    stdin_out = tmp_path / "stdin.jsonl"
    lines = '{"id": "x", "text": "Xi runs."}\n{"id": "y", "text": "Yo sits."}\n'
    result = invoke(env, "person", "-", "-o", str(stdin_out), stdin=lines)
    assert result.exit_code == 0
    assert [(r["id"], r["input"]) for r in read_rows(stdin_out)] == [
        ("x", "<stdin>"),
        ("y", "<stdin>"),
    ]


def test_resume_after_kill_9(env: dict[str, Path], tmp_path: Path) -> None:
    count = 40
    data = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"d{i:02d}", "text": f"Ann {i}."} for i in range(count)]
    )
    out = tmp_path / "out.jsonl"
    args = [str(env["person"]), str(data), "-o", str(out), "-m", str(env["model"])]
    args += ["--max-tokens", "8", "--batch-size", "1", "--mode", "prompt"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kor_cli", "batch", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100"},
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    written = out.read_bytes().count(b"\n")
    assert 2 <= written < count
    with out.open("ab") as handle:  # a write torn by the kill: half a row, no newline
        handle.write(b'{"id": "d39", "input": "in.js')

    result = invoke(
        env, "person", str(data), "-o", str(out), "--batch-size", "4", "--mode", "prompt"
    )
    assert result.exit_code == 3, result.output  # random weights: no row is valid
    assert "dropped a torn last line" in said(result)
    assert [r["id"] for r in read_rows(out)] == [f"d{i:02d}" for i in range(count)]


def test_ctrl_c_finishes_the_batch_then_exits_130(
    env: dict[str, Path], tmp_path: Path, scripted: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": f"Ann {i}."} for i in range(10)])

    def interrupted(extractor: Any, texts: list[str]) -> list[ExtractResult]:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C in the middle of the first batch
        return script(extractor, texts)

    monkeypatch.setattr(runner_module, "extract_stream", stream_of_batches(interrupted))
    out = tmp_path / "out.jsonl"
    result = invoke(env, "person", str(data), "-o", str(out), "--batch-size", "3")
    assert result.exit_code == 130
    assert "stopping after the records in flight" in said(result) and "interrupted" in said(result)
    assert [r["id"] for r in read_rows(out)] == [1, 2, 3]


def test_continuous_batching_ctrl_c_and_resume_write_each_record_once_in_order(
    env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Texts of 1-9 words take that many steps; rows finish out of order across slots."""
    texts = [" ".join(["Ann"] * (i * 5 % 9 + 1)) for i in range(30)]
    data = write_jsonl(
        tmp_path / "in.jsonl", [{"id": f"r{i}", "text": t} for i, t in enumerate(texts)]
    )
    out = tmp_path / "out.jsonl"
    extracted: list[str] = []
    interrupt = [True]

    def answer(extractor: Any, text: str) -> ExtractResult:
        extracted.append(text)
        if len(extracted) == 6 and interrupt.pop():
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while rows are in flight
        return script(extractor, [text])[0]

    widths: list[int] = []
    monkeypatch.setattr(
        runner_module, "extract_stream", simulated_stream(answer, lambda t: len(t.split()), widths)
    )
    result = invoke(env, "person", str(data), "-o", str(out), "--batch-size", "4")
    assert result.exit_code == 130, result.output
    first = [r["id"] for r in read_rows(out)]
    assert first == [f"r{i}" for i in range(len(first))] and 6 <= len(first) < 30
    assert len(extracted) == len(first)  # what was in flight finished and was written
    assert 4 in widths and extracted != texts[: len(extracted)]  # out of order inside

    extracted.clear()
    interrupt.append(False)
    result = invoke(env, "person", str(data), "-o", str(out), "--batch-size", "4")
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(30)]
    assert sorted(extracted) == sorted(texts[len(first) :])  # the rest, each once
    assert all(r["data"] == {"person": {"name": "Ann"}} for r in rows)


def test_rows_do_not_depend_on_the_batch_size(env: dict[str, Path], tmp_path: Path) -> None:
    """The real decoder with continuous batching: same rows, same order as one at a time."""
    texts = ["Ann.", "Bo is 40 and lives in Leeds with Cy.", "", "Di is 7.", "Ed " * 12]
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in texts])
    outs = []
    for size in ("1", "3"):
        out = tmp_path / f"out{size}.jsonl"
        result = invoke(
            env, "person", str(data), "-o", str(out), "--batch-size", size, "--mode", "prompt"
        )
        assert result.exit_code == 3, result.output
        outs.append([(r["id"], r["raw"], r["tokens"], r["finish_reason"]) for r in read_rows(out)])
    assert outs[0] == outs[1] and [row[0] for row in outs[0]] == [1, 2, 3, 4, 5]


def test_long_text_is_chunked_with_the_real_model(env: dict[str, Path], tmp_path: Path) -> None:
    text = "\n\n".join(f"Paragraph {p}. " + "Ann went to Leeds. " * 6 for p in range(4))
    data = write_jsonl(tmp_path / "in.jsonl", [{"id": "long", "text": text}, {"text": "Short."}])
    out = tmp_path / "out.jsonl"
    result = invoke(env, "person", str(data), "-o", str(out), "--chunk-tokens", "40")
    assert result.exit_code == 3
    long_row, short_row = read_rows(out)
    spans = [(c["start"], c["end"]) for c in long_row["chunks"]]
    assert len(spans) >= 4 and spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False))  # no gaps
    assert long_row["raw"] is None and long_row["errors"][0].startswith("chunk 1/")
    assert "chunks" not in short_row


def test_chunks_merge_many_records(
    env: dict[str, Path], tmp_path: Path, scripted: list[str]
) -> None:
    text = "Ann met Bo. " * 10 + "\n\n" + "Cy met Ann. " * 10
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": text}])
    out = tmp_path / "out.jsonl"
    assert invoke(env, "people", str(data), "-o", str(out), "--chunk-tokens", "30").exit_code == 0
    [row] = read_rows(out)
    assert len(row["chunks"]) == len(scripted) > 1
    assert row["data"] == {"people": [{"name": "Ann"}, {"name": "Bo"}, {"name": "Cy"}]}


def test_too_long_without_chunking_is_an_error_row(env: dict[str, Path], tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "word " * 5000}])
    out = tmp_path / "out.jsonl"
    result = invoke(env, "person", str(data), "-o", str(out), "--chunk-tokens", "0")
    assert result.exit_code == 3
    [row] = read_rows(out)
    assert row["finish_reason"] == "input" and "text too long" in row["errors"][0]
    assert "context of 4096 tokens" in row["errors"][0]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["missing.jsonl"], 2, "no such file or folder"),
        (["in.jsonl", "--keep", "valid"], 2, "--keep cannot copy valid"),
        (["in.jsonl", "--chunk-tokens", "5000"], 2, "--chunk-tokens 5000 does not fit"),
        (["in.jsonl", "--mode", "fancy"], 2, "unknown mode 'fancy'"),
        (["in.jsonl", "-m", "/no/such/model"], 4, "does not exist"),
    ],
)
def test_usage_input_and_model_errors(
    env: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "in.jsonl", [{"text": "Ann."}])
    result = invoke(env, "person", *args, "-o", "out.jsonl")
    assert result.exit_code == code, result.output
    assert said(result).startswith("kor-cli: ") and message in said(result)
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_a_locked_output_is_refused(env: dict[str, Path], tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "in.jsonl", [{"text": "Ann."}])
    out = tmp_path / "out.jsonl"
    with OutputSink(out) as other_run:
        other_run.open()
        result = invoke(env, "person", str(data), "-o", str(out))
    assert result.exit_code == 2 and "another kor-cli batch run" in said(result)


def test_batch_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kor_cli.cli import app\n"
        "result = CliRunner().invoke(app, ['batch', '--help'])\n"
        "assert result.exit_code == 0 and '--chunk-tokens' in result.output\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
