"""CPU threads for torch: one for small models, more only where the work pays for them.

A step of a small model is a few hundred tiny matmuls; splitting each over threads costs
more in wake-ups than it saves, and on a busy machine waiting for a descheduled second
thread makes it far worse (the 4.7 MB demo model: ~10× slower with 2 threads on a loaded
2-core machine than with 1).
"""

from __future__ import annotations

import os
from typing import Any

# Below this many parameters one thread is fastest (the demo model has ~1.2M, a 0.5B ~500M).
SMALL_MODEL_PARAMETERS = 100_000_000


def choose_threads(model: Any, device: Any, requested: int = 0) -> int:
    """Threads for `model`: `requested` when > 0, else 1 for small models on CPU, else
    torch's default (the cores it sees)."""
    if requested > 0:
        return requested
    if getattr(device, "type", "cpu") != "cpu":
        return 1
    count = sum(p.numel() for p in model.parameters())
    if count < SMALL_MODEL_PARAMETERS:
        return 1
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def apply_threads(model: Any, device: Any, requested: int = 0) -> int:
    """Set torch's intra-op threads for `model` (see `choose_threads`); returns the count."""
    import torch

    threads = choose_threads(model, device, requested)
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return threads
