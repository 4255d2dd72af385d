"""Resumable JSONL output: one writer at a time, each batch fsync'd, trusted only if ours.

The output file itself is locked with `fcntl.flock` for the whole run, so two runs can
never append to the same file. A sidecar (kor_cli/provenance.py) records the run settings
and how many bytes kor-cli wrote, with their SHA-256. On open, a file without a sidecar
is refused unless it is empty (never modified: it may be someone's notes), a file of
other settings is refused, and a file whose content no longer matches is refused; a torn
tail that a kill -9 or power loss mid-write leaves is truncated away. Then the rows are
counted per id (the run skips that many occurrences of each id). Rows are appended as
whole batches, then flushed and fsync'd, so a row is either fully on disk or redone.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from kor_cli.errors import InputError, OutputError, UsageError
from kor_cli.provenance import (
    Mark,
    Provenance,
    ProvenanceError,
    fsync_dir,
    new_digest,
    read_provenance,
    settings_difference,
    sidecar_path,
    write_provenance,
)

_CHUNK = 1 << 20
_FIX = "choose another -o, or pass --overwrite to start it afresh"


def row_key(record_id: Any) -> str:
    """The resume key of an id: its JSON form, so 1 and "1" stay different ids."""
    return json.dumps(record_id, ensure_ascii=False)


@dataclass
class Existing:
    """What an earlier run left in the output file."""

    done: Counter[str] = field(default_factory=Counter)  # row_key(id) → rows written
    valid: int = 0
    empty: int = 0  # valid rows that say "nothing here"
    failed: int = 0
    dropped_bytes: int = 0  # torn tail removed on open

    @property
    def rows(self) -> int:
        return self.valid + self.failed


class OutputSink:
    """An exclusively locked, append-only JSONL file of result rows, with its sidecar."""

    def __init__(
        self,
        path: str | Path,
        *,
        overwrite: bool = False,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.overwrite = overwrite
        self.settings = settings or {}
        self.sidecar = sidecar_path(self.path)
        self._handle: BinaryIO | None = None
        self._digest = new_digest()
        self._size = 0

    def open(self) -> Existing:
        """Lock the file (creating it), then check, repair and scan it, or empty it."""
        _check_target(self.path)
        created = not self.path.exists()
        try:
            handle: BinaryIO = open(self.path, "a+b")  # held until close()
        except OSError as error:
            raise OutputError(f"{self.path}: cannot open for writing ({error.strerror})") from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise UsageError(
                f"{self.path}: another kor-cli batch run is writing this file"
            ) from None
        self._handle = handle
        try:
            if created:
                fsync_dir(self.path.parent)
            return self._start(handle)
        except BaseException:
            self.close()
            raise

    def _start(self, handle: BinaryIO) -> Existing:
        if self.overwrite:
            handle.truncate(0)
            self._sync()
            self._commit()
            return Existing()
        try:
            provenance = read_provenance(self.sidecar)
        except ProvenanceError as error:
            raise InputError(f"{self.path}: {error}; {_FIX}") from None
        size = os.fstat(handle.fileno()).st_size
        if provenance is None:
            if size:
                raise InputError(
                    f"{self.path}: not written by kor-cli batch (no {self.sidecar.name} "
                    f"beside it), left as it is; {_FIX}"
                )
            self._commit()
            return Existing()
        difference = settings_difference(provenance.settings, self.settings)
        if difference is not None:
            raise UsageError(
                f"{self.path}: written with other settings ({difference}); rerun with the "
                f"same ones, or {_FIX}"
            )
        end, dropped = self._verify(handle, provenance, size)
        if dropped:
            handle.truncate(end)
            self._sync()
        existing = self._scan(handle, end)
        existing.dropped_bytes = dropped
        if dropped or provenance.pending is not None:
            self._commit()
        return existing

    def _verify(self, handle: BinaryIO, provenance: Provenance, size: int) -> tuple[int, int]:
        """Check the file against its sidecar: (bytes kor-cli wrote, torn bytes to drop)."""
        committed, pending = provenance.committed, provenance.pending
        changed = f"{self.path}: changed since kor-cli wrote it"
        if size < committed.bytes:
            raise InputError(f"{changed} (shorter than its {committed.bytes} bytes); {_FIX}")
        handle.seek(0)
        _hash_into(self._digest, handle, committed.bytes)
        if self._digest.hexdigest() != committed.sha256:
            raise InputError(f"{changed} (its first {committed.bytes} bytes differ); {_FIX}")
        end = committed.bytes
        if pending is not None and size >= pending.bytes:
            ahead = self._digest.copy()
            _hash_into(ahead, handle, pending.bytes - end)
            if ahead.hexdigest() == pending.sha256:  # the last batch is whole: keep it
                self._digest, end = ahead, pending.bytes
        self._size = end
        if size == end:
            return end, 0
        handle.seek(end)
        tail = handle.read(min(size - end, _CHUNK + 1))
        torn_write = pending is not None and end == committed.bytes and size < pending.bytes
        if torn_write or b"\n" not in tail:
            return end, size - end
        line = _line_number(handle, end)
        raise InputError(f"{changed}: line {line} is not a row kor-cli wrote; {_FIX}")

    def _scan(self, handle: BinaryIO, end: int) -> Existing:
        existing = Existing()
        handle.seek(0)
        offset = 0
        for number, raw in enumerate(handle, start=1):
            offset += len(raw)
            if offset > end:
                break
            row = _parse_row(raw)
            if row is None:
                raise InputError(f"{self.path}: line {number} is not a result row; {_FIX}")
            existing.done[row_key(row["id"])] += 1
            if row["valid"] is True:
                existing.valid += 1
                existing.empty += row.get("empty") is True
            else:
                existing.failed += 1
        return existing

    def _commit(self, pending: Mark | None = None) -> None:
        mark = Mark.of(self._digest, self._size)
        try:
            write_provenance(self.sidecar, Provenance(self.settings, mark, pending))
        except OSError as error:
            raise OutputError(f"{self.sidecar}: cannot write ({error.strerror})") from None

    def write(self, rows: list[dict[str, Any]]) -> None:
        """Append rows as one write, then flush and fsync; the sidecar brackets the write."""
        if self._handle is None:
            raise RuntimeError("OutputSink.write before open")
        if not rows:
            return
        data = b"".join(_encode_row(row) for row in rows)
        after = self._digest.copy()
        after.update(data)
        self._commit(Mark.of(after, self._size + len(data)))
        try:
            self._handle.write(data)
            self._sync()
        except OSError as error:
            self.close()  # what was fsync'd before stays; the torn rest is dropped on resume
            raise OutputError(
                f"{self.path}: cannot write ({error.strerror}); rows written before are kept, "
                "rerun the same command to resume"
            ) from None
        self._digest, self._size = after, self._size + len(data)
        self._commit()

    def _sync(self) -> None:
        assert self._handle is not None
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Release the lock and close the file (safe to call twice)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()  # closing the descriptor drops the flock
            except OSError:
                pass  # a failed final flush: the rows it held were never fsync'd

    def __enter__(self) -> OutputSink:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _check_target(path: Path) -> None:
    """-o must be a regular file or not exist yet (never a folder, device or pipe)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        raise OutputError(f"{path}: cannot use as output ({error.strerror})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a folder, expected an output .jsonl file")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path}: -o must be a regular file (not a device, pipe or socket)")


def _hash_into(digest: Any, handle: BinaryIO, count: int) -> None:
    while count > 0:
        data = handle.read(min(count, _CHUNK))
        if not data:
            return
        digest.update(data)
        count -= len(data)


def _line_number(handle: BinaryIO, offset: int) -> int:
    """The 1-based number of the line that starts at byte `offset`."""
    handle.seek(0)
    newlines = 0
    while offset > 0:
        data = handle.read(min(offset, _CHUNK))
        if not data:
            break
        newlines += data.count(b"\n")
        offset -= len(data)
    return newlines + 1


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
