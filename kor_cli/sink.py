"""Resumable JSONL output: one writer at a time, each batch fsync'd, a torn tail dropped.

The output file itself is locked with `fcntl.flock` for the whole run, so two runs can
never append to the same file. On open, the rows already there are counted per id (the
run skips that many occurrences of each id); an unterminated or unparsable last line —
what a kill -9 or power loss mid-write leaves — is truncated away. Rows are appended as
whole batches, then flushed and fsync'd, so a row is either fully on disk or redone.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from kor_cli.errors import InputError, UsageError


def row_key(record_id: Any) -> str:
    """The resume key of an id: its JSON form, so 1 and "1" stay different ids."""
    return json.dumps(record_id, ensure_ascii=False)


@dataclass
class Existing:
    """What an earlier run left in the output file."""

    done: Counter[str] = field(default_factory=Counter)  # row_key(id) → rows written
    valid: int = 0
    failed: int = 0
    dropped_bytes: int = 0  # torn tail removed on open

    @property
    def rows(self) -> int:
        return self.valid + self.failed


class OutputSink:
    """An exclusively locked, append-only JSONL file of result rows."""

    def __init__(self, path: str | Path, *, overwrite: bool = False) -> None:
        self.path = Path(path)
        self.overwrite = overwrite
        self._handle: BinaryIO | None = None

    def open(self) -> Existing:
        """Lock the file (creating it), then repair and scan it, or empty it (--overwrite)."""
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a folder, expected an output .jsonl file")
        created = not self.path.exists()
        try:
            handle: BinaryIO = open(self.path, "a+b")  # held until close()
        except OSError as error:
            raise InputError(f"{self.path}: cannot open for writing ({error.strerror})") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise UsageError(
                f"{self.path}: another kor-cli batch run is writing this file"
            ) from None
        self._handle = handle
        if created:
            _fsync_dir(self.path.parent)
        if self.overwrite:
            handle.truncate(0)
            self._sync()
            return Existing()
        existing = self._scan(handle)
        if existing.dropped_bytes:
            self._sync()
        return existing

    def _scan(self, handle: BinaryIO) -> Existing:
        existing = Existing()
        handle.seek(0)
        offset = good_end = 0
        bad_line: int | None = None
        for number, raw in enumerate(handle, start=1):
            if bad_line is not None:
                self.close()
                raise InputError(
                    f"{self.path}: line {bad_line} is not a result row; "
                    "fix or remove it, or start over with --overwrite"
                )
            offset += len(raw)
            row = _parse_row(raw)
            if row is None:
                bad_line = number
                continue
            existing.done[row_key(row["id"])] += 1
            if row["valid"] is True:
                existing.valid += 1
            else:
                existing.failed += 1
            good_end = offset
        if good_end < offset:
            handle.truncate(good_end)
            existing.dropped_bytes = offset - good_end
        return existing

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows as one write, then flush and fsync."""
        if self._handle is None:
            raise RuntimeError("OutputSink.write before open")
        if not rows:
            return
        self._handle.write(b"".join(_encode_row(row) for row in rows))
        self._sync()

    def _sync(self) -> None:
        assert self._handle is not None
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Release the lock and close the file (safe to call twice)."""
        if self._handle is not None:
            self._handle.close()  # closing the descriptor drops the flock
            self._handle = None

    def __enter__(self) -> OutputSink:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _encode_row(row: dict[str, Any]) -> bytes:
    """One JSON line; non-ASCII kept as is, unless lone surrogates force \\u escapes."""
    try:
        return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(row) + "\n").encode("ascii")


def _parse_row(raw: bytes) -> dict[str, Any] | None:
    """A complete result row (newline-terminated JSON object with id and valid), or None."""
    if not raw.endswith(b"\n"):
        return None
    try:
        row = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(row, dict) or "id" not in row or "valid" not in row:
        return None
    return row


def _fsync_dir(folder: Path) -> None:
    """Make a newly created file's directory entry durable too."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
