"""The JSON-Schema-Test-Suite (draft 2020-12): never accept an invalid instance.

Counts come from `benchmarks/json_schema_suite.py` (which also writes them to
`benchmarks/results/json_schema_suite.json`). Skipped when the suite is not checked out
next to the repository (`../shared/testdata/json-schema-test-suite`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO.parent / "shared" / "testdata" / "json-schema-test-suite" / "draft2020-12"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "json_schema_suite", REPO / "benchmarks" / "json_schema_suite.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SUITE.is_dir(), reason="JSON-Schema-Test-Suite not available")
def test_no_false_accepts() -> None:
    counts = _runner().run(SUITE)
    assert counts["false_accepts"] == 0, counts["false_accept_cases"]
    assert counts["schemas_compiled"] >= 330  # refusing everything would be "safe" too
    # formats are enforced on purpose; the suite's "format is only an annotation" cases fail
    others = [c for c in counts["false_reject_cases"] if "only an annotation" not in c]
    # the documented classes: closed objects by default, bounded depth of untyped values
    # (one more since uniqueItems arrays of untyped items compile), anyOf annotation
    # collection, a custom metaschema (README)
    assert len(others) <= 11, others
