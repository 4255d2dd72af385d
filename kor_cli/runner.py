"""Records in → result rows out, in order: what `batch` and `compare` share.

Per record the planner decides: extract the text whole, split it into chunks that fit
the model's context (kor_cli/chunking.py), or refuse it as too long. All texts and
chunks of a group of records are extracted `batch_size` at a time through one seam
(`extract_batch`), chunk results are merged, and every record gets exactly one
`ExtractResult` row — an input error row when the model never saw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kor_cli.chunking import Chunk, merge_results, split_text
from kor_cli.errors import UsageError
from kor_cli.result import ExtractResult

if TYPE_CHECKING:
    from kor_cli.extract import Extractor
    from kor_cli.models import LoadedModel
    from kor_cli.records import Record

# Tokens kept free besides prompt and output when sizing chunks (joins tokenize unevenly).
CHUNK_MARGIN = 8


def extract_batch(extractor: Extractor, texts: list[str]) -> list[ExtractResult]:
    """Extract several texts; the seam for batched decoding.

    Uses `Extractor.extract_batch` (one batched generation) when the extractor has it,
    else extracts the texts one by one.
    """
    batched = getattr(extractor, "extract_batch", None)
    if batched is not None:
        return list(batched(texts))
    return [extractor.extract(text) for text in texts]


def model_context(loaded: LoadedModel) -> int | None:
    """The model's context length in tokens, when its config says."""
    config = getattr(loaded.model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return value if isinstance(value, int) and value > 0 else None


class TooLong(Exception):
    """A text whose prompt plus --max-tokens does not fit the model's context."""


class Planner:
    """Decides per text: extract whole, split into chunks, or refuse as too long."""

    def __init__(self, extractor: Extractor, context: int | None, chunk_tokens: int | None):
        self.extractor = extractor
        self.context = context
        self.max_new = extractor.options.sampling.max_new_tokens
        tokenizer = extractor.loaded.tokenizer
        self.count_tokens = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
        overhead = len(extractor.prompt_ids(""))
        room = None if context is None else context - overhead - self.max_new - CHUNK_MARGIN
        if room is not None and chunk_tokens is None and room < 1:
            raise UsageError(
                f"the prompt ({overhead} tokens) and --max-tokens ({self.max_new}) leave "
                f"no room for text in the model's context of {context} tokens"
            )
        if room is not None and chunk_tokens and chunk_tokens > room:
            raise UsageError(
                f"--chunk-tokens {chunk_tokens} does not fit the model's context of "
                f"{context} tokens (prompt {overhead}, --max-tokens {self.max_new}); "
                f"use at most {max(room, 1)}"
            )
        self.chunk_tokens = room if chunk_tokens is None else chunk_tokens or None

    def plan(self, text: str) -> list[Chunk]:
        """The chunks to extract (one for a text that fits); raise TooLong otherwise."""
        if self.chunk_tokens is not None and self.count_tokens(text) > self.chunk_tokens:
            chunks = split_text(text, self.chunk_tokens, self.count_tokens)
        else:
            chunks = [Chunk(0, len(text), text)]
        if self.context is not None:
            for chunk in chunks:
                prompt = len(self.extractor.prompt_ids(chunk.text))
                if prompt + self.max_new > self.context:
                    raise TooLong(
                        f"input: text too long: the prompt is {prompt} tokens and --max-tokens "
                        f"{self.max_new}, more than the model's context of {self.context} "
                        "tokens (split it with --chunk-tokens)"
                    )
        return chunks


class Runner:
    """One extractor over groups of records: one result row per record, in order.

    `chunk_tokens`: None splits what does not fit the context, 0 never splits.
    `keep`: record fields copied into each row (`batch --keep`).
    """

    def __init__(
        self,
        extractor: Extractor,
        *,
        batch_size: int = 8,
        chunk_tokens: int | None = None,
        keep: tuple[str, ...] = (),
    ) -> None:
        self.extractor = extractor
        self.batch_size = batch_size
        self.keep = keep
        self.planner = Planner(extractor, model_context(extractor.loaded), chunk_tokens)

    def run(self, records: Sequence[Record]) -> list[ExtractResult]:
        """Rows for `records`, in order; all their texts and chunks extracted together."""
        mode = self.extractor.options.mode
        plans: list[list[Chunk] | str] = []
        for record in records:
            if record.text is None:
                plans.append(record.error or "input: no text")
                continue
            try:
                plans.append(self.planner.plan(record.text))
            except TooLong as error:
                plans.append(str(error))
        texts = [chunk.text for plan in plans if not isinstance(plan, str) for chunk in plan]
        results: list[ExtractResult] = []
        for start in range(0, len(texts), self.batch_size):
            results += extract_batch(self.extractor, texts[start : start + self.batch_size])
        rows, taken = [], 0
        for record, plan in zip(records, plans, strict=True):
            if isinstance(plan, str):
                outcome = ExtractResult.input_error(plan, mode)
            else:
                own, taken = results[taken : taken + len(plan)], taken + len(plan)
                if len(plan) == 1:
                    outcome = own[0]
                else:
                    outcome = merge_results(plan, own, self.extractor.model_class)
            rows.append(outcome.for_record(record, self.keep))
        return rows
