"""JSON Schema → grammar: valid instances are accepted, everything the grammar produces
is valid (checked with `jsonschema`), unsupported keywords are named errors."""

from __future__ import annotations

import json
import random
import re
import string
from decimal import Decimal
from typing import Any

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kor_cli.errors import GrammarError
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.compile import (
    GrammarOptions,
    compile_json_schema,
    serialize,
)
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver

Pair = tuple[dict[str, Any], st.SearchStrategy[Any]]
KEYS = ["a", "b", "name", "x y", "é", 'q"uote']
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
FORMATS = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "duration": st.sampled_from(["P3D", "PT1H30M", "P1Y2M", "P2W", "PT0S", "P1DT12H"]),
    "json-pointer": st.lists(TEXT, max_size=3).map(
        lambda tokens: "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)
    ),
    "email": st.from_regex(r"[a-z0-9.+]{1,6}@[a-z]{1,5}\.[a-z]{2,3}", fullmatch=True).filter(
        lambda s: ".." not in s and not s.startswith(".") and ".@" not in s
    ),
}
PATTERNS = {  # pattern -> strings it matches (search semantics)
    "^[a-z]+$": st.text(string.ascii_lowercase, min_size=1, max_size=6),
    "[0-9]{2}": st.from_regex(r"[0-9]{2}", fullmatch=False),
    '^x|"$': st.from_regex(r'^x|"$', fullmatch=False),
}


def integers() -> st.SearchStrategy[Pair]:
    @st.composite
    def build(draw: st.DrawFn) -> Pair:
        lo, hi = draw(st.none() | st.integers(-300, 300)), draw(st.none() | st.integers(-300, 300))
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        schema: dict[str, Any] = {"type": "integer"}
        if lo is not None:
            schema["minimum"] = lo
        if hi is not None:
            schema["maximum"] = hi
        return schema, st.integers(lo, hi)

    return build()


def numbers() -> st.SearchStrategy[Pair]:
    @st.composite
    def build(draw: st.DrawFn) -> Pair:
        lo, hi = sorted(draw(st.lists(st.integers(-40, 40), min_size=2, max_size=2)))
        if lo == hi:
            hi += 1
        schema = {"type": "number", "exclusiveMinimum": lo / 4, "maximum": hi / 4}
        return schema, st.integers(lo * 100 + 1, hi * 100).map(lambda k: k / 400)

    return build()


def strings() -> st.SearchStrategy[Pair]:
    lengths = st.tuples(st.integers(0, 3), st.integers(0, 4)).map(lambda t: (t[0], t[0] + t[1]))
    by_length = lengths.map(
        lambda t: ({"type": "string", "minLength": t[0], "maxLength": t[1]}, st.text(
            st.characters(exclude_categories=("Cs",)), min_size=t[0], max_size=t[1]))
    )  # fmt: skip
    by_format = st.sampled_from(sorted(FORMATS)).map(
        lambda f: ({"type": "string", "format": f}, FORMATS[f])
    )
    by_pattern = st.sampled_from(sorted(PATTERNS)).map(
        lambda p: ({"type": "string", "pattern": p}, PATTERNS[p])
    )
    bounded_pattern = st.integers(1, 5).map(
        lambda n: (
            {"type": "string", "pattern": "^[a-z]+$", "maxLength": n},
            st.text(string.ascii_lowercase, min_size=1, max_size=n),
        )
    )
    return st.one_of(by_length, by_format, by_pattern, bounded_pattern)


def scalars() -> st.SearchStrategy[Pair]:
    values = st.lists(
        st.one_of(st.integers(-5, 5), TEXT, st.booleans(), st.none(), st.just({"k": [1, "v"]})),
        min_size=1,
        max_size=4,
        unique_by=lambda v: json.dumps(v),
    )
    enums = values.map(lambda vs: ({"enum": vs}, st.sampled_from(vs)))
    const = values.map(lambda vs: ({"const": vs[0]}, st.just(vs[0])))
    simple = st.sampled_from(
        [({"type": "boolean"}, st.booleans()), ({"type": "null"}, st.none()), ({}, TEXT)]
    )
    return st.one_of(integers(), numbers(), strings(), enums, const, simple)


def containers(children: st.SearchStrategy[Pair]) -> st.SearchStrategy[Pair]:
    @st.composite
    def objects(draw: st.DrawFn) -> Pair:
        names = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
        props = {name: draw(children) for name in names}
        required = [n for n in names if draw(st.booleans())]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {n: s for n, (s, _) in props.items()},
            "required": required,
        }
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        strategy = st.fixed_dictionaries(
            {n: props[n][1] for n in required},
            optional={n: v for n, (_, v) in props.items() if n not in required},
        )
        return schema, strategy

    @st.composite
    def arrays(draw: st.DrawFn) -> Pair:
        item, values = draw(children)
        lo = draw(st.integers(0, 2))
        hi = draw(st.none() | st.integers(lo, 3))
        schema: dict[str, Any] = {"type": "array", "items": item, "minItems": lo}
        if hi is not None:
            schema["maxItems"] = hi
        return schema, st.lists(values, min_size=lo, max_size=3 if hi is None else hi)

    any_of = st.lists(children, min_size=2, max_size=3).map(
        lambda ps: ({"anyOf": [s for s, _ in ps]}, st.one_of([v for _, v in ps]))
    )
    nullable = children.map(lambda p: ({"anyOf": [p[0], {"type": "null"}]}, p[1] | st.none()))
    return st.one_of(objects(), arrays(), any_of, nullable)


def referenced(pairs: st.SearchStrategy[Pair]) -> st.SearchStrategy[Pair]:
    """The schema moved under $defs and used through $ref (with a sibling annotation)."""
    return pairs.map(
        lambda p: ({"$defs": {"d": p[0]}, "$ref": "#/$defs/d", "description": "x"}, p[1])
    )


BASE = st.recursive(scalars(), containers, max_leaves=6)
SCHEMAS = st.one_of(BASE, referenced(BASE))


def canonical(instance: Any, schema: Any) -> bytes:
    return serialize(reorder(instance, LocationSpace(Resolver(schema)).at([schema]))).encode()


@given(SCHEMAS, st.data())
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
def test_valid_instances_are_accepted(pair: Pair, data: st.DataObject) -> None:
    schema, values = pair
    dfa = compile_json_schema(schema).dfa
    for _ in range(3):
        instance = data.draw(values)
        jsonschema.validate(instance, schema, format_checker=jsonschema.FormatChecker())
        assert dfa.accepts(canonical(instance, schema)), (schema, instance)


def random_text(dfa: ByteDFA, rng: random.Random, budget: int = 200) -> bytes:
    """A random accepted text: random live bytes, heading for acceptance when long."""
    distance = _distances(dfa)
    state, out = dfa.start, bytearray()
    while True:
        row = dfa.transitions[state].tolist()
        live = [b for b in range(256) if row[b]]
        if dfa.accepting[state] and (not live or rng.random() < 0.3 or len(out) > budget):
            return bytes(out)
        if len(out) > budget:
            live = [b for b in live if distance[row[b]] < distance[state]]
        targets = sorted({int(row[b]) for b in live})
        target = rng.choice(targets)
        byte = rng.choice([b for b in live if row[b] == target])
        out.append(byte)
        state = target


def _distances(dfa: ByteDFA) -> list[int]:
    distance = [0 if a else 10**9 for a in dfa.accepting.tolist()]
    distance[0] = 10**9
    changed = True
    while changed:
        changed = False
        for s, row in enumerate(dfa.transitions.tolist()):
            best = min((distance[t] + 1 for t in set(row) if t), default=10**9)
            if s and best < distance[s]:
                distance[s], changed = best, True
    return distance


@given(SCHEMAS, st.randoms(use_true_random=False))
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
def test_generated_texts_are_valid(pair: Pair, rng: random.Random) -> None:
    check_random_texts(pair[0], compile_json_schema(pair[0]).dfa, rng)


def check_random_texts(schema: Any, dfa: ByteDFA, rng: random.Random, count: int = 4) -> None:
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for _ in range(count):
        text = random_text(dfa, rng).decode("utf-8")
        instance = json.loads(text, parse_float=Decimal)
        assert validator.is_valid(instance), (schema, text)
        if not _duplicate_keys(text):  # free-form objects may repeat a key
            # otherwise canonical, but for the spelling of numbers (`4.0`, `1e-05`)
            assert serialize(instance) == canonical_numbers(text)


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*')


def canonical_numbers(text: str) -> str:
    """`text` with every number written canonically (`4.0` -> `4`, `1e-05` -> `0.00001`)."""

    def one(match: re.Match[str]) -> str:
        token = match.group()
        return token if token.startswith('"') else serialize(Decimal(token))

    return _TOKEN.sub(one, text)


def applicators(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    several = st.lists(children, min_size=2, max_size=3)
    return st.one_of(
        several.map(lambda ss: {"oneOf": ss}),
        several.map(lambda ss: {"allOf": ss}),
        children.map(lambda s: {"not": s}),
        st.tuples(children, children, children).map(
            lambda t: {"if": t[0], "then": t[1], "else": t[2]}
        ),
        children.map(
            lambda s: {"type": "array", "items": s, "contains": {"type": "null"}, "maxContains": 2}
        ),
        children.map(lambda s: {"type": "object", "properties": {"a": s, "b": {}},
                                "patternProperties": {"^x": s}, "dependentRequired": {"a": ["b"]},
                                "additionalProperties": {"type": "boolean"}}),
    )  # fmt: skip


APPLIED = st.recursive(BASE.map(lambda pair: pair[0]), applicators, max_leaves=3)


@given(APPLIED, st.randoms(use_true_random=False))
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_applicator_texts_are_valid(schema: Any, rng: random.Random) -> None:
    try:
        dfa = compile_json_schema(schema, GrammarOptions(max_states=10_000)).dfa
    except GrammarError as error:  # e.g. nothing valid at all, or too large
        assume("matches no" in str(error) or "too large" in str(error) or "nothing" in str(error))
        return
    check_random_texts(schema, dfa, rng, count=3)


def _duplicate_keys(text: str) -> bool:
    found = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found.append(len({k for k, _ in pairs}) < len(pairs))
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return any(found)
