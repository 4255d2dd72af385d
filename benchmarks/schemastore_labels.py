"""What `schemastore.py` walks and how it judges it: the texts of an instance (the model's,
then canonical forms), whether jsonschema agrees with an instance's label, and the
documented choice (closed objects, free-form depth, formats) behind a genuine false reject."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from _common import sorted_keys

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver


def schema_ordered(instance: Any, schema: Any, loader: Any) -> Any:
    """`instance` with its members in the order the schema's grammar writes them."""
    return reorder(instance, LocationSpace(Resolver(schema, loader=loader)).at([schema]))


def forms(instance: Any, schema: Any, loader: Any) -> list[str]:
    """Texts to try: the model's (json.dumps, schema order) first, then canonical ones."""
    ordered = schema_ordered(instance, schema, loader)
    written = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    canonical = [serialize(form) for form in (ordered, instance, sorted_keys(instance))]
    return list(dict.fromkeys([written, *canonical]))


def label_holds(schema: Any, instance: Any, loader: Any, formats: bool = False) -> bool | None:
    """Whether jsonschema (the schema's draft, formats as annotations unless `formats`,
    sibling files by name) finds `instance` valid; None when it cannot tell (an
    unresolvable reference, an error of its own). Counted apart as mislabelled, for every
    engine alike: a valid instance it finds invalid (e.g. github-workflow's valid instances,
    converted from YAML, carry the key `true` where the schema requires `on`), and an
    invalid one it finds valid even with formats asserted (e.g. pre-commit-config's
    local-missing-entry: the draft-07 schema's `required` stands beside a `$ref`, where
    that draft ignores it)."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    def retrieve(uri: str) -> Resource:
        found = loader(uri)
        if found is None:
            raise LookupError(uri)
        return Resource.from_contents(found, default_specification=DRAFT202012)

    try:
        cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
        checker = cls.FORMAT_CHECKER if formats else None
        validator = cls(schema, registry=Registry(retrieve=retrieve), format_checker=checker)
        return bool(validator.is_valid(instance))
    except Exception:  # noqa: BLE001 - any failure of the reference validator: no verdict
        return None


def no_formats(value: Any) -> Any:
    """`value` without its `format` keywords (string-valued, i.e. not a property named so)."""
    if isinstance(value, dict):
        return {
            k: no_formats(v) for k, v in value.items() if k != "format" or not isinstance(v, str)
        }
    if isinstance(value, list):
        return [no_formats(v) for v in value]
    return value


# Genuine false rejects that a documented choice explains: the grammar with that choice
# undone (an option, or the schema without `format`) accepts the instance. In this order.
CLASSES: tuple[tuple[str, dict[str, Any], Any], ...] = (
    ("closed objects (accepted with open_objects)", {"open_objects": True}, None),
    (
        "free-form depth (accepted with max_any_depth=5)",
        {"max_any_depth": 5, "max_states": 400_000},
        None,
    ),
    ("format enforced (accepted without format)", {}, no_formats),
)


def classify(schema: Any, options: GrammarOptions, rejected: dict[str, list[str]]) -> dict:
    """For each genuine false reject: the first of `CLASSES` whose grammar accepts one of
    its forms, else "unclassified"."""
    found = dict.fromkeys(rejected, "unclassified")
    for label, changes, transform in CLASSES:
        pending = [case for case, kind in found.items() if kind == "unclassified"]
        if not pending:
            break
        try:
            changed = transform(schema) if transform else schema
            grammar = compile_json_schema(changed, replace(options, **changes))
            for case in pending:
                if any(grammar.accepts(text.encode()) for text in rejected[case]):
                    found[case] = label
        except GrammarError:
            continue
    return found
