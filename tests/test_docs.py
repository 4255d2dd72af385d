"""Design notes live in the repository, and every reference to them names a real section."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
OLD_NAME = "DESIGN" + ".md"  # the notes' name before they moved into the repository
CITED = re.compile(r"(DESIGN\.md|docs/design\.md) §(\d+)")


def sources() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in ("kor_cli", "tests", "benchmarks", "scripts"):
        found += sorted((ROOT / folder).rglob("*.py"))
    return found


def test_every_design_reference_names_a_section_of_docs_design() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", DESIGN.read_text(encoding="utf-8"), re.MULTILINE))
    assert {"4", "5", "6", "7", "8"} <= sections
    cited = 0
    for path in [p for p in sources() if p.name != "test_docs.py"]:
        text = path.read_text(encoding="utf-8")
        assert OLD_NAME not in text, f"{path} cites {OLD_NAME}, which is not in the repository"
        for _, number in CITED.findall(text):
            cited += 1
            assert number in sections, f"{path} cites docs/design.md §{number}"
    assert cited >= 5
    assert "docs/design.md" in (ROOT / "README.md").read_text(encoding="utf-8")
