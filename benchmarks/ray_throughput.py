"""Records per second of `kor-cli batch --ray` at 1, 2, ... workers vs the single-process run.

Both paths run the loop of `kor-cli batch` after the model is loaded: batches of records
read from a JSONL file go through the engine's `rows_of` (`batch.local_engine` here, or
`distributed.ray_engine`'s Ray actors) and every batch's rows are appended and fsync'd by
`OutputSink`. Like for like: every worker and the single-process baseline run torch on
`--threads` threads (per worker count, a local cluster of workers × threads CPUs is
started here, no dashboard; its start-up and the workers' model loads are reported apart).
One warm-up batch first; then single-process and Ray runs alternate `--repeats` times (the
median counts), so load from elsewhere hits both; then one single-process run at torch's
default threads. The overhead is Ray's time over the single-process time of the runs next to it.
Without `--model` it builds the tiny random-weight test model (mistral-sp tokenizer), so
it runs offline anywhere.

    python benchmarks/ray_throughput.py --workers 1,2 [--records 96] [--batch-size 8]
        [--max-tokens 16] [--threads 1] [--out benchmarks/results/ray_throughput.json]

Needs the ray extra (pip install -e '.[ray]').
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import add_out_argument, out_path

if TYPE_CHECKING:
    from kor_cli.batch import RowsOf
    from kor_cli.records import Record

ROOT = Path(__file__).resolve().parent.parent
PEOPLE = [
    ("Ann Lee", "Leeds"),
    ("Bob Stone", "Paris"),
    ("Cara Diaz", "Lagos"),
    ("Dev Patel", "Pune"),
]


def write_inputs(path: Path, count: int) -> Path:
    """A JSONL file of `count` short person texts."""
    with path.open("w") as handle:
        for i in range(count):
            name, city = PEOPLE[i % len(PEOPLE)]
            text = f"{name}, {21 + i % 40}, moved to {city} last spring."
            handle.write(json.dumps({"id": i, "text": text}) + "\n")
    return path


def batches_of(records: list[Record], size: int) -> Iterator[list[Record]]:
    return (records[start : start + size] for start in range(0, len(records), size))


def timed_run(rows_of: RowsOf, records: list[Record], size: int, out: Path) -> float:
    """Seconds for all records through `rows_of`, each batch appended and fsync'd."""
    from kor_cli.sink import OutputSink

    with OutputSink(out, overwrite=True) as sink:
        sink.open()
        started = time.perf_counter()
        for rows in rows_of(batches_of(records, size), threading.Event()):
            sink.write([row.to_dict() for row in rows])
        return time.perf_counter() - started


def with_threads(threads: int, run: Callable[[], float]) -> float:
    """`run` with torch on `threads` threads in this process."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return run()
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder or hub id (default: the tiny test model)")
    parser.add_argument("--schema", default=str(ROOT / "schemas" / "person.yaml"))
    parser.add_argument("--mode", default="prompt", choices=("prompt", "constrained"))
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--records", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5, help="runs per path; the median counts")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads per worker and for the baseline"
    )
    add_out_argument(parser, "ray_throughput.json")
    args = parser.parse_args()

    import ray
    import torch

    from kor_cli.batch import BatchOptions, local_engine
    from kor_cli.decode import SamplingOptions
    from kor_cli.distributed import RayOptions, ray_engine
    from kor_cli.extract import ExtractOptions
    from kor_cli.records import iter_records, resolve_sources
    from kor_cli.schema import load_schema
    from kor_cli.testing import build_tiny_model, load_offline_tokenizer

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as `--ray local` (Ray's default: 15)
    default_threads = torch.get_num_threads()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kor-ray-bench-") as tmp:
        folder = Path(tmp)
        model = args.model or str(
            build_tiny_model(load_offline_tokenizer("mistral-sp"), folder / "tiny")
        )
        sources = resolve_sources([str(write_inputs(folder / "in.jsonl", args.records))])
        records = list(iter_records(sources))
        schema = load_schema(args.schema)
        extract = ExtractOptions(
            mode=args.mode, sampling=SamplingOptions(max_new_tokens=args.max_tokens), chat=False
        )
        batch = BatchOptions(inputs=(), output="", batch_size=args.batch_size)
        out = folder / "out.jsonl"

        def measure(rows_of: RowsOf) -> Callable[[], float]:
            timed_run(rows_of, records[: args.batch_size], args.batch_size, out)  # warm-up
            return lambda: timed_run(rows_of, records, args.batch_size, out)

        with local_engine(schema, model, extract, batch, "auto", "auto") as local_rows:
            single = measure(local_rows)
            for workers in [int(w) for w in args.workers.split(",")]:
                started = time.perf_counter()
                ray.init(  # each worker gets --threads CPUs, so torch runs --threads threads
                    address="local",
                    num_cpus=workers * args.threads,
                    include_dashboard=False,
                    object_store_memory=256 * 1024**2,
                    log_to_driver=False,
                )
                cluster_seconds = time.perf_counter() - started
                options = RayOptions("auto", workers=workers)
                with ray_engine(schema, model, extract, batch, options, "auto") as ray_rows:
                    ready_seconds = time.perf_counter() - started - cluster_seconds
                    distributed = measure(ray_rows)
                    runs: dict[str, list[float]] = {"single": [], "ray": []}
                    for _ in range(args.repeats):
                        runs["single"].append(with_threads(args.threads, single))
                        runs["ray"].append(distributed())
                    runs["single_default"] = [with_threads(default_threads, single)]  # once
                ray.shutdown()
                median = {name: statistics.median(values) for name, values in runs.items()}
                one, many = median["single"], median["ray"]
                row = {
                    "workers": workers,
                    "ray_records_per_second": round(args.records / many, 2),
                    "single_records_per_second": round(args.records / one, 2),
                    "single_default_threads_records_per_second": round(
                        args.records / median["single_default"], 2
                    ),
                    "ray_overhead_percent": round(100 * (many - one) / one, 1),
                    "speedup_vs_single": round(one / many, 2),
                    "ray_cluster_start_seconds": round(cluster_seconds, 1),
                    "workers_ready_seconds": round(ready_seconds, 1),
                    "seconds": {
                        name: [round(s, 3) for s in values] for name, values in runs.items()
                    },
                }
                rows.append(row)
                print(
                    f"{workers} worker(s): ray {row['ray_records_per_second']:6.2f} rec/s, "
                    f"single {row['single_records_per_second']:6.2f} rec/s, overhead "
                    f"{row['ray_overhead_percent']:+.1f}%, speed-up {row['speedup_vs_single']}x "
                    f"(single at {default_threads} threads: "
                    f"{row['single_default_threads_records_per_second']:.2f} rec/s)"
                )

    report = {
        "model": args.model or "tiny random-weight Llama (hidden 64, 2 layers, mistral-sp 32k)",
        "schema": Path(args.schema).name,
        "mode": args.mode,
        "records": args.records,
        "batch_size": args.batch_size,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "ray": ray.__version__,
        "threads_per_worker": args.threads,
        "torch_default_threads": default_threads,
        "ray_worker_niceness": os.environ["RAY_worker_niceness"],
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs shared with other jobs",
        "results": rows,
    }
    results = out_path(args)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {results}")


if __name__ == "__main__":
    main()
