"""The shared runner (records in → rows out) and the one result-row type, without a model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from kor_cli.decode import SamplingOptions
from kor_cli.errors import UsageError
from kor_cli.records import Record
from kor_cli.result import ROW_FIELDS, ExtractResult
from kor_cli.runner import Runner

OUTCOME = [
    "data", "valid", "errors", "raw", "finish_reason", "mode", "tokens", "forward_passes",
    "forced_tokens", "seconds", "refusal", "empty",
]  # fmt: skip


class Words:
    """A tokenizer stand-in: one token per word."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": list(range(len(text.split())))}


class Config:
    max_position_embeddings = 60


@dataclass
class Loaded:
    tokenizer: Any = field(default_factory=Words)
    model: Any = field(default_factory=lambda: type("M", (), {"config": Config()})())


class Record_(BaseModel):
    person: Any


@dataclass
class Options:
    mode: str = "prompt"
    sampling: SamplingOptions = field(default_factory=lambda: SamplingOptions(max_new_tokens=10))


class FakeExtractor:
    """Answers each text with the list of its capitalised words; counts its calls."""

    def __init__(self) -> None:
        self.loaded = Loaded()
        self.options = Options()
        self.model_class = Record_
        self.calls: list[list[str]] = []

    def prompt_ids(self, text: str) -> list[int]:
        return list(range(20 + len(text.split())))  # a 20-token prompt around the text

    def extract_batch(self, texts: list[str]) -> list[ExtractResult]:
        self.calls.append(list(texts))
        return [
            ExtractResult(
                {"person": [w for w in t.split() if w[:1].isupper()]},
                True,
                [],
                "raw",
                "stop",
                "prompt",
                2,
                2,
                0,
                0.25,
            )  # fmt: skip
            for t in texts
        ]


def rec(number: int, text: str | None, error: str | None = None) -> Record:
    return Record(number, "in.jsonl", number, text, error, extra={"tag": f"t{number}"})


def test_rows_in_order_with_identity_errors_and_batches() -> None:
    extractor = FakeExtractor()
    runner = Runner(extractor, batch_size=2, keep=("tag",))  # type: ignore[arg-type]
    records = [rec(1, "Ann met Bo"), rec(2, None, "input: line 2: bad"), rec(3, "Cy"), rec(4, "Di")]
    rows = runner.run(records)
    assert [row.id for row in rows] == [1, 2, 3, 4]
    assert [row.data for row in rows] == [
        {"person": ["Ann", "Bo"]},
        None,
        {"person": ["Cy"]},
        {"person": ["Di"]},
    ]
    assert rows[1].finish_reason == "input" and rows[1].errors == ["input: line 2: bad"]
    assert extractor.calls == [["Ann met Bo", "Cy"], ["Di"]]  # the error row costs no slot
    assert rows[0].to_dict()["tag"] == "t1"


def test_a_long_text_is_chunked_and_merged_into_one_row() -> None:
    extractor = FakeExtractor()
    text = " ".join(f"W{i}." for i in range(40))  # 40 words > 60 - 20 - 10 - 8 = 22 of room
    rows = Runner(extractor, batch_size=8).run([rec(1, text)])  # type: ignore[arg-type]
    assert len(rows) == 1 and len(extractor.calls[0]) > 1
    row = rows[0].to_dict()
    assert row["valid"] and row["raw"] is None and len(row["chunks"]) == len(extractor.calls[0])
    assert row["data"]["person"] == [f"W{i}." for i in range(40)]


def test_too_long_without_chunking_is_an_input_row() -> None:
    text = " ".join("w" for _ in range(40))
    rows = Runner(FakeExtractor(), chunk_tokens=0).run([rec(1, text)])  # type: ignore[arg-type]
    assert rows[0].finish_reason == "input" and "too long" in rows[0].errors[0]


def test_chunk_tokens_larger_than_the_context_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--chunk-tokens 50 does not fit"):
        Runner(FakeExtractor(), chunk_tokens=50)  # type: ignore[arg-type]


def test_one_serialisation_for_every_kind_of_row() -> None:
    single = ExtractResult({"p": 1}, True, [], "r", "stop", "prompt", 1, 1, 0, 0.123456)
    assert list(single.to_dict()) == OUTCOME  # `extract` prints no identity
    assert single.to_dict()["seconds"] == 0.1235
    row = single.for_record(rec(7, "x"), keep=("tag", "absent")).to_dict()
    assert list(row) == ["id", "input", "line", "tag", *OUTCOME]
    error = ExtractResult.input_error("input: bad", "prompt").for_record(rec(8, None))
    assert list(error.to_dict()) == ["id", "input", "line", *OUTCOME]
    assert error.to_dict()["valid"] is False and error.to_dict()["raw"] is None
    assert set(ROW_FIELDS) >= set(row) - {"tag"}
    assert "refusal" in ROW_FIELDS and "chunks" in ROW_FIELDS
