"""Python's `\\d`, `\\w`, `\\s` as code point ranges (`charset.python_class`): a code point
is in the ranges exactly when `re` matches it (hypothesis over all code points but the
surrogates), and the text they are read from holds every such code point once, in order."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar.charset import _all_text, python_class

POINTS = st.one_of(
    st.integers(0, 0xD7FF), st.integers(0xE000, 0x10FFFF), st.integers(0, 0x3000)
)


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
