"""SchemaStore's real-world schemas through the real Qwen token mask: never accept an
instance that must not validate (`benchmarks/schemastore.py`, which also writes the
figures the README quotes).

Slow: marked `slow` and run only when `KOR_CORPUS_TESTS=1`; `KOR_CORPUS_EVERY=N` checks
every N-th schema only (`.ci/run` checks every 8th: ~25 minutes on a loaded 2-core machine,
where the whole corpus took over 3 hours). Skipped when the corpus is absent
(`../shared/testdata/schemastore`).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "testdata" / "schemastore"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "schemastore_bench", REPO / "benchmarks" / "schemastore.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.skipif(not (CORPUS / "schemas").is_dir(), reason="SchemaStore corpus not available")
@pytest.mark.skipif(os.environ.get("KOR_CORPUS_TESTS") != "1", reason="set KOR_CORPUS_TESTS=1")
def test_schemastore_no_false_accepts() -> None:
    result = _runner().run(CORPUS, every=int(os.environ.get("KOR_CORPUS_EVERY", "1")))
    assert result["false_accepts"] == 0, result["false_accept_cases"]
    assert result["crashed"] == 0, result["crash_cases"]  # only named refusals
    assert result["timeouts"] == 0, result["timeout_schemas"]
    assert result["mask_dfa_disagreements"] == 0
    assert result["compiled"] >= result["schemas"] // 2  # refusing everything is "safe" too


def test_format_class_drops_only_the_keyword() -> None:
    _runner()  # puts benchmarks/ on sys.path for its sibling modules
    from schemastore_labels import no_formats

    schema = {"properties": {"format": {"type": "string", "format": "date"}}, "format": "uri"}
    assert no_formats(schema) == {"properties": {"format": {"type": "string"}}}


def test_ratios_only_over_schemas_both_compiled() -> None:
    bench = _runner()
    kor = [
        {"name": "a", "status": "compiled", "first_mask_s": 2.0},
        {"name": "b", "status": "compiled", "first_mask_s": 9.0},
        {"name": "c", "status": "refused"},
    ]
    other = [
        {"name": "a", "status": "compiled", "first_mask_s": 1.0},
        {"name": "b", "status": "refused"},
        {"name": "c", "status": "compiled", "first_mask_s": 5.0},
    ]
    found = bench.ratios(kor, other)
    assert found["both_compiled"] == 1
    assert found["first_mask_kor_over_other"]["p50"] == 2.0


def test_labels_jsonschema_contradicts_are_mislabelled_not_walked(tmp_path: Path) -> None:
    bench = _runner()
    draft7 = "http://json-schema.org/draft-07/schema#"
    schema = {
        "$schema": draft7,
        "definitions": {"x": {"type": "object"}},
        "properties": {
            "a": {"$ref": "#/definitions/x", "required": ["b"]},
            "d": {"format": "date"},
        },
    }
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "s.json").write_text(json.dumps(schema))
    cases = {  # draft 7 ignores `required` beside `$ref`; the date is checked when asserted
        "valid": {"ok": {"a": {}}, "bad": {"a": 1}},
        "invalid": {"no-b": {"a": {}}, "date": {"d": "2024-13-45"}},
    }
    for label, instances in cases.items():
        (tmp_path / label / "s").mkdir(parents=True)
        for name, instance in instances.items():
            (tmp_path / label / "s" / f"{name}.json").write_text(json.dumps(instance))
    walked: list[str] = []
    found = bench._outcomes(tmp_path, "s", schema, lambda text: walked.append(text) or True)
    assert sorted(found["mislabelled"]) == ["s/bad.json", "s/no-b.json"]
    assert found["ok"] == ["s/ok.json"] and found["fa"] == ["s/date.json"]
    assert len(walked) == 2  # the mislabelled are not walked


def test_shown_summary_drops_rows_and_cases_of_every_engine() -> None:
    _runner()  # puts benchmarks/ on sys.path for its sibling modules
    from schemastore_summary import shown

    other = {"rows": [2], "n": 3}
    result = {"compiled": 1, "rows": [1], "fa_cases": [], "competitors": {"x": other}}
    assert shown(result) == {"compiled": 1, "competitors": {"x": {"n": 3}}}


def test_ratios_divide_unrounded_percentiles() -> None:
    bench = _runner()
    kor = [{"name": "a", "status": "compiled", "first_mask_s": 0.0134}]
    other = [{"name": "a", "status": "compiled", "first_mask_s": 0.0034}]
    found = bench.ratios(kor, other)
    assert found["first_mask_kor_over_other"]["p50"] == 3.94  # not 0.013 / 0.003 = 4.33
    assert found["first_mask_s_other"]["p50"] == 0.0034
