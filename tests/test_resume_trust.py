"""Resume trusts nothing it did not write: sidecar, forged rows, foreign files, write errors."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.errors import InputError, OutputError, UsageError
from kor_cli.provenance import read_provenance, sidecar_path
from kor_cli.sink import OutputSink

runner = CliRunner()
SETTINGS = {"schema_sha256": "ab" * 32, "mode": "prompt", "model": "m"}


def row(record_id: object, valid: bool = True) -> dict[str, object]:
    return {"id": record_id, "valid": valid, "data": None}


def written(out: Path, *batches: list[dict[str, object]]) -> bytes:
    with OutputSink(out, settings=SETTINGS) as sink:
        sink.open()
        for batch in batches:
            sink.write(batch)
    return out.read_bytes()


@pytest.mark.parametrize(
    "content",
    [b"my notes\n", b"my notes, no newline", b'{"id": 1, "valid": true}\n', b"\x00\xff"],
)
def test_a_file_kor_cli_did_not_write_is_refused_and_left_as_it_is(
    tmp_path: Path, content: bytes
) -> None:
    out = tmp_path / "notes.txt"
    out.write_bytes(content)
    with pytest.raises(InputError, match="not written by kor-cli batch"):
        OutputSink(out, settings=SETTINGS).open()
    assert out.read_bytes() == content
    assert not sidecar_path(out).exists()


def test_an_empty_file_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.touch()
    assert written(out, [row(1)]) == b'{"id": 1, "valid": true, "data": null}\n'


@pytest.mark.parametrize(
    "forge",
    [
        lambda data: data + b'{"id": "person-005", "valid": true}\n',  # a forged row appended
        lambda data: data.replace(b'"valid": false', b'"valid": true '),  # a row edited
        lambda data: data[: data.index(b"\n") + 1],  # rows removed
        lambda data: b'{"id": 0, "valid": true, "data": null}\n' + data,  # a row inserted
    ],
    ids=["appended", "edited", "truncated", "inserted"],
)
def test_forged_or_changed_rows_are_refused(tmp_path: Path, forge: Any) -> None:
    out = tmp_path / "out.jsonl"
    forged = forge(written(out, [row(1), row(2, valid=False)], [row(3)]))
    out.write_bytes(forged)
    with pytest.raises(InputError, match="changed since kor-cli wrote it"):
        OutputSink(out, settings=SETTINGS).open()
    assert out.read_bytes() == forged


def test_other_settings_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    written(out, [row(1)])
    with pytest.raises(UsageError, match=r"other settings \(mode: \"prompt\" then"):
        OutputSink(out, settings=SETTINGS | {"mode": "constrained"}).open()
    with OutputSink(out, settings=SETTINGS | {"mode": "constrained"}, overwrite=True) as sink:
        assert sink.open().rows == 0
    assert read_provenance(sidecar_path(out)).settings["mode"] == "constrained"  # type: ignore[union-attr]


def test_a_broken_sidecar_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    data = written(out, [row(1)])
    sidecar_path(out).write_text('{"kor_cli_batch": 1, "bytes": -1}')
    with pytest.raises(InputError, match="is not a kor-cli batch sidecar"):
        OutputSink(out, settings=SETTINGS).open()
    assert out.read_bytes() == data


def test_a_kill_inside_the_write_drops_only_the_torn_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the sidecar announced a batch: part of it on disk, or all of it."""
    out = tmp_path / "out.jsonl"
    kept = written(out, [row(1)])
    for part in (0.0, 0.5, 1.0):
        sink = OutputSink(out, settings=SETTINGS)
        sink.open()
        real_write = sink._handle.write  # type: ignore[union-attr]

        def die(data: bytes, part: float = part, real: Any = real_write) -> int:
            real(data[: int(len(data) * part)])
            raise SystemExit("killed")  # stands in for kill -9 between syscalls

        monkeypatch.setattr(sink._handle, "write", die)
        with pytest.raises(SystemExit):
            sink.write([row(2), row(3)])
        sink.close()
        with OutputSink(out, settings=SETTINGS) as again:
            existing = again.open()
            rows = [json.loads(line)["id"] for line in out.read_bytes().splitlines()]
            if part < 1.0:
                assert rows == [1] and out.read_bytes() == kept
            else:
                assert rows == [1, 2, 3] and existing.rows == 3 and existing.dropped_bytes == 0
        monkeypatch.undo()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG, errno.EACCES, errno.EIO])
def test_write_errors_are_named_and_keep_what_was_fsyncd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    out = tmp_path / "out.jsonl"
    kept = written(out, [row(1)])
    sink = OutputSink(out, settings=SETTINGS)
    sink.open()

    def full(data: bytes) -> int:
        raise OSError(code, __import__("os").strerror(code))

    monkeypatch.setattr(sink._handle, "write", full)
    with pytest.raises(OutputError, match="cannot write .*rows written before are kept"):
        sink.write([row(2)])
    with OutputSink(out, settings=SETTINGS) as again:
        assert again.open().rows == 1
    assert out.read_bytes() == kept


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "/dev/zero"])
def test_devices_are_not_outputs(tmp_path: Path, target: str) -> None:
    if not Path(target).exists():
        pytest.skip(f"{target} is absent here")
    with pytest.raises(UsageError, match="must be a regular file"):
        OutputSink(target, settings=SETTINGS).open()


# --- through the command -------------------------------------------------------------------

SCHEMA = "id: person\nattributes:\n  - id: name\n"


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """No model: the extraction seam and the model loader are stand-ins."""
    from kor_cli import backends
    from kor_cli import runner as runner_module
    from kor_cli.result import ExtractResult
    from kor_cli.testing import stream_of_batches

    seen: list[str] = []

    def fake(extractor: Any, texts: list[str]) -> list[ExtractResult]:
        seen.extend(texts)
        return [
            ExtractResult({"person": {"name": t}}, True, [], "", "stop", "prompt", 1, 1, 0, 0.0)
            for t in texts
        ]

    class Loaded:
        model = None
        tokenizer = staticmethod(lambda text, **kw: {"input_ids": list(range(len(text)))})

    monkeypatch.setattr(runner_module, "extract_stream", stream_of_batches(fake))
    monkeypatch.setattr(backends, "load_backend", lambda *a, **k: Loaded())
    monkeypatch.setattr("kor_cli.extract.Extractor.__init__", _fake_init)
    (tmp_path / "person.yaml").write_text(SCHEMA)
    return seen


def _fake_init(self: Any, schema: Any, loaded: Any, options: Any) -> None:
    self.schema, self.loaded, self.options, self.warnings = schema, loaded, options, ()
    self.prompt_ids = lambda text: list(range(len(text)))


def batch(tmp_path: Path, *args: str) -> Any:
    schema = str(tmp_path / "person.yaml")
    return runner.invoke(app, ["batch", schema, *args, "--mode", "prompt"])


def test_batch_refuses_a_notes_file_and_keeps_its_bytes(
    tmp_path: Path, scripted: list[str]
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "text": "Ann"}\n')
    notes = tmp_path / "notes.txt"
    notes.write_text("buy milk")
    result = batch(tmp_path, str(data), "-o", str(notes))
    assert result.exit_code == 2, result.output
    assert "not written by kor-cli batch" in result.stderr and "Traceback" not in result.output
    assert notes.read_text() == "buy milk" and scripted == []


def test_batch_resume_refuses_other_mode_forged_rows_and_other_input(
    tmp_path: Path, scripted: list[str]
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "text": f"T{i}"}) + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    assert batch(tmp_path, str(data), "-o", str(out), "--limit", "2").exit_code == 0
    assert batch(tmp_path, str(data), "-o", str(out)).exit_code == 0
    assert scripted == ["T0", "T1", "T2"]

    other_mode = runner.invoke(
        app, ["batch", str(tmp_path / "person.yaml"), str(data), "-o", str(out)]
    )
    assert other_mode.exit_code == 2 and "other settings (mode" in " ".join(
        other_mode.stderr.split()
    )

    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "p0", "text": "T0"}\n')
    result = batch(tmp_path, str(other), "-o", str(out))
    assert result.exit_code == 2 and "ids this input does not have" in result.stderr

    good = out.read_bytes()
    out.write_bytes(good + b'{"id": "p9", "valid": true}\n')
    result = batch(tmp_path, str(data), "-o", str(out))
    assert result.exit_code == 2 and "changed since kor-cli wrote it" in result.stderr
    assert scripted == ["T0", "T1", "T2"]
