"""Pause Python's cyclic garbage collector while a grammar compiles.

A compile allocates tens of thousands of small AST nodes, NFA lists and tuples, most of
them acyclic and freed by reference counting when the compile returns. With the
collector running, the compile's working set outlives the young generations' passes, is
promoted to the oldest generation, and after a few compiles that triggers a full
collection, which walks every tracked object of the process (a loaded tokenizer, torch,
the cached grammars): 25-200 ms each, on top of a 10 ms compile. Measured on SchemaStore's
every-8th sample in one process: 28 full collections (3.6 s) over 86 schemas with the
collector running, 1 with it paused during compiles.

Only the cyclic collector pauses: memory that reference counting frees is freed as
always. Cycles made during a compile (the compiler's closures hold its rule book) are
collected once the collector runs again; peak memory on the largest SchemaStore refusals
is unchanged. Pauses nest and may overlap across threads: the collector runs again when
the last one ends, and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # pauses in progress (all threads)
_restore = False  # whether the collector was enabled when the first of them began


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic garbage collector disabled for the duration (nests; see the module
    docstring)."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
