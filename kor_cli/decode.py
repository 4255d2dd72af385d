"""The generation loop: slots, optional token masking, sampling, stops.

The loop drives a `Backend` (kor_cli/backends): up to `slots` requests are in flight; each
pass feeds every live row its next tokens, and a row that finishes leaves at once — its
slot takes the next request (continuous batching) when the backend can insert rows. A
`Constraint` per row (the grammar adapter) masks the logits before temperature/top-k/top-p
and may force tokens (jump-forward); forced tokens ride along in the row's next forward
pass instead of costing passes of their own. Masks are one packed int32 bitmask
`[slots, ceil(V/32)]` on the host (a slot's row is refilled only when its grammar state
changes), copied once and applied in one vectorised op. Without constraints this is plain
prompt-only decoding.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kor_cli.backends import Backend, as_backend
from kor_cli.backends.head import DEFAULT_SELECTIVE_LIMIT, SelectiveHead


class Constraint(Protocol):
    """What the decode loop needs from a grammar (see kor_cli/constrain.py)."""

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        """Write the allowed next tokens into row `row` of an int32 [B, ceil(V/32)] bitmask
        (token i: bit i % 32 of word i // 32). A simple constraint may instead provide
        `mask(device)`: a bool tensor [vocab_size] (packed by the loop)."""

    def state_key(self) -> Hashable | None:
        """Equal keys mean equal masks, so the row's bitmask is kept (None: refill)."""

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


class _Wait:
    """The type of `WAIT`."""

    def __repr__(self) -> str:
        return "WAIT"


# A request source yields WAIT for "nothing to start now": the loop steps the rows in
# flight and asks again next pass (no index is used up). A source that has no row in
# flight should block for its next request instead (else the loop spins).
WAIT: Any = _Wait()
_END: Any = object()


@dataclass
class _Row:
    index: int  # the request's position in the input
    constraint: Constraint | None
    started: float = field(default_factory=time.perf_counter)
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


Request = tuple[list[int], "Constraint | None"]
# Results that need no pass (None requests, rows done at start) go out this many at a time.
READY_LIMIT = 64


class _SlotMasks:
    """One packed bitmask row per slot, refilled only when the row's grammar state changes."""

    def __init__(self, slots: int, vocab_size: int) -> None:
        self.slots, self.vocab_size = slots, vocab_size
        self.bitmask: np.ndarray | None = None  # allocated with the first constrained row
        self.filled: list[tuple[_Row, Hashable] | None] = [None] * slots

    def select(self, order: list[int], rows: list[_Row], device: Any) -> np.ndarray | None:
        """The bitmask rows of `order` (slots), in that order, each row up to date (None
        when no row is constrained)."""
        if all(row.constraint is None for row in rows):
            return None
        from kor_cli.grammar.surface import allocate_token_bitmask, pack_bool_mask

        if self.bitmask is None:  # prompt-only runs never import the grammar engine
            self.bitmask = allocate_token_bitmask(self.slots, self.vocab_size)
        bitmask = self.bitmask
        for slot, row in zip(order, rows, strict=True):
            constraint = row.constraint
            key = None if constraint is None else getattr(constraint, "state_key", _none)()
            entry = self.filled[slot]
            if key is not None and entry is not None and entry[0] is row and entry[1] == key:
                continue
            if constraint is None:
                bitmask[slot] = -1
            elif hasattr(constraint, "fill_bitmask"):
                constraint.fill_bitmask(bitmask, slot)
            else:
                bitmask[slot] = pack_bool_mask(constraint.mask(device), bitmask.shape[1])
            self.filled[slot] = (row, key)
        return bitmask[order]


def _none() -> None:
    return None


class Decoder:
    """Runs generation on a backend (or a `LoadedModel`, wrapped in the transformers one)."""

    def __init__(self, backend: Any, selective_limit: int = DEFAULT_SELECTIVE_LIMIT) -> None:
        self.backend: Backend = as_backend(backend)
        self.loaded = self.backend.loaded
        self.step = SelectiveHead(self.backend, selective_limit)
        self.stop_ids = frozenset(self.loaded.stop_ids)
        self._may_stop: dict[tuple[str, ...], dict[int, bool]] = {}

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
        slots: int | None = None,
    ) -> list[DecodeResult]:
        """Generate for several prompts, up to `slots` (default: all) in flight at once;
        results in input order."""
        requests = list(zip(prompts, constraints or [None] * len(prompts), strict=True))
        results: list[DecodeResult | None] = [None] * len(requests)
        stream = self.generate_stream(
            requests, options, slots=slots or len(requests) or 1,
            stop_strings=stop_strings, observer=observer,
        )  # fmt: skip
        for group in stream:
            for index, result in group:
                results[index] = result
        return [r for r in results if r is not None]

    def generate_stream(
        self,
        requests: Iterable[Request | None],  # or WAIT
        options: SamplingOptions,
        *,
        slots: int,
        stop_strings: tuple[str, ...] = (),
        observer: StepObserver | None = None,
    ) -> Iterator[list[tuple[int, DecodeResult | None]]]:
        """(input index, result) for each (prompt, constraint) request, as rows finish, in
        lists of those that finished together (one list per pass, at most).

        Up to `slots` rows are in flight; a finished row's slot takes the next request at
        once (when the backend refills), so no row waits for the slowest of a batch. A
        None request is answered with (index, None) without a forward pass, so a caller
        gets control back to write what needs no model. A `WAIT` takes no index: the rows
        in flight go on (a source fed from elsewhere, like a Ray worker's).
        """
        import torch

        backend = self.backend
        with torch.inference_mode():
            backend.start(slots, options.max_new_tokens)
        generator = None
        if options.seed is not None:
            generator = torch.Generator(device=self.loaded.device).manual_seed(options.seed)
        pending = iter(requests)
        taken = 0  # requests started or answered so far: the next one's index
        masks = _SlotMasks(slots, int(self.loaded.vocab_size))
        free = list(range(slots - 1, -1, -1))
        live: dict[int, _Row] = {}  # slot -> row
        inputs: dict[int, list[int]] = {}  # slot -> tokens to feed next
        exhausted = False
        ready: list[tuple[int, DecodeResult | None]] = []
        while True:
            new: dict[int, list[int]] = {}
            while free and not exhausted and (backend.refills or not live):
                request = next(pending, _END)
                if request is _END:
                    exhausted = True
                    break
                if request is WAIT:
                    break
                index, taken = taken, taken + 1
                if len(ready) >= READY_LIMIT:
                    yield ready
                    ready = []
                if request is None:
                    ready.append((index, None))
                    continue
                prompt, constraint = request
                row = _Row(index, constraint)
                forced = self._force_at_start(row, options.max_new_tokens)
                if row.finish:  # the grammar's forced text reached --max-tokens
                    ready.append((index, self._result(row, stop_strings)))
                    continue
                slot = free.pop()
                live[slot] = row
                new[slot] = prompt + forced
            if not live:
                if ready:
                    yield ready
                    ready = []
                if exhausted:
                    return
                continue  # the source said WAIT with nothing in flight: ask it again
            with torch.inference_mode():  # not held across yields
                order, states = self._forward(new, inputs, live)
                rows = [live[slot] for slot in order]
                bitmask = masks.select(order, rows, states.device)
                steps = self._advance_rows(
                    rows, states, options, generator, stop_strings, observer, bitmask
                )
                inputs, done = {}, []
                for slot, row, step in zip(order, rows, steps, strict=True):
                    if row.finish:
                        done.append(slot)
                    else:
                        inputs[slot] = step
                if done:
                    backend.free(done)
            for slot in done:
                row = live.pop(slot)
                free.append(slot)
                ready.append((row.index, self._result(row, stop_strings)))
            if ready:
                yield ready
                ready = []

    def _forward(
        self, new: dict[int, list[int]], inputs: dict[int, list[int]], live: dict[int, _Row]
    ) -> tuple[list[int], Any]:
        """Prefill new rows and step the others; (slots in state order, states)."""
        import torch

        order, parts = [], []
        if new:
            order += list(new)
            parts.append(self.backend.prefill(list(new), list(new.values())))
        if inputs:
            order += list(inputs)
            parts.append(self.backend.step(list(inputs), list(inputs.values())))
            for slot in inputs:
                live[slot].passes += 1
        return order, parts[0] if len(parts) == 1 else torch.cat(parts)

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

    def _logits(self, rows: list[_Row], states: Any, bitmask: np.ndarray | None) -> Any:
        """Next-token logits, masked by each row's grammar (one packed-bitmask op)."""
        device = states.device
        constrained = [row.constraint is not None for row in rows]
        allowed = None
        if all(constrained):
            allowed = [row.constraint.allowed_ids(device) for row in rows]  # type: ignore[union-attr]
        logits = self.step.logits(states, allowed)
        if bitmask is not None:
            from kor_cli.grammar.surface import apply_token_bitmask_

            logits = apply_token_bitmask_(logits, bitmask)
        return logits

    def _advance_rows(
        self,
        rows: list[_Row],
        states: Any,
        options: SamplingOptions,
        generator: Any,
        stop_strings: tuple[str, ...],
        observer: StepObserver | None,
        bitmask: np.ndarray | None,
    ) -> list[list[int]]:
        """Mask, choose and record one token per row; return each row's next input."""
        tokens = choose_tokens(self._logits(rows, states, bitmask), options, generator)
        if observer is not None:
            full = self.step.backend.project(states)
            for at, (row, token) in enumerate(zip(rows, tokens, strict=True)):
                observer(row.index, full[at], token)
        steps: list[list[int]] = []
        for row, token in zip(rows, tokens, strict=True):
            steps.append(self._take(row, token, options, stop_strings))
            if row.finish:
                row.seconds = time.perf_counter() - row.started
        return steps

    def _take(
        self, row: _Row, token: int, options: SamplingOptions, stop_strings: tuple[str, ...]
    ) -> list[int]:
        """Record `token` (plus forced tokens) for a row; set row.finish when it ends."""
        constraint = row.constraint
        if constraint is not None:
            constraint.advance(token)
        if token in self.stop_ids:
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
            and self._may_end_stop(token, stop_strings)
            and _ends_with_stop(self.loaded.tokenizer, row.output, stop_strings)
        ):
            row.finish = "stop"
        elif len(row.output) >= options.max_new_tokens:
            row.finish = "length"
        return [] if row.finish else step

    def _may_end_stop(self, token: int, stop_strings: tuple[str, ...]) -> bool:
        """Whether `token` can complete a stop string: its text holds a stop string's last
        character (ASCII ones; a token's text alone and in context differ only in spaces
        and split multi-byte characters). Cached per token, so most steps decode nothing."""
        known = self._may_stop.setdefault(stop_strings, {})
        may = known.get(token)
        if may is None:
            ends = {s[-1] for s in stop_strings if s}
            piece = self.loaded.tokenizer.decode([token], skip_special_tokens=True)
            may = known[token] = any(not c.isascii() or c.isspace() or c in piece for c in ends)
        return may

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
