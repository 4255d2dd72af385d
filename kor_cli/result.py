"""The one result row: what `extract` prints and each JSONL line `batch` writes.

`extract` prints the outcome fields; `batch` rows lead with the record's identity
(`id`, `input`, `line`, then the `--keep` fields). A text split into chunks carries
`chunks` (per chunk: span, validity, finish reason, raw output) and `raw` null. A record
the model never saw (bad input, too long) has finish_reason "input"; one that says
"nothing here" has `empty` true. See README, `kor-cli extract` and `kor-cli batch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kor_cli.records import Record

IDENTITY_FIELDS = ("id", "input", "line")


@dataclass
class ExtractResult:
    """One record's outcome, and (in a batch) which record it is."""

    data: Any
    valid: bool
    errors: list[str]
    raw: str | None
    finish_reason: str  # "stop" | "length" | "input"
    mode: str
    tokens: int
    forward_passes: int
    forced_tokens: int
    seconds: float
    refusal: str | None = None
    empty: bool = False  # Kor's "nothing here": valid, data `{}` (or an empty `many` list)
    chunks: list[dict[str, Any]] | None = None
    id: str | int | None = None  # the identity of a batch row; None for `extract`
    input: str | None = None
    line: int | None = None
    kept: dict[str, Any] = field(default_factory=dict)  # --keep fields, copied as is

    @classmethod
    def input_error(cls, error: str, mode: str) -> ExtractResult:
        """A record the model never saw (finish_reason "input")."""
        return cls(None, False, [error], None, "input", mode, 0, 0, 0, 0.0)

    def for_record(self, record: Record, keep: tuple[str, ...] = ()) -> ExtractResult:
        """This outcome as `record`'s row (its id, source, line and --keep fields)."""
        kept = {key: record.extra[key] for key in keep if key in record.extra}
        return replace(self, id=record.id, input=record.source, line=record.line, kept=kept)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: identity (batch rows only), outcome, then chunks when chunked."""
        out: dict[str, Any] = {}
        if self.id is not None:
            out = {"id": self.id, "input": self.input, "line": self.line} | self.kept
        out.update((name, getattr(self, name)) for name in OUTCOME_FIELDS)
        out["seconds"] = round(self.seconds, 4)
        if self.chunks is not None:
            out["chunks"] = self.chunks
        return out


OUTCOME_FIELDS = tuple(
    f.name for f in fields(ExtractResult) if f.name not in IDENTITY_FIELDS + ("kept", "chunks")
)
# Every key kor-cli writes in a row; --keep may not reuse them.
ROW_FIELDS = IDENTITY_FIELDS + OUTCOME_FIELDS + ("chunks",)
