"""Validate a parsed record against the schema's Pydantic model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError


def format_validation_error(error: ValidationError) -> list[str]:
    """One readable line per Pydantic error: `path.to.field: message`."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "<root>"
        lines.append(f"{where}: {item['msg']}")
    return lines


def validate_record(model: type[BaseModel], data: Any) -> tuple[Any, list[str]]:
    """Return (validated JSON data, []) or (None, errors)."""
    try:
        validated = model.model_validate(data)
    except ValidationError as error:
        return None, format_validation_error(error)
    return validated.model_dump(mode="json", exclude_unset=True), []
