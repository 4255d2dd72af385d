"""Oracle steering for decode benchmarks (no pydantic, no schema loader: GPU-box safe).

A random-weight model never finishes a record on its own, which would make every mode
run to `--max-tokens`. So the model is *oracle-steered*: the real transformer runs every
forward pass, and a per-row bonus is added to the logits of the longest vocabulary token
that continues the row's gold output (then a stop token). The oracle's own bookkeeping is
timed so benchmarks can leave it out.
"""

from __future__ import annotations

import time
from typing import Any

from kor_cli.decode import Decoder


class Oracle:
    """Longest vocabulary token continuing each row's gold bytes (stop when done)."""

    BONUS = 1e4

    def __init__(self, token_bytes: list[bytes | None], stop_id: int) -> None:
        self.token_bytes = token_bytes
        self.by_bytes: dict[bytes, int] = {}
        for token_id, raw in enumerate(token_bytes):
            if raw:
                self.by_bytes.setdefault(raw, token_id)
        self.stop_id = stop_id
        self.gold: list[bytes] = []
        self.seconds = 0.0  # wall
        self.cpu_seconds = 0.0  # this process's CPU time

    def next_token(self, gold: bytes, done: bytes) -> int:
        rest = gold[len(done) :] if gold.startswith(done) else b""
        for end in range(min(len(rest), 48), 0, -1):
            token_id = self.by_bytes.get(rest[:end])
            if token_id is not None:
                return token_id
        return self.stop_id


def steered(base: type) -> type:
    """`base` (a Decoder class) with oracle bonuses added after masking, timed apart.

    A row's gold is `oracle.gold[row.index]`; decoders whose rows carry no index (older
    loops) use the row's position plus `offset`."""

    class Steered(base):  # type: ignore[valid-type,misc]
        def __init__(self, backend: Any, oracle: Oracle, **kwargs: Any) -> None:
            super().__init__(backend, **kwargs)
            self.oracle = oracle
            self.offset = 0

        def _logits(self, rows: list[Any], states: Any, *rest: Any) -> Any:
            logits = super()._logits(rows, states, *rest)
            started, cpu = time.perf_counter(), time.process_time()
            picks = []
            for position, row in enumerate(rows):
                index = getattr(row, "index", self.offset + position)
                done = b"".join(self.oracle.token_bytes[t] or b"" for t in row.output)
                picks.append(self.oracle.next_token(self.oracle.gold[index], done))
            logits[range(len(rows)), picks] += Oracle.BONUS
            self.oracle.cpu_seconds += time.process_time() - cpu
            self.oracle.seconds += time.perf_counter() - started  # both clock reads inside
            return logits

    return Steered


OracleDecoder = steered(Decoder)
