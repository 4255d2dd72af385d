"""Every JSON-Schema-Test-Suite (draft 2020-12) schema the grammar engine compiles loads
through `kor_cli.schema` too (the engine is the one judge), its prompt view renders, and
validation of the wrapped record agrees with the suite. Skipped when the suite is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kor_cli.constrain import record_grammar_options
from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.schema.loader import schema_from_document

SUITE = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
SUITE = SUITE / "json-schema-test-suite" / "draft2020-12"
# formats are enforced on purpose; a custom metaschema without the validation vocabulary
KNOWN = {"format.json", "vocabulary.json"}


@pytest.mark.slow
@pytest.mark.skipif(not SUITE.is_dir(), reason="JSON-Schema-Test-Suite not available")
def test_what_the_engine_compiles_loads_renders_and_validates_as_the_suite_says() -> None:
    loaded = 0
    for path in sorted(SUITE.glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            schema = group["schema"]
            if not isinstance(schema, dict):
                continue
            try:
                compile_json_schema(schema, record_grammar_options())
            except GrammarError:
                continue
            where = f"{path.name}: {group['description']}"
            result = schema_from_document(schema, where, "r")  # must not raise
            assert result.typescript().startswith("```TypeScript\n\nr: "), where
            loaded += 1
            validator = result.validator()
            for case in group["tests"]:
                valid = not validator.validate({"r": case["data"]})[1]
                if valid != case["valid"] and path.name not in KNOWN:
                    pytest.fail(f"{where}: {case['description']}: validation says {valid}")
    assert loaded >= 300
