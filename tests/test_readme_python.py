"""The README's Python snippet (the transformers LogitsProcessor) runs as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snippet(heading: str) -> str:
    """The first ```python block after `heading` in the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    return after.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_logits_processor_snippet_runs_and_writes_a_record() -> None:
    code = snippet("### transformers `LogitsProcessor`")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.fullmatch(r"\s*<json>(.*)</json>\s*", done.stdout, re.DOTALL)
    assert found, done.stdout
    record = json.loads(found.group(1))
    assert set(record) == {"person"} and isinstance(record["person"]["name"], str)
