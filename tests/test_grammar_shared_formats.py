"""shared_rules.shared_node: a string `format` is parsed once per process (and repeat limit),
and grammars compiled with the memo kept are those compiled with every format parsed anew."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import dfa_cache, json_format_rules, json_schema, shared_rules
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.json_formats import FORMATS

FLAT = [name for name in FORMATS if name != "regex"]  # flat "regex" is a ~1,500-state DFA


def cold() -> None:
    compile_module._cache.clear()
    dfa_cache.clear()


def uses(name: str) -> dict[str, Any]:
    """`name` in several places: a member, array items, a length-bounded member, a `not`."""
    fmt = {"type": "string", "format": name}
    return {
        "type": "object",
        "properties": {
            "a": fmt,
            "b": {"type": "array", "items": fmt},
            "c": {**fmt, "maxLength": 40},
            "d": {"not": fmt},
        },
        "required": ["a"],
    }


def rule_prints(schema: Any, options: GrammarOptions | None = None) -> list[tuple[Any, ...]]:
    """Every rule of a cold compile (all built), in id order: name, DFA, calls."""
    cold()
    rules = compile_json_schema(schema, options or GrammarOptions()).rules
    built = {k: rules.rule(k) for k in sorted(rules.names)}
    return [
        (k, rules.names[k], rule.dfa.fingerprint(), sorted(dict(rule.calls).items()))
        for k, rule in built.items()
    ]


@pytest.mark.parametrize("name", FLAT)
def test_a_memoized_format_compiles_as_one_parsed_anew(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_rules, "_nodes", OrderedDict())  # nothing parsed yet
    fresh = rule_prints(uses(name))
    rule_prints({"anyOf": [{"type": "string", "format": n} for n in FLAT]})  # another schema
    assert rule_prints(uses(name)) == fresh  # the memo kept: the same rules, built alike


def test_a_second_schema_does_not_parse_its_formats_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_rules, "_nodes", OrderedDict())
    parsed: list[str] = []
    real = json_schema.fullmatch
    monkeypatch.setattr(json_schema, "fullmatch", lambda t, d: parsed.append(t) or real(t, d))
    rule_prints(uses("date-time"))
    assert parsed == [FORMATS["date-time"]]  # once in a compile that uses it four times
    rule_prints({"type": "array", "items": {"type": "string", "format": "date-time"}})
    assert parsed == [FORMATS["date-time"]]  # not again in another schema's cold compile
    assert json_schema.format_node("date-time") is json_schema.format_node("date-time")


def test_the_repeat_limit_is_part_of_the_key() -> None:
    schema = uses("uuid")  # counts up to 12
    default = rule_prints(schema)  # memoized under the default limit
    with pytest.raises(GrammarError, match="repetition count 12 exceeds the limit of 8"):
        rule_prints(schema, GrammarOptions(max_repeat=8))
    assert default and rule_prints(schema, GrammarOptions(max_repeat=12)) == default


def test_regex_format_rules_memoized_compile_as_parsed_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "r": {"type": "string", "format": "regex"},
            "s": {"type": "array", "items": {"type": "string", "format": "regex"}},
        },
    }
    monkeypatch.setattr(shared_rules, "_nodes", OrderedDict())
    fresh = rule_prints(schema)
    parsed: list[str] = []
    real = json_format_rules.fullmatch
    monkeypatch.setattr(json_format_rules, "fullmatch", lambda t, d: parsed.append(t) or real(t, d))
    assert rule_prints(schema) == fresh  # every rule (class, braces, groups) built alike
    assert parsed == []  # and no piece parsed again
