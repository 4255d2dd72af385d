"""Per-tokenizer tables (byte tries, string-body tables) on the disk cache.

Building them takes about a second for a 150k-token vocabulary, in every new process that
builds a mask; reading them back takes milliseconds. The key covers the tokenizer's
fingerprint and the source of the modules that define the tables (`trie.py`, `trie_loops.py`,
`string_body.py`), so a changed table layout never reads an old file. An object is stored
as its attributes (arrays, ints, lists of ints, lists of bytes, nested tables); one whose
attributes are of any other kind is not stored (it is rebuilt each process).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

from kor_cli.grammar import string_body, trie, trie_loops
from kor_cli.grammar.disk_cache import blob_key, blob_path, cache_root, read_arrays, write_arrays
from kor_cli.grammar.string_body import BodyTokens
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.trie_loops import LoopSkips

_FORMAT = "kor-tables-v1"
_CLASSES: dict[str, type] = {
    "TokenTrie": TokenTrie, "BodyTokens": BodyTokens, "LoopSkips": LoopSkips
}  # fmt: skip
_SCRATCH = ("_pool", "_views", "_dups")  # per-process work buffers: restored empty
_SOURCE: list[str] = []
T = TypeVar("T")


class PackedBytes(Sequence[bytes]):
    """A read-only list of byte strings kept as one buffer and their end offsets (a token
    list restored from the cache without making ~150k bytes objects up front)."""

    def __init__(self, data: bytes, lengths: np.ndarray) -> None:
        self._data = data
        self._ends = np.cumsum(lengths, dtype=np.int64)
        self._starts = self._ends - lengths
        # plain-int reads: a bisect over the tokens (TokenTrie.along) reads one per probe
        self._start_at, self._end_at = memoryview(self._starts), memoryview(self._ends)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, at: int) -> bytes: ...
    @overload
    def __getitem__(self, at: slice) -> list[bytes]: ...
    def __getitem__(self, at: int | slice) -> bytes | list[bytes]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self)))]
        return self._data[self._start_at[at] : self._end_at[at]]


def _source_hash() -> str:
    """A hash of the modules whose classes are stored (their layout is the file format)."""
    if not _SOURCE:
        digest = hashlib.sha256()
        for module in (trie, string_body, trie_loops):
            digest.update(Path(module.__file__ or "").read_bytes())
        _SOURCE.append(digest.hexdigest())
    return _SOURCE[0]


def tables_path(fingerprint: str) -> Path | None:
    """The cache file of one tokenizer's tables (None: no disk cache)."""
    root = cache_root()
    if root is None:
        return None
    return blob_path(root, "tables", blob_key(_FORMAT, fingerprint, _source_hash()))


def _flatten(obj: Any, prefix: str, out: dict[str, np.ndarray]) -> bool:
    """Add `obj`'s attributes to `out` under `prefix`; False when one cannot be stored."""
    kinds: list[list[str]] = []
    for name, value in vars(obj).items():
        key = f"{prefix}.{name}"
        if name in _SCRATCH:
            kind = "scratch"
        elif isinstance(value, np.ndarray) and not value.dtype.hasobject:
            kind, out[key] = "array", value
        elif isinstance(value, bool):
            kind, out[key] = "bool", np.asarray(value)
        elif isinstance(value, int):
            kind, out[key] = "int", np.asarray(value, dtype=np.int64)
        elif isinstance(value, list) and all(isinstance(v, int) for v in value):
            kind, out[key] = "ints", np.asarray(value, dtype=np.int64)
        elif isinstance(value, (list, PackedBytes)) and all(isinstance(v, bytes) for v in value):
            kind = "bytes"
            out[key] = np.frombuffer(b"".join(value), dtype=np.uint8)
            out[key + "#lens"] = np.fromiter(map(len, value), np.int64, count=len(value))
        elif type(value).__name__ in _CLASSES and type(value) is _CLASSES[type(value).__name__]:
            kind = type(value).__name__
            if not _flatten(value, key, out):
                return False
        else:
            return False
        kinds.append([name, kind])
    out[prefix + "#kinds"] = np.asarray(repr(kinds))
    return True


def _restore(cls: type[T], prefix: str, arrays: dict[str, np.ndarray]) -> T:
    """An object of `cls` from the attributes `_flatten` stored under `prefix`."""
    import ast

    obj = cls.__new__(cls)
    for name, kind in ast.literal_eval(str(arrays[prefix + "#kinds"])):
        key = f"{prefix}.{name}"
        value: Any
        if kind == "scratch":
            value = []
        elif kind == "array":
            value = arrays[key]
        elif kind == "bool":
            value = bool(arrays[key])
        elif kind == "int":
            value = int(arrays[key])
        elif kind == "ints":
            value = arrays[key].tolist()
        elif kind == "bytes":
            value = PackedBytes(arrays[key].tobytes(), arrays[key + "#lens"])
        else:
            value = _restore(_CLASSES[kind], key, arrays)
        setattr(obj, name, value)
    return obj


def load_or_build(
    fingerprint: str, build: Callable[[], tuple[Any, ...]], classes: tuple[type, ...]
) -> tuple[Any, ...]:
    """The tables of one tokenizer: read from the disk cache, else `build()` and stored.
    `classes`: the class of each table, in order."""
    path = tables_path(fingerprint)
    found = read_arrays(path) if path is not None else None
    if found is not None:
        try:
            return tuple(_restore(cls, f"t{at}", found) for at, cls in enumerate(classes))
        except (KeyError, ValueError, TypeError, SyntaxError, AttributeError):
            pass  # a stale or broken file: rebuild and overwrite it
    tables = build()
    out: dict[str, np.ndarray] = {}
    if path is not None and all(_flatten(t, f"t{at}", out) for at, t in enumerate(tables)):
        write_arrays(path, out)
    return tables
