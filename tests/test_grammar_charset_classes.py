"""Python's `\\d`, `\\w`, `\\s` as code point ranges (`charset.python_class`): a code point
is in the ranges exactly when `re` matches it (hypothesis over all code points but the
surrogates), and the text they are read from holds every such code point once, in order;
the disk cache of the classes: read back by a later process, a broken file ignored and
rewritten, nothing written with the cache off."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import charset
from kor_cli.grammar.charset import _all_text, python_class, scan_python_class

POINTS = st.one_of(st.integers(0, 0xD7FF), st.integers(0xE000, 0x10FFFF), st.integers(0, 0x3000))


def test_all_text_is_every_code_point_but_surrogates() -> None:
    text = _all_text()
    assert len(text) == 0x110000 - 0x800
    assert text[:3] == "\x00\x01\x02" and text[0xD7FF] == "\ud7ff" and text[0xD800] == "\ue000"
    assert text[-1] == "\U0010ffff"


@pytest.mark.parametrize("letter", ["d", "w", "s"])
@given(point=POINTS)
@settings(max_examples=300, deadline=None)
def test_class_ranges_are_what_re_matches(letter: str, point: int) -> None:
    inside = any(lo <= point <= hi for lo, hi in python_class(letter))
    assert inside == bool(re.fullmatch(rf"\{letter}", chr(point)))


@pytest.fixture
def fresh_classes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty disk cache and no class computed in this process (restored after)."""
    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path))
    python_class.cache_clear()
    yield tmp_path
    python_class.cache_clear()


def class_files(root: Path) -> list[Path]:
    return sorted(root.glob("pyclass-*"))


@pytest.mark.parametrize("letter", ["d", "w", "s"])
def test_a_second_process_reads_the_class_from_the_disk_cache(
    fresh_classes: Path, monkeypatch: pytest.MonkeyPatch, letter: str
) -> None:
    scanned = python_class(letter)
    assert scanned == scan_python_class(letter)
    (path,) = class_files(fresh_classes)
    python_class.cache_clear()  # as in a new process

    def no_scan(letter: str) -> charset.Ranges:
        raise AssertionError("scanned although the disk cache holds the class")

    monkeypatch.setattr(charset, "scan_python_class", no_scan)
    assert python_class(letter) == scanned
    assert class_files(fresh_classes) == [path]


def test_each_class_has_its_own_file(fresh_classes: Path) -> None:
    for letter in "dws":
        python_class(letter)
    assert len(class_files(fresh_classes)) == 3


def flip_a_byte(raw: bytes) -> bytes:
    return raw[:-3] + bytes([raw[-3] ^ 0x40]) + raw[-2:]


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: b"",
        lambda raw: b"garbage",
        lambda raw: raw[:-1],
        lambda raw: raw[:-8],
        flip_a_byte,
    ],
    ids=["empty", "garbage", "cut-byte", "cut-range", "flipped"],
)
def test_a_broken_cache_file_is_ignored_and_rewritten(
    fresh_classes: Path, damage: Callable[[bytes], bytes]
) -> None:
    expected = python_class("w")
    (path,) = class_files(fresh_classes)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    python_class.cache_clear()
    assert python_class("w") == expected
    assert path.read_bytes() == good


@pytest.mark.parametrize(
    "ranges",
    [((5, 3),), ((1, 4), (5, 9)), ((9, 12), (1, 4)), ((0xD000, 0xD900),), ((0, 0x110000),)],
    ids=["reversed", "adjacent", "unsorted", "surrogates", "past-max"],
)
def test_a_file_with_a_good_digest_but_bad_ranges_is_rejected(ranges: charset.Ranges) -> None:
    assert charset._decode_ranges(charset._encode_ranges(ranges)) is None
    good = ((1, 4), (6, 9), (0xE000, 0x10FFFF))
    assert charset._decode_ranges(charset._encode_ranges(good)) == good


def test_with_the_disk_cache_off_nothing_is_written(
    fresh_classes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KOR_CLI_CACHE", "off")
    assert python_class("d") == scan_python_class("d")
    assert class_files(fresh_classes) == []


def test_the_key_covers_the_python_version_and_unicode_database(
    fresh_classes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = charset._class_path("w")
    monkeypatch.setattr(charset.unicodedata, "unidata_version", "0.0.0")
    assert charset._class_path("w") != first
    monkeypatch.undo()
    monkeypatch.setattr(charset.sys, "version", "0.0")
    assert charset._class_path("w") != first


@pytest.mark.slow
@pytest.mark.parametrize("letter", ["d", "w", "s"])
def test_cached_class_is_what_re_matches_on_every_code_point(
    fresh_classes: Path, letter: str
) -> None:
    python_class(letter)
    python_class.cache_clear()
    cached = python_class(letter)  # read back from the file
    member = np.zeros(0x110000, dtype=bool)
    for lo, hi in cached:
        member[lo : hi + 1] = True
    one = re.compile(rf"\{letter}").fullmatch
    matched = np.fromiter((one(chr(c)) is not None for c in range(0x110000)), bool, 0x110000)
    matched[0xD800:0xE000] = False  # not scalar values: never members
    assert np.array_equal(member, matched)
    assert cached == scan_python_class(letter)
