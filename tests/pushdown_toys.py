"""Toy grammars (nested lists, a tree, JSON-RPC-like params, nullable and ambiguous rules)
over a toy vocabulary, and `check_along`: the pushdown matcher's masks against the reference
simulation (`pushdown_helpers.Reference`) byte by byte."""

from __future__ import annotations

import itertools

import numpy as np
from pushdown_helpers import Reference

from kor_cli.grammar.ast import Node, alt, literal, opt, repeat, seq
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.pushdown import PushdownGrammar, PushdownMatcher
from kor_cli.grammar.regex import fullmatch
from kor_cli.grammar.rules import RuleSet, call
from kor_cli.grammar.vocab import TokenizerInfo

DIGITS = fullmatch("[0-9]+")
WORD = fullmatch("[a-z]+")
STRING = fullmatch('"[a-z ]*"')


def rules_of(bodies: dict[int, Node], start: int = 0) -> RuleSet:
    return RuleSet(start, lambda k: compile_ast(bodies[k]), names={k: f"R{k}" for k in bodies})


def items(node: Node, open_: str, close: str) -> Node:
    return seq(literal(open_), opt(repeat(node, 1, None, literal(","))), literal(close))


NESTED = {0: items(call(0), "[", "]")}  # A -> "[" (A ("," A)*)? "]"
TREE = {  # {"v":1,"kids":[Node,...]}
    0: seq(
        literal('{"v":'),
        DIGITS,
        opt(seq(literal(',"kids":'), items(call(0), "[", "]"))),
        literal("}"),
    )
}
RPC = {  # JSON-RPC-like: nested params of any shape; Value ends in numbers (can go on or return)
    0: seq(literal('{"method":'), STRING, literal(',"params":'), call(1), literal("}")),
    1: alt(call(2), call(3), DIGITS, STRING, literal("true")),
    2: items(seq(STRING, literal(":"), call(1)), "{", "}"),
    3: items(call(1), "[", "]"),
}
NULLABLE = {  # calls of rules that generate the empty string, in a loop and in a row
    0: seq(literal("<"), repeat(seq(call(1), call(2)), 0, None), call(1), literal(">")),
    1: opt(literal("a")),
    2: alt(literal("b"), seq(literal("("), call(0), literal(")"))),
}
AMBIGUOUS = {  # two rules spell the same items: a configuration's stacks double per level
    0: items(alt(call(1), call(2)), "[", "]"),
    1: alt(literal("x"), call(0)),
    2: alt(literal("x"), call(0)),
}
GRAMMARS = {
    "nested": NESTED,
    "tree": TREE,
    "rpc": RPC,
    "nullable": NULLABLE,
    "ambiguous": AMBIGUOUS,
}

ALPHABET = b'[],{}"x:1av<>b()'
TOY_TOKENS: list[bytes | None] = [
    *(bytes(p) for n in (1, 2, 3) for p in itertools.product(ALPHABET, repeat=n)),
    b'{"v":', b',"kids":[', b'{"v":1,"kids":[{"v":', b"]}]}", b"}]}", b'"}', b'":[', b"]]]]",
    b'{"method":"a","params":', b"12}", b"1,", b'"a":', b"\xc3\xa9", b"<a<b>", b"]}]",
    None, b"",
]  # fmt: skip
STOP = len(TOY_TOKENS) - 2
TOY = TokenizerInfo(TOY_TOKENS, stop_ids=[STOP], vocab_size=len(TOY_TOKENS) + 7)


def unpack(words: np.ndarray, size: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), count=size, bitorder="little").astype(bool)


def check_along(rules: RuleSet, info: TokenizerInfo, texts: list[bytes], every: int = 1) -> None:
    """At every `every`-th byte of each text, the mask equals the reference's."""
    grammar = PushdownGrammar(rules, info)
    reference = Reference(rules)
    for text in texts:
        matcher = PushdownMatcher(grammar)
        config = reference.start()
        for at in range(len(text) + 1):
            if at % every == 0 or at == len(text):
                want = reference.allowed(config, info.token_bytes, info.stop_ids)
                want = np.concatenate([want, np.zeros(info.vocab_size - len(want), bool)])
                got = unpack(matcher.packed_mask(), info.vocab_size)
                wrong = np.flatnonzero(got != want)
                assert not len(wrong), (
                    text[:at],
                    [(t, info.token_bytes[t], want[t]) for t in wrong[:8]],
                )
                assert matcher.is_accepting == reference.accepting(config)
            if at < len(text):
                assert matcher.accept_bytes(text[at : at + 1]), text[: at + 1]
                config = reference.step(config, text[at])


def sample_texts(rules: RuleSet, count: int, seed: int = 0, max_len: int = 30) -> list[bytes]:
    rng = np.random.default_rng(seed)
    reference = Reference(rules)
    return [reference.random_string(rng, max_len) for _ in range(count)]
