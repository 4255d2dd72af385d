"""`load_schema(spec)` and `Schema`, the one normalised form every source becomes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kor_cli.errors import SchemaError
from kor_cli.schema.examples import check_examples, gather_examples
from kor_cli.schema.json_schema import parse_json_schema, root_id_for
from kor_cli.schema.model import record_model
from kor_cli.schema.nodes import Example, Node, check_tree, node_json_schema
from kor_cli.schema.pydantic_source import parse_pydantic
from kor_cli.schema.yaml_dsl import parse_yaml


@dataclass
class Schema:
    """A checked schema tree; the output record is `{root.id: <root value>}`.

    `examples` holds every few-shot example of the tree in Kor's order, as (text, value
    under the root id), None meaning "nothing here" (rendered as `{}`).
    """

    root: Node
    source: str = "<schema>"
    examples: list[Example] = field(init=False)
    _model: type[BaseModel] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_tree(self.root, self.source)
        check_examples(self.root, self.source)
        self.examples = gather_examples(self.root)

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the whole output record (a fresh dict each call)."""
        return {
            "type": "object",
            "properties": {self.root.id: node_json_schema(self.root)},
            "required": [self.root.id],
            "additionalProperties": False,
        }

    def typescript(self) -> str:
        """Kor's TypeScript block describing the root."""
        from kor_cli.typescript import render_typescript

        return render_typescript(self.root)

    def pydantic_model(self) -> type[BaseModel]:
        """Strict Pydantic model of the whole record (built once, then reused)."""
        if self._model is None:
            self._model = record_model(self.root)
        return self._model


def load_schema(spec: str) -> Schema:
    """Load `path.yaml`/`.yml` (Kor-like), `path.json` (JSON Schema), `file.py:Class` or
    `package.module:Class` (Pydantic) into a checked Schema; SchemaError otherwise."""
    suffix = Path(spec).suffix.lower()
    if suffix in (".yaml", ".yml"):
        root = parse_yaml(_read(spec), spec)
    elif suffix == ".json":
        try:
            document = json.loads(_read(spec))
        except json.JSONDecodeError as error:
            raise SchemaError(
                f"{spec}:{error.lineno}:{error.colno}: JSON syntax error: {error.msg}"
            ) from None
        root = parse_json_schema(document, spec, root_id=root_id_for(document, Path(spec).stem))
    elif ":" in spec:
        root = parse_pydantic(spec)
    else:
        raise SchemaError(
            f"{spec}: unknown schema kind; use a .yaml/.yml file (Kor-like), a .json file "
            "(JSON Schema), or 'path/to/file.py:Class' / 'package.module:Class' (Pydantic)"
        )
    return Schema(root, source=spec)


def _read(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"{path}: schema file not found") from None
    except OSError as error:
        raise SchemaError(f"{path}: cannot read schema file: {error.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SchemaError(
            f"{path}: schema file is not UTF-8 text (byte 0x{data[error.start]:02x} "
            f"at offset {error.start})"
        ) from None
