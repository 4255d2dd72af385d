"""Row bookkeeping over the static cache: slots, prefill, steps, compaction, graphs.

The decode loop names rows by slot; here every live slot sits in a physical cache row
`0 .. live-1`. A freed slot's row is filled by moving the last live row into it, so a step
always runs the first `live` physical rows (a slice, no gather) — or the smallest captured
CUDA-graph bucket that holds them. A new row's prompt start that an earlier prompt shared
is copied from the prefix cache (prefix.py) instead of being prefilled again.
"""

from __future__ import annotations

from typing import Any

import torch

from kor_cli.backends.prefix import MIN_SHARED, PrefixCache
from kor_cli.backends.static_cache import StaticCacheModel

# Multi-token steps wider than this are prefills of long prompts: run in pieces of this
# width so the attention scores stay small (a piece sees the pieces before it in the cache).
PREFILL_PIECE = 512


class OwnedRunner:
    """Prefill/step/free over a `StaticCacheModel`; optional CUDA graphs for 1-token steps."""

    refills = True

    def __init__(self, model: Any, graphs: bool) -> None:
        self.model = StaticCacheModel(model)
        self.graphs: Any = None
        if graphs:
            from kor_cli.backends.graphs import StepGraphs

            self.graphs = StepGraphs(self.model)
        self.physical: dict[int, int] = {}  # slot -> physical row
        self.lengths: list[int] = []  # host copy of each physical row's length
        self.max_new = 0
        self.prefix = PrefixCache()

    @property
    def live(self) -> int:
        return len(self.physical)

    def start(self, capacity: int, max_new_tokens: int) -> None:
        rows = max(capacity, self.graphs.rows_for(capacity) if self.graphs else capacity)
        needed = max(self.model.length, 64 + max_new_tokens)
        if rows != self.model.rows or needed > self.model.length:
            self.model.allocate(rows, needed)
        else:
            self.model.lengths.zero_()
        self.physical.clear()
        self.lengths = [0] * rows
        self.max_new = max_new_tokens

    def prefill(self, rows: list[int], prompts: list[list[int]]) -> torch.Tensor:
        """New rows take the next physical rows; their prompts run in one padded pass."""
        first = self.live
        for offset, slot in enumerate(rows):
            if slot in self.physical:
                raise ValueError(f"row {slot} is already in use")
            self.physical[slot] = first + offset
            self.lengths[first + offset] = 0
        self.model.lengths[first : first + len(rows)] = 0
        need = max(len(p) for p in prompts) + self.max_new + 1
        self._ensure(need)
        shared = [self.prefix.shared(prompt) for prompt in prompts]
        for row, count in enumerate(shared, start=first):
            if count:
                self.prefix.copy_into(self.model, row, count)
                self.lengths[row] = count
                self.model.lengths[row] = count
        hidden = self._run(first, rows, [p[n:] for p, n in zip(prompts, shared, strict=True)])
        fresh = [at for at, n in enumerate(shared) if not n and len(prompts[at]) > MIN_SHARED]
        if fresh:
            self.prefix.keep(self.model, first + fresh[0], prompts[fresh[0]])
        return hidden

    def step(self, rows: list[int], tokens: list[list[int]]) -> torch.Tensor:
        """Feed rows their next tokens; rows not named keep their state."""
        width = max(len(t) for t in tokens)
        self._ensure(max(self.lengths[self.physical[r]] for r in rows) + width)
        if width == 1 and self.graphs is not None and len(rows) == self.live:
            try:
                return self._graph_step(rows, tokens)
            except RuntimeError as error:  # capture failed: say so once, run eagerly
                from kor_cli.console import info

                info(f"kor-cli: CUDA graphs failed ({str(error).splitlines()[0]}); eager steps")
                self.graphs = None
        if width == 1 and len(rows) == 1:  # one record decoding: the fewest torch calls
            row = self.physical[rows[0]]
            token = torch.tensor([tokens[0]], dtype=torch.long, device=self.model.device)
            hidden = self.model.forward_one(row, token, self.lengths[row])
            self.lengths[row] += 1
            return hidden[:, 0]
        return self._run(0, rows, tokens)

    def _graph_step(self, rows: list[int], tokens: list[list[int]]) -> torch.Tensor:
        order = [self.physical[r] for r in rows]
        ids = torch.zeros(self.live, dtype=torch.long)
        ids[order] = torch.tensor([t[0] for t in tokens])
        hidden = self.graphs.step(ids, self.live)
        for row in order:
            self.lengths[row] += 1
        return hidden[torch.tensor(order, device=hidden.device)]

    def free(self, rows: list[int]) -> None:
        """Finished rows leave; the last live rows move into their places."""
        for slot in rows:
            row = self.physical.pop(slot)
            last = len(self.physical)
            if row != last:
                moved = next(s for s, r in self.physical.items() if r == last)
                self.model.move(last, row)
                self.physical[moved] = row
                self.lengths[row] = self.lengths[last]
            self.lengths[last] = 0

    def _ensure(self, needed: int) -> None:
        if self.model.ensure_length(needed) and self.graphs is not None:
            self.graphs.clear()

    def _run(self, first: int, rows: list[int], tokens: list[list[int]]) -> torch.Tensor:
        """Eager pass over physical rows `first ..` (rows not named get no tokens)."""
        end = max(self.physical[r] for r in rows) + 1
        count = end - first
        device = self.model.device
        width = max(len(t) for t in tokens)
        grid = [[0] * width for _ in range(count)]
        counts = [0] * count
        for slot, ids in zip(rows, tokens, strict=True):
            at = self.physical[slot] - first
            grid[at][: len(ids)] = ids
            counts[at] = len(ids)
        upto = max(self.lengths[first:end]) + width
        ids_t = torch.tensor(grid, dtype=torch.long, device=device)
        counts_t = torch.tensor(counts, dtype=torch.long, device=device)
        states = []
        for piece in range(0, width, PREFILL_PIECE):
            part = ids_t[:, piece : piece + PREFILL_PIECE]
            real = (counts_t - piece).clamp(0, part.shape[1])
            hidden = self.model.forward(first, part, real, upto - width + piece + part.shape[1])
            states.append(hidden)
        hidden = torch.cat(states, dim=1) if len(states) > 1 else states[0]
        for at, n in enumerate(counts):
            self.lengths[first + at] += n
        picks = [self.physical[r] - first for r in rows]
        last = [max(len(t), 1) - 1 for t in tokens]
        return hidden[torch.tensor(picks, device=device), torch.tensor(last, device=device)]
