"""`load_schema(spec)` and `Schema`: every source → the record's JSON Schema document.

One path: YAML (Kor-like) → node tree → JSON Schema; JSON Schema as written; Pydantic →
the class's JSON Schema (the class is kept for validation). The document is what the
grammar compiles and validation checks. The node tree is the prompt's view (TypeScript
block, examples) when it can express the schema; otherwise the view is rendered from the
document itself, and the grammar engine is asked at load time whether it can enforce the
document (it is the one judge of what is enforceable: every command accepts what it does).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kor_cli.errors import SchemaError
from kor_cli.reading import first_line, load_json, read_limited
from kor_cli.schema.document import escape, record_document
from kor_cli.schema.document_examples import document_examples
from kor_cli.schema.examples import check_examples, gather_examples
from kor_cli.schema.json_schema import NotATree, parse_json_schema, root_id_for
from kor_cli.schema.model import record_model
from kor_cli.schema.nodes import Example, Node, check_tree, node_json_schema
from kor_cli.schema.pydantic_source import pydantic_document
from kor_cli.schema.yaml_dsl import parse_yaml


@dataclass
class Schema:
    """A loaded schema; the output record is `{root.id: <root value>}`.

    `document` is the record's JSON Schema (None: built from the tree). `tree` says
    whether `root` is the whole node tree (the prompt's view) or only names the root,
    the view then coming from `document`. `examples` holds every few-shot example in
    Kor's order, as (text, value under the root id), None meaning "nothing here".
    `user_model` is the user's own Pydantic class (it validates the root's value).
    `open_objects`: objects without `additionalProperties` follow the specification in
    generation and validation alike (default: closed in both).
    """

    root: Node
    source: str = "<schema>"
    document: dict[str, Any] | None = None
    tree: bool = True
    user_model: type[BaseModel] | None = None
    source_document: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    open_objects: bool = False
    examples: list[Example] = field(init=False)
    _model: type[BaseModel] | None = field(default=None, init=False, repr=False, compare=False)
    _validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tree:
            check_tree(self.root, self.source)
            check_examples(self.root, self.source)
            self.examples = gather_examples(self.root)
        else:
            document = self.source_document or {}
            self.examples = document_examples(document, self.root.id, self.source)
        if self.document is None:
            self.document = {
                "type": "object",
                "properties": {self.root.id: node_json_schema(self.root)},
                "required": [self.root.id],
                "additionalProperties": False,
            }

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (e.g. for Ray workers) without the built models; the user's class goes
        by its spec and is imported again where it is unpickled."""
        state = {**self.__dict__, "_model": None, "_validator": None}
        if self.user_model is not None:
            state["user_model"] = self.source
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("user_model"), str):
            state["user_model"] = pydantic_document(state["user_model"])[1]
        self.__dict__.update(state)

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of the whole output record (a fresh dict each call)."""
        return copy.deepcopy(self.document or {})

    def typescript(self) -> str:
        """Kor's TypeScript block describing the root."""
        if self.tree:
            from kor_cli.typescript import render_typescript

            return render_typescript(self.root)
        from kor_cli.typescript_json import render_document_typescript

        return render_document_typescript(self.json_schema(), self.root.id)

    def pydantic_model(self) -> type[BaseModel]:
        """Strict Pydantic model of the whole record, rebuilt from the node tree (built
        once); SchemaError when the tree does not hold the schema (use `validator()`)."""
        if not self.tree:
            raise SchemaError(
                f"{self.source}: no node tree for this schema; validate with Schema.validator()"
            )
        if self._model is None:
            try:
                self._model = record_model(self.root)
            except Exception as error:  # noqa: BLE001 - pydantic refuses odd constraints
                raise SchemaError(
                    f"{self.source}: cannot build the record model: {first_line(error)}"
                ) from None
        return self._model

    def ignored_keywords_report(self) -> list[str]:
        """One line per keyword of the JSON Schema as written that is only an annotation
        (no supported draft defines it): ignored by the grammar and by validation."""
        if self.source_document is None:
            return [f"{self.source}: no JSON Schema keywords ignored (not a JSON Schema source)"]
        from kor_cli.grammar import ignored_keywords

        found = ignored_keywords(self.source_document)
        lines = [f"ignored (annotation): '{key}' at '{pointer or '/'}'" for key, pointer in found]
        return lines or [f"{self.source}: no keyword ignored"]

    def validator(self) -> Any:
        """The record validator (`kor_cli.validate.RecordValidator`), built once."""
        if self._validator is None:
            from kor_cli.validate import RecordValidator

            model = self.pydantic_model() if self.tree else None
            self._validator = RecordValidator(
                self.json_schema(),
                self.root.id,
                model=model,
                user_model=self.user_model,
                closed_objects=not self.tree and not self.open_objects,
            )
        return self._validator


def load_schema(spec: str, *, lenient: bool = False, open_objects: bool = False) -> Schema:
    """Load `path.yaml`/`.yml` (Kor-like), `path.json` (JSON Schema), `file.py:Class` or
    `package.module:Class` (Pydantic) into a Schema; SchemaError otherwise.

    `lenient`: a JSON Schema keyword the grammar cannot enforce is dropped from generation
    with a warning (`Schema.warnings`) instead of failing; validation still checks it.
    `open_objects`: JSON Schema objects without `additionalProperties` allow other members
    (the spec's rule) instead of being closed (the default for extraction)."""
    flags = {"lenient": lenient, "open_objects": open_objects}
    suffix = Path(spec).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return Schema(parse_yaml(_read(spec), spec), source=spec)
    if suffix == ".json":
        document = load_json(_read(spec), spec, error=SchemaError)
        root_id = root_id_for(document, Path(spec).stem)
        return schema_from_document(document, spec, root_id, **flags)
    if ":" in spec:
        document, model, root_id = pydantic_document(spec)
        return schema_from_document(document, spec, root_id, **flags, user_model=model)
    raise SchemaError(
        f"{spec}: unknown schema kind; use a .yaml/.yml file (Kor-like), a .json file "
        "(JSON Schema), or 'path/to/file.py:Class' / 'package.module:Class' (Pydantic)"
    )


def schema_from_document(
    document: Any,
    source: str,
    root_id: str,
    *,
    lenient: bool = False,
    open_objects: bool = False,
    user_model: type[BaseModel] | None = None,
) -> Schema:
    """A Schema for a JSON Schema document: the node tree when it can express the document,
    else the document itself once the grammar engine accepts it."""
    if not isinstance(document, dict):
        raise SchemaError(f"{source}: a JSON Schema must be a JSON object")
    _check_meta_schema(document, source)
    try:
        root = parse_json_schema(document, source, root_id=root_id, open_objects=open_objects)
    except NotATree:
        record = record_document(document, root_id)
        warnings = _engine_check(record, source, root_id, lenient, open_objects)
        return Schema(
            Node(id=root_id, type="object", description=str(document.get("description", ""))),
            source=source,
            document=record,
            tree=False,
            user_model=user_model,
            source_document=document,
            warnings=warnings,
            open_objects=open_objects,
        )
    return Schema(root, source=source, user_model=user_model, source_document=document)


def _check_meta_schema(document: dict[str, Any], source: str) -> None:
    import jsonschema

    cls = jsonschema.validators.validator_for(document, jsonschema.Draft202012Validator)
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(document))
    if error is not None:
        where = "".join(f"/{escape(str(part))}" for part in error.absolute_path) or "/"
        raise SchemaError(f"{source}: not a valid JSON Schema: {error.message} at '{where}'")


def _engine_check(
    record: dict[str, Any], source: str, root_id: str, lenient: bool, open_objects: bool
) -> tuple[str, ...]:
    """Ask the grammar engine to compile the record document (as `extract` will: the
    compiled grammar is cached); its refusal is the schema error."""
    from kor_cli.constrain import record_grammar_options
    from kor_cli.errors import GrammarError
    from kor_cli.grammar.surface import compile_json_schema_cached

    def local(message: str) -> str:
        inner = "/properties/" + escape(root_id)
        for quote in ("'", "'#"):
            message = message.replace(quote + inner + "'", quote + "/'")
            message = message.replace(quote + inner + "/", quote + "/")
        return message

    try:
        options = record_grammar_options(lenient=lenient, open_objects=open_objects)
        grammar = compile_json_schema_cached(record, options)
    except GrammarError as error:
        raise SchemaError(f"{source}: {local(str(error))}") from None
    return tuple(local(warning) for warning in grammar.warnings)


def _read(path: str) -> str:
    data = read_limited(path, error=SchemaError, what="schema file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise SchemaError(
            f"{path}: schema file is not UTF-8 text (byte 0x{data[error.start]:02x} "
            f"at offset {error.start})"
        ) from None
