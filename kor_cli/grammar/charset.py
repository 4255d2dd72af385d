"""Sets of Unicode scalar values as sorted ranges, and their UTF-8 byte automata.

A `Ranges` value is a tuple of disjoint, non-adjacent, sorted (lo, hi) code point pairs.
Surrogates (U+D800–U+DFFF) are never members: UTF-8 cannot encode them.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import unicodedata
from array import array
from collections.abc import Iterable
from pathlib import Path

from kor_cli.grammar.ast import Bytes, Node, alts, seq
from kor_cli.grammar.disk_cache import blob_key, blob_path, cache_root, read_blob, write_blob

Ranges = tuple[tuple[int, int], ...]

MAX_CODE_POINT = 0x10FFFF
SURROGATES: Ranges = ((0xD800, 0xDFFF),)
ALL: Ranges = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))
_UTF8_BOUNDS = (0x7F, 0x7FF, 0xFFFF, MAX_CODE_POINT)


def normalize(pairs: Iterable[tuple[int, int]]) -> Ranges:
    """Sorted, merged ranges without surrogates."""
    merged: list[list[int]] = []
    for lo, hi in sorted(pairs):
        if lo > hi:
            continue
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return _minus_surrogates(tuple((lo, hi) for lo, hi in merged))


def _minus_surrogates(ranges: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if hi < 0xD800 or lo > 0xDFFF:
            out.append((lo, hi))
            continue
        if lo < 0xD800:
            out.append((lo, 0xD7FF))
        if hi > 0xDFFF:
            out.append((0xE000, hi))
    return tuple(out)


def chars(text: str) -> Ranges:
    """The set of the characters of `text`."""
    return normalize((ord(c), ord(c)) for c in text)


def union(*sets: Ranges) -> Ranges:
    """Union of sets."""
    return normalize(pair for ranges in sets for pair in ranges)


def complement(ranges: Ranges) -> Ranges:
    """All scalar values not in `ranges`."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return _minus_surrogates(tuple(out))


def intersection(a: Ranges, b: Ranges) -> Ranges:
    """Scalar values in both sets."""
    return complement(union(complement(a), complement(b)))


def minus(a: Ranges, b: Ranges) -> Ranges:
    """Scalar values in `a` but not in `b`."""
    return intersection(a, complement(b))


def utf8_sequences(lo: int, hi: int) -> list[tuple[tuple[int, int], ...]]:
    """Byte-range sequences whose concatenations are exactly the UTF-8 encodings of lo..hi."""
    for bound in _UTF8_BOUNDS[:-1]:
        if lo <= bound < hi:
            return utf8_sequences(lo, bound) + utf8_sequences(bound + 1, hi)
    if hi <= 0x7F:
        return [((lo, hi),)]
    for i in range(1, 4):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                return utf8_sequences(lo, lo | m) + utf8_sequences((lo | m) + 1, hi)
            if hi & m != m:
                return utf8_sequences(lo, (hi & ~m) - 1) + utf8_sequences(hi & ~m, hi)
    a, b = chr(lo).encode(), chr(hi).encode()
    return [tuple(zip(a, b, strict=True))]


def utf8(ranges: Ranges) -> Node:
    """One character of `ranges`, as UTF-8 bytes (a trie with shared suffixes)."""
    return _trie([sequence for lo, hi in ranges for sequence in utf8_sequences(lo, hi)])


def _trie(sequences: Iterable[tuple[tuple[int, int], ...]]) -> Node:
    """Alternation of byte-range sequences of equal length per lead byte, factored."""
    by_byte: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for sequence in sequences:
        lo, hi = sequence[0]
        for b in range(lo, hi + 1):
            by_byte.setdefault(b, []).append(sequence[1:])
    by_rest: dict[frozenset[tuple[tuple[int, int], ...]], int] = {}
    for b, rests in by_byte.items():
        key = frozenset(rests)
        by_rest[key] = by_rest.get(key, 0) | 1 << b
    return alts(
        Bytes(mask) if key == _END else seq(Bytes(mask), _trie(key))
        for key, mask in by_rest.items()
    )


_END: frozenset[tuple[tuple[int, int], ...]] = frozenset({()})


@functools.cache
def _all_text() -> str:
    """Every code point but the surrogates, in order (decoded at once: ~0.03 s, not ~0.4 s)."""
    import numpy as np

    codes = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)]).astype("<u4")
    return codes.tobytes().decode("utf-32-le")


def _code_point(index: int) -> int:
    return index if index < 0xD800 else index + 0x800


def scan_python_class(letter: str) -> Ranges:
    """`python_class` computed: `re` run over every code point (~20 ms a class, ~60-80 ms
    for the first in a process, which also decodes the text)."""
    spans = re.finditer(rf"\{letter}+", _all_text())
    return normalize((_code_point(m.start()), _code_point(m.end() - 1)) for m in spans)


@functools.cache
def python_class(letter: str) -> Ranges:
    """The characters Python's `re` matches with `\\d`, `\\w` or `\\s` (str patterns).

    Scanned once per machine and kept on the disk cache (`disk_cache.cache_root()`), keyed
    by the Python version and its Unicode database: a later process reads ~6 KB instead of
    scanning 1.1M code points. A file that is missing, unreadable or fails its checksum is
    ignored and rewritten."""
    path = _class_path(letter)
    if path is not None:
        found = _decode_ranges(read_blob(path))
        if found is not None:
            return found
    ranges = scan_python_class(letter)
    if path is not None:
        write_blob(path, _encode_ranges(ranges))
    return ranges


_CLASS_FORMAT = "python-class-v1"  # bump when the file layout or the definition changes
_DIGEST = 16  # bytes of sha256 that lead the file


def _class_path(letter: str) -> Path | None:
    """The cache file of one class under this interpreter (None: no disk cache)."""
    root = cache_root()
    if root is None:
        return None
    key = blob_key(_CLASS_FORMAT, letter, sys.version, unicodedata.unidata_version)
    return blob_path(root, "pyclass", key)


def _encode_ranges(ranges: Ranges) -> bytes:
    """A digest, then each range's two ends as little-endian uint32."""
    body = array("I", [end for pair in ranges for end in pair])
    if sys.byteorder != "little":
        body.byteswap()
    data = body.tobytes()
    return hashlib.sha256(data).digest()[:_DIGEST] + data


def _decode_ranges(raw: bytes | None) -> Ranges | None:
    """The ranges `_encode_ranges` wrote, or None when `raw` is missing or broken (wrong
    digest or length, or not sorted disjoint non-adjacent scalar-value ranges)."""
    if raw is None or len(raw) < _DIGEST or (len(raw) - _DIGEST) % 8:
        return None
    data = raw[_DIGEST:]
    if hashlib.sha256(data).digest()[:_DIGEST] != raw[:_DIGEST]:
        return None
    ends = array("I")
    ends.frombytes(data)
    if sys.byteorder != "little":
        ends.byteswap()
    ranges = tuple(zip(ends[0::2], ends[1::2], strict=True))
    last = -2
    for lo, hi in ranges:
        if lo <= last + 1 or hi < lo or hi > MAX_CODE_POINT or (lo <= 0xDFFF and hi >= 0xD800):
            return None
        last = hi
    return ranges


ASCII_DIGIT = chars("0123456789")
ASCII_WORD = normalize([(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F)])
ECMA_SPACE = union(
    chars("\t\n\v\f\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"), ((0x2000, 0x200A),)
)
ECMA_LINE_TERMINATORS = chars("\n\r\u2028\u2029")
