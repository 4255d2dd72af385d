"""Numbers as models and `json.dumps` write them: `4.0`, `2.50`, `1e-05`, `1.5E+20`.

Choices (see `json_numbers`): a `number` accepts trailing fraction zeros everywhere and
normalised exponent forms where no `multipleOf` applies (bounds are exact on exponent forms
too); `integer` accepts digits
only (`4.0` is an integer in JSON Schema since draft-06, but the grammar never writes or
accepts it for `integer`). `not`/`oneOf`/`if` subtract every spelling, so no spelling of a
value can slip through a subtraction (0 false accepts).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.grammar.compile import compile_json_schema, serialize


def _is_integer(checker: Any, instance: Any) -> bool:
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (
        isinstance(instance, (float, Decimal)) and instance == instance.to_integral_value()
    )


_CHECKER = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer)
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_CHECKER)


def valid(schema: Any, text: str) -> bool:
    """The oracle: exact decimals, integral values are integers (draft-06 and later)."""
    exact = json.loads(json.dumps(schema), parse_float=Decimal)
    return Validator(exact).is_valid(json.loads(text, parse_float=Decimal))


def spellings(value: Decimal) -> list[str]:
    """Texts of `value`: canonical, json.dumps of the float, trailing zeros, exponents."""
    canonical = serialize(value)
    out = [canonical, json.dumps(float(value))]
    out.append(canonical + ("0" if "." in canonical else ".0"))
    out.append(canonical + ("00" if "." in canonical else ".00"))
    if value:
        sign, digits, exponent = value.normalize().as_tuple()
        assert isinstance(exponent, int)
        mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if digits[1:] else "")
        power = exponent + len(digits) - 1
        minus = "-" if sign else ""
        out += [f"{minus}{mantissa}e{power:+03d}", f"{minus}{mantissa}E{power}"]
        if power == 0:  # a zero exponent written negative
            out += [f"{minus}{mantissa}e-0", f"{minus}{mantissa}E-00"]
    return list(dict.fromkeys(out))


DECIMALS = st.integers(-3000, 3000).flatmap(
    lambda n: st.sampled_from([Decimal(n), Decimal(n) / 100, Decimal(n) * 1000, Decimal(n) / 10**7])
)


@st.composite
def number_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": draw(st.sampled_from(["number", "integer", None]))}
    if schema["type"] is None:
        del schema["type"]
    for keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if draw(st.integers(0, 3)) == 0:
            schema[keyword] = float(draw(DECIMALS))
    if draw(st.integers(0, 3)) == 0:
        schema["multipleOf"] = draw(st.sampled_from([0.5, 0.25, 2, 3, 0.01, 1.5]))
    return schema


@st.composite
def wrapped(draw: st.DrawFn) -> dict[str, Any]:
    """A number schema, or one under a subtraction (not / oneOf / if-then-else)."""
    inner = draw(number_schemas())
    value = float(draw(DECIMALS))
    return draw(
        st.sampled_from(
            [
                inner,
                {"type": "number", "not": inner},
                {"not": {"const": value}, "type": "number"},
                {"type": "number", "not": {"type": "integer"}},
                {"oneOf": [inner, {"type": "number", "maximum": value}]},
                {"if": inner, "then": {"const": value}, "else": {"type": "number"}},
                {"type": "array", "items": {"type": "number"}, "not": {"const": [value]}},
                {
                    "type": "object",
                    "properties": {"a": {"type": "number"}},
                    "not": {"enum": [{"a": value}, value]},
                },
            ]
        )  # fmt: skip
    )


def _texts(value: Decimal, schema: dict[str, Any]) -> list[str]:
    if schema.get("type") == "array":
        return [f"[{t}]" for t in spellings(value)]
    if schema.get("type") == "object":
        return ['{"a":' + t + "}" for t in spellings(value)]
    return spellings(value)


@given(wrapped(), DECIMALS)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_spelling_is_falsely_accepted(schema: dict[str, Any], value: Decimal) -> None:
    try:
        dfa = compile_json_schema(schema).dfa
    except Exception as error:  # an empty language is a named refusal
        assert "matches no" in str(error) or "nothing" in str(error), error
        return
    for text in _texts(value, schema):
        if dfa.accepts(text.encode()):
            assert valid(schema, text), (schema, text)


@given(number_schemas(), DECIMALS)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_valid_numbers_are_accepted_as_written(schema: dict[str, Any], value: Decimal) -> None:
    try:
        dfa = compile_json_schema(schema).dfa
    except Exception as error:
        assert "matches no" in str(error) or "nothing" in str(error), error
        return
    canonical, *others = spellings(value)
    if not valid(schema, canonical):
        return
    integral = value == value.to_integral_value()
    number = schema.get("type") != "integer" or not integral
    assert dfa.accepts(canonical.encode()) or (schema.get("type") == "integer" and not integral)
    for text in others:  # exponent forms wherever no multipleOf applies
        if number and ("e" not in text.lower() or "multipleOf" not in schema):
            assert dfa.accepts(text.encode()), (schema, text)


def test_integer_is_digits_only() -> None:
    dfa = compile_json_schema({"type": "integer"}).dfa
    assert dfa.accepts(b"4") and dfa.accepts(b"-12")
    for text in (b"4.0", b"4e0", b"1e+20", b"4.", b"04"):
        assert not dfa.accepts(text)


def test_number_spellings() -> None:
    dfa = compile_json_schema({"type": "number"}).dfa
    for text in (b"4", b"4.0", b"2.50", b"1e-05", b"1.5E+20", b"-3.25e7", b"0.0"):
        assert dfa.accepts(text), text
    for text in (b"4.", b"1e", b"01", b"1.50e3", b"10e3", b".5", b"+1"):
        assert not dfa.accepts(text), text
    bounded = compile_json_schema({"type": "number", "maximum": 10}).dfa
    assert bounded.accepts(b"9.50") and bounded.accepts(b"1e-05") and bounded.accepts(b"1e1")
    assert not bounded.accepts(b"10.01") and bounded.accepts(b"10.000")
    assert not bounded.accepts(b"1.01e1") and not bounded.accepts(b"2e+01")
    assert bounded.accepts(b"9.5e-0") and bounded.accepts(b"1E-00") and bounded.accepts(b"1e-01")
    assert not compile_json_schema({"maximum": 5}).dfa.accepts(b"5.5e-0")
    stepped = compile_json_schema({"type": "number", "multipleOf": 0.5}).dfa
    assert stepped.accepts(b"2.50") and not stepped.accepts(b"2.5e0")  # only exponents refused


def test_serialize_stays_canonical() -> None:
    assert serialize([4.0, 1e-05, 1.5e20, 2.5]) == "[4,0.00001,150000000000000000000,2.5]"


def test_huge_integral_numbers_serialize_as_digits() -> None:
    """An integral number past Python's int-to-str digit limit (4,300) still serializes to
    its digits (found by hypothesis: a random text `1E+10000` re-serialized)."""
    from kor_cli.grammar.json_values import format_number

    assert format_number(Decimal("1E+10000")) == "1" + "0" * 10_000
    assert format_number(Decimal("-7E+2")) == "-700"
    assert format_number(Decimal("-0.0")) == "0" and format_number(Decimal("5.000")) == "5"
