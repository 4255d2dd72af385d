"""What every benchmark script shares: where results go, and a grammar-timing wrapper.

A run writes only to `--out`. The default is a scratch path under `benchmarks/out/`, which
git ignores, so merely running a script (or a broken `--help`) never changes a committed
figure; to update `benchmarks/results/`, pass `--out benchmarks/results/NAME` on purpose and
commit the file with the README text that quotes it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
SCRATCH = BENCHMARKS / "out"
COMMITTED = BENCHMARKS / "results"


def add_out_argument(parser: argparse.ArgumentParser, name: str) -> None:
    """`--out PATH` on `parser`; its default, `benchmarks/out/NAME`, is untracked. A NAME
    holding `{...}` fields is filled from the parsed arguments by `out_path`."""
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"results file (default: benchmarks/out/{name}, untracked; the committed "
        f"figures are benchmarks/results/{name}, written only when passed here)",
    )
    parser.set_defaults(out_name=name)


def out_path(args: argparse.Namespace) -> Path:
    """The results path of parsed `args`: `--out`, else the scratch default."""
    return args.out or SCRATCH / args.out_name.format(**vars(args))


def write_results(path: Path, report: Any, *, indent: int = 2) -> None:
    """Write `report` as JSON to `path` (folders made) and say so on stdout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


class TimedConstraint:
    """Wraps a decode-loop constraint and adds the seconds spent in grammar calls to
    `clock[0]` (the grammar's share of step time)."""

    def __init__(self, inner: Any, clock: list[float]) -> None:
        self.inner, self.clock = inner, clock

    def _timed(self, name: str, *args: Any) -> Any:
        started = time.perf_counter()
        out = getattr(self.inner, name)(*args)
        self.clock[0] += time.perf_counter() - started
        return out

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        self._timed("fill_bitmask", bitmask, row)

    def state_key(self) -> Any:
        return self._timed("state_key")

    def allowed_ids(self, device: Any) -> Any:
        return self._timed("allowed_ids", device)

    def advance(self, token_id: int) -> None:
        self._timed("advance", token_id)

    def forced_tokens(self, limit: int) -> list[int]:
        return self._timed("forced_tokens", limit)  # type: ignore[no-any-return]

    @property
    def finished(self) -> bool:
        return bool(self.inner.finished)


def sorted_keys(value: Any) -> Any:
    """`value` with every object's keys in sorted order (one of the texts a test tries)."""
    if isinstance(value, dict):
        return {k: sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_keys(v) for v in value]
    return value
