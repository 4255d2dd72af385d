"""Deferred values (`json_defer`): a large member value's AST is built when its rule is
first reached, keyword errors still come at compile time, and the language is the one the
eager compiler builds (random schemas, hypothesis)."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.json_containers import ANY_RULE
from kor_cli.grammar.json_schema import SchemaCompiler
from tests.test_grammar_json_rules import RECURSIVE, matches, random_text


def record(prefix: str, inner: Any = None) -> dict[str, Any]:
    """An object of eight string members (and `inner` as member "sub")."""
    props: dict[str, Any] = {f"{prefix}{k}": {"type": "string"} for k in range(8)}
    if inner is not None:
        props["sub"] = inner
    return {"type": "object", "properties": props}


DEEP = record("a", record("b", {"type": "array", "items": record("c", {"not": {"type": "null"}})}))
SCHEMA = {"type": "object", "properties": {"x": DEEP, "y": record("y")}, "required": ["y"]}


def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile everything up front (the engine before deferral) and bypass the LRU cache."""
    monkeypatch.setattr("kor_cli.grammar.json_defer.DEFER_SIZE", 10**9)
    monkeypatch.setattr("kor_cli.grammar.json_rules.SPLIT_SIZE", 10**9)
    monkeypatch.setattr("kor_cli.grammar.json_member_rules.OBJECT_NODES", 10**9)
    compile_module._cache.clear()


def test_deferred_values_are_built_when_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    distribute = SchemaCompiler.distribute

    def counted(self: SchemaCompiler, facts: Any, loc: Any, pos: bool) -> Any:
        built.append(facts.parts[0].pointer)
        return distribute(self, facts, loc, pos)

    monkeypatch.setattr(SchemaCompiler, "distribute", counted)
    compiler = SchemaCompiler(SCHEMA)
    book = compiler.compile()
    # the start rule only: "y" is required, but its strings prove it productive unbuilt
    assert book.has_calls and book.forced == 0 and not built
    book.build(book.start)  # the first mask needs the start rule; x is proved productive
    assert book.forced == 0 and not built  # so its body waits until the matcher reaches it
    view = book.inlined(3)  # every body: the `not` deep inside is built only now
    assert built == ["/properties/x/properties/sub/properties/sub/items/properties/sub"]
    assert view


def test_deferred_grammar_is_the_eager_language(monkeypatch: pytest.MonkeyPatch) -> None:
    lazy = compile_json_schema(SCHEMA, GrammarOptions(time_limit_s=28.0))
    assert lazy.has_calls
    text = json.dumps({"x": {"sub": {"sub": [{"c0": "q", "sub": 1}]}}, "y": {"y3": "z"}})
    assert matches(lazy, text.replace(" ", ""))
    assert not matches(lazy, text.replace(" ", "").replace('"sub":1', '"sub":null'))
    eager(monkeypatch)
    whole = compile_json_schema(SCHEMA, GrammarOptions(time_limit_s=28.0))
    shared = ANY_RULE[:-1]  # no deferred rule: "any value" and the free types' (shared)
    assert all(n == "#" or n.startswith(shared) for n in whole.rules.names.values())
    assert lazy.dfa.fingerprint() == whole.dfa.fingerprint()


@pytest.mark.parametrize(
    ("bad", "keyword"),
    [({"format": "iri"}, "format"), ({"pattern": "x(?=x)"}, "pattern"),
     ({"$ref": "#/nowhere"}, "$ref"), ({"$dynamicRef": "#x"}, "$dynamicRef"),
     ({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True, "maxItems": 3}, None),
     ({"type": "string", "pattern": "a"}, None)],
)  # fmt: skip
def test_bad_keyword_deep_inside_is_reported_at_compile(
    bad: dict[str, Any], keyword: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad keyword in a value never reached fails the compile as it did eagerly; a good
    one (last cases) does not."""
    inner = record("c", {"type": "object", "properties": {"deep": bad}})
    schema = {"type": "object", "properties": {"x": record("a", record("b", inner))}}
    outcomes = []
    for mode in ("lazy", "eager"):
        if mode == "eager":
            eager(monkeypatch)
        try:
            compile_json_schema(schema, GrammarOptions(time_limit_s=27.0))
            outcomes.append(None)
        except GrammarError as error:
            outcomes.append((error.keyword, error.pointer))
    assert outcomes[0] == outcomes[1]
    if keyword is None:
        assert outcomes[0] is None
    else:
        assert outcomes[0] == (keyword, "/properties/x/properties/sub/properties/sub"
                               "/properties/sub/properties/deep")  # fmt: skip


SCALARS = st.sampled_from(
    [{"type": "integer", "minimum": 0}, {"type": "string", "maxLength": 2},
     {"enum": [1, "a", None]}, {"type": "boolean"}, {"not": {"type": "string"}}]
)  # fmt: skip


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        children.map(lambda c: {"type": "array", "items": c, "maxItems": 2}),
        st.dictionaries(names, children, min_size=1, max_size=3).map(
            lambda p: {"type": "object", "properties": p, "required": sorted(p)[:1]}
        ),
        st.lists(children, min_size=2, max_size=2).map(lambda c: {"anyOf": c}),
        st.lists(children, min_size=2, max_size=2).map(lambda c: {"oneOf": c}),
    )


TREES = st.recursive(SCALARS, containers, max_leaves=8)


@given(TREES)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_schemas_same_dfa_deferred_or_not(schema: Any) -> None:
    """Every value deferred (DEFER_SIZE 1) or none: the same minimal DFA (no recursion, so
    the view inlines every rule)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("kor_cli.grammar.json_defer.DEFER_SIZE", 1)
        compile_module._cache.clear()
        lazy = _fingerprint(schema)
        eager(patch)
        assert lazy == _fingerprint(schema)
    compile_module._cache.clear()


def _fingerprint(schema: Any) -> str | None:
    try:
        return compile_json_schema(schema, GrammarOptions(max_states=20_000)).dfa.fingerprint()
    except GrammarError as error:
        return f"error {error.keyword}"


@given(RECURSIVE, st.randoms(use_true_random=False))
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_random_recursive_schemas_deferred(schema: Any, rng: random.Random) -> None:
    """Recursion through deferred values: texts of the deferred grammar validate and the
    eager grammar accepts them."""
    options = GrammarOptions(max_states=20_000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("kor_cli.grammar.json_defer.DEFER_SIZE", 1)
        compile_module._cache.clear()
        try:
            lazy = compile_json_schema(schema, options)
        except GrammarError as error:
            empty = ("nothing", "no JSON value")  # the compiler's two "empty schema" messages
            assert (
                error.keyword == "$ref"
                or any(word in str(error) for word in empty)
                or "too large" in str(error)
            )
            return
        eager(patch)
        try:  # the whole DFA may be past max_states where the lazy rules are not (yet)
            whole = compile_json_schema(schema, options)
        except GrammarError as error:
            assert "too large" in str(error)
            compile_module._cache.clear()
            return
    compile_module._cache.clear()
    validator = jsonschema.Draft202012Validator(schema)
    try:
        for _ in range(3):
            data = random_text(lazy.rules, lazy.rules.start, rng, [rng.randrange(10, 200)])
            try:
                valid = validator.is_valid(json.loads(data, parse_float=Decimal))
            except RecursionError:
                valid = None
            assert valid is not False, (schema, data)
            assert whole.accepts(data)
    except GrammarError as error:  # a rule built when first reached can be past max_states
        assert "too large" in str(error)


def test_values_holding_unique_items_stay_eager() -> None:
    """`unique_check` relies on it: checked arrays exist once the schema is compiled, so the
    matcher knows at construction whether it must check uniqueness."""
    unique = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    schema = {"type": "object", "properties": {"x": record("a", record("b", unique)),
                                               "y": record("y", record("z"))}}  # fmt: skip
    book = SchemaCompiler(schema).compile()
    assert len(book.checked) == 1  # the checked array is known at compile time
    deferred = {book.names[r] for r in book._pending}
    assert deferred == {"#/properties/y"}  # x (uniqueItems deep inside) was built at once
