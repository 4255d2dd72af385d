"""The output format, in one place (Kor's `Encoder` idea).

An `Envelope` is everything kor-cli knows about how a record travels in model output:
the format instructions the prompt gives, how a few-shot example's record is written,
the grammar wrapped around the record in constrained mode, the stop strings, and how the
record's JSON text is found again in what the model wrote. `JsonTags` is Kor's JSON
encoder with `<json>` tags (the default); another format (tool calls, bare JSON lines)
is one new subclass, and nothing else changes.

Record-level checks (root id, refusal, "nothing here") are format-neutral: `parse.py`.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # prompt-only runs import no grammar engine
    from kor_cli.grammar.ast import Node


class ParseFailure(Exception):
    """The model output holds no usable JSON record."""


def parse_json(text: str) -> Any:
    """json.loads with a one-line error that gives the position."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseFailure(
            f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None


def _json_value_end(raw: str, start: int) -> int | None:
    """Where the JSON value that starts at `start` (after whitespace) ends, or None."""
    begin = len(raw) - len(raw[start:].lstrip())
    try:
        return json.JSONDecoder().raw_decode(raw, begin)[1]
    except (json.JSONDecodeError, RecursionError):
        return None


class Envelope(ABC):
    """One output format: instructions, example encoding, grammar wrapper, stops, parsing."""

    name: str = "envelope"

    @property
    @abstractmethod
    def instructions(self) -> str:
        """The prompt's `{format_instructions}`."""

    @abstractmethod
    def encode(self, record: dict[str, Any]) -> str:
        """A few-shot example's output, as written after `Output: `."""

    @abstractmethod
    def wrap(self, body: Node) -> Node:
        """The constrained output: `body` (the record's JSON grammar) in its wrapper.

        The output follows the prompt's `Output:` directly, so a wrapper starts with the
        separator the examples show (a space).
        """

    @property
    @abstractmethod
    def stop_strings(self) -> tuple[str, ...]:
        """Decoding stops once the output ends with one of these."""

    @abstractmethod
    def payload(self, raw: str) -> str:
        """The record's JSON text inside model output; ParseFailure if there is none."""

    def decode(self, raw: str) -> Any:
        """The record in model output, parsed as JSON; ParseFailure with a clear reason."""
        return parse_json(self.payload(raw))


@dataclass(frozen=True)
class JsonTags(Envelope):
    """Kor's JSON encoder: `<json>{...}</json>`, json.dumps with non-ASCII kept."""

    open: str = "<json>"
    close: str = "</json>"
    name: str = "json-tags"

    @property
    def instructions(self) -> str:
        return (
            "Please output the extracted information in JSON format. Do not output anything"
            " except for the extracted information. Do not add any clarifying information."
            " Do not add any fields that are not in the schema. If the text contains"
            " attributes that do not appear in the schema, please ignore them. All output"
            " must be in JSON format and follow the schema specified above."
            f" Wrap the JSON in {self.open} tags."
        )

    def encode(self, record: dict[str, Any]) -> str:
        return f"{self.open}{json.dumps(record, ensure_ascii=False)}{self.close}"

    def wrap(self, body: Node) -> Node:
        from kor_cli.grammar.ast import literal, seq

        return seq(literal(" " + self.open), body, literal(self.close))

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return (self.close,)

    def payload(self, raw: str) -> str:
        """The text inside the first complete block, strictly.

        A block whose body is one complete JSON value is taken whole, so a string inside it
        may hold the closing tag itself; otherwise the body ends at the first closing tag.
        """
        start = raw.find(self.open)
        if start >= 0:
            body = start + len(self.open)
            end = _json_value_end(raw, body)
            if end is not None and raw[end:].lstrip().startswith(self.close):
                return raw[body : raw.index(self.close, end)]
        pattern = re.escape(self.open) + "(.*?)" + re.escape(self.close)
        match = re.search(pattern, raw, re.DOTALL)
        if match is None:
            if self.open in raw:
                raise ParseFailure(f"output has '{self.open}' but no closing '{self.close}'")
            raise ParseFailure(f"output has no {self.open}…{self.close} block")
        return match.group(1)


JSON_TAGS = JsonTags()
DEFAULT_ENVELOPE: Envelope = JSON_TAGS
