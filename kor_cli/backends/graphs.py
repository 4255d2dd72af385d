"""CUDA graphs of one-token decode steps over the static cache, one per batch-size bucket.

A step of a small model on a GPU is bound by kernel launches (hundreds per step), not by
the GPU. Capturing the whole step once per bucket (1, 2, 4, … rows) and replaying it costs
one launch. The graph owns static input tensors (tokens, counts) and reads the cache,
lengths and rotary tables in place, so nothing transformers allocates per call is in it
(the reason a naive `torch.compile(mode="reduce-overhead")` over transformers' own static
cache fails with "CUDA graph output overwritten"). Multi-token steps (prefill, jump-forward)
run eagerly. Rows of a bucket beyond the live ones get no tokens (count 0): their lengths
stay, and what the step writes past them is overwritten by their next real step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kor_cli.backends.static_cache import StaticCacheModel

BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)


@dataclass
class _Captured:
    graph: Any
    tokens: torch.Tensor  # [bucket, 1]
    counts: torch.Tensor  # [bucket]
    hidden: torch.Tensor  # [bucket, H], written by each replay


class StepGraphs:
    """Captured one-token steps of a `StaticCacheModel`, by bucket."""

    def __init__(self, model: StaticCacheModel) -> None:
        self.model = model
        self.captured: dict[int, _Captured] = {}
        self.generation = model.generation
        self.pool: Any = None

    @staticmethod
    def rows_for(live: int) -> int:
        """The bucket that holds `live` rows (`live` itself past the largest bucket)."""
        return next((b for b in BUCKETS if b >= live), live)

    def clear(self) -> None:
        """Forget every graph (the cache tensors were replaced)."""
        self.captured.clear()
        self.generation = self.model.generation

    def step(self, ids: torch.Tensor, live: int) -> torch.Tensor:
        """One token for each of physical rows `0 .. live-1`; hidden states [live, H]."""
        if self.model.generation != self.generation:
            self.clear()
        bucket = self.rows_for(live)
        entry = self.captured.get(bucket) or self._capture(bucket)
        entry.tokens.zero_()
        entry.tokens[:live, 0].copy_(ids, non_blocking=True)
        entry.counts.zero_()
        entry.counts[:live] = 1
        entry.graph.replay()
        return entry.hidden[:live]

    def _capture(self, bucket: int) -> _Captured:
        device = self.model.device
        tokens = torch.zeros((bucket, 1), dtype=torch.long, device=device)
        counts = torch.zeros(bucket, dtype=torch.long, device=device)  # warm-up: no growth
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                self.model.forward(0, tokens, counts, None)
        torch.cuda.current_stream(device).wait_stream(stream)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            hidden = self.model.forward(0, tokens, counts, None)[:, 0]
        entry = _Captured(graph, tokens, counts, hidden)
        self.captured[bucket] = entry
        return entry
