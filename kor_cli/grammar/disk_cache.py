"""The on-disk cache of compiled grammars and token-mask tables: a key → bytes blob store.

Where: `$KOR_CLI_CACHE` (empty, `0` or `off`: no disk cache), else
`$XDG_CACHE_HOME/kor-cli`, else `~/.cache/kor-cli`. A blob is one file,
`<root>/<kind>-<key>.<suffix>`; `key` is a sha256 over `ENGINE_VERSION` and the parts
that decide the content (grammar source and options, tokenizer fingerprint, ...), so a
new engine version never reads an old file. Writes are atomic (a temporary file in the
same folder, then `os.replace`); a file that cannot be read or parsed is ignored (the
caller recomputes), and a cache that cannot be written is skipped: the disk cache never
makes a run fail. Any engine stores its tables the same way: `blob_key(...)`, then
`read_blob`/`write_blob` (bytes) or `read_arrays`/`write_arrays` (named numpy arrays).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

ENGINE_VERSION = "kor-engine-1"  # bump when cached grammars or masks change meaning
ENV = "KOR_CLI_CACHE"
_OFF = {"", "0", "off", "none"}


def cache_root() -> Path | None:
    """The cache folder, or None when the disk cache is switched off."""
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in _OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kor-cli"


_UNDER_FILES: set[str] = set()  # roots found under a file: remembered (a cold compile's cost)


def usable_root(root: Path | str | None) -> Path | None:
    """`root` as a cache folder, made if missing; None when it cannot exist (e.g. under a
    file, or the empty string, which would otherwise be the current folder): then nothing
    can be read or written there, so no key needs computing. A root under a file (such as
    `os.devnull`) is remembered as such for the process: no system call the next time."""
    if root is None or root == "":
        return None
    text = os.fspath(root)
    if text in _UNDER_FILES:
        return None
    path = Path(text)
    if path.is_dir():
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except NotADirectoryError:
        _UNDER_FILES.add(text)
        return None
    except OSError:
        return None
    return path


_STAMP: list[str] = []


def engine_stamp() -> str:
    """Size and modification time of every module of the grammar package, hashed (once per
    process): in a key, a changed engine never reads an old file (hashing the modules'
    text would cost more than reading a cached grammar)."""
    if not _STAMP:
        parts = []
        for entry in sorted(os.scandir(Path(__file__).resolve().parent), key=lambda e: e.name):
            if entry.name.endswith(".py"):
                info = entry.stat()
                parts.append(f"{entry.name}:{info.st_size}:{info.st_mtime_ns}")
        _STAMP.append(hashlib.sha256(" ".join(parts).encode()).hexdigest())
    return _STAMP[0]


def blob_key(*parts: str) -> str:
    """A 32-hex-digit key over the engine version and `parts` (unambiguous joins)."""
    digest = hashlib.sha256(ENGINE_VERSION.encode())
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:32]


def blob_path(root: Path | str, kind: str, key: str, suffix: str = "bin") -> Path:
    """The file of blob (`kind`, `key`) under `root`."""
    return Path(root) / f"{kind}-{key}.{suffix}"


def read_blob(path: Path) -> bytes | None:
    """The bytes of a cache file, or None when it is missing or unreadable."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_blob(path: Path, data: bytes) -> bool:
    """Write `data` to `path` atomically; False (and nothing written) when that fails."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_MAGIC = b"KORARR1\n"
_ALIGN = 16  # each array starts at a multiple of this in the file (and in the read buffer)


def read_arrays(path: Path) -> dict[str, np.ndarray] | None:
    """Named arrays from a cache file (views of one copy of its bytes); None when missing,
    unreadable or corrupt."""
    raw = read_blob(path)
    if raw is None or not raw.startswith(_MAGIC):
        return None
    data = bytearray(raw)  # writable arrays, like freshly built ones
    try:
        size = int.from_bytes(data[len(_MAGIC) : len(_MAGIC) + 8], "little")
        start = len(_MAGIC) + 8
        header = json.loads(data[start : start + size])
        base = start + size
        arrays = {}
        for name, dtype, shape, offset, nbytes in header:
            if base + offset + nbytes > len(data):
                return None
            kind = np.dtype(dtype)
            if kind.hasobject or not kind.itemsize:
                return None
            count = nbytes // kind.itemsize
            flat = np.frombuffer(data, kind, count=count, offset=base + offset)
            # an older file's arrays may sit at odd offsets: numpy walks those slowly
            arrays[str(name)] = np.require(flat, requirements="A").reshape(shape)
        return arrays
    except (ValueError, TypeError, KeyError):
        return None


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> bool:
    """Write named arrays as one cache file (a JSON header, then the raw bytes of each
    array, each at a multiple of _ALIGN bytes), atomically; False when that fails."""
    header, chunks, offset = [], [], 0
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array).tobytes()
        header.append([name, np.asarray(array).dtype.str, list(np.shape(array)), offset, len(raw)])
        chunks.append(raw + bytes(-len(raw) % _ALIGN))
        offset += len(chunks[-1])
    head = json.dumps(header).encode()
    head += b" " * (-(len(_MAGIC) + 8 + len(head)) % _ALIGN)  # arrays start aligned
    return write_blob(path, b"".join([_MAGIC, len(head).to_bytes(8, "little"), head, *chunks]))
