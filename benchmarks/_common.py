"""What every benchmark script shares: where results go.

A run writes only to `--out`. The default is a scratch path under `benchmarks/out/`, which
git ignores, so merely running a script (or a broken `--help`) never changes a committed
figure; to update `benchmarks/results/`, pass `--out benchmarks/results/NAME` on purpose and
commit the file with the README text that quotes it.
"""

from __future__ import annotations

import argparse
import json
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
