"""Few-shot examples of a JSON Schema beyond Kor's node tree, gathered the way Kor does.

`x-kor-examples` (`{text, output}` items, output being that location's value) and
`x-kor-null-examples` (texts) may sit at the top level (the root's value) and at any
location reached through `properties`, array `items` and local `$ref`s. A location's
example becomes `{name: value}` (inside a list where the location is an array) and is
wrapped under every enclosing property on the way up, as in `examples.gather_examples`.
Each example output is checked against its location's schema with `jsonschema`.
"""

from __future__ import annotations

from typing import Any

from kor_cli.errors import SchemaError
from kor_cli.schema.document import escape, resolve_pointer
from kor_cli.schema.examples import is_empty
from kor_cli.schema.nodes import Example, is_example_list

Found = list[tuple[str, dict[str, Any] | None]]


def document_examples(document: dict[str, Any], root_id: str, source: str) -> list[Example]:
    """Every example as (text, value under the root id); None means nothing here."""
    from kor_cli.validate import json_validator

    walker = _Walker(document, source, json_validator(document))
    found = walker.collect(document, root_id, "", root_id)
    return [(text, None if record is None else record[root_id]) for text, record in found]


class _Walker:
    def __init__(self, document: dict[str, Any], source: str, validator: Any) -> None:
        self.document = document
        self.source = source
        self.validator = validator
        self.refs: list[str] = []

    def collect(self, schema: Any, name: str, pointer: str, path: str) -> Found:
        schema, pointer = self.follow(schema, pointer)
        if not isinstance(schema, dict):
            return []
        inner, inner_pointer = self.nullable_inner(schema, pointer)
        many = inner.get("type") == "array" and isinstance(inner.get("items"), (dict, bool))
        item, item_pointer = inner, inner_pointer
        if many:
            item, item_pointer = self.follow(inner["items"], f"{inner_pointer}/items")
            item = item if isinstance(item, dict) else {}
        places: list[tuple[dict[str, Any], str]] = []
        for where, at in ((schema, pointer), (inner, inner_pointer), (item, item_pointer)):
            if not any(where is seen for seen, _ in places):
                places.append((where, at))
        found: Found = []
        for where, at in places:
            listify = many and where is not item
            found += [(t, _wrap(name, v, many)) for t, v in self.examples(where, at, path, listify)]
            found += [(text, None) for text in self.null_examples(where, at)]
        properties = item.get("properties")
        if isinstance(properties, dict):
            for child, sub in properties.items():
                sub_pointer = f"{item_pointer}/properties/{escape(child)}"
                depth = len(self.refs)
                for text, record in self.collect(sub, child, sub_pointer, f"{path}.{child}"):
                    found.append((text, None if record is None else _wrap(name, record, many)))
                del self.refs[depth:]
        return found

    def follow(self, schema: Any, pointer: str) -> tuple[Any, str]:
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            target = resolve_pointer(self.document, ref)
            if target is None or ref in self.refs:
                return {}, pointer
            self.refs.append(ref)
            schema, pointer = target, ref[1:]
        return schema, pointer

    def nullable_inner(self, schema: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
                index = 1 - branches.index({"type": "null"})
                inner, at = self.follow(branches[index], f"{pointer}/{key}/{index}")
                if isinstance(inner, dict):
                    return inner, at
        return schema, pointer

    def examples(
        self, schema: dict[str, Any], pointer: str, path: str, many: bool
    ) -> list[Example]:
        items = schema.get("x-kor-examples", [])
        if not is_example_list(items):
            raise SchemaError(
                f'{self.source}: \'x-kor-examples\' must be a list of {{"text", "output"}} '
                f"at '{pointer or '/'}'"
            )
        for number, item in enumerate(items, start=1):
            self.check(item, number, pointer, path, many)
        return [(item["text"], item["output"]) for item in items]

    def check(self, item: dict[str, Any], number: int, pointer: str, path: str, many: bool) -> None:
        from kor_cli.validate import describe_json_error

        value = item["output"]
        if is_empty(value):
            return
        schema = resolve_pointer(self.document, "#" + pointer) if pointer else self.document
        if many and not isinstance(value, list):
            value = [value]
        errors = list(self.validator.evolve(schema=schema).iter_errors(value))
        if errors:
            problems = "; ".join(describe_json_error(error) for error in errors[:3])
            text = item["text"]
            short = repr(text if len(text) <= 40 else text[:37] + "...")
            raise SchemaError(
                f"{self.source}: example {number} of '{path}' ({short}) does not fit the "
                f"schema: {problems}"
            )

    def null_examples(self, schema: dict[str, Any], pointer: str) -> list[str]:
        texts = schema.get("x-kor-null-examples", [])
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise SchemaError(
                f"{self.source}: 'x-kor-null-examples' must be a list of texts "
                f"at '{pointer or '/'}'"
            )
        return texts


def _wrap(name: str, value: Any, many: bool) -> dict[str, Any] | None:
    if is_empty(value):
        return None
    if many and not isinstance(value, list):
        value = [value]
    return {name: value}
