"""The shared runner (records in → rows out) and the one result-row type, without a model."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from kor_cli.decode import SamplingOptions
from kor_cli.errors import UsageError
from kor_cli.records import Record
from kor_cli.result import ROW_FIELDS, ExtractResult
from kor_cli.runner import Runner
from kor_cli.shared_stream import SharedStream
from kor_cli.testing import simulated_stream

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


def answer(extractor: FakeExtractor, text: str) -> ExtractResult:
    """The list of the text's capitalised words; the text is logged as extracted."""
    extractor.done.append(text)
    names = [w for w in text.split() if w[:1].isupper()]
    return ExtractResult({"person": names}, True, [], "raw", "stop", "prompt", 2, 2, 0, 0.25)


class FakeExtractor:
    """Continuous batching simulated: a text of n words takes n decode steps."""

    def __init__(self) -> None:
        self.loaded = Loaded()
        self.options = Options()
        self.model_class = Record_
        self.done: list[str] = []  # texts in the order they finished
        self.widths: list[int] = []  # rows in flight per step
        self.extract_stream = lambda texts, slots: simulated_stream(
            answer, lambda t: len(t.split()), self.widths
        )(self, texts, slots)

    def prompt_ids(self, text: str) -> list[int]:
        return list(range(20 + len(text.split())))  # a 20-token prompt around the text


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
    assert extractor.done == ["Cy", "Di", "Ann met Bo"]  # short texts finished first
    assert extractor.widths == [2, 2, 1]  # the error row costs no slot; Di took Cy's
    assert rows[0].to_dict()["tag"] == "t1"


def mixed(count: int) -> list[Record]:
    """Records of 1 to 9 words in a scrambled order, an input error every 7th."""
    return [
        rec(i, None, f"input: line {i}: bad") if i % 7 == 0 else rec(i, "Ann " * (i * 5 % 9 + 1))
        for i in range(1, count + 1)
    ]


def test_continuous_batching_keeps_order_and_every_record_once() -> None:
    extractor = FakeExtractor()
    records = mixed(40)
    rows = Runner(extractor, batch_size=4).run(records)  # type: ignore[arg-type]
    assert [row.id for row in rows] == list(range(1, 41))
    assert [row.data is None for row in rows] == [r.text is None for r in records]
    for row, record in zip(rows, records, strict=True):
        if record.text is not None:
            assert row.data == {"person": record.text.split()}
    texts = [r.text for r in records if r.text is not None]
    assert sorted(extractor.done) == sorted(texts) and extractor.done != texts  # out of order
    # slots are refilled at once: every step but the last few runs 4 rows, and the run
    # takes far fewer steps than groups of 4 waiting for their longest text
    assert extractor.widths[: len(extractor.widths) - 8] == [4] * (len(extractor.widths) - 8)
    groups = sum(max(len(t.split()) for t in texts[i : i + 4]) for i in range(0, len(texts), 4))
    assert len(extractor.widths) <= sum(len(t.split()) for t in texts) // 4 + 9 < groups


def test_stream_hands_rows_out_early_and_reads_only_what_it_needs() -> None:
    extractor = FakeExtractor()
    pulled: list[int] = []

    def records() -> Any:
        for record in [rec(1, "Ann"), rec(2, "Bo"), *mixed(30)[2:], rec(31, "Cy " * 50)]:
            pulled.append(record.id)
            yield record

    stream = Runner(extractor, batch_size=3).stream(records())  # type: ignore[arg-type]
    first = next(stream)
    assert [row.id for row in first] == [1, 2] and pulled == [1, 2, 3]  # finished together
    rest = [row.id for rows in stream for row in rows]
    assert rest == list(range(3, 32))


def test_stopping_the_input_still_gives_every_pulled_record_its_row() -> None:
    extractor = FakeExtractor()
    pulled: list[int] = []
    stop = False

    def records() -> Any:
        for record in mixed(30):
            if stop:
                return
            pulled.append(record.id)
            yield record

    written = []
    for rows in Runner(extractor, batch_size=4).stream(records()):  # type: ignore[arg-type]
        written += [row.id for row in rows]
        stop = len(written) >= 5  # Ctrl-C: no new record, those in flight finish
    assert written == pulled and 5 <= len(written) < 30


def test_a_long_text_is_chunked_and_merged_into_one_row() -> None:
    extractor = FakeExtractor()
    text = " ".join(f"W{i}." for i in range(40))  # 40 words > 60 - 20 - 10 - 8 = 22 of room
    rows = Runner(extractor, batch_size=8).run([rec(1, text)])  # type: ignore[arg-type]
    assert len(rows) == 1 and len(extractor.done) > 1
    row = rows[0].to_dict()
    assert row["valid"] and row["raw"] is None and len(row["chunks"]) == len(extractor.done)
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


def test_a_workers_batches_share_one_stream_so_none_waits_for_its_slowest_row() -> None:
    """Two batches sent to one worker (kor_cli/shared_stream.py): the second one's records
    take the slots the first one's short rows free, while its long row still runs."""
    extractor = FakeExtractor()
    shared = SharedStream(Runner(extractor, batch_size=2))  # type: ignore[arg-type]
    both_queued = threading.Event()
    steps = extractor.extract_stream
    extractor.extract_stream = lambda texts, slots: steps(held(texts), slots)

    def held(texts: Any) -> Any:
        both_queued.wait(5)  # the stream starts once both batches are there
        yield from texts

    results: dict[str, list[ExtractResult]] = {}
    first = [rec(1, "a b c d e f Long"), rec(2, "Ann")]
    second = [rec(3, "Bo"), rec(4, "Cy")]
    threads = [
        threading.Thread(target=lambda: results.update(first=shared.run(first))),
        threading.Thread(target=lambda: results.update(second=shared.run(second))),
    ]
    threads[0].start()
    while not shared.calls:
        time.sleep(0.001)
    threads[1].start()
    while len(shared.calls) < 2:
        time.sleep(0.001)
    both_queued.set()
    for thread in threads:
        thread.join(5)
    assert [row.id for row in results["first"]] == [1, 2]
    assert [row.data for row in results["second"]] == [{"person": ["Bo"]}, {"person": ["Cy"]}]
    assert extractor.done == ["Ann", "Bo", "Cy", "a b c d e f Long"]
    # batch by batch: [2, 1, 1, 1, 1, 1, 1] then [2]; one stream: the slots stay full
    assert extractor.widths == [2, 2, 2, 1, 1, 1, 1]
    assert shared.run([rec(5, "Di")])[0].data == {"person": ["Di"]}  # idle, then woken


def test_a_failed_worker_stream_fails_its_callers_and_the_next_call_starts_afresh() -> None:
    extractor = FakeExtractor()
    shared = SharedStream(Runner(extractor, batch_size=2))  # type: ignore[arg-type]
    steps = extractor.extract_stream

    def broken(texts: Any, slots: int) -> Any:
        yield from ()
        raise RuntimeError("out of memory")

    extractor.extract_stream = broken
    with pytest.raises(RuntimeError, match="out of memory"):
        shared.run([rec(1, "Ann")])
    extractor.extract_stream = steps
    assert [row.id for row in shared.run([rec(2, "Bo"), rec(3, "Cy")])] == [2, 3]
