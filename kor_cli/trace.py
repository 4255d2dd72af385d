"""`kor-cli trace`: constrained decoding of one text, step by step.

Each sampled step shows how many tokens the grammar allowed, the chosen token, the model's
probability of it, and the probability mass the grammar kept: the softmax mass (before
masking, at temperature 1) of the allowed tokens, i.e. how much of what the model wanted
the schema let through. Jump-forward chunks appear as steps of their own.

`TracingConstraint` wraps the real grammar constraint (same protocol, delegating) and
records the steps; the logits come from the decode loop's observer hook.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from kor_cli.console import plural
from kor_cli.constrain import GrammarConstraint

if TYPE_CHECKING:
    from kor_cli.backends import Backend
    from kor_cli.decode import DecodeResult
    from kor_cli.extract import ExtractOptions
    from kor_cli.models import LoadedModel
    from kor_cli.schema import Schema


@dataclass
class TraceStep:
    """One step: a sampled token (or the stop token) or a forced chunk."""

    kind: str  # "sample" | "stop" | "forced"
    token_ids: list[int]
    text: str  # the exact bytes of the tokens, undecodable ones as \\x escapes
    allowed: int | None = None  # tokens the grammar allowed (sampled steps)
    mass: float | None = None  # model probability of the allowed tokens
    p_token: float | None = None  # model probability of the chosen token

    def to_dict(self, step: int) -> dict[str, Any]:
        return {"step": step} | asdict(self)


class TracingConstraint:
    """A `decode.Constraint` that delegates to a `GrammarConstraint` and records each step.

    Pass `observe` as the decoder's observer: it sees the logits before masking.
    """

    def __init__(self, inner: GrammarConstraint, tokenizer: Any) -> None:
        self.inner = inner
        self.tokenizer = tokenizer
        self.compiled = inner.matcher.compiled
        self.token_bytes = self.compiled.token_bytes
        self.steps: list[TraceStep] = []
        self._observed: tuple[int, float, float] | None = None

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        self.inner.fill_bitmask(bitmask, row)

    def state_key(self) -> Hashable:
        return self.inner.state_key()

    def allowed_ids(self, device: Any) -> Any:
        return self.inner.allowed_ids(device)

    def observe(self, row: int, logits: Any, token_id: int) -> None:
        """Decoder observer: the allowed count, kept mass and chosen token's probability."""
        import torch

        probs = torch.softmax(logits.float(), dim=-1)
        allowed = torch.from_numpy(self.inner.allowed_mask())[: probs.shape[-1]]
        kept = float(probs[allowed].sum().clamp(0.0, 1.0))
        self._observed = (int(allowed.sum()), kept, float(probs[token_id]))

    def advance(self, token_id: int) -> None:
        self.inner.advance(token_id)
        allowed, mass, p_token = self._observed or (None, None, None)
        self._observed = None
        kind = "stop" if self.compiled.is_stop(token_id) else "sample"
        self.steps.append(
            TraceStep(kind, [token_id], self.token_text([token_id]), allowed, mass, p_token)
        )

    def forced_tokens(self, limit: int) -> list[int]:
        ids = self.inner.forced_tokens(limit)
        if ids:
            self.steps.append(TraceStep("forced", ids, self.token_text(ids)))
        return ids

    @property
    def finished(self) -> bool:
        return self.inner.finished

    def token_text(self, ids: list[int]) -> str:
        """Exact token bytes as text (special tokens by name; partial UTF-8 as \\x escapes)."""
        parts = []
        for token_id in ids:
            raw = self.token_bytes[token_id] if token_id < len(self.token_bytes) else None
            if raw is None:
                parts.append(str(self.tokenizer.convert_ids_to_tokens(token_id)))
            else:
                parts.append(raw.decode("utf-8", errors="backslashreplace"))
        return "".join(parts)


def run_trace(
    schema: Schema, model: Backend | LoadedModel, text: str, options: ExtractOptions
) -> tuple[list[TraceStep], DecodeResult, tuple[str, ...]]:
    """Constrained decoding of `text`, traced: (steps, decode result, grammar warnings)."""
    from kor_cli.extract import Extractor

    extractor = Extractor(schema, model, replace(options, mode="constrained"))
    assert extractor.constraints is not None  # constrained mode always has a grammar
    tracer = TracingConstraint(extractor.constraints.new(), extractor.loaded.tokenizer)
    decoded = extractor.decoder.generate_batch(
        [extractor.prompt_ids(text)],
        options.sampling,
        constraints=[tracer],
        observer=tracer.observe,
    )[0]
    return tracer.steps, decoded, extractor.warnings


def summary(steps: list[TraceStep], decoded: DecodeResult) -> str:
    """One line: tokens split into sampled and forced, passes, finish reason."""
    sampled = sum(step.kind == "sample" for step in steps)
    return (
        f"{plural(decoded.tokens, 'token')} = {sampled} sampled + {decoded.forced_tokens} forced, "
        f"{plural(decoded.forward_passes, 'forward pass')}, finish: {decoded.finish_reason}"
    )


def trace_table(steps: list[TraceStep], decoded: DecodeResult) -> Table:
    """The steps as a rich table; forced chunks on their own dimmed lines."""
    table = Table(title="kor-cli trace", title_justify="left", caption=summary(steps, decoded))
    table.add_column("#", justify="right")
    table.add_column("allowed", justify="right")
    table.add_column("mass kept", justify="right")
    table.add_column("p(token)", justify="right")
    table.add_column("token", overflow="fold")
    for number, step in enumerate(steps):
        if step.kind == "forced":
            count = len(step.token_ids)
            table.add_row(
                str(number), f"forced ×{count}", "", "", Text(repr(step.text)), style="cyan dim"
            )
        else:
            table.add_row(
                str(number),
                "" if step.allowed is None else str(step.allowed),
                "" if step.mass is None else f"{step.mass:.4f}",
                "" if step.p_token is None else f"{step.p_token:.4f}",
                Text(repr(step.text)),
                style="bold" if step.kind == "stop" else None,
            )
    return table
