"""Records in → result rows out, in order: what `batch`, `compare` and Ray workers share.

Per record the planner decides: extract the text whole, split it into chunks that fit
the model's context (kor_cli/chunking.py), or refuse it as too long. The texts and chunks
of the whole input flow through one seam (`extract_stream`) with `batch_size` in flight:
a finished row's slot takes the next text at once (continuous batching), so no record
waits for the slowest of a group. Results are held until the records before them are
done, chunk results are merged, and every record gets exactly one `ExtractResult` row, in
input order — an input error row when the model never saw it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kor_cli.chunking import Chunk, merge_results, split_text
from kor_cli.decode import WAIT
from kor_cli.errors import UsageError
from kor_cli.result import ExtractResult

if TYPE_CHECKING:
    from kor_cli.extract import Extractor
    from kor_cli.models import LoadedModel
    from kor_cli.records import Record

# Tokens kept free besides prompt and output when sizing chunks (joins tokenize unevenly).
CHUNK_MARGIN = 8


def extract_stream(
    extractor: Extractor, texts: Iterable[str | None], slots: int
) -> Iterator[list[tuple[int, ExtractResult | None]]]:
    """(input index, result) per text as rows finish, in lists of those that finished
    together, `slots` in flight; the seam for batched decoding. A None text is answered
    with (index, None) without a forward pass: the caller gets control back to write
    rows that need no model."""
    return extractor.extract_stream(texts, slots)


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


@dataclass
class _Pending:
    """A record waiting for its row: its plan (chunks, or an input error) and results."""

    record: Record
    plan: list[Chunk] | str
    results: list[ExtractResult | None]
    missing: int


class Runner:
    """One extractor over a stream of records: one result row per record, in order.

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
        """Rows for `records`, in order."""
        return [row for rows in self.stream(records) for row in rows]

    def stream(self, records: Iterable[Record]) -> Iterator[list[ExtractResult]]:
        """Rows for `records` in input order, in lists of the rows that became ready
        together. Records are pulled only as slots free up (at most `batch_size` texts
        in flight), so a caller can stop the input and still get a row for every record
        it handed over. A source fed from elsewhere yields `WAIT` (kor_cli/decode.py)
        when it has no record yet but rows are in flight."""
        queue: deque[_Pending] = deque()
        owners: dict[int, tuple[_Pending, int]] = {}  # text index -> (record, chunk)

        def texts() -> Iterator[str | None]:
            index = 0
            for record in records:
                if record is WAIT:
                    yield WAIT  # nothing to start now: the rows in flight go on
                    continue
                pending = self._plan(record)
                queue.append(pending)
                if isinstance(pending.plan, str):
                    index += 1
                    yield None  # hands control back so the rows before it can go out
                    continue
                for at, chunk in enumerate(pending.plan):
                    owners[index] = (pending, at)
                    index += 1
                    yield chunk.text

        for group in extract_stream(self.extractor, texts(), self.batch_size):
            for index, result in group:
                if result is not None:
                    pending, at = owners.pop(index)
                    pending.results[at] = result
                    pending.missing -= 1
            ready = []
            while queue and not queue[0].missing:
                ready.append(self._row(queue.popleft()))
            if ready:
                yield ready
        if any(pending.missing for pending in queue):
            raise RuntimeError("the extraction stream ended before every text had a result")
        if queue:
            yield [self._row(pending) for pending in queue]

    def _plan(self, record: Record) -> _Pending:
        if record.text is None:
            return _Pending(record, record.error or "input: no text", [], 0)
        try:
            chunks = self.planner.plan(record.text)
        except TooLong as error:
            return _Pending(record, str(error), [], 0)
        return _Pending(record, chunks, [None] * len(chunks), len(chunks))

    def _row(self, pending: _Pending) -> ExtractResult:
        plan = pending.plan
        if isinstance(plan, str):
            outcome = ExtractResult.input_error(plan, self.extractor.options.mode)
        else:
            results = [result for result in pending.results if result is not None]
            if len(plan) == 1:
                outcome = results[0]
            else:
                outcome = merge_results(plan, results, self.extractor.model_class)
        return outcome.for_record(pending.record, self.keep)
