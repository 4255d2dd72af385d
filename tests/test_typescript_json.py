"""TypeScript from JSON Schema never fails: random schemas (hypothesis) always render."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kor_cli.schema.document import record_document
from kor_cli.typescript_json import render_document_typescript

NAMES = st.sampled_from(["a", "b-c", "d e", "$f", "default", "Node"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
LEAVES = st.one_of(
    st.booleans(),
    st.just({}),
    st.builds(lambda t: {"type": t}, st.sampled_from(["string", "integer", "number", "null"])),
    st.builds(lambda v: {"enum": v}, st.lists(SCALARS, max_size=3)),
    st.builds(lambda v: {"const": v}, SCALARS),
    st.builds(lambda r: {"$ref": r}, st.sampled_from(["#", "#/$defs/Node", "#/$defs/missing"])),
    st.just({"type": "string", "minLength": 1, "format": "date", "description": "D"}),
)


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(
            lambda p, r: {"type": "object", "properties": p, "required": r},
            st.dictionaries(NAMES, inner, max_size=3),
            st.lists(NAMES, max_size=2),
        ),
        st.builds(lambda i: {"type": "array", "items": i, "minItems": 1}, inner),
        st.builds(lambda p: {"prefixItems": p, "items": False}, st.lists(inner, max_size=2)),
        st.builds(lambda b: {"anyOf": b}, st.lists(inner, max_size=3)),
        st.builds(lambda b: {"oneOf": [b, {"type": "null"}]}, inner),
        st.builds(lambda b: {"allOf": b, "type": "object"}, st.lists(inner, max_size=2)),
        st.builds(lambda n: {"not": n, "if": n, "then": n}, inner),
        st.builds(lambda a: {"type": "object", "additionalProperties": a}, inner),
        st.builds(lambda a: {"patternProperties": {"^x": a}}, inner),
        st.builds(lambda t: {"type": t}, st.lists(st.sampled_from(["string", "null"]), max_size=2)),
    )


SCHEMAS = st.recursive(LEAVES, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(SCHEMAS, SCHEMAS)
@example({"type": ["null", "null"]}, {})
def test_any_schema_renders(body: Any, node: Any) -> None:
    document = body if isinstance(body, dict) else {"allOf": [body]}
    document = {**document, "$defs": {"Node": node}}
    text = render_document_typescript(record_document(document, "r"), "r")
    assert text.startswith("```TypeScript\n\nr") and text.endswith("\n```\n")
