"""Kor's "nothing here" ({}) as a first-class outcome: grammar, parsing, result, merge, scoring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kor_cli.chunking import Chunk, merge_results
from kor_cli.compare import ModeStats
from kor_cli.constrain import GrammarConstraint, record_grammar
from kor_cli.decode import DecodeResult, SamplingOptions
from kor_cli.extract import ExtractOptions, Extractor, allows_empty
from kor_cli.models import LoadedModel, load_model
from kor_cli.parse import ParseFailure, read_output
from kor_cli.result import ExtractResult
from kor_cli.schema import Schema, load_schema

ROOT = Path(__file__).resolve().parents[1]
PARIS = "The weather in Paris is lovely today."


def schema(name: str) -> Schema:
    return load_schema(str(ROOT / "schemas" / name))


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: str) -> LoadedModel:
    return load_model(tiny_model_dir)


# --- when {} is allowed ----------------------------------------------------------------


def test_null_examples_turn_it_on_and_flags_override() -> None:
    person, receipt, review = (
        schema("person.yaml"),
        schema("receipt.yaml"),
        schema("restaurant_review.yaml"),
    )
    assert allows_empty(person, ExtractOptions())  # `output: {}`
    assert allows_empty(review, ExtractOptions())  # `output: []` under many
    assert not allows_empty(receipt, ExtractOptions())  # no null example
    assert allows_empty(receipt, ExtractOptions(allow_empty=True))
    assert not allows_empty(person, ExtractOptions(allow_empty=False))


@pytest.mark.parametrize("name", ["person.yaml", "restaurant_review.yaml"])
def test_grammar_admits_kor_empty_output_only_when_asked(name: str) -> None:
    """Kor renders `{}` for a null example, under `many` too: that is what the grammar admits."""
    json_schema = schema(name).json_schema()
    assert record_grammar(json_schema, allow_empty=True).dfa.accepts(b" <json>{}</json>")
    assert not record_grammar(json_schema).dfa.accepts(b" <json>{}</json>")
    assert not record_grammar(json_schema, allow_empty=True).dfa.accepts(b" <json>{ }</json>")


# --- reading model output ----------------------------------------------------------------


def test_read_output_empty_record_refusal() -> None:
    empty = read_output("<json>{}</json>", "person", allow_empty=True)
    assert (empty.data, empty.empty, empty.refusal) == ({}, True, None)
    with pytest.raises(ParseFailure, match="missing root id"):
        read_output("<json>{}</json>", "person")
    many = read_output('<json>{"review": []}</json>', "review")
    assert many.empty and many.data == {"review": []}
    full = read_output('<json>{"person": {"name": "Ann"}}</json>', "person", allow_empty=True)
    assert not full.empty and full.data == {"person": {"name": "Ann"}}
    refusal = read_output('<json>{"error": "no"}</json>', "person", allow_refusal=True)
    assert refusal.refusal == "no" and refusal.data is None and not refusal.empty


def scripted(extractor: Extractor, raw: str) -> ExtractResult:
    """The extractor's own parse/validate path on a given model output."""

    def generate_batch(prompts: list[Any], *args: Any, **kwargs: Any) -> list[DecodeResult]:
        return [DecodeResult(raw, [], "stop", 4, 4, 0, 0.01) for _ in prompts]

    extractor.decoder.generate_batch = generate_batch  # type: ignore[method-assign]
    return extractor.extract(PARIS)


def test_prompt_mode_reports_nothing_here(tiny: LoadedModel) -> None:
    person = schema("person.yaml")
    result = scripted(Extractor(person, tiny, ExtractOptions(mode="prompt")), " <json>{}</json>")
    row = result.to_dict()
    assert row["valid"] and row["empty"] and row["data"] == {} and row["errors"] == []
    off = ExtractOptions(mode="prompt", allow_empty=False)
    refused = scripted(Extractor(person, tiny, off), " <json>{}</json>")
    assert not refused.valid and not refused.empty
    assert "missing root id 'person'" in refused.errors[0]


# --- constrained decoding, steered -----------------------------------------------------


class Steer:
    """A model stand-in's preference: write `target` wherever the grammar lets it.

    Narrows the grammar's mask to tokens that continue `target` (falls back to the
    grammar's own mask where none does), so the output is `target` exactly when the
    grammar admits it.
    """

    def __init__(self, inner: GrammarConstraint, target: bytes) -> None:
        self.inner = inner
        self.target = target
        self.token_bytes = inner.matcher.compiled.token_bytes
        self.written = b""

    def _mask(self, device: Any) -> Any:
        import torch

        mask = torch.from_numpy(self.inner.allowed_mask()).to(device)
        rest = self.target[len(self.written) :] if self.target.startswith(self.written) else b""
        ok = [bool(b) and rest.startswith(b) for b in self.token_bytes[: mask.shape[0]]]
        ok += [False] * (mask.shape[0] - len(ok))
        steered = mask & torch.tensor(ok, device=mask.device)
        return steered if bool(steered.any()) else mask

    def mask(self, device: Any) -> Any:
        return self._mask(device)

    def allowed_ids(self, device: Any) -> Any:
        import torch

        return torch.nonzero(self._mask(device)).flatten()

    def advance(self, token_id: int) -> None:
        self.inner.advance(token_id)
        self.written += self.token_bytes[token_id] or b""

    def forced_tokens(self, limit: int) -> list[int]:
        ids = self.inner.forced_tokens(limit)
        self.written += b"".join(self.token_bytes[i] or b"" for i in ids)
        return ids

    @property
    def finished(self) -> bool:
        return self.inner.finished


def steered(extractor: Extractor, target: bytes) -> ExtractResult:
    factory = extractor.constraints
    assert factory is not None
    plain = factory.new
    factory.new = lambda: Steer(plain(), target)  # type: ignore[method-assign,return-value]
    return extractor.extract(PARIS)


@pytest.mark.parametrize("name", ["person.yaml", "restaurant_review.yaml"])
def test_constrained_model_can_say_nothing(tiny: LoadedModel, name: str) -> None:
    options = ExtractOptions(sampling=SamplingOptions(max_new_tokens=40))
    result = steered(Extractor(schema(name), tiny, options), b" <json>{}</json>")
    assert result.raw is not None and result.raw.strip() == "<json>{}</json>"
    assert result.valid and result.empty and result.data == {}, result.errors
    assert result.finish_reason == "stop"


def test_constrained_model_cannot_say_nothing_when_not_allowed(tiny: LoadedModel) -> None:
    options = ExtractOptions(sampling=SamplingOptions(max_new_tokens=40), allow_empty=False)
    result = steered(Extractor(schema("person.yaml"), tiny, options), b" <json>{}</json>")
    assert result.raw is not None and result.raw.startswith('<json>{"person": ')
    assert not result.empty


# --- merging chunks and scoring ----------------------------------------------------------


class Record_(BaseModel):
    person: list[dict[str, Any]]


def outcome(data: Any, empty: bool = False, valid: bool = True) -> ExtractResult:
    errors = [] if valid else ["parse: nope"]
    return ExtractResult(data, valid, errors, "r", "stop", "prompt", 1, 1, 0, 0.1, empty=empty)


def test_merge_ignores_empty_chunks_and_is_empty_when_all_are() -> None:
    chunks = [Chunk(0, 1, "a"), Chunk(1, 2, "b")]
    mixed = merge_results(chunks, [outcome({}, True), outcome({"person": [{"n": 1}]})], Record_)
    assert mixed.valid and not mixed.empty and mixed.data == {"person": [{"n": 1}]}
    nothing = merge_results(chunks, [outcome({}, True), outcome({}, True)], Record_)
    assert nothing.valid and nothing.empty and nothing.data == {}
    broken = merge_results(chunks, [outcome({}, True), outcome(None, valid=False)], Record_)
    assert not broken.valid and not broken.empty


def test_compare_counts_empty_apart_and_scores_it_against_empty_gold() -> None:
    ann = {"name": "Ann"}
    stats = ModeStats("constrained")
    stats.add(outcome({}, empty=True), {}, "person")  # right: nothing there
    stats.add(outcome({"person": []}, empty=True), {"person": []}, "person")  # many form
    stats.add(outcome({}, empty=True), ann, "person")  # missed Ann
    stats.add(outcome({"person": ann}), {}, "person")  # invented Ann
    report = stats.to_dict()
    assert (report["empty"], report["gold_empty"], report["empty_matches"]) == (3, 3, 2)
    assert report["empty_rate"] == 0.75 and report["empty_accuracy"] == round(2 / 3, 4)
    assert (report["matched_fields"], report["gold_fields"]) == (2, 4)
    assert report["exact_matches"] == 2


def test_batch_rows_say_empty(
    tmp_path: Path, tiny_model_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from kor_cli import runner
    from kor_cli.cli import app
    from kor_cli.testing import stream_of_batches

    def nothing(extractor: Any, texts: list[str]) -> list[ExtractResult]:
        return [outcome({}, empty=True) for _ in texts]

    monkeypatch.setattr(runner, "extract_stream", stream_of_batches(nothing))
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "p", "text": PARIS}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["batch", str(ROOT / "schemas" / "person.yaml"), str(data), "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "-m", tiny_model_dir])
    assert result.exit_code == 0, result.output
    row = json.loads(out.read_text())
    assert row["id"] == "p" and row["empty"] is True and row["valid"] is True and row["data"] == {}
    assert "nothing to extract" in result.output
    again = CliRunner().invoke(app, [*args, "-m", tiny_model_dir])  # all done: rows counted
    assert again.exit_code == 0 and "nothing to extract" in again.output
    other = CliRunner().invoke(app, [*args, "-m", tiny_model_dir, "--no-allow-empty"])
    assert other.exit_code == 2 and "allow_empty" in other.output  # resume keeps the setting
