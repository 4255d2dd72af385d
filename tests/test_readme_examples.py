"""Every shell example of the README and of `--help` runs as written, on the demo model.

README blocks fenced as bash/console/sh run with `bash -euo pipefail` in a fresh scratch
folder holding copies of `schemas/`, `samples/` and `prompts/`; `kor-cli` is this checkout's.
A block may be marked on the line before its fence:

- `<!-- example: needs a real model -->`: skipped (it names a hub id or your own folder);
- `<!-- example: setup -->`: installs or runs the test suite; only its `kor-cli` commands run
  here (`.ci/run` does the install from scratch).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # minutes: every example loads the demo model and decodes

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARK = re.compile(r"^<!-- example: (.+?) -->$")
MARKS = {"needs a real model", "setup"}
SHELLS = {"bash", "console", "sh", "shell"}


@dataclass(frozen=True)
class Block:
    line: int
    mark: str | None
    code: str


def readme_blocks() -> list[Block]:
    """The fenced shell blocks of the README, with the example mark just above each."""
    blocks: list[Block] = []
    lines = README.read_text(encoding="utf-8").splitlines()
    number = 0
    while number < len(lines):
        fence = lines[number].strip()
        if fence.startswith("```") and fence[3:].strip() in SHELLS:
            above = next((line for line in reversed(lines[:number]) if line.strip()), "")
            mark = MARK.match(above.strip())
            end = lines.index("```", number + 1)
            code = "\n".join(lines[number + 1 : end])
            if fence[3:].strip() == "console":  # only the `$ ` lines are commands
                code = "\n".join(c[2:] for c in code.splitlines() if c.startswith("$ "))
            blocks.append(Block(number + 1, mark.group(1) if mark else None, code))
            number = end
        number += 1
    return blocks


def help_examples() -> list[str]:
    """The example command lines of every `--help` text."""
    import typer

    from kor_cli.cli import app

    found: list[str] = []

    def visit(command: object) -> None:
        for line in (getattr(command, "help", None) or "").splitlines():
            text = line.strip().removeprefix("Example:").strip()
            if text.startswith(("kor-cli ", "echo ")) and "kor-cli " in text:
                found.append(text)
        for sub in getattr(command, "commands", {}).values():
            visit(sub)

    visit(typer.main.get_command(app))
    return found


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose `kor-cli` is this checkout's, with no model chosen."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "kor-cli"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kor_cli "$@"\n')
    shim.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "KOR_CLI_MODEL"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HF_HUB_OFFLINE"] = "1"
    return env


def run_shell(code: str, env: dict[str, str], folder: Path) -> None:
    """Run `code` in `folder`, a fresh copy of the files the examples read."""
    for name in ("schemas", "samples", "prompts"):
        shutil.copytree(ROOT / name, folder / name)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,  # minutes on a busy shared 2-core machine
        check=False,
    )
    assert done.returncode == 0, f"{code}\nexit {done.returncode}\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr


BLOCKS = readme_blocks()


def test_the_readme_has_shell_examples_and_known_marks() -> None:
    assert len(BLOCKS) >= 8
    assert {block.mark for block in BLOCKS} - {None} <= MARKS
    for block in BLOCKS:
        if block.mark == "needs a real model":  # the mark is for -m examples only
            assert all(" -m " in line for line in block.code.splitlines() if "kor-cli" in line)


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.mark != "needs a real model"], ids=lambda b: f"line{b.line}"
)
def test_readme_example_runs_as_written(block: Block, env: dict[str, str], tmp_path: Path) -> None:
    code = block.code
    if block.mark == "setup":
        commands = [part.strip() for part in re.split(r"&&|\n", code)]
        code = "\n".join(part for part in commands if part.startswith("kor-cli "))
        if not code:
            pytest.skip("installs packages or runs the test suite (.ci/run does both)")
    run_shell(code, env, tmp_path)


def test_help_examples_run_as_written(env: dict[str, str], tmp_path: Path) -> None:
    examples = help_examples()
    assert len(examples) >= 8 and not any(" -m " in example for example in examples)
    for number, example in enumerate(examples):
        run_shell(example, env, tmp_path / str(number))
