"""Pydantic model classes → their JSON Schema (and the class, which validation keeps).

Spec: `path/to/file.py:ClassName` or `package.module:ClassName` (the current directory is
importable, as with `python -m`). The root id is the class name in snake_case
(`RestaurantReview` → `restaurant_review`; Kor lower-cases it, `restaurantreview`); the
class docstring is the root's description and `Field(description=...)` each field's.

Few-shot examples go in `json_schema_extra` under `x-kor-examples`, the key JSON Schema
files use, as `{"text": ..., "output": ...}` items whose output is that node's value:

    class Person(BaseModel):
        model_config = ConfigDict(json_schema_extra={"x-kor-examples": [
            {"text": "Ann, 31, Oslo", "output": {"name": "Ann", "age": 31, "city": "Oslo"}},
        ]})
        name: str = Field(
            description="Full name",
            json_schema_extra={"x-kor-examples": [{"text": "I am Bo", "output": "Bo"}]},
        )

`x-kor-null-examples` (a list of texts) works the same way. Fields with a default are
optional; `X | None` fields are nullable. The class itself, with its validators, checks
every extracted record besides the JSON Schema (see `kor_cli.validate`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from kor_cli.errors import SchemaError
from kor_cli.reading import untrusted_import
from kor_cli.schema.nodes import did_you_mean, snake_case


def pydantic_document(spec: str) -> tuple[dict[str, Any], type[BaseModel], str]:
    """Import the class named by `spec`: (its JSON Schema, the class, the root id)."""
    target, _, class_name = spec.rpartition(":")
    module = _import_file(Path(target), spec) if target.endswith(".py") else _import(target, spec)
    model = getattr(module, class_name, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        models = [name for name, value in vars(module).items() if _is_model(value)]
        found = "no Pydantic model" if model is None else "not a Pydantic model"
        hint = did_you_mean(class_name, models) or (
            f" (models there: {', '.join(models)})" if models else ""
        )
        raise SchemaError(f"{spec}: '{class_name}' in {target}: {found}{hint}")
    try:
        document = model.model_json_schema(schema_generator=_InOrder)
    except Exception as error:  # pydantic raises several kinds for unschemable types
        raise SchemaError(
            f"{spec}: cannot build the JSON Schema of {class_name}: {error}"
        ) from None
    return document, model, snake_case(model.__name__)


class _InOrder(GenerateJsonSchema):
    """Pydantic sorts JSON Schema keys; keep the author's order (examples render as written)."""

    def sort(self, value: JsonSchemaValue, parent_key: str | None = None) -> JsonSchemaValue:
        return value


def _is_model(value: Any) -> bool:
    return inspect.isclass(value) and issubclass(value, BaseModel) and value is not BaseModel


def _import_file(path: Path, spec: str) -> ModuleType:
    if not path.is_file():
        raise SchemaError(f"{spec}: schema file not found: {path}")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"_kor_schema_{snake_case(path.stem) or 'module'}_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise SchemaError(f"{spec}: cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # so the module's own annotations and imports resolve
    with _on_path(str(path.resolve().parent)), untrusted_import():
        try:
            module_spec.loader.exec_module(module)
        except (Exception, SystemExit) as error:
            del sys.modules[name]
            raise SchemaError(f"{spec}: importing {path} failed: {_describe(error)}") from None
    return module


def _import(module_name: str, spec: str) -> ModuleType:
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise SchemaError(
            f"{spec}: expected 'path/to/file.py:ClassName' or 'package.module:ClassName'"
        )
    with _on_path(os.getcwd()), untrusted_import():
        try:
            return importlib.import_module(module_name)
        except (Exception, SystemExit) as error:
            raise SchemaError(
                f"{spec}: importing {module_name} failed: {_describe(error)}"
            ) from None


@contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """Make `folder` importable for the duration of an import."""
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added:
            sys.path.remove(folder)


def _describe(error: BaseException) -> str:
    if isinstance(error, SystemExit):
        return f"it called sys.exit({error.code!r}) at import"
    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg} (line {error.lineno})"
    return f"{type(error).__name__}: {error}"
