"""Every JSON-Schema-Test-Suite (draft 2020-12) schema the grammar engine compiles loads
through `kor_cli.schema` too (the engine is the one judge) and its prompt view renders;
with open objects validation agrees with the suite, and with closed objects (the default)
it accepts every text the record grammar generates (a sixth of the schemas each, for
time). Skipped when the suite is absent."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_grammar_json_schema import random_text

from kor_cli.constrain import record_grammar_options
from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import compile_json_schema
from kor_cli.schema.loader import schema_from_document

SUITE = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
SUITE = SUITE / "json-schema-test-suite" / "draft2020-12"
# formats are enforced on purpose; a custom metaschema without the validation vocabulary
KNOWN = {"format.json", "vocabulary.json"}


def suite_schemas() -> list[tuple[str, dict]]:
    found = []
    for path in sorted(SUITE.glob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            if isinstance(group["schema"], dict):
                found.append((f"{path.name}: {group['description']}", group))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not SUITE.is_dir(), reason="JSON-Schema-Test-Suite not available")
@pytest.mark.parametrize("open_objects", [True, False], ids=["open", "closed"])
def test_what_the_engine_compiles_loads_and_validates(open_objects: bool) -> None:
    options = record_grammar_options(open_objects=open_objects)
    rng = random.Random(11)
    loaded = 0
    for where, group in suite_schemas()[int(open_objects) :: 6]:  # a sixth each, for time
        try:
            compile_json_schema(group["schema"], options)
        except GrammarError:
            continue
        schema = schema_from_document(group["schema"], where, "r", open_objects=open_objects)
        assert schema.typescript().startswith("```TypeScript\n\nr: "), where
        loaded += 1
        validator = schema.validator()
        if open_objects:  # the specification's semantics
            for case in group["tests"]:
                valid = not validator.validate({"r": case["data"]})[1]
                if valid != case["valid"] and where.split(":")[0] not in KNOWN:
                    pytest.fail(f"{where}: {case['description']}: validation says {valid}")
        dfa = compile_json_schema(schema.json_schema(), options).dfa
        for _ in range(4):  # what the grammar writes, validation accepts
            text = random_text(dfa, rng)
            problems = validator.validate(json.loads(text))[1]
            assert not problems, (where, text, problems)
    assert loaded >= 50
