"""`json_values.max_depth`: the three searches (whole small table, distinct edges, numpy
levels) agree with each other and with the nesting of the JSON texts a DFA accepts, and a
DFA is searched once."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kor_cli.grammar import json_values
from kor_cli.grammar.ast import alt, literal
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-99, 99) | st.text('a[]{}"\\,:', max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text("ab[{", max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)
# (small-table cells, level-search states): the search each setting forces
WAYS = {"small": (10**9, 10**9), "edges": (0, 10**9), "levels": (0, 0)}


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


def depth_by(way: str, dfa: ByteDFA, monkeypatch: pytest.MonkeyPatch) -> int:
    small, levels = WAYS[way]
    with monkeypatch.context() as patch:
        patch.setattr(json_values, "_SMALL_TABLE", small)
        patch.setattr(json_values, "_LEVELS", levels)
        return json_values._max_depth(dfa)


@settings(max_examples=60, deadline=None)
@given(st.lists(JSON, min_size=1, max_size=4))
def test_the_searches_agree_with_the_nesting(values: list[Any]) -> None:
    dfa = compile_ast(alt(*(literal(json_values.dumps(v)) for v in values)))
    expected = max(map(nesting, values))
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert {w: depth_by(w, dfa, monkeypatch) for w in WAYS} == dict.fromkeys(WAYS, expected)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_loose_values(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for depth in range(5):
        assert depth_by(way, compile_ast(json_values.loose_value(depth)), monkeypatch) == depth


def test_a_dfa_is_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    dfa = compile_ast(json_values.loose_value(3))
    calls: list[ByteDFA] = []
    real = json_values._max_depth
    monkeypatch.setattr(json_values, "_max_depth", lambda d: calls.append(d) or real(d))
    assert json_values.max_depth(dfa) == json_values.max_depth(dfa) == 3
    assert calls == [dfa]
