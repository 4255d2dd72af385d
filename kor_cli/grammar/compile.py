"""Public facade: JSON Schema / regex / choice list → `Grammar` (a `RuleSet` of byte-DFA
rules: one rule, a minimal `ByteDFA`, unless a JSON Schema's `$ref` recurses).

Compiled grammars are kept in a small in-memory LRU cache keyed by the canonical JSON of
the input and the options.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from kor_cli.errors import GrammarError
from kor_cli.grammar.ast import Node, alt, literal
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.gc_pause import paused
from kor_cli.grammar.json_files import Loader, prefix_loader, sibling_loader
from kor_cli.grammar.json_schema import SchemaCompiler
from kor_cli.grammar.json_values import dumps
from kor_cli.grammar.limits import Limits, applied
from kor_cli.grammar.regex import fullmatch
from kor_cli.grammar.rules import RuleSet

_CACHE_SIZE = 64


@dataclass(frozen=True)
class GrammarOptions:
    """How grammars are built.

    whitespace: "compact" (`,` and `:`) or "spaced" (`", "` and `": "`, like json.dumps).
    lenient: drop keywords that cannot be enforced (with a warning) instead of failing.
    max_recursion_depth: recursive `$ref`s are rules (any depth, see `json_rules`) except
        under products (`not`, `oneOf`, `if`/`else`, `contains`, `uniqueItems`, ...), where
        they are unrolled this many times; also the depth of `Grammar.dfa`'s bounded view
        of a recursive grammar.
    max_any_depth: unconstrained values (`{}`, `true`, free items and members) are a
        recursive rule (any depth, see `json_containers`) except where the grammar must be
        one DFA: under products (as `max_recursion_depth`), in the DFA view, and with
        `bounded_any`; there they nest at most this many containers deep.
    bounded_any: a grammar whose only calls would be "any value" rules stays one DFA
        (the former engine: `{}` unrolled `max_any_depth` deep, faster cold masks, bounded
        depth). Default False: any depth (benchmarks/any_value.py measures both).
    max_states: DFA size limit; larger grammars raise `GrammarError`.
    open_objects: an object schema without `additionalProperties` allows other members
        (the specification); by default it is closed once it declares properties/required.
    ref_dir: a folder of sibling schema files: `$ref: "other.json"` (relative) and
        `https://json.schemastore.org/other.json` load `ref_dir/other.json` (`json_files`).
    ref_map: (URI prefix, folder) pairs: a `$ref` under a prefix loads the file at the rest
        of its path under the folder.
    time_limit_s: CPU-time limit of one compile (None: none); past it `GrammarError`.
    max_repeat / max_enum / max_properties: the largest regex repetition count, enum and
        object schema (number of `properties`) compiled; larger ones raise `GrammarError`.
    No Python exception other than `GrammarError` escapes a compile (a schema too deep
    for Python's recursion limit is a `GrammarError` too).
    """

    whitespace: Literal["compact", "spaced"] = "compact"
    lenient: bool = False
    max_recursion_depth: int = 3
    max_any_depth: int = 3
    bounded_any: bool = False
    max_states: int = 50_000
    open_objects: bool = False
    ref_dir: str | None = None
    ref_map: tuple[tuple[str, str], ...] = ()
    time_limit_s: float | None = 30.0
    max_repeat: int = 1000
    max_enum: int = 2000
    max_properties: int = 1000


class Grammar:
    """A compiled grammar: its rules, what it came from, and dropped-keyword warnings.

    `rules` is what the pushdown matcher runs; they are built when first reached (a rule
    too large to build is a `GrammarError` then). A one-rule grammar's `dfa` is that rule's
    DFA. A grammar with calls (recursion, or large values split off) has as `dfa` a view for
    DFA-only consumers, built on first use: its calls inlined, recursive ones
    `max_recursion_depth` deep, "any value" `max_any_depth` deep (the same language when
    nothing recurses).
    """

    __slots__ = ("_dfa", "_rules", "_view", "_bytewise", "kind", "warnings")

    def __init__(
        self,
        dfa: ByteDFA | None,
        kind: str,  # "json-schema" | "regex" | "choice"
        warnings: tuple[str, ...] = (),
        rules: RuleSet | None = None,
        view: Callable[[], ByteDFA] | None = None,
    ) -> None:
        if dfa is None and (rules is None or view is None):
            raise ValueError("a Grammar needs a DFA, or rules and a DFA view of them")
        self._dfa, self._rules, self._view = dfa, rules, view
        self._bytewise: Any = None  # a byte-level pushdown grammar, for `accepts`
        self.kind, self.warnings = kind, warnings

    @property
    def dfa(self) -> ByteDFA:
        if self._dfa is None:
            assert self._view is not None
            self._dfa = self._view()
        return self._dfa

    @property
    def rules(self) -> RuleSet:
        if self._rules is None:
            self._rules = RuleSet.from_dfa(self.dfa)
        return self._rules

    @property
    def has_calls(self) -> bool:
        """True if the grammar has more than one rule (runs on the pushdown matcher)."""
        return self._view is not None

    def accepts(self, data: bytes) -> bool:
        """Whether the grammar accepts `data` whole (a grammar with calls: walked byte by
        byte on the pushdown matcher, any depth; the DFA view would bound recursion)."""
        if not self.has_calls:
            return self.dfa.accepts(data)
        from kor_cli.grammar.pushdown import PushdownGrammar, PushdownMatcher
        from kor_cli.grammar.vocab import TokenizerInfo

        if self._bytewise is None:
            info = TokenizerInfo([bytes([b]) for b in range(256)], vocab_size=256)
            self._bytewise = PushdownGrammar(self.rules, info)
        matcher = PushdownMatcher(self._bytewise)
        return matcher.accept_bytes(data) and matcher.is_accepting

    @property
    def key(self) -> str:
        """Stable hash of the grammar (one rule: the DFA fingerprint)."""
        return self.rules.key() if self.has_calls else self.dfa.fingerprint()


_cache: OrderedDict[tuple[str, str, GrammarOptions], Grammar] = OrderedDict()


def _cached(kind: str, text: str, options: GrammarOptions, build: Callable[[], Grammar]) -> Grammar:
    key = (kind, text, options)
    found = _cache.get(key)
    if found is not None:
        _cache.move_to_end(key)
        return found
    grammar = _bounded(build, options)
    _cache[key] = grammar
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return grammar


def _loader(options: GrammarOptions) -> Loader | None:
    siblings = sibling_loader(options.ref_dir) if options.ref_dir else None
    return prefix_loader(options.ref_map, siblings) if options.ref_map else siblings


T = TypeVar("T")


def _bounded(build: Callable[[], T], options: GrammarOptions) -> T:
    """`build()` under the options' limits; resource exhaustion becomes a `GrammarError`.
    The cyclic garbage collector pauses meanwhile (`gc_pause`)."""
    sizes = Limits(options.max_repeat, options.max_enum, options.max_properties)
    try:
        with paused(), applied(sizes, options.time_limit_s):
            return build()
    except RecursionError:
        message = "the schema nests too deeply to compile (Python's recursion limit)"
        raise GrammarError(message) from None
    except MemoryError:
        raise GrammarError("compiling ran out of memory (the grammar is too large)") from None


def _finish(
    node: Node, kind: str, options: GrammarOptions, warnings: Sequence[str] = ()
) -> Grammar:
    dfa = compile_ast(node, options.max_states)
    if dfa.is_empty():
        raise GrammarError(f"the {kind} grammar matches nothing")
    return Grammar(dfa, kind, tuple(warnings))


def compile_json_schema(
    schema: dict[str, Any] | bool, options: GrammarOptions = GrammarOptions()
) -> Grammar:
    """Grammar of the canonical JSON texts (`serialize`, members in schema order) of the
    instances valid under `schema` (draft 2020-12).

    `additionalProperties: false` is the default for objects that declare `properties` or
    `required`; `oneOf` exclusivity is exact on the text and re-checked by the validator.
    Keywords that cannot be enforced raise `GrammarError` naming keyword and JSON pointer
    (or, with `options.lenient`, are dropped and listed in `Grammar.warnings`). See
    `kor_cli.grammar.json_schema` for the details.
    """
    if not isinstance(schema, (dict, bool)):
        raise GrammarError("a JSON Schema must be an object or a boolean")
    try:
        text = json.dumps(schema, sort_keys=False, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise GrammarError(f"the schema is not JSON: {error}") from None
    except RecursionError:
        raise GrammarError("the schema nests too deeply (Python's recursion limit)") from None

    def build() -> Grammar:
        compiler = SchemaCompiler(
            schema,
            whitespace=options.whitespace,
            lenient=options.lenient,
            max_recursion_depth=options.max_recursion_depth,
            max_any_depth=options.max_any_depth,
            max_states=options.max_states,
            open_objects=options.open_objects,
            loader=_loader(options),
        )
        book = compiler.compile()
        warnings = tuple(compiler.warnings)
        bounded = options.bounded_any and book.only_any_values  # `{}` unrolled: one DFA
        if book.has_calls and not bounded:

            def rule(k: int) -> ByteDFA:  # each rule built under the compile's limits
                return _bounded(lambda: book.build(k), options)

            def view() -> ByteDFA:
                def inlined() -> ByteDFA:  # builds deferred bodies: under the limits too
                    node = book.inlined(options.max_recursion_depth)
                    return compile_ast(node, options.max_states)

                return _bounded(inlined, options)

            key = f"{text} {options!r}"
            rules = RuleSet(
                book.start, rule, book.names, key=key, checked=book.checked, shared=book.shared
            )
            rules.names = book.names  # rules found when deferred values are built get names
            rules.rule(rules.start)  # the others when first reached

            return Grammar(None, "json-schema", warnings, rules, view)
        root = book.inlined(options.max_recursion_depth) if bounded else book.bodies[book.start]
        dfa = compile_ast(root, options.max_states)
        if dfa.is_empty():
            raise compiler.empty_error()
        return Grammar(dfa, "json-schema", warnings)

    return _cached("json-schema", text, options, build)


def compile_regex(pattern: str, options: GrammarOptions = GrammarOptions()) -> Grammar:
    """Grammar of the strings `pattern` matches in full (Python `re` subset, UTF-8)."""
    return _cached("regex", pattern, options, lambda: _finish(fullmatch(pattern), "regex", options))


def compile_choice(choices: Sequence[str], options: GrammarOptions = GrammarOptions()) -> Grammar:
    """Grammar of exactly one of `choices` (UTF-8)."""
    if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
        raise GrammarError("choices must be a list of strings")
    if not choices:
        raise GrammarError("the choice list is empty")
    text = json.dumps(list(choices), ensure_ascii=False)
    node = alt(*(literal(c) for c in choices))
    return _cached("choice", text, options, lambda: _finish(node, "choice", options))


def serialize(instance: Any, options: GrammarOptions = GrammarOptions()) -> str:
    """Canonical JSON text (json.dumps in the grammar's whitespace, ensure_ascii=False,
    members in the given order; integral numbers without fraction, no exponents)."""
    return dumps(instance, options.whitespace)
