"""The generation loop: KV cache, optional token masking, sampling, stop conditions.

One forward pass per step. A `Constraint` (the grammar matcher adapter) may mask the
logits before temperature/top-k/top-p, and may force tokens (jump-forward) that are fed
in a single extra forward pass. Without a constraint this is plain prompt-only decoding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from kor_cli.models import LoadedModel


class Constraint(Protocol):
    """What the decode loop needs from a grammar (see kor_cli/constrain.py)."""

    def mask(self, device: Any) -> Any:
        """Bool tensor [vocab_size] of allowed next tokens."""

    def advance(self, token_id: int) -> None:
        """Record a sampled token (already allowed by `mask`)."""

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar fixes from here (jump-forward); already advanced over."""

    @property
    def finished(self) -> bool:
        """True when the grammar has accepted a stop token or cannot continue."""


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
    finish_reason: str  # "stop" (stop token/string or grammar done) | "length"
    tokens: int  # tokens in the output, sampled plus forced
    forward_passes: int
    forced_tokens: int
    seconds: float


def _filter_logits(logits: Any, top_k: int, top_p: float) -> Any:
    import torch

    if top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative - torch.softmax(sorted_logits, dim=-1) > top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def choose_token(logits: Any, options: SamplingOptions, generator: Any) -> int:
    """Argmax at temperature 0, else sample from the tempered, filtered distribution."""
    import torch

    if options.temperature <= 0:
        return int(torch.argmax(logits))
    logits = _filter_logits(logits / options.temperature, options.top_k, options.top_p)
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


class Decoder:
    """Runs generation for one prompt at a time on a loaded model."""

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded

    def _forward(self, ids: list[int], cache: Any) -> tuple[Any, Any]:
        import torch

        input_ids = torch.tensor([ids], dtype=torch.long, device=self.loaded.device)
        out = self.loaded.model(
            input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1
        )
        return out.logits[0, -1].float(), out.past_key_values

    def generate(
        self,
        prompt_ids: list[int],
        options: SamplingOptions,
        *,
        stop_strings: tuple[str, ...] = (),
        constraint: Constraint | None = None,
    ) -> DecodeResult:
        import torch

        started = time.perf_counter()
        tokenizer = self.loaded.tokenizer
        stop_ids = set(self.loaded.stop_ids)
        generator = None
        if options.seed is not None:
            generator = torch.Generator(device=self.loaded.device).manual_seed(options.seed)
        output: list[int] = []
        forced_count = 0
        passes = 1
        finish = "length"
        with torch.inference_mode():
            logits, cache = self._forward(prompt_ids, None)
            while len(output) < options.max_new_tokens:
                if constraint is not None:
                    allowed = constraint.mask(logits.device)
                    logits = logits.masked_fill(~allowed[: logits.shape[-1]], float("-inf"))
                token = choose_token(logits, options, generator)
                if constraint is not None:
                    constraint.advance(token)
                if token in stop_ids or (constraint is not None and constraint.finished):
                    finish = "stop"
                    if token not in stop_ids:
                        output.append(token)
                    break
                output.append(token)
                step_ids = [token]
                if constraint is not None:
                    forced = constraint.forced_tokens()
                    forced = forced[: max(0, options.max_new_tokens - len(output))]
                    output.extend(forced)
                    forced_count += len(forced)
                    step_ids.extend(forced)
                if stop_strings and _ends_with_stop(tokenizer, output, stop_strings):
                    finish = "stop"
                    break
                if len(output) >= options.max_new_tokens:
                    break
                logits, cache = self._forward(step_ids, cache)
                passes += 1
        text = tokenizer.decode(output, skip_special_tokens=True)
        if stop_strings:
            text = _cut_after_stop(text, stop_strings)
        return DecodeResult(
            text=text,
            token_ids=output,
            finish_reason=finish,
            tokens=len(output),
            forward_passes=passes,
            forced_tokens=forced_count,
            seconds=time.perf_counter() - started,
        )


def _ends_with_stop(tokenizer: Any, output: list[int], stop_strings: tuple[str, ...]) -> bool:
    longest = max(len(s) for s in stop_strings)
    tail = tokenizer.decode(output[-(longest + 8) :], skip_special_tokens=True)
    return any(s in tail for s in stop_strings)


def _cut_after_stop(text: str, stop_strings: tuple[str, ...]) -> str:
    ends = [text.index(s) + len(s) for s in stop_strings if s in text]
    return text[: min(ends)] if ends else text
