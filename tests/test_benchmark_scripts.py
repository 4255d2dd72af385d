"""Benchmark scripts: `--help` runs nothing, results go only to `--out` (by default an
untracked scratch path), engines.py without the bench extra runs kor-cli alone, and the
engine benchmarks run the engines `--engines` names (kor among them)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SCRIPTS = ["decode_modes.py", "batch_throughput.py", "startup.py"]  # runtime11's (issue 11)
SCRIPTS += [
    "demo_heldout.py", "engines.py", "grammar_masks.py", "json_schema_suite.py", "schemastore.py"
]  # fmt: skip
SCRIPTS += ["ray_throughput.py"]  # ray12's (issue 12)
SCRIPTS += ["engines_recursive.py"]  # pda10's (issue 10)
SCRIPTS += ["grammar_cache.py"]  # surface10's (issue 10)


def committed() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (BENCH / "results").iterdir()
    }


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600, check=False, **kwargs,
    )  # fmt: skip


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_runs_nothing_and_names_out(script: str) -> None:
    before = committed()
    scratch = BENCH / "out"
    existed = set(scratch.iterdir()) if scratch.exists() else set()
    done = run([str(BENCH / script), "--help"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:") and "--out" in done.stdout
    assert committed() == before
    assert (set(scratch.iterdir()) if scratch.exists() else set()) == existed


def test_default_out_is_untracked_scratch(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import argparse

        from _common import SCRATCH, add_out_argument, out_path
    finally:
        sys.path.remove(str(BENCH))
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokenizer", default="qwen")
    add_out_argument(parser, "masks_{tokenizer}.json")
    assert out_path(parser.parse_args([])) == SCRATCH / "masks_qwen.json"
    assert out_path(parser.parse_args(["--out", str(tmp_path / "x.json")])) == tmp_path / "x.json"
    if shutil.which("git") and (ROOT / ".git").exists():
        probe = SCRATCH.relative_to(ROOT) / "engines.json"
        ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"{probe} is not ignored by git"


BLOCK_EXTRAS = """
import importlib.util, runpy, sys
real = importlib.util.find_spec
hidden = {"xgrammar", "llguidance", "outlines_core", "matplotlib"}
importlib.util.find_spec = lambda name, *a: None if name in hidden else real(name, *a)
sys.path.insert(0, "benchmarks")
sys.argv = ["engines.py", *sys.argv[1:]]
runpy.run_path("benchmarks/engines.py", run_name="__main__")
"""


@pytest.mark.slow
def test_engines_without_the_bench_extra_runs_kor_alone(tmp_path: Path) -> None:
    out = tmp_path / "engines.json"
    args = ["--tokenizers", "mistral-sp", "--schemas", "person", "--walks", "1", "--repeats", "1"]
    done = run(["-c", BLOCK_EXTRAS, *args, "--out", str(out)])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "note: xgrammar, llguidance, outlines not installed" in done.stdout
    assert "Traceback" not in done.stderr
    report = json.loads(out.read_text())
    assert list(report["versions"]) == ["kor-cli"]
    [row] = report["tokenizers"]["mistral-sp"]["schemas"]
    assert list(row["engines"]) == ["kor"] and row["correctness"]["wrong_steps"] == 0


@pytest.mark.parametrize("script", ["engines.py", "engines_recursive.py"])
def test_engines_without_kor_is_refused(script: str) -> None:
    done = run([str(BENCH / script), "--engines", "llguidance", "--out", "unused.json"])
    assert done.returncode == 2
    assert "kor is the reference for every comparison" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_engines_recursive_runs_the_engines_named(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"
    args = ["--tokenizers", "mistral-sp", "--schemas", "tree", "--walks", "1", "--repeats", "1"]
    done = run([str(BENCH / "engines_recursive.py"), *args, "--engines", "kor", "--out", str(out)])
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert list(report["versions"]) == ["kor-cli"]
    [row] = report["tokenizers"]["mistral-sp"]["schemas"]
    assert list(row["engines"]) == ["kor"]


@pytest.mark.slow
def test_gpu_run_script_runs_end_to_end_on_cpu(tmp_path: Path) -> None:
    """`bash benchmarks/gpu_run.sh --cpu DIR`: the GPU script's every step on the tiny shape,
    so a GPU session can run it at once."""
    done = subprocess.run(
        ["bash", str(BENCH / "gpu_run.sh"), "--cpu", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=3000,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("batch_throughput_cpu_tiny.json", "batch_throughput_cpu_tiny-large.json"):
        report = json.loads((tmp_path / name).read_text())
        cells = {(row["variant"], row["mode"], row["batch_size"]) for row in report["results"]}
        modes = {"prompt", "constrained"}
        assert cells == {(v, m, b) for v in ("eager", "graphs") for m in modes for b in (1, 4)}
    modes = json.loads((tmp_path / "decode_modes_cpu_tiny.json").read_text())["modes"]
    assert [mode["mode"] for mode in modes] == ["prompt", "constrained", "constrained-nojump"]
