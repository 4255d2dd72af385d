"""One record: prompt → decode → parse → validate → ExtractResult."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from kor_cli.decode import WAIT, Decoder, DecodeResult, SamplingOptions
from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope
from kor_cli.errors import UsageError
from kor_cli.models import encode_prompt
from kor_cli.parse import ParseFailure, Reading, read_output
from kor_cli.prompt import render_prompt
from kor_cli.result import ExtractResult
from kor_cli.schema import Schema
from kor_cli.validate import validate_record

if TYPE_CHECKING:
    from kor_cli.constrain import ConstraintFactory

Mode = Literal["prompt", "constrained"]
MODES: tuple[str, ...] = ("prompt", "constrained")


@dataclass(frozen=True)
class ExtractOptions:
    """Everything that shapes one extraction besides schema, model and text."""

    mode: Mode = "constrained"
    sampling: SamplingOptions = field(default_factory=SamplingOptions)
    jump: bool = True
    allow_refusal: bool = False
    allow_empty: bool | None = None  # None: when the schema has a "nothing here" example
    lenient: bool = False
    open_objects: bool = False
    chat: bool | None = None
    template: str | None = None
    input_formatter: str = "none"
    envelope: Envelope = DEFAULT_ENVELOPE


def check_options(options: ExtractOptions) -> None:
    """Reject bad option values before anything expensive (like loading a model) runs."""
    if options.mode not in MODES:
        raise UsageError(f"unknown mode {options.mode!r}; choose {' or '.join(MODES)}")
    if options.mode == "prompt" and options.allow_refusal:
        raise UsageError("--allow-refusal applies to --mode constrained only")


class Extractor:
    """Extracts records for one schema with one model backend (reused across texts).

    `model`: a `Backend` (kor_cli/backends), or a `LoadedModel` for the transformers one.
    """

    def __init__(self, schema: Schema, model: Any, options: ExtractOptions) -> None:
        check_options(options)
        self.schema = schema
        self.decoder = Decoder(model)
        self.backend = self.decoder.backend
        self.loaded = loaded = self.backend.loaded
        self.options = options
        self.model_class = schema.validator()
        self.allow_empty = allows_empty(schema, options)
        self.constraints: ConstraintFactory | None = None
        self.warnings: tuple[str, ...] = ()
        if options.mode == "constrained":  # the grammar engine is imported only for it
            from kor_cli.constrain import ConstraintFactory, record_grammar

            grammar = record_grammar(
                schema.json_schema(),
                allow_refusal=options.allow_refusal,
                allow_empty=self.allow_empty,
                lenient=options.lenient,
                open_objects=options.open_objects,
                envelope=options.envelope,
            )
            self.warnings = grammar.warnings
            self.constraints = ConstraintFactory(loaded, grammar, jump=options.jump)

    def prompt_ids(self, text: str) -> list[int]:
        prompt = render_prompt(
            self.schema,
            text,
            template=self.options.template,
            input_formatter=self.options.input_formatter,
            envelope=self.options.envelope,
        )
        return encode_prompt(self.loaded, prompt, chat=self.options.chat)

    def extract(self, text: str) -> ExtractResult:
        """Extract one record from `text`."""
        return self.extract_batch([text])[0]

    def extract_batch(self, texts: list[str]) -> list[ExtractResult]:
        """Extract one record per text, all in flight at once; results in input order."""
        factory = self.constraints
        decoded = self.decoder.generate_batch(
            [self.prompt_ids(text) for text in texts],
            self.options.sampling,
            stop_strings=self._stop_strings,
            constraints=[factory.new() for _ in texts] if factory else None,
        )
        return [self._finish(result) for result in decoded]

    @property
    def _stop_strings(self) -> tuple[str, ...]:
        """Constrained rows end by the grammar alone; prompt-only rows by the envelope."""
        return () if self.constraints else self.options.envelope.stop_strings

    def extract_stream(
        self, texts: Iterable[str | None], slots: int
    ) -> Iterator[list[tuple[int, ExtractResult | None]]]:
        """(input index, result) per text as rows finish, in lists of those that finished
        together, `slots` in flight: a finished row's slot takes the next text at once
        (continuous batching). A runner that writes in input order holds results back
        until the ones before them are in. A None text is answered with (index, None)
        without the model (a placeholder for a record the model never sees); a `WAIT`
        (kor_cli/decode.py) is passed on."""
        factory = self.constraints
        requests = (
            text
            if text is None or text is WAIT
            else (self.prompt_ids(text), factory.new() if factory else None)
            for text in texts
        )
        stream = self.decoder.generate_stream(
            requests,
            self.options.sampling,
            slots=slots,
            stop_strings=self._stop_strings,
        )
        for group in stream:
            yield [(i, None if decoded is None else self._finish(decoded)) for i, decoded in group]

    def _finish(self, decoded: DecodeResult) -> ExtractResult:
        """Parse and validate one generation into a result."""
        reading = Reading(None)
        errors: list[str] = []
        try:
            reading = read_output(
                decoded.text,
                self.schema.root.id,
                self.options.envelope,
                allow_empty=self.allow_empty,
                allow_refusal=self.options.allow_refusal,
            )
        except ParseFailure as failure:
            errors.append(f"parse: {failure}")
            if decoded.finish_reason == "length":
                errors.append("output truncated at --max-tokens before the record was complete")
        data = reading.data
        if reading.refusal is not None:
            errors.append(f"refusal: the model says the text holds no answer: {reading.refusal}")
        elif data is not None and data != {}:
            validated, problems = validate_record(self.model_class, data)
            errors.extend(f"schema: {p}" for p in problems)
            data = validated if not problems else data
        return ExtractResult(
            data=data,
            valid=not errors,
            errors=errors,
            raw=decoded.text,
            finish_reason=decoded.finish_reason,
            mode=self.options.mode,
            tokens=decoded.tokens,
            forward_passes=decoded.forward_passes,
            forced_tokens=decoded.forced_tokens,
            seconds=decoded.seconds,
            refusal=reading.refusal,
            empty=reading.empty and not errors,
        )


def allows_empty(schema: Schema, options: ExtractOptions) -> bool:
    """Whether `{}` ("nothing here") is a legal answer: as asked, else when an example shows it."""
    if options.allow_empty is not None:
        return options.allow_empty
    return any(value is None for _, value in schema.examples)
