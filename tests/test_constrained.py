"""Constrained extraction on a tiny random-weight model with a real tokenizer.

Random weights make this a real test: unconstrained output from them never parses, so
every valid record below is the grammar's doing. Sampling runs at temperature 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kor_cli.constrain import record_grammar
from kor_cli.decode import DecodeResult, SamplingOptions
from kor_cli.extract import ExtractOptions, Extractor, ExtractResult
from kor_cli.models import LoadedModel, load_model
from kor_cli.schema import Schema, load_schema

ROOT = Path(__file__).resolve().parents[1]
TEXT = "Maria Garcia, 34, paid 12.50 EUR for two coffees in Valencia."

BOUNDED = {
    "title": "pick",
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "n": {"type": "integer", "minimum": -5, "maximum": 120},
        "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]$"},
        "note": {"type": "string", "maxLength": 4},
        "ok": {"type": "boolean"},
    },
    "required": ["color", "n", "code", "note", "ok"],
}


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: str) -> LoadedModel:
    return load_model(tiny_model_dir)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    path = tmp_path_factory.mktemp("schemas") / "pick.json"
    path.write_text(json.dumps(BOUNDED))
    return load_schema(str(path))


def run(
    schema: Schema, tiny: LoadedModel, texts: list[str], **options: object
) -> list[ExtractResult]:
    sampling = options.pop("sampling", SamplingOptions(max_new_tokens=160))
    extract_options = ExtractOptions(sampling=sampling, **options)  # type: ignore[arg-type]
    return Extractor(schema, tiny, extract_options).extract_batch(texts)


@pytest.mark.parametrize("seed", range(4))
def test_bounded_schema_always_validates_when_sampling(
    bounded: Schema, tiny: LoadedModel, seed: int
) -> None:
    sampling = SamplingOptions(temperature=1.0, seed=seed, max_new_tokens=160)
    results = run(bounded, tiny, [TEXT] * 6, sampling=sampling)
    for result in results:
        assert result.valid, result.errors
        assert result.finish_reason == "stop"
        assert result.raw.startswith("<json>") and result.raw.endswith("</json>")
        jsonschema.validate(result.data, bounded.json_schema())


@pytest.mark.parametrize("name", ["person.yaml", "receipt.yaml", "restaurant_review.yaml"])
def test_unbounded_schemas_validate_or_report_length(name: str, tiny: LoadedModel) -> None:
    schema = load_schema(str(ROOT / "schemas" / name))
    sampling = SamplingOptions(temperature=1.0, seed=11, max_new_tokens=48)
    for result in run(schema, tiny, [TEXT] * 4, sampling=sampling):
        if result.finish_reason == "stop":
            assert result.valid, result.errors
            if result.data == {}:  # Kor's "nothing here" (schemas with a null example)
                assert result.empty and any(value is None for _, value in schema.examples)
            else:
                jsonschema.validate(result.data, schema.json_schema())
        else:
            assert result.finish_reason == "length" and not result.valid
            assert any("truncated" in error for error in result.errors)


def test_jump_forward_saves_forward_passes(bounded: Schema, tiny: LoadedModel) -> None:
    with_jump = run(bounded, tiny, [TEXT])[0]
    without = run(bounded, tiny, [TEXT], jump=False)[0]
    assert with_jump.valid and without.valid
    assert with_jump.forced_tokens > 0 and without.forced_tokens == 0
    assert with_jump.forward_passes < without.forward_passes
    assert without.forward_passes == without.tokens  # one pass per sampled token (+prompt, -stop)


def test_batched_equals_unbatched_greedy(bounded: Schema, tiny: LoadedModel) -> None:
    texts = [TEXT, "Nothing here.", "Bob, 7, paid 3 USD in Oslo last Tuesday afternoon."]
    batched = run(bounded, tiny, texts)
    single = [run(bounded, tiny, [text])[0] for text in texts]
    assert [r.raw for r in batched] == [r.raw for r in single]
    assert all(r.valid for r in batched)


def test_truncation_is_reported(bounded: Schema, tiny: LoadedModel) -> None:
    result = run(bounded, tiny, [TEXT], sampling=SamplingOptions(max_new_tokens=3))[0]
    assert result.finish_reason == "length" and not result.valid and result.tokens == 3
    assert result.data is None


def test_refusal_is_accepted_by_the_grammar_and_reported(
    bounded: Schema, tiny: LoadedModel
) -> None:
    grammar = record_grammar(bounded.json_schema(), allow_refusal=True)
    assert grammar.dfa.accepts(b' <json>{"error": "no colour named"}</json>')
    assert not record_grammar(bounded.json_schema()).dfa.accepts(
        b' <json>{"error": "no colour named"}</json>'
    )
    extractor = Extractor(bounded, tiny, ExtractOptions(allow_refusal=True))
    decoded = DecodeResult(' <json>{"error": "no colour named"}</json>', [], "stop", 9, 3, 6, 0.1)
    result = extractor._finish(decoded)
    assert result.refusal == "no colour named"
    assert not result.valid and result.data is None
    assert result.errors[0].startswith("refusal:")


def test_grammar_wraps_the_record_in_json_tags(bounded: Schema) -> None:
    grammar = record_grammar(bounded.json_schema())
    record = {"pick": {"color": "red", "n": 7, "code": "AB1", "note": "hi", "ok": True}}
    text = " <json>" + json.dumps(record) + "</json>"
    assert grammar.dfa.accepts(text.encode())
    assert not grammar.dfa.accepts(text.replace('"n": 7', '"n": 121').encode())
    assert not grammar.dfa.accepts(text.replace(", ", ",").encode())  # json.dumps spacing only


def test_selective_lm_head_matches_full_projection(bounded: Schema, tiny: LoadedModel) -> None:
    from kor_cli.decode import Decoder

    options = SamplingOptions(max_new_tokens=80)
    extractor = Extractor(bounded, tiny, ExtractOptions(sampling=options))
    prompt = extractor.prompt_ids(TEXT)
    factory = extractor.constraints
    assert factory is not None
    selective, full = Decoder(tiny), Decoder(tiny, selective_limit=0)
    a = selective.generate(prompt, options, constraint=factory.new())
    b = full.generate(prompt, options, constraint=factory.new())
    assert a.token_ids == b.token_ids
    assert selective.step.selective_steps > 0 and full.step.selective_steps == 0


def test_sampled_batch_with_rows_finishing_early(bounded: Schema, tiny: LoadedModel) -> None:
    texts = [TEXT, "x"]
    sampling = SamplingOptions(temperature=1.0, seed=5, max_new_tokens=160)
    person = load_schema(str(ROOT / "schemas" / "person.yaml"))
    for schema in (bounded, person):  # person rows run long; bounded rows finish early
        results = run(schema, tiny, texts, sampling=sampling)
        assert all(r.valid or r.finish_reason == "length" for r in results)
