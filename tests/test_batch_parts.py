"""Batch building blocks without a model: inputs → records, the resumable sink, chunking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from kor_cli.chunking import merge_results, split_text
from kor_cli.errors import InputError, UsageError
from kor_cli.extract import ExtractResult
from kor_cli.records import count_records, iter_records, resolve_sources
from kor_cli.sink import OutputSink, row_key


def words(text: str) -> int:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    return len(text.split())


# --- records -------------------------------------------------------------------------------


def test_jsonl_lines_become_records_or_error_rows(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(
        b'{"id": "a", "text": "Ann", "gold": 1}\n'
        b"\n"
        b"not json\n"
        b'{"text": "no id"}\n'
        b'{"id": "b"}\n'
        b'{"id": "c", "text": 5}\n'
        b'{"id": "d", "text": "caf\xe9"}\n'
        b"[1, 2]\n"
        b'{"id": [1], "text": "x"}\n'
        b'{"id": "e", "text": "  "}\n'
    )
    sources = resolve_sources([str(path)])
    records = list(iter_records(sources, keep=("gold",)))
    assert count_records(sources) == len(records) == 9
    assert [(r.id, r.line) for r in records] == [
        ("a", 1), (3, 3), (4, 4), ("b", 5), ("c", 6), (7, 7), (8, 8), (9, 9), ("e", 10)
    ]  # fmt: skip
    assert records[0].text == "Ann" and records[0].extra == {"gold": 1}
    assert records[2].text == "no id"
    errors = {r.line: r.error for r in records if r.error}
    assert errors == {
        3: "input: line 3: malformed JSON: Expecting value at column 1",
        5: "input: line 5: missing text key 'text'",
        6: "input: line 6: 'text' must be a string, got a number",
        7: "input: line 7: not valid UTF-8 (bad byte 0xe9 at column 25)",
        8: "input: line 8: expected a JSON object, got an array",
        9: "input: line 9: 'id' must be a string or an integer, got an array",
        10: "input: line 10: 'text' is empty",
    }


def test_bom_and_lone_surrogates(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "bom"}\n{"id": "s", "text": "a\\ud800b"}\n')
    first, second = iter_records(resolve_sources([str(path)]))
    assert first.text == "bom"
    assert second.error == (
        "input: line 2: text 'a\\ud800b' holds a lone surrogate (not valid Unicode)"
    )


def test_the_output_file_is_never_an_input(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    out = tmp_path / "out.jsonl"
    out.write_text("")
    for spec in (str(tmp_path), str(tmp_path / "*")):
        assert [s.path for s in resolve_sources([spec], output=str(out))] == [
            str(tmp_path / "a.txt")
        ]
    with pytest.raises(InputError, match="is the output file"):
        resolve_sources([str(out)], output=str(out))


def test_custom_keys(tmp_path: Path) -> None:
    path = tmp_path / "in.ndjson"
    path.write_text('{"doc": "x1", "body": "hello"}\n')
    [record] = iter_records(resolve_sources([str(path)]), text_key="body", id_key="doc")
    assert (record.id, record.text) == ("x1", "hello")


def test_folders_globs_and_text_files(tmp_path: Path) -> None:
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "b.txt").write_text("B")
    (tmp_path / "docs" / "a.md").write_text("A")
    (tmp_path / "docs" / "sub" / "c.txt").write_text("C")
    (tmp_path / "docs" / ".hidden").write_text("H")
    (tmp_path / "docs" / "empty.txt").write_text("\n")
    (tmp_path / "docs" / "bin.txt").write_bytes(b"\xff\x00")
    folder = [r.id for r in iter_records(resolve_sources([str(tmp_path / "docs")]))]
    names = [Path(str(i)).relative_to(tmp_path / "docs").as_posix() for i in folder]
    assert names == ["a.md", "b.txt", "bin.txt", "empty.txt", "sub/c.txt"]
    records = list(iter_records(resolve_sources([str(tmp_path / "docs" / "**" / "*.txt")])))
    assert [Path(str(r.id)).name for r in records] == ["b.txt", "bin.txt", "empty.txt", "c.txt"]
    assert [r.text for r in records] == ["B", None, None, "C"]
    assert "not valid UTF-8" in str(records[1].error) and "empty" in str(records[2].error)


@pytest.mark.parametrize(
    ("spec", "message"),
    [("missing.jsonl", "no such file or folder"), ("*.nothing", "pattern matches no files")],
)
def test_missing_inputs_are_input_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=message):
        resolve_sources([spec])


# --- sink ----------------------------------------------------------------------------------


def row(record_id: object, valid: bool = True) -> dict[str, object]:
    return {"id": record_id, "valid": valid, "data": {"é": 1}}


def test_sink_resumes_counts_and_drops_torn_tail(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with OutputSink(out) as sink:
        assert sink.open().rows == 0
        sink.write([row("a"), row(1, valid=False)])
        sink.write([row("a")])
    with out.open("ab") as handle:
        handle.write(b'{"id": "b", "val')  # what a kill -9 mid-write could leave
    with OutputSink(out) as sink:
        existing = sink.open()
        assert (existing.valid, existing.failed, existing.dropped_bytes) == (2, 1, 16)
        assert existing.done == {row_key("a"): 2, row_key(1): 1}
        assert row_key(1) != row_key("1")
        sink.write([row("b")])
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", 1, "a", "b"]


def test_sink_escapes_lone_surrogates_and_reads_them_back(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with OutputSink(out) as sink:
        sink.open()
        sink.write([row("x\ud800"), row("ok")])
    assert b"\\ud800" in out.read_bytes() and "é" in out.read_text(encoding="utf-8")
    with OutputSink(out) as sink:
        assert sink.open().done == {row_key("x\ud800"): 1, row_key("ok"): 1}


def test_sink_rejects_garbage_after_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with OutputSink(out) as sink:
        sink.open()
        sink.write([row(1)])
    with out.open("ab") as handle:
        handle.write(b'not a row\n{"id": 2, "valid": true}\n')
    before = out.read_bytes()
    with pytest.raises(InputError, match="line 2 is not a row kor-cli wrote"):
        OutputSink(out).open()
    assert out.read_bytes() == before


def test_sink_lock_and_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": 1, "valid": true}\n')
    with OutputSink(out, overwrite=True) as first:
        first.open()
        with pytest.raises(UsageError, match="another kor-cli batch run"):
            OutputSink(out, overwrite=True).open()
    with OutputSink(out, overwrite=True) as sink:
        assert sink.open().rows == 0
    assert out.read_bytes() == b""


# --- chunking ------------------------------------------------------------------------------


def test_short_text_is_one_chunk() -> None:
    [chunk] = split_text("one two three", 5, words)
    assert (chunk.start, chunk.end, chunk.text) == (0, 13, "one two three")


def test_split_prefers_paragraphs_then_sentences_and_overlaps() -> None:
    text = "A1 A2 A3 A4.\n\nB1 B2. B3 B4.\n\nC1 C2 C3. C4 C5 C6. C7 C8 C9. C10 C11 C12."
    chunks = split_text(text, 6, words, overlap=3)
    assert [c.text for c in chunks] == [
        "A1 A2 A3 A4.\n\n",  # B does not fit too, and is not cut to fill the chunk
        "B1 B2. B3 B4.\n\n",
        "C1 C2 C3. C4 C5 C6. ",  # C is too long: split at sentences
        "C4 C5 C6. C7 C8 C9. ",  # each later chunk repeats the previous sentence
        "C7 C8 C9. C10 C11 C12.",
    ]
    assert all(text[c.start : c.end] == c.text for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)


def test_hard_split_inside_a_word() -> None:
    chunks = split_text("a" * 50, 10, len, overlap=0)
    assert [c.text for c in chunks] == ["a" * 10] * 5


class Person(BaseModel):
    person: object


def result(data: object, valid: bool = True, reason: str = "stop") -> ExtractResult:
    errors = [] if valid else ["parse: nope"]
    return ExtractResult(data, valid, errors, "raw", reason, "prompt", 3, 2, 1, 0.5)


def test_merge_many_concatenates_and_deduplicates() -> None:
    chunks = split_text("a b c d", 2, words, overlap=0)
    merged = merge_results(
        chunks,
        [result({"person": [{"n": "A"}, {"n": "B"}]}), result({"person": [{"n": "B"}]})],
        Person,
    ).to_dict()
    assert merged["data"] == {"person": [{"n": "A"}, {"n": "B"}]}
    assert merged["valid"] and merged["raw"] is None
    assert (merged["tokens"], merged["forward_passes"], merged["seconds"]) == (6, 4, 1.0)
    assert [(c["start"], c["end"]) for c in merged["chunks"]] == [(0, 4), (4, 7)]


def test_merge_single_keeps_first_filled_value_from_valid_chunks() -> None:
    chunks = split_text("a b c d e f", 2, words, overlap=0)
    merged = merge_results(
        chunks,
        [
            result({"person": {"name": None, "age": 4}}),
            result({"person": {"name": "X"}}, valid=False, reason="length"),
            result({"person": {"name": "Ann", "age": 5, "city": ""}}),
        ],
        Person,
    ).to_dict()
    assert merged["data"] == {"person": {"name": "Ann", "age": 4, "city": ""}}
    assert not merged["valid"] and merged["errors"] == ["chunk 2/3: parse: nope"]
    assert merged["finish_reason"] == "length"


def test_resume_reads_the_input_only_until_every_written_id_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import Counter

    from kor_cli import batch

    path = tmp_path / "in.jsonl"
    lines = [{"id": f"r{i % 50}", "text": "t"} for i in range(1000)]  # ids repeat from line 50
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    pulled = [0]
    real = batch.iter_records

    def counting(*args: object, **kwargs: object) -> object:
        for record in real(*args, **kwargs):  # type: ignore[arg-type]
            pulled[0] += 1
            yield record

    monkeypatch.setattr(batch, "iter_records", counting)
    sources = resolve_sources([str(path)])
    options = batch.BatchOptions(inputs=(str(path),), output="out.jsonl")
    wanted = Counter({row_key("r3"): 2, row_key("r7"): 1})
    assert batch.input_ids(sources, options, wanted) == wanted
    assert pulled[0] == 54  # the second r3 is line 54: nothing after it is read
    pulled[0] = 0
    more = Counter({row_key("r3"): 30, row_key("nope"): 1})  # the input has r3 20 times
    found = batch.input_ids(sources, options, more)
    assert found == Counter({row_key("r3"): 20}) and pulled[0] == 1000
    with pytest.raises(InputError, match="another input"):
        batch.check_rows_match_input(batch.Existing(done=more), found, "out.jsonl")
