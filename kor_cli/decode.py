"""The generation loop: KV cache, batching, optional token masking, sampling, stops.

Every step runs one forward pass for all active rows of a batch (left-padded prompts,
attention mask, explicit positions). A `Constraint` per row (the grammar adapter) masks
the logits before temperature/top-k/top-p and may force tokens (jump-forward); forced
tokens ride along in the row's next forward pass instead of costing passes of their own.
Rows whose step is shorter are right-padded with masked positions, so rows finish and
jump independently. Without constraints this is plain prompt-only decoding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kor_cli.forward import DEFAULT_SELECTIVE_LIMIT, ModelStep
from kor_cli.models import LoadedModel


class Constraint(Protocol):
    """What the decode loop needs from a grammar (see kor_cli/constrain.py)."""

    def mask(self, device: Any) -> Any:
        """Bool tensor [vocab_size] of allowed next tokens."""

    def allowed_ids(self, device: Any) -> Any:
        """Long tensor of the allowed next token ids (for the selective LM head)."""

    def advance(self, token_id: int) -> None:
        """Record a sampled token (already allowed by `mask`)."""

    def forced_tokens(self, limit: int) -> list[int]:
        """Up to `limit` tokens the grammar fixes from here (jump-forward), advanced over."""

    @property
    def finished(self) -> bool:
        """True when the grammar has accepted a stop token or cannot continue."""


# Sees each sampled token: (row, full logits [V] before any masking, chosen token id).
# For tracing (it costs a full LM-head projection per step); it must not modify the logits.
StepObserver = Callable[[int, Any, int], None]


@dataclass(frozen=True)
class SamplingOptions:
    """Greedy at temperature 0 (the default); otherwise seeded sampling."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    max_new_tokens: int = 256


@dataclass
class DecodeResult:
    """What one generation produced and what it cost."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" (stop token, grammar done, or prompt-only stop string) | "length"
    tokens: int  # tokens in the output, sampled plus forced
    forward_passes: int
    forced_tokens: int
    seconds: float


@dataclass
class _Row:
    constraint: Constraint | None
    output: list[int] = field(default_factory=list)
    finish: str | None = None
    passes: int = 1
    forced: int = 0
    seconds: float = 0.0


def _filter_logits(logits: Any, top_k: int, top_p: float) -> Any:
    """Top-k then nucleus filtering on a [B, V] tensor."""
    import torch

    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop_sorted = probs.cumsum(dim=-1) - probs > top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def choose_tokens(logits: Any, options: SamplingOptions, generator: Any) -> list[int]:
    """Argmax per row at temperature 0, else sample from the tempered, filtered rows."""
    import torch

    if options.temperature <= 0:
        return torch.argmax(logits, dim=-1).tolist()
    logits = _filter_logits(logits / options.temperature, options.top_k, options.top_p)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1).tolist()


class Decoder:
    """Runs generation on a loaded model, one prompt or a batch of prompts at a time."""

    def __init__(
        self, loaded: LoadedModel, selective_limit: int = DEFAULT_SELECTIVE_LIMIT
    ) -> None:
        self.loaded = loaded
        self.step = ModelStep(loaded, selective_limit)
        tokenizer = loaded.tokenizer
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_id = pad if pad is not None else (loaded.stop_ids or (0,))[0]

    def generate(
        self,
        prompt_ids: list[int],
        options: SamplingOptions,
        *,
        stop_strings: tuple[str, ...] = (),
        constraint: Constraint | None = None,
    ) -> DecodeResult:
        """Generate for one prompt."""
        return self.generate_batch(
            [prompt_ids], options, stop_strings=stop_strings, constraints=[constraint]
        )[0]

    def generate_batch(
        self,
        prompts: list[list[int]],
        options: SamplingOptions,
        *,
        stop_strings: tuple[str, ...] = (),
        constraints: list[Constraint | None] | None = None,
        observer: StepObserver | None = None,
    ) -> list[DecodeResult]:
        """Generate for several prompts at once; rows finish independently."""
        import torch

        started = time.perf_counter()
        device = self.loaded.device
        rows = [_Row(c) for c in (constraints or [None] * len(prompts))]
        limit = options.max_new_tokens
        prompts = [p + self._force_at_start(r, limit) for p, r in zip(prompts, rows, strict=True)]
        generator = None
        if options.seed is not None:
            generator = torch.Generator(device=device).manual_seed(options.seed)
        width = max(len(p) for p in prompts)
        ids = [[self.pad_id] * (width - len(p)) + p for p in prompts]
        attention = torch.tensor(
            [[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device
        )
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        next_position = attention.sum(-1)
        with torch.inference_mode():
            states, cache = self._forward(ids, attention, positions, None, [width] * len(rows))
            while True:
                steps = self._advance_rows(
                    rows, states, options, generator, stop_strings, started, observer
                )
                if all(row.finish for row in rows):
                    break
                length = max(len(step) for step in steps)
                ids = [step + [self.pad_id] * (length - len(step)) for step in steps]
                real = torch.tensor([len(step) for step in steps], device=device)
                offsets = torch.arange(length, device=device)
                step_mask = (offsets[None, :] < real[:, None]).long()
                attention = torch.cat([attention, step_mask], dim=1)
                positions = next_position[:, None] + offsets[None, :]
                next_position = next_position + real
                states, cache = self._forward(ids, attention, positions, cache, real.tolist())
                for row, step in zip(rows, steps, strict=True):
                    row.passes += bool(step)
        return [self._result(row, stop_strings) for row in rows]

    @staticmethod
    def _force_at_start(row: _Row, limit: int) -> list[int]:
        """Text the grammar fixes before the first sampled token rides in the prompt pass."""
        if row.constraint is None:
            return []
        forced = row.constraint.forced_tokens(limit)
        row.output.extend(forced)
        row.forced += len(forced)
        if len(row.output) >= limit:
            row.finish = "length"
        return forced

    def _forward(
        self, ids: list[list[int]], attention: Any, positions: Any, cache: Any, real: list[int]
    ) -> tuple[Any, Any]:
        import torch

        input_ids = torch.tensor(ids, dtype=torch.long, device=self.loaded.device)
        return self.step.run(input_ids, attention, positions, cache, real)

    def _logits(self, rows: list[_Row], states: Any) -> Any:
        """Next-token logits, masked by each active row's grammar."""
        import torch

        device = states.device
        allowed: list[Any] | None = []
        for row in rows:
            if row.finish:
                allowed.append(torch.empty(0, dtype=torch.long, device=device))
            elif row.constraint is None:
                allowed = None
                break
            else:
                allowed.append(row.constraint.allowed_ids(device))
        logits = self.step.logits(states, allowed)
        if any(row.constraint is not None and not row.finish for row in rows):
            width = logits.shape[-1]
            masks = [
                row.constraint.mask(device)[:width]
                if row.constraint is not None and not row.finish
                else torch.ones(width, dtype=torch.bool, device=device)
                for row in rows
            ]
            logits = logits.masked_fill(~torch.stack(masks), float("-inf"))
        finished = [i for i, row in enumerate(rows) if row.finish]
        if finished:  # their token is ignored; keep them finite so sampling stays defined
            logits[finished] = 0.0
        return logits

    def _advance_rows(
        self,
        rows: list[_Row],
        states: Any,
        options: SamplingOptions,
        generator: Any,
        stop_strings: tuple[str, ...],
        started: float,
        observer: StepObserver | None,
    ) -> list[list[int]]:
        """Mask, choose and record one token per active row; return each row's next input."""
        tokens = choose_tokens(self._logits(rows, states), options, generator)
        if observer is not None:
            full = self.step.logits(states, None)
            for index, (row, token) in enumerate(zip(rows, tokens, strict=True)):
                if not row.finish:
                    observer(index, full[index], token)
        steps: list[list[int]] = []
        for row, token in zip(rows, tokens, strict=True):
            steps.append([] if row.finish else self._take(row, token, options, stop_strings))
            if row.finish and not row.seconds:
                row.seconds = time.perf_counter() - started
        return steps

    def _take(
        self, row: _Row, token: int, options: SamplingOptions, stop_strings: tuple[str, ...]
    ) -> list[int]:
        """Record `token` (plus forced tokens) for a row; set row.finish when it ends."""
        constraint = row.constraint
        if constraint is not None:
            constraint.advance(token)
        if token in self.loaded.stop_ids:
            row.finish = "stop"
            return []
        row.output.append(token)
        step = [token]
        if constraint is not None:
            if constraint.finished:
                row.finish = "stop"
                return []
            forced = constraint.forced_tokens(options.max_new_tokens - len(row.output))
            row.output.extend(forced)
            row.forced += len(forced)
            step.extend(forced)
            if constraint.finished:
                row.finish = "stop"
                return []
        # Stop strings end prompt-only rows; a constrained row ends only when its grammar
        # does (a `</json>` inside a JSON string is text, not the end of the record).
        if (
            stop_strings
            and constraint is None
            and _ends_with_stop(self.loaded.tokenizer, row.output, stop_strings)
        ):
            row.finish = "stop"
        elif len(row.output) >= options.max_new_tokens:
            row.finish = "length"
        return [] if row.finish else step

    def _result(self, row: _Row, stop_strings: tuple[str, ...]) -> DecodeResult:
        text = self.loaded.tokenizer.decode(row.output, skip_special_tokens=True)
        if stop_strings and row.constraint is None:
            text = _cut_after_stop(text, stop_strings)
        return DecodeResult(
            text=text,
            token_ids=row.output,
            finish_reason=row.finish or "length",
            tokens=len(row.output),
            forward_passes=row.passes,
            forced_tokens=row.forced,
            seconds=row.seconds,
        )


def _ends_with_stop(tokenizer: Any, output: list[int], stop_strings: tuple[str, ...]) -> bool:
    longest = max(len(s) for s in stop_strings)
    tail = tokenizer.decode(output[-(longest + 8) :], skip_special_tokens=True)
    return any(s in tail for s in stop_strings)


def _cut_after_stop(text: str, stop_strings: tuple[str, ...]) -> str:
    ends = [text.index(s) + len(s) for s in stop_strings if s in text]
    return text[: min(ends)] if ends else text
