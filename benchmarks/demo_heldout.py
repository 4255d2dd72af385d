"""The embedded demo model on its held-out sets: `kor-cli compare` (prompt-only vs
constrained) over `samples/heldout_*.jsonl` with each set's schema, and over the hand-written
`samples/people.jsonl`; greedy, on the CPU.

    python benchmarks/demo_heldout.py [--out PATH] [--limit N]

Writes `--out` (default benchmarks/out/demo_heldout.json, untracked; the README's demo-model
table quotes benchmarks/results/demo_heldout.json) and prints one line per set and mode.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

from _common import add_out_argument, out_path, write_results

from kor_cli.cli_options import build_extract_options
from kor_cli.compare import CompareOptions, run_compare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from demo_data import SCHEMAS  # noqa: E402  (held-out set → its schema)

# set → (records, schema): the four held-out sets, and 12 hand-written people unlike them
SETS = {name: (f"samples/heldout_{name}.jsonl", schema) for name, schema in SCHEMAS.items()}
SETS["people"] = ("samples/people.jsonl", "schemas/person.yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    parser.add_argument("--limit", type=int, help="only the first N records of each set")
    add_out_argument(parser, "demo_heldout.json")
    args = parser.parse_args()
    os.chdir(ROOT)
    base = build_extract_options(
        mode="constrained", max_tokens=256, temperature=0.0, top_k=0, top_p=1.0, seed=None,
        chat=None, template=None, input_formatter="none", jump=True, allow_refusal=False,
        lenient=False,
    )  # fmt: skip
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared)",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "sets": {},
    }
    for name in args.sets:
        data, schema = SETS[name]
        options = CompareOptions(inputs=(data,), limit=args.limit, batch_size=8)
        result = run_compare(schema, None, base, options, device="cpu")
        report["sets"][name] = result
        for mode, stats in result["modes"].items():
            print(
                f"{name:<8} {mode:<12} parse {stats['parse_rate']:.1%} valid "
                f"{stats['valid_rate']:.1%} fields {stats['field_accuracy']:.1%} exact "
                f"{stats['exact_match']:.0%} passes/record "
                f"{stats['forward_passes_per_record']:.1f}",
                flush=True,
            )
    write_results(out_path(args), report, indent=1)


if __name__ == "__main__":
    main()
