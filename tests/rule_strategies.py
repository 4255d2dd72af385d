"""Hypothesis strategies shared by the rule tests: small grammar trees over a few byte
pieces and calls (`rules.call`), for the call-splitting and call-class properties."""

from __future__ import annotations

from hypothesis import strategies as st

from kor_cli.grammar.ast import Node, alt, literal, opt, repeat, seq
from kor_cli.grammar.rules import call

PIECES = ["[", "]", ",", "x", "1", "ab", '"', ""]
LEAVES = st.one_of(
    st.sampled_from(PIECES).map(literal),
    st.integers(0, 400).map(call),
    st.just(call(7**5)),  # a rule id far past the others (sparse ids)
)
CALL_TREES: st.SearchStrategy[Node] = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: seq(*p)),
        st.tuples(inner, inner).map(lambda p: alt(*p)),
        inner.map(opt),
        inner.map(lambda n: repeat(n, 0, None, literal(","))),
        inner.map(lambda n: repeat(n, 1, 3)),
    ),
    max_leaves=12,
)
