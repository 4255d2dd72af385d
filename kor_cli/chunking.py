"""Long documents: split at paragraph/sentence boundaries with a small overlap, then merge.

`split_text` cuts a text into chunks of at most `max_tokens` tokens, preferring blank
lines, then sentence ends, then spaces, and only as a last resort the middle of a word.
Chunks are exact slices of the text and cover all of it; each one repeats up to
`overlap` tokens from the end of the previous one so that a record cut by a boundary is
still seen whole once.

`merge_results` combines the chunk results of one text into one result: lists are
concatenated and de-duplicated (`many: true` roots), objects keep per field the first
non-empty value, taken from valid chunks only, and the merged record is validated again.
Chunks that say "nothing here" (`{}`) add nothing; the text is empty when all of them do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from kor_cli.result import ExtractResult
from kor_cli.validate import RecordValidator, validate_record

TokenCounter = Callable[[str], int]

# Boundaries from coarse to fine; the separator stays with the piece before it.
_SEPARATORS = (
    re.compile(r"\n[ \t]*\n\s*"),  # blank line: paragraphs
    re.compile(r"(?<=[.!?;:。！？；])\s+"),  # sentence ends
    re.compile(r"\s+"),  # words
)


@dataclass(frozen=True)
class Chunk:
    """A slice `text[start:end]` of the original text."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Unit:
    start: int
    end: int
    tokens: int


def default_overlap(max_tokens: int) -> int:
    """A small overlap: an eighth of the chunk, at most 64 tokens."""
    return min(64, max_tokens // 8)


def split_text(
    text: str, max_tokens: int, count_tokens: TokenCounter, overlap: int | None = None
) -> list[Chunk]:
    """Chunks of at most `max_tokens` tokens (by `count_tokens`) covering `text` in order."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if count_tokens(text) <= max_tokens:
        return [Chunk(0, len(text), text)]
    overlap = default_overlap(max_tokens) if overlap is None else overlap
    units = list(_units(text, 0, len(text), 0, max_tokens, count_tokens))
    chunks: list[Chunk] = []
    first, done = 0, 0  # first unit of this chunk; units already covered by earlier chunks
    while done < len(units):
        last = _pack(text, units, first, max_tokens, count_tokens)
        if last <= done:  # the overlap left no room for a new unit: drop the overlap
            first = done
            last = _pack(text, units, first, max_tokens, count_tokens)
        start, end = units[first].start, units[last - 1].end
        chunks.append(Chunk(start, end, text[start:end]))
        done = last
        first = _overlap_start(units, first, done, overlap)
    return chunks


def _pack(
    text: str, units: list[_Unit], first: int, max_tokens: int, count_tokens: TokenCounter
) -> int:
    """End index (exclusive) of the longest run of units from `first` that fits."""
    last, total = first, 0
    while last < len(units) and (last == first or total + units[last].tokens <= max_tokens):
        total += units[last].tokens
        last += 1
    # Token counts of pieces do not add up exactly; check the joined slice.
    while last - first > 1:
        if count_tokens(text[units[first].start : units[last - 1].end]) <= max_tokens:
            break
        last -= 1
    return last


def _overlap_start(units: list[_Unit], first: int, done: int, overlap: int) -> int:
    """Where the next chunk starts: back from `done` by at most `overlap` tokens."""
    start, total = done, 0
    while start - 1 > first and total + units[start - 1].tokens <= overlap:
        start -= 1
        total += units[start].tokens
    return start


def _units(
    text: str, start: int, end: int, level: int, max_tokens: int, count_tokens: TokenCounter
) -> Iterator[_Unit]:
    """Pieces of `text[start:end]` that each fit, split at the coarsest boundary possible."""
    if level == len(_SEPARATORS):
        yield from _hard_split(text, start, end, max_tokens, count_tokens)
        return
    pieces, pos = [], start
    for match in _SEPARATORS[level].finditer(text, start, end):
        if match.start() > pos:
            pieces.append((pos, match.end()))
            pos = match.end()
    if pos < end:
        pieces.append((pos, end))
    for piece_start, piece_end in pieces:
        tokens = count_tokens(text[piece_start:piece_end])
        if tokens <= max_tokens:
            yield _Unit(piece_start, piece_end, tokens)
        else:
            yield from _units(text, piece_start, piece_end, level + 1, max_tokens, count_tokens)


def _hard_split(
    text: str, start: int, end: int, max_tokens: int, count_tokens: TokenCounter
) -> Iterator[_Unit]:
    """Cut inside a word: the longest prefix that fits (at least one character)."""
    pos = start
    while pos < end:
        lo, hi = pos + 1, end
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count_tokens(text[pos:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        yield _Unit(pos, lo, count_tokens(text[pos:lo]))
        pos = lo


def merge_results(
    chunks: list[Chunk],
    results: list[ExtractResult],
    model_class: RecordValidator | type[BaseModel],
) -> ExtractResult:
    """One result from the chunk results of one text (see the module docstring)."""
    count = len(results)
    errors = [
        f"chunk {i}/{count}: {error}"
        for i, result in enumerate(results, start=1)
        for error in result.errors
    ]
    valid = [result for result in results if result.valid]
    filled = [result.data for result in valid if result.data != {}]  # {}: nothing here
    data: Any = {} if valid else None
    if filled:
        data = _merge_data(filled)
        validated, problems = validate_record(model_class, data)
        errors.extend(f"merge: schema: {problem}" for problem in problems)
        data = validated if not problems else data
    reasons = [result.finish_reason for result in results]
    return ExtractResult(
        data=data,
        valid=not errors,
        errors=errors,
        raw=None,
        finish_reason=next((r for r in reasons if r != "stop"), "stop"),
        mode=results[0].mode,
        tokens=sum(result.tokens for result in results),
        forward_passes=sum(result.forward_passes for result in results),
        forced_tokens=sum(result.forced_tokens for result in results),
        seconds=sum(result.seconds for result in results),
        empty=not errors and all(result.empty for result in valid),
        chunks=[
            {
                "start": chunk.start,
                "end": chunk.end,
                "valid": result.valid,
                "finish_reason": result.finish_reason,
                "raw": result.raw,
            }
            for chunk, result in zip(chunks, results, strict=True)
        ],
    )


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _merge_data(datas: list[Any]) -> Any:
    """Merge `{root_id: value}` records key by key; anything else: the first one."""
    if not all(isinstance(data, dict) for data in datas):
        return datas[0]
    keys = list(dict.fromkeys(key for data in datas for key in data))
    return {key: _merge_root([data[key] for data in datas if key in data]) for key in keys}


def _merge_root(values: list[Any]) -> Any:
    """Lists: concatenate, dropping repeats. Objects: per field the first non-empty value."""
    if all(isinstance(value, list) for value in values):
        merged, seen = [], set()
        for item in (item for value in values for item in value):
            key = json.dumps(item, sort_keys=True, ensure_ascii=False)
            if key not in seen:
                seen.add(key)
                merged.append(item)
        return merged
    if all(isinstance(value, dict) for value in values):
        fields = list(dict.fromkeys(field for value in values for field in value))
        return {field: _first_filled([v[field] for v in values if field in v]) for field in fields}
    return _first_filled(values)


def _first_filled(values: list[Any]) -> Any:
    return next((value for value in values if not _is_empty(value)), values[0])
