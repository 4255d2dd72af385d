"""Records per second of `kor-cli batch` at batch sizes 1, 4 and 8.

`batch`: the batch loop itself (plan → extract → merge → append + fsync, the same
`process_batch` and `OutputSink` that `kor-cli batch` uses) on synthetic person records,
with the model loaded once and one warm-up batch first. `decoder`: the same prompts
through `Decoder.generate_batch` alone, i.e. what batched generation gives when the
extraction seam (`kor_cli.batch.extract_batch`) uses it. Without `--model` it builds the
tiny random-weight test model (mistral-sp tokenizer), so it runs offline anywhere.

    python benchmarks/batch_throughput.py [--model DIR] [--records 32] [--max-tokens 32]

Writes benchmarks/results/batch_throughput.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from kor_cli.batch import BatchOptions, Planner, model_context, process_batch
from kor_cli.decode import SamplingOptions
from kor_cli.extract import ExtractOptions, Extractor
from kor_cli.models import load_model
from kor_cli.records import Record
from kor_cli.schema import load_schema
from kor_cli.sink import OutputSink
from kor_cli.testing import build_tiny_model, load_offline_tokenizer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "batch_throughput.json"
NAMES = ["Ann Lee", "Bob Stone", "Cara Diaz", "Dev Patel", "Eve Moreau", "Femi Ade"]
CITIES = ["Leeds", "Paris", "Lagos", "Pune", "Quito", "Oslo"]


def synthetic_records(count: int) -> list[Record]:
    return [
        Record(
            id=i,
            source="<benchmark>",
            line=i + 1,
            text=f"{NAMES[i % 6]} is {20 + i % 50} years old and lives in {CITIES[i % 6]}.",
        )
        for i in range(count)
    ]


def measure(
    extractor: Extractor, planner: Planner, records: list[Record], size: int, folder: Path
) -> float:
    """Seconds to run all records through the batch loop at batch size `size`."""
    options = BatchOptions(inputs=(), output=str(folder / "out.jsonl"), batch_size=size)
    with OutputSink(options.output, overwrite=True) as sink:
        sink.open()
        started = time.perf_counter()
        for start in range(0, len(records), size):
            sink.write(process_batch(records[start : start + size], extractor, planner, options))
        return time.perf_counter() - started


def measure_decoder(extractor: Extractor, records: list[Record], size: int) -> float:
    """Seconds to generate for all records' prompts with batched decoding alone."""
    prompts = [extractor.prompt_ids(str(record.text)) for record in records]
    started = time.perf_counter()
    for start in range(0, len(prompts), size):
        extractor.decoder.generate_batch(
            prompts[start : start + size], extractor.options.sampling, stop_strings=("</json>",)
        )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder or hub id (default: the tiny test model)")
    parser.add_argument("--schema", default=str(ROOT / "schemas" / "person.yaml"))
    parser.add_argument("--records", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5, help="runs per size; the median counts")
    parser.add_argument("--sizes", default="1,4,8")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kor-bench-") as tmp:
        folder = Path(tmp)
        model_name = args.model or str(
            build_tiny_model(load_offline_tokenizer("mistral-sp"), folder / "tiny")
        )
        loaded = load_model(model_name)
        options = ExtractOptions(
            mode="prompt", sampling=SamplingOptions(max_new_tokens=args.max_tokens), chat=False
        )
        extractor = Extractor(load_schema(args.schema), loaded, options)
        planner = Planner(extractor, model_context(loaded), None)
        records = synthetic_records(args.records)
        measure(extractor, planner, records[:8], 8, folder)  # warm-up
        sizes = [int(s) for s in args.sizes.split(",")]
        runs: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.repeats):  # interleaved, so load from elsewhere hits every size
            for size in sizes:
                batch_seconds = measure(extractor, planner, records, size, folder)
                runs.setdefault(("batch", size), []).append(batch_seconds)
                runs.setdefault(("decoder", size), []).append(
                    measure_decoder(extractor, records, size)
                )
        rows: list[dict[str, Any]] = []
        for size in sizes:
            row: dict[str, Any] = {"batch_size": size}
            for kind in ("batch", "decoder"):
                row[f"{kind}_records_per_second"] = round(
                    len(records) / statistics.median(runs[kind, size]), 2
                )
            rows.append(row)
            print(
                f"batch size {size:>2}: batch {row['batch_records_per_second']:7.2f} records/s,"
                f" decoder alone {row['decoder_records_per_second']:7.2f} records/s"
            )

    report = {
        "model": args.model or "tiny random-weight Llama (hidden 64, 2 layers, mistral-sp 32k)",
        "schema": Path(args.schema).name,
        "mode": "prompt",
        "records": args.records,
        "max_tokens": args.max_tokens,
        "repeats": args.repeats,
        "device": str(loaded.device),
        "batched_extraction": hasattr(Extractor, "extract_batch"),
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
        "results": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
