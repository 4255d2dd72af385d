"""Who wrote a batch output file, with which settings, and how far: its sidecar.

`kor-cli batch -o out.jsonl` keeps `.out.jsonl.kor-cli` beside the output (hidden, so
folder and glob inputs never pick it up). It holds the run settings (schema hash, mode,
model, options), the byte length and SHA-256 of everything written and fsync'd so far
(`bytes`, `sha256`), and, while a batch is being written, what the file will be once it
is (`pending`). A resume continues only a file whose content matches its sidecar; a
kill -9 at any point leaves either the committed state, a torn tail inside the pending
write (dropped), or the full pending write (committed on open).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 1


def sidecar_path(output: Path) -> Path:
    """The hidden file beside `output` that says kor-cli wrote it."""
    return output.with_name(f".{output.name}.kor-cli")


@dataclass
class Mark:
    """A byte length of the output and the SHA-256 of its first `bytes` bytes."""

    bytes: int
    sha256: str

    @classmethod
    def of(cls, digest: Any, size: int) -> Mark:
        return cls(size, digest.hexdigest())


@dataclass
class Provenance:
    """The sidecar's content."""

    settings: dict[str, Any]
    committed: Mark
    pending: Mark | None = None

    def to_json(self) -> str:
        doc = {
            "kor_cli_batch": FORMAT,
            "settings": self.settings,
            "bytes": self.committed.bytes,
            "sha256": self.committed.sha256,
            "pending": None if self.pending is None else vars(self.pending),
        }
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"


class ProvenanceError(Exception):
    """The sidecar is missing, unreadable, or does not describe the file."""


def read_provenance(path: Path) -> Provenance | None:
    """The sidecar at `path`, None if there is none; ProvenanceError if it is not one."""
    try:
        data = path.read_bytes()[: 1 << 20]
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ProvenanceError(f"cannot read {path} ({error.strerror})") from None
    try:
        doc = json.loads(data)
        assert isinstance(doc, dict) and doc.get("kor_cli_batch") == FORMAT
        settings = doc["settings"]
        assert isinstance(settings, dict)
        committed = _mark(doc["bytes"], doc["sha256"])
        pending = doc.get("pending")
        return Provenance(settings, committed, None if pending is None else _mark(**pending))
    except (ValueError, AssertionError, KeyError, TypeError):
        raise ProvenanceError(f"{path} is not a kor-cli batch sidecar") from None


def _mark(bytes: Any, sha256: Any) -> Mark:  # noqa: A002 - the JSON field names
    if not isinstance(bytes, int) or isinstance(bytes, bool) or bytes < 0:
        raise TypeError("bytes")
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise TypeError("sha256")
    return Mark(bytes, sha256)


def write_provenance(path: Path, provenance: Provenance) -> None:
    """Replace the sidecar atomically (temporary file, fsync, rename, fsync the folder)."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(provenance.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a created or renamed file's directory entry durable too."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def settings_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """'key: old → new' for the first setting that differs, or None when all agree."""
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            return f"{key}: {_short(old.get(key))} then, {_short(new.get(key))} now"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def new_digest() -> Any:
    return hashlib.sha256()
