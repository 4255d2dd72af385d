"""Validate a parsed record against the schema: its JSON Schema document and Pydantic models.

`RecordValidator` checks, in order, and reports the first stage that fails:

1. the strict Pydantic model rebuilt from the schema tree (when the schema has one: its
   messages are the most readable),
2. the record's JSON Schema document with `jsonschema` (everything a rebuilt model
   cannot express: `not`, `if`/`then`/`else`, unions, recursion, …), formats included:
   the grammar enforces `format`, so validation does too, and `multipleOf` is exact
   decimal arithmetic as in the grammar; objects without
   `additionalProperties` are closed as the grammar closes them unless objects are open,
3. the user's own Pydantic class with its validators, when the schema came from one;
   its dump (aliases, validators' changes) becomes the record's value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError


def format_validation_error(error: ValidationError) -> list[str]:
    """One readable line per Pydantic error: `path.to.field: message`."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "<root>"
        lines.append(f"{where}: {item['msg']}")
    return lines


@dataclass
class RecordValidator:
    """Checks `{root_id: value}` records (see the module docstring)."""

    document: dict[str, Any]
    root_id: str
    model: type[BaseModel] | None = None  # rebuilt from the tree, closed and strict
    user_model: type[BaseModel] | None = None  # the user's class, for the root's value
    closed_objects: bool = False  # objects closed where the grammar closes them

    def __post_init__(self) -> None:
        self._validator = json_validator(self.document, closed_objects=self.closed_objects)

    def validate(self, data: Any) -> tuple[Any, list[str]]:
        """Return (validated JSON data, []) or (None, errors)."""
        if self.model is not None:
            try:
                dumped = self.model.model_validate(data).model_dump(mode="json", exclude_unset=True)
            except ValidationError as error:
                return None, format_validation_error(error)
        else:
            dumped = data
        problems = [describe_json_error(error) for error in self._validator.iter_errors(data)]
        if problems:
            return None, problems
        if self.user_model is not None:
            try:
                value = self.user_model.model_validate(data[self.root_id])
            except ValidationError as error:
                return None, [f"{self.root_id}.{line}" for line in format_validation_error(error)]
            dumped = {
                self.root_id: value.model_dump(mode="json", by_alias=True, exclude_unset=True)
            }
        return dumped, []


def json_validator(document: dict[str, Any], *, closed_objects: bool = False) -> Any:
    """A `jsonschema` validator for `document` (its `$schema`'s draft, 2020-12 without one)
    that checks formats as kor-cli's grammar enforces them, and with `closed_objects` also
    the objects the grammar closes by default (see `kor_cli.schema.closed`)."""
    import jsonschema

    from kor_cli.schema.closed import MARKER, closed_keyword, mark_closed
    from kor_cli.schema.formats import FORMAT_CHECKS, is_valid_format

    cls = jsonschema.validators.validator_for(document, jsonschema.Draft202012Validator)
    checker = jsonschema.FormatChecker(formats=())
    for name in FORMAT_CHECKS:
        checker.checks(name)(lambda value, name=name: is_valid_format(name, value))
    keywords: dict[str, Any] = {"multipleOf": _multiple_of}
    if closed_objects:
        keywords[MARKER] = closed_keyword
        document = mark_closed(document)
    cls = jsonschema.validators.extend(cls, keywords)
    return cls(document, format_checker=checker)


def _multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Any:
    """`multipleOf` in exact decimal arithmetic, as the grammar enforces it (jsonschema's
    float division says 96.005 is no multiple of 0.0001)."""
    from decimal import Decimal, InvalidOperation, localcontext

    from jsonschema import ValidationError

    if not validator.is_type(instance, "number") or not validator.is_type(divisor, "number"):
        return
    try:
        with localcontext() as context:
            context.prec = 1000
            exact = Decimal(repr(instance)) % Decimal(repr(divisor)) == 0
    except (InvalidOperation, ValueError):  # inf/nan or a divisor of 0: not multiples
        exact = False
    if not exact:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor!r}")


def describe_json_error(error: Any) -> str:
    """`path.to.value: message` for a jsonschema ValidationError."""
    where = ".".join(str(part) for part in error.absolute_path) or "<root>"
    return f"{where}: {error.message}"


def validate_record(model: type[BaseModel] | RecordValidator, data: Any) -> tuple[Any, list[str]]:
    """Return (validated JSON data, []) or (None, errors)."""
    if isinstance(model, RecordValidator):
        return model.validate(data)
    try:
        validated = model.model_validate(data)
    except ValidationError as error:
        return None, format_validation_error(error)
    return validated.model_dump(mode="json", exclude_unset=True), []
