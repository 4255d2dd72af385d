"""Batch inputs → records with ids: JSONL files or stdin, text files, folders and globs.

Every input line or file becomes exactly one `Record`, in input order. A record that
cannot be used (bad JSON, missing or non-string text, invalid UTF-8, an empty file)
carries an `error` instead of a text, so the run writes an error row and goes on.
Paths that do not exist, or globs that match nothing, are `InputError`s (exit 2).
"""

from __future__ import annotations

import glob
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from kor_cli.errors import InputError
from kor_cli.inputs import decode_text
from kor_cli.reading import MAX_INPUT_BYTES, human_bytes, load_json, read_limited

JSONL_SUFFIXES = (".jsonl", ".ndjson")
STDIN = "-"
_GLOB_CHARS = frozenset("*?[")

RecordId = str | int


@dataclass
class Record:
    """One unit of work: a text to extract from, or an input error to report."""

    id: RecordId
    source: str  # the JSONL file ("<stdin>") or the text file
    line: int | None  # 1-based line number in a JSONL source; None for text files
    text: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # --keep fields


@dataclass(frozen=True)
class Source:
    """One resolved input: a JSONL stream (file or stdin) or a whole text file."""

    path: str
    jsonl: bool


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in JSONL_SUFFIXES


def _folder_files(folder: Path) -> list[Path]:
    """Every non-hidden file below `folder`, sorted by path."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def resolve_sources(specs: Iterable[str], *, output: str | None = None) -> list[Source]:
    """Expand INPUT arguments: '-' (stdin JSONL), *.jsonl files, text files, folders, globs.

    Files ending in .jsonl/.ndjson are read line by line; anything else is one text.
    Folders and globs leave out the `output` file; naming it as an input is an error.
    """
    sources: list[Source] = []
    for spec in specs:
        if spec == STDIN:
            sources.append(Source(STDIN, jsonl=True))
            continue
        path = Path(spec)
        if path.is_dir():
            paths = [p for p in _folder_files(path) if not _same_file(p, output)]
            if not paths:
                raise InputError(f"{spec}: folder has no files")
        elif path.exists():
            if _same_file(path, output):
                raise InputError(f"{spec}: is the output file (-o), not an input")
            paths = [path]
        elif _GLOB_CHARS & set(spec):
            matches = (Path(p) for p in sorted(glob.glob(spec, recursive=True)))
            paths = [p for p in matches if p.is_file() and not _same_file(p, output)]
            if not paths:
                raise InputError(f"{spec}: pattern matches no files")
        else:
            raise InputError(f"{spec}: no such file or folder")
        sources.extend(Source(str(p), jsonl=_is_jsonl(p)) for p in paths)
    if sum(s.path == STDIN for s in sources) > 1:
        raise InputError("'-' (stdin) can be given only once")
    return sources


def _same_file(path: Path, output: str | None) -> bool:
    return output is not None and path.resolve() == Path(output).resolve()


def count_records(sources: list[Source]) -> int | None:
    """How many records the sources hold (non-blank lines / files); None with stdin."""
    total = 0
    for source in sources:
        if source.path == STDIN:
            return None
        if not source.jsonl:
            total += 1
            continue
        try:
            with open(source.path, "rb") as handle:
                total += sum(1 for _ in record_lines(handle))
        except OSError as error:
            raise InputError(f"{source.path}: cannot read ({error.strerror})") from None
    return total


def iter_records(
    sources: list[Source],
    *,
    text_key: str = "text",
    id_key: str = "id",
    keep: tuple[str, ...] = (),
) -> Iterator[Record]:
    """Yield one Record per non-blank JSONL line or text file, in input order."""
    for source in sources:
        if not source.jsonl:
            yield _text_file_record(source.path)
        elif source.path == STDIN:
            yield from _jsonl_records(sys.stdin.buffer, "<stdin>", text_key, id_key, keep)
        else:
            try:
                with open(source.path, "rb") as handle:
                    yield from _jsonl_records(handle, source.path, text_key, id_key, keep)
            except OSError as error:
                raise InputError(f"{source.path}: cannot read ({error.strerror})") from None


def _text_file_record(path: str) -> Record:
    record = Record(id=path, source=path, line=None)
    try:
        text = decode_text(read_limited(path, limit=MAX_INPUT_BYTES, what="input text"), path)
    except InputError as error:
        record.error = f"input: {error}"
    else:
        if text.strip():
            record.text = text
        else:
            record.error = f"input: {path}: text is empty"
    return record


def record_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of every line that becomes a record: not blank, and not the
    dangling second byte of a UTF-16 file's last newline. A line longer than
    MAX_INPUT_BYTES comes as None (its bytes are skipped, never held)."""
    number = 0
    utf16 = False
    while True:
        raw = stream.readline(MAX_INPUT_BYTES + 1)
        if not raw:
            return
        number += 1
        if number == 1:
            utf16 = raw.startswith((b"\xff\xfe", b"\xfe\xff"))
        if len(raw) > MAX_INPUT_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = stream.readline(1 << 20)
            yield number, None
        elif raw.strip() and not (utf16 and not raw.strip(b"\x00\r\n")):
            yield number, raw


def _jsonl_records(
    stream: BinaryIO, name: str, text_key: str, id_key: str, keep: tuple[str, ...]
) -> Iterator[Record]:
    for number, raw in record_lines(stream):
        if raw is None:
            error = f"input: line {number}: longer than {human_bytes(MAX_INPUT_BYTES)}"
            yield Record(id=number, source=name, line=number, error=error)
        else:
            yield parse_jsonl_line(raw, name, number, text_key, id_key, keep)


def parse_jsonl_line(
    raw: bytes, name: str, number: int, text_key: str, id_key: str, keep: tuple[str, ...]
) -> Record:
    """One JSONL line → Record; every problem becomes an error naming the line."""

    def bad(reason: str, record_id: RecordId = number) -> Record:
        error = f"input: line {number}: {reason}"
        return Record(id=record_id, source=name, line=number, error=error)

    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return bad("the file is UTF-16 (convert it to UTF-8)")
    if raw.startswith(b"\x00"):
        return bad("starts with a NUL byte (UTF-16 or binary data?)")
    try:
        line = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        byte = raw[error.start]
        return bad(f"not valid UTF-8 (bad byte 0x{byte:02x} at column {error.start + 1})")
    try:
        obj = load_json(line, "")
    except InputError as error:
        return bad(str(error))
    if not isinstance(obj, dict):
        return bad(f"expected a JSON object, got {_json_type(obj)}")
    record_id: Any = obj.get(id_key, number)
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)):
        return bad(f"'{id_key}' must be a string or an integer, got {_json_type(record_id)}")
    extra = {key: obj[key] for key in keep if key in obj}
    text = obj.get(text_key)
    if text_key not in obj:
        record = bad(f"missing text key '{text_key}'", record_id)
    elif not isinstance(text, str):
        record = bad(f"'{text_key}' must be a string, got {_json_type(text)}", record_id)
    elif not text.strip():
        record = bad(f"'{text_key}' is empty", record_id)
    else:
        record = Record(id=record_id, source=name, line=number, text=text)
    record.extra = extra
    return record


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names = {dict: "an object", list: "an array", str: "a string"}
    return names.get(type(value), type(value).__name__)
