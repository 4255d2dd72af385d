"""The bad-input corpus (tests/badinput_corpus.py) through every command.

Every case must end with an exit code the README documents for it (never 70, the code for
kor-cli's own bugs) and, when it fails, one line on stderr that names the kind of error.
The default run is in-process (typer's CliRunner) and leaves out the heavy cases (model
runs, huge schemas, pipes); the `slow` part runs the heavy cases (every case with
KOR_CORPUS_ALL=1) in a subprocess and checks each ends within 30 s with a peak resident
memory under 1 GB.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.models import demo_model_path

sys.path.insert(0, str(Path(__file__).parent))
from badinput_corpus import Case, build_corpus  # noqa: E402

CORPUS_DIR = Path(tempfile.mkdtemp(prefix="kor-cli-corpus-"))
atexit.register(shutil.rmtree, CORPUS_DIR, True)
CASES = build_corpus(CORPUS_DIR, Path(demo_model_path()))
SECONDS, MEMORY = 30, 1 << 30
KINDS = (
    "usage error",
    "input error",
    "schema error",
    "grammar error",
    "model error",
    "output error",
)


def params(cases: list[Case]) -> list[Any]:
    marks = lambda case: [pytest.mark.xfail(reason=case.xfail, strict=False)] if case.xfail else []  # noqa: E731
    return [pytest.param(case, id=case.id, marks=marks(case)) for case in cases]


def check(case: Case, code: int, stderr: str) -> None:
    assert code != 70, f"internal error: {stderr[-2000:]}"
    assert code in case.expect, f"exit {code}, expected {sorted(case.expect)}: {stderr[-2000:]}"
    if code in (2, 4):
        named = tuple(f"kor-cli: {k}: " for k in KINDS) + ("Error: ",)
        assert any(line.lstrip("│ ").startswith(named) for line in stderr.splitlines()), stderr[
            -2000:
        ]
        assert "Traceback" not in stderr


@pytest.fixture
def _alarm() -> Iterator[None]:
    """A case that hangs fails instead of stopping the suite."""

    def ring(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {SECONDS} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_the_corpus_is_large_and_covers_every_command() -> None:
    assert len(CASES) >= 300
    commands = {case.argv[0] for case in CASES}
    assert commands >= {"schema", "prompt", "extract", "generate", "batch", "compare", "trace"}


@pytest.mark.parametrize("case", params([case for case in CASES if not case.heavy]))
@pytest.mark.usefixtures("_alarm")
def test_case_in_process(case: Case) -> None:
    stdin = case.stdin if case.stdin is not None else b""
    result = CliRunner().invoke(app, list(case.argv), input=stdin, env={"COLUMNS": "200"})
    check(case, result.exit_code, result.stderr)
    if case.name == "py-prints-at-import:show":
        assert "NOISE" not in result.stdout and "NOISE" in result.stderr


def run_limited(argv: list[str], stdin: bytes) -> tuple[int | None, str, float, int]:
    """(exit code or None if killed at SECONDS, stderr, seconds, peak RSS bytes)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (8 * MEMORY, 8 * MEMORY)),
    )
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    try:
        proc.stdin.write(stdin)  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    except BrokenPipeError:
        pass
    code: int | None = None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - started > SECONDS:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = code if code is not None else -9  # reaped here, not by Popen
    reader.join()
    return (
        code,
        b"".join(chunks).decode("utf-8", "replace"),
        time.monotonic() - started,
        (usage.ru_maxrss * 1024),
    )


# The heavy cases by default (the ones whose time and memory are at stake); every case
# with KOR_CORPUS_ALL=1 (well over an hour on a 2-core machine).
SUBPROCESS_CASES = CASES if os.environ.get("KOR_CORPUS_ALL") else [c for c in CASES if c.heavy]


@pytest.mark.slow
@pytest.mark.parametrize("case", params(SUBPROCESS_CASES))
def test_case_in_a_subprocess_within_time_and_memory(case: Case) -> None:
    argv = [sys.executable, "-m", "kor_cli", *case.argv]
    code, stderr, seconds, peak = run_limited(argv, case.stdin or b"")
    assert code is not None, f"no answer within {SECONDS} s"
    check(case, code, stderr)
    assert seconds < SECONDS
    assert peak < MEMORY, f"peak memory {peak / 2**20:.0f} MiB"
