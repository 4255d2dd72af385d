"""Container member values and other keys of a large object as rules of their own
(`json_member_rules`): the start rule keeps named keys and punctuation, each member value
and the keys beyond the named ones are built when reached, the language is that of the
inline grammar (and jsonschema's), and small objects stay one rule."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jsonschema
import pytest
from grammar_helpers import token_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_member_rules
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.surface import compile_grammar

NAMES = [f"rule_number_{k}" for k in range(24)]
LEVEL = {"type": "string", "enum": ["error", "warn", "ignore"]}
SCHEMA: dict[str, Any] = {  # coffeelint's shape: many small optional objects, open at the top
    "type": "object",
    "definitions": {"base": {"type": "object", "properties": {"level": LEVEL}}},
    "properties": {
        name: {
            "allOf": [{"$ref": "#/definitions/base"}],
            "properties": {"value": {"type": "integer", "enum": [k, k + 1]}},
        }
        for k, name in enumerate(NAMES)
    },
    "additionalProperties": True,
}
VALUES = st.one_of(
    st.fixed_dictionaries({}, optional={"level": st.sampled_from(["error", "warn", "bad"])}),
    st.fixed_dictionaries({"value": st.integers(0, 30)}),
    st.sampled_from([1, "x", None, [], [{"level": "warn"}]]),
)
EXTRA = st.sampled_from(["extra", "", "rule_number_", "rule_number_99", "rule_number_1x"])
INSTANCES = st.dictionaries(st.sampled_from(NAMES) | EXTRA, VALUES, max_size=6)


def _text(instance: Any) -> bytes:
    return serialize(reorder(instance, LocationSpace(Resolver(SCHEMA)).at([SCHEMA]))).encode()


@pytest.fixture(scope="module")
def grammars() -> tuple[Any, Any]:
    split = compile_json_schema(SCHEMA, GrammarOptions())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(json_member_rules, "OBJECT_NODES", 10**9)
        patch.setattr(json_member_rules, "KEY_STATES", 10**9)
        patch.setattr(compile_module, "_cache", OrderedDict())  # no grammar from above
        inline = compile_json_schema(SCHEMA, GrammarOptions())
    return split, inline


def test_member_values_are_rules_built_when_reached(grammars: tuple[Any, Any]) -> None:
    split, inline = grammars
    assert split.rules.built == 1  # only the start rule so far
    start = split.rules.rule(split.rules.start)
    inline_start = inline.rules.rule(inline.rules.start)
    callees = {callee for calls in start.calls.values() for callee, _ in calls}
    assert len(callees) >= len(NAMES) + 1  # each member's value is a call, other keys too
    assert any(split.rules.name(k).endswith("/other-keys") for k in callees)
    assert start.dfa.num_states < inline_start.dfa.num_states // 2


@given(INSTANCES)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_same_language_as_inline_and_jsonschema(grammars: tuple[Any, Any], instance: Any) -> None:
    split, inline = grammars
    text = _text(instance)
    valid = jsonschema.Draft7Validator(SCHEMA).is_valid(instance)
    assert split.accepts(text) == inline.accepts(text) == valid, text
    assert not split.accepts(text[:-1])


def test_small_objects_stay_one_rule() -> None:
    few = {"type": "object", "properties": {n: SCHEMA["properties"][n] for n in NAMES[:1]}}
    few["definitions"] = SCHEMA["definitions"]
    grammar = compile_json_schema(few, GrammarOptions())
    assert not grammar.has_calls  # one DFA: the whole-DFA engine, as before


WALKED = [
    {"rule_number_3": {"level": "warn"}, "rule_number_7": {"value": 8}, "extra": [1, {"a": 2}]},
    {"rule_number_0": {}, "rule_number_": {"level": "x"}},
    {"rule_number_1": {"value": 1}},
    {"rule_number_1": {"value": 3}},  # not in [1, 2]
    {"rule_number_2": {"level": "bad"}},
    {"rule_number_23": {}, "extra": 1},
]


def test_real_token_masks_walk_the_called_members(
    grammars: tuple[Any, Any], tokenizer_info_factory: Any, qwen_tokenizer: Any
) -> None:
    """Qwen's own tokens (which cross key, value and member boundaries): every token of a
    valid text is allowed, then a stop token; an invalid text is stopped somewhere."""
    split, inline = grammars
    info = tokenizer_info_factory("qwen")
    compiled = compile_grammar(split, info, cache_dir="")
    verdicts = []
    for instance in WALKED:
        text = _text(instance)
        tokens = qwen_tokenizer.encode(text.decode(), add_special_tokens=False)
        verdicts.append(token_walk(compiled, info, tokens))
        assert verdicts[-1] == inline.accepts(text), text
    assert verdicts == [True, True, True, False, False, True]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet='ab"\\\n\x00é€😀/', max_size=6), min_size=1, max_size=12))
def test_other_keys_dfa_is_the_products(names: list[str]) -> None:
    """The other keys' DFA built directly (the names' trie over the string DFA) is the very
    minimal DFA the product gives (same fingerprint), names escaped, shared or prefixes."""
    from kor_cli.grammar.ast import Automaton, alt, difference, literal
    from kor_cli.grammar.fsm import compile_ast
    from kor_cli.grammar.json_values import json_text, string_node

    key = difference(string_node(), alt(*(literal(json_text(n)) for n in dict.fromkeys(names))))
    direct = json_member_rules._but_names(key)
    assert isinstance(direct, Automaton)
    assert direct.dfa.fingerprint() == compile_ast(key).fingerprint()
    assert direct.dfa.trimmed
    assert json_member_rules._but_names(string_node()) is string_node()  # other shapes: as is
