"""README figures come from the committed results files (benchmarks/results/*.json)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The README text under heading `title`, up to the next heading."""
    start = README.index(title)
    end = re.search(r"^#{1,3} ", README[start + len(title) :], re.MULTILINE)
    return README[start : start + len(title) + (end.start() if end else len(README))]


def numbers(value: Any) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [n for item in value for n in numbers(item)]
    return []


def quoted(figure: str, found: list[float]) -> bool:
    """`figure` as printed (its decimals) matches a number of the results file."""
    places = len(figure.split(".")[1]) if "." in figure else 0
    return any(round(n, places) == float(figure) for n in found)


def test_batch_throughput_figures_are_in_its_results_file() -> None:
    text = section("### Batch throughput")
    found = numbers(json.loads((RESULTS / "batch_throughput.json").read_text()))
    groups = re.findall(r"((?:\d+(?:\.\d+)? / )+\d+(?:\.\d+)?) records/s", text)
    assert groups, "no records/s figures in the README's batch section"
    for group in groups:
        for figure in group.split(" / "):
            assert quoted(figure, found), f"README says {figure} records/s; not in the file"


def test_decode_mode_passes_are_in_its_results_file() -> None:
    report = json.loads((RESULTS / "decode_modes.json").read_text())
    passes = {
        (mode["mode"], record["schema"].split(".")[0]): record["forward_passes"]
        for mode in report["modes"]
        for record in mode["records"]
    }
    rows = re.findall(
        r"^\| (\w+)[^|]* \| (\d+) \| (\d+) / \*\*(\d+)\*\* / (\d+) \|",
        section("### Extraction: prompt-only"),
        re.MULTILINE,
    )
    assert len(rows) == 4
    schemas = {"review": "restaurant_review"}
    for name, _tokens, prompt, constrained, nojump in rows:
        schema = schemas.get(name, name)
        assert passes["prompt", schema] == int(prompt)
        assert passes["constrained", schema] == int(constrained)
        assert passes["constrained-nojump", schema] == int(nojump)


def test_json_schema_suite_counts_are_in_its_results_file() -> None:
    counts = json.loads((RESULTS / "json_schema_suite.json").read_text())
    row = next(line for line in README.splitlines() if line.startswith("| **kor-cli** |"))
    cells = [cell.strip(" *").replace(",", "") for cell in row.split("|")[2:6]]
    correct = counts["accepted_correctly"] + counts["rejected_correctly"]
    assert cells == [
        str(counts["schemas_compiled"]),
        str(correct),
        str(counts["false_accepts"]),
        str(counts["false_rejects"]),
    ]


def test_ray_figures_are_in_its_results_file() -> None:
    text = section("### Ray: `kor-cli batch --ray`")
    report = json.loads((RESULTS / "ray_throughput.json").read_text())
    rows = re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| \*\*(-?\d+)%", text, re.MULTILINE)
    rows += re.findall(r"^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| (-?\d+)%", text, re.MULTILINE)
    assert len(rows) == len(report["results"]) == 2
    by_workers = {row["workers"]: row for row in report["results"]}
    for workers, ray_rate, single_rate, overhead in rows:
        row = by_workers[int(workers)]
        assert quoted(ray_rate, [row["ray_records_per_second"]])
        assert quoted(single_rate, [row["single_records_per_second"]])
        assert quoted(overhead, [row["ray_overhead_percent"]])


def test_demo_model_table_is_in_its_results_file() -> None:
    report = json.loads((RESULTS / "demo_heldout.json").read_text())
    rows = re.findall(
        r"^\| (\w+)[^|]* \| (prompt-only|constrained) \| (\d+)% \| (\d+)% \| ([\d.]+)% \| "
        r"(\d+)% \| \**([\d.]+)\** \|$",
        README,
        re.MULTILINE,
    )
    assert len(rows) == 8  # four held-out sets × two modes
    for name, mode, parse, valid, fields, exact, passes in rows:
        stats = report["sets"][name]["modes"]["prompt" if mode == "prompt-only" else mode]
        assert round(100 * stats["parse_rate"]) == int(parse)
        assert round(100 * stats["valid_rate"]) == int(valid)
        assert round(100 * stats["field_accuracy"], 1) == float(fields)
        assert round(100 * stats["exact_match"]) == int(exact)
        assert f"{stats['forward_passes_per_record']:.1f}" == passes


def test_hand_written_people_figures_are_in_the_results_file() -> None:
    modes = json.loads((RESULTS / "demo_heldout.json").read_text())["sets"]["people"]["modes"]
    found = re.search(
        r"prompt-only parses (\d+)/(\d+)\s+\((\d+)% field accuracy\) and constrained "
        r"(\d+)/(\d+) \((\d+)%\)",
        README,
    )
    assert found, "the people.jsonl sentence is gone from the README"
    prompt, constrained = modes["prompt"], modes["constrained"]
    assert [int(n) for n in found.groups()] == [
        prompt["parsed"], prompt["records"], round(100 * prompt["field_accuracy"]),
        constrained["parsed"], constrained["records"], round(100 * constrained["field_accuracy"]),
    ]  # fmt: skip


def test_grammar_cache_figures_are_in_its_results_file() -> None:
    text = section("### Token masks vs XGrammar")
    start = text.index("- **Disk cache.**")
    end = text.find("\n- ", start + 1)
    bullet = text[start : end if end > 0 else len(text)]
    data = json.loads((RESULTS / "grammar_cache_qwen.json").read_text())
    found = numbers(data["summary"])
    figures = re.findall(r"(\d+\.\d+) ms", bullet) + re.findall(r"(\d+\.\d+)–", bullet)
    assert len(figures) >= 7
    for figure in figures:
        assert quoted(figure, found), figure


def test_recursive_engine_table_is_in_its_results_file() -> None:
    report = json.loads((RESULTS / "engines_recursive.json").read_text())
    rows = {row["schema"]: row["engines"] for row in report["tokenizers"]["qwen"]["schemas"]}
    table = re.findall(r"^\| (tree|rpc) \| (.+) \|$", section("### Recursive schemas"), re.M)
    assert {name for name, _ in table} == set(rows)
    for name, cells in table:
        engines = rows[name]
        want = [
            *(engines[e]["first_mask_ms"] for e in ("kor", "llguidance", "xgrammar")),
            *(engines[e]["mask_us_cold"]["mean"] for e in ("kor", "llguidance")),
            *(engines[e]["mask_us_cold_cpu"]["mean"] for e in ("kor", "llguidance")),
            *(engines[e]["mask_us_warm"]["mean"] for e in ("kor", "llguidance")),
            engines["kor"]["mask_us_warm"]["p99"],
        ]
        got = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cells)]
        assert got == want, (name, got, want)


def test_first_mask_figures_are_in_their_results_files() -> None:
    """Every "a / b / c ms" (or s) group of the JSTS and SchemaStore sections is a time to
    first mask of that benchmark's results file."""
    for title, names in (
        ("### JSON-Schema-Test-Suite", ("json_schema_suite.json", "json_schema_suite_frozen.json")),
        ("### SchemaStore", ("schemastore.json",)),
    ):
        text = section(title)
        found = [n for name in names for n in numbers(json.loads((RESULTS / name).read_text()))]
        name = " or ".join(names)
        groups = re.findall(r"((?:\d+(?:\.\d+)? / )+\d+(?:\.\d+)?) m?s\b", text)
        assert groups, f"no first-mask figures in the README's {title} section"
        for group in groups:
            for figure in group.split(" / "):
                assert quoted(figure, found), f"README says {figure} ({title}); not in {name}"


def test_any_value_figures_are_in_its_results_file() -> None:
    text = section("### Any value (`{}`): a recursive rule")
    found = numbers(json.loads((RESULTS / "any_value.json").read_text()))
    figures = re.findall(r"(\d+\.\d+)(?= ms| µs|×| /| vs)", text)
    assert len(figures) >= 20, figures
    for figure in figures:
        assert quoted(figure, found), f"README says {figure}; not in any_value.json"
