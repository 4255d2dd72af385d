"""Startup of `kor-cli extract` on the demo model: wall time, import time, modules imported.

    python benchmarks/startup.py --baseline OLD_CHECKOUT --repeats 3 \\
        --out benchmarks/results/startup.json

Each run is a fresh `python -m kor_cli extract schemas/person.yaml samples/person.txt
--max-tokens 1 --mode MODE` (prompt and constrained): its wall and CPU time, and in a second run
under `python -X importtime` the sum of the top-level imports' cumulative times, the number
of modules, how many are torch/transformers/grammar-engine ones, and whether transformers'
modeling stack or torch._dynamo was imported. With `--baseline` another kor-cli checkout
runs the same commands, taking turns run by run (load changes on a shared machine hit both
alike); medians are reported.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import add_out_argument, out_path, write_results

ROOT = Path(__file__).resolve().parents[1]
MODES = ("prompt", "constrained")
TABLES = ("kor_cli.grammar.json_drafts", "kor_cli.grammar.json_formats")  # schema loading's


def command(mode: str, importtime: bool) -> list[str]:
    flags = ["-X", "importtime"] if importtime else []
    return [sys.executable, *flags, "-m", "kor_cli", "extract", "schemas/person.yaml",
            "samples/person.txt", "--max-tokens", "1", "--mode", mode]  # fmt: skip


def run_once(checkout: Path, mode: str) -> dict[str, Any]:
    """One plain run (wall time) and one under -X importtime (imports) in `checkout`."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    first = subprocess.run(command(mode, False), cwd=checkout, env=env, capture_output=True)
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    done = subprocess.run(
        command(mode, True), cwd=checkout, env=env, capture_output=True, text=True
    )
    for finished in (first, done):  # 1: one token makes no valid record, as expected
        if finished.returncode not in (0, 1):
            raise SystemExit(f"{checkout}: extract failed ({finished.returncode})")
    lines = [
        line.split("|") for line in done.stderr.splitlines()
        if line.startswith("import time:") and "cumulative" not in line
    ]  # fmt: skip
    names = [parts[2].strip() for parts in lines]
    top = sum(int(parts[1]) for parts in lines if not parts[2].startswith("   "))
    return {
        "wall_s": wall,
        "cpu_s": cpu,  # user + system time of the run: what load on a shared machine moves least
        "imports_s": top / 1e6,
        "modules": len(names),
        "torch_transformers_modules": sum(
            n.split(".")[0] in ("torch", "transformers") for n in names
        ),
        "grammar_engine_modules": sum(
            n.startswith("kor_cli.grammar.") and n not in TABLES for n in names
        ),
        "transformers_modeling": "transformers.modeling_utils" in names,
        "torch_dynamo": "torch._dynamo" in names,
    }


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, bool):
            row[key] = value
        elif isinstance(value, float):
            row[key] = round(statistics.median(run[key] for run in runs), 2)
            row[key + "_runs"] = [round(run[key], 2) for run in runs]
        else:
            row[key] = value
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per mode and checkout")
    parser.add_argument("--baseline", help="another kor-cli checkout, timed alongside")
    add_out_argument(parser, "startup.json")
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.baseline:
        checkouts["baseline"] = Path(args.baseline).resolve()
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.repeats):
        for mode in MODES:
            for label, checkout in checkouts.items():
                runs.setdefault((label, mode), []).append(run_once(checkout, mode))
    rows = [{"checkout": label, "mode": mode, **median_row(found)}
            for (label, mode), found in runs.items()]  # fmt: skip
    for row in rows:
        print(f"{row['checkout']:<9}{row['mode']:<12} wall {row['wall_s']:6.2f} s  CPU "
              f"{row['cpu_s']:6.2f} s  imports "
              f"{row['imports_s']:6.2f} s  modules {row['modules']:5}  grammar "
              f"{row['grammar_engine_modules']:3}  modeling {row['transformers_modeling']}  "
              f"dynamo {row['torch_dynamo']}")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    report = {
        "machine": f"{os.cpu_count()} CPUs, shared (load average {load:.1f} at the end)"
        if load is not None else "",
        "model": "the demo model (kor_cli/resources/demo_model)",
        "baseline": args.baseline,
        "repeats": args.repeats,
        "rows": rows,
    }  # fmt: skip
    write_results(out_path(args), report)


if __name__ == "__main__":
    main()
