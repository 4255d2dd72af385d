"""Recursive schemas: kor-cli's pushdown matcher side by side with XGrammar, llguidance and
outlines-core (`engine_adapters.py`, as `engines.py`), one run, same tokenizers.

Two closed schemas (`additionalProperties: false`: every engine reads the same language)
whose `$ref` recursion kor-cli compiles to rules (calls) with no depth bound:
`tree` (`{"v":1,"kids":[Node,...]}`) and `rpc` (JSON-RPC-like: `params` is any nesting of
arrays and objects of scalars). Instances nest past depth 3 (today's unrolling bound).

Per engine × schema × tokenizer, as in `engines.py`: compile (schema → ready matcher, caches
cleared; ours: `engine_adapters.Kor`, the matcher surface: compile_json_schema + compile_grammar,
which runs these on the pushdown matcher; disk cache off), time to first mask, per-token mask
time along the token sequences (the instances tokenized mid-text, then the stop token, plus
seeded random walks over our allowed tokens), each step filling a caller-owned int32 bitmask
[ceil(V/32)]: "cold" right after a compile, "warm" the same walk again; accept time.
Compile, first mask and the cold statistics are medians over --repeats compiles (9 since
session 20; 5 before, 3 before 2026-12-01), the engines interleaved (`engine_timing.py`: each
repeat runs every engine in turn, in a rotating order; before session 20 one engine's repeats
ran after another's, and a swing of this machine's speed could land on one engine alone).
`paired_cold_ratio`: per competitor, the median over repeats of our cold mean over theirs in
the same repeat. Each fill is also timed in process CPU time
(`mask_us_cold_cpu`, every engine alike): a step another process preempted counts only its
own work, so the CPU mean is robust to the shared machine's load where the wall mean is not.

Agreement: at every step of every sequence our mask is compared with each competitor's:
tokens only we allow, tokens only they allow (a few examples kept). Our masks' exactness is
tested against a brute-force reference simulation in tests/test_grammar_pushdown.py.

    python benchmarks/engines_recursive.py [--tokenizers qwen ...] [--engines kor llguidance ...]
        [--walks 4] [--repeats 9]

Writes `--out` (default benchmarks/out/engines_recursive.json, untracked) and prints a table.
The machine is shared (2 cores, five engineers): timings are noisy.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from importlib.metadata import version
from typing import Any

import numpy as np
from _common import add_out_argument, out_path
from engine_adapters import ENGINE_CLASSES, PACKAGES, add_engines_argument, chosen_engines
from engine_timing import measure_engines, paired_ratios, random_walk
from grammar_masks import continuation

from kor_cli.grammar.compile import serialize
from kor_cli.grammar.surface import GrammarMatcher, TokenizerInfo
from kor_cli.testing import (
    QWEN_LOGITS_WIDTH,
    TOKENIZER_NAMES,
    load_offline_tokenizer,
    recursive_schema,
)

TREE = recursive_schema("tree", closed=True)
RPC = recursive_schema("rpc", closed=True)
SCHEMAS = {"tree": TREE, "rpc": RPC}


def _tree(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"v": depth}
    for level in range(depth):
        node = {"v": level * 7, "kids": [node, {"v": -level}]}
    return node


INSTANCES = {
    "tree": [_tree(6), {"v": 1, "kids": [{"v": 2, "kids": []}, _tree(3), {"v": 40}]}],
    "rpc": [
        {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {
                "name": "search",
                "args": {"q": "pushdown", "filters": [[1, 2], {"a": [True, None]}]},
            },
            "id": 17,
        },
        {
            "jsonrpc": "2.0",
            "method": "sum",
            "params": [[[[[[3]]]]], {"x": {"y": {"z": {}}}}],
            "id": 2,
        },
    ],
}


def agreement(ours: list[np.ndarray], theirs: list[np.ndarray], info: TokenizerInfo) -> dict:
    """Steps compared, and tokens only we / only they allow (with a few examples)."""
    only_ours = only_theirs = steps = 0
    examples: list[list[str]] = []
    for a_seq, b_seq in zip(ours, theirs, strict=False):
        for a, b in zip(a_seq, b_seq, strict=False):
            steps += 1
            diff_a = np.flatnonzero(np.unpackbits((a & ~b).view(np.uint8), bitorder="little"))
            diff_b = np.flatnonzero(np.unpackbits((b & ~a).view(np.uint8), bitorder="little"))
            only_ours += len(diff_a)
            only_theirs += len(diff_b)
            for who, diff in (("ours", diff_a), ("theirs", diff_b)):
                if len(diff) and len(examples) < 8:
                    token = int(diff[0])
                    data = info.token_bytes[token] if token < len(info.token_bytes) else None
                    examples.append([who, str(steps), repr(data)])
    return {
        "steps": steps,
        "only_ours": only_ours,
        "only_theirs": only_theirs,
        "examples": examples,
    }


def bench(
    name: str,
    engines: dict[str, Any],
    info: TokenizerInfo,
    tokenizer: Any,
    walks: int,
    repeats: int,
) -> dict:
    schema = SCHEMAS[name]
    words = (info.vocab_size + 31) // 32
    sequences = [
        continuation(tokenizer, info, serialize(inst)) + [info.stop_ids[0]]
        for inst in INSTANCES[name]
    ]
    rng = np.random.default_rng(0)
    walker = engines["kor"].compile(schema)
    stops = list(info.stop_ids)
    sequences += [random_walk(GrammarMatcher(walker), stops, rng, 150) for _ in range(walks)]
    row: dict[str, Any] = {"schema": name, "steps": sum(map(len, sequences)), "engines": {}}
    masks: dict[str, list[np.ndarray]] = {}
    for ename, run in measure_engines(engines, schema, sequences, words, repeats).items():
        if run.error is not None:
            row["engines"][ename] = {"error": run.error}
            continue
        row["engines"][ename] = run.result(0)
        masks[ename] = run.kept
    row["paired_cold_ratio"] = paired_ratios(row["engines"])
    row["agreement"] = {e: agreement(masks["kor"], masks[e], info) for e in masks if e != "kor"}
    return row


def table(report: dict[str, Any]) -> str:
    head = "| tokenizer | schema | engine | compile ms | first mask ms | mask µs mean cold / warm |"
    lines = [head + " cold CPU | warm p99 µs | ours / theirs, paired |", "|---" * 9 + "|"]
    for tname, part in report["tokenizers"].items():
        for row in part["schemas"]:
            for ename, r in row["engines"].items():
                if "error" in r:
                    lines.append(
                        f"| {tname} | {row['schema']} | {ename} | {r['error'][:60]} | | | | | |"
                    )
                    continue
                lines.append(
                    f"| {tname} | {row['schema']} | {ename} | {r['compile_ms']}"
                    f" | {r['first_mask_ms']}"
                    f" | {r['mask_us_cold'].get('mean')} / {r['mask_us_warm'].get('mean')}"
                    f" | {r.get('mask_us_cold_cpu', {}).get('mean')}"
                    f" | {r['mask_us_warm'].get('p99')}"
                    f" | {row.get('paired_cold_ratio', {}).get(ename, '')} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizers", nargs="+", choices=TOKENIZER_NAMES, default=["qwen"])
    parser.add_argument("--schemas", nargs="+", choices=list(SCHEMAS), default=list(SCHEMAS))
    add_engines_argument(parser)
    parser.add_argument("--walks", type=int, default=4, help="random walks per schema")
    parser.add_argument("--repeats", type=int, default=9, help="compiles per engine × schema")
    add_out_argument(parser, "engines_recursive.json")
    args = parser.parse_args()
    args.out = out_path(args)
    names = chosen_engines(parser, args.engines)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}; shared by five engineers",
        "versions": {PACKAGES[e]: version(PACKAGES[e]) for e in names},
        "whitespace": "compact everywhere: ',' and ':' with no spaces",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "tokenizers": {},
    }
    for tname in args.tokenizers:
        tokenizer = load_offline_tokenizer(tname)
        width = QWEN_LOGITS_WIDTH if tname == "qwen" else None
        info = TokenizerInfo.from_hf(tokenizer, vocab_size=width)
        engines = {e: ENGINE_CLASSES[e](tokenizer, info) for e in names}
        rows = []
        for sname in args.schemas:
            t0 = time.perf_counter()
            rows.append(bench(sname, engines, info, tokenizer, args.walks, args.repeats))
            print(f"[{tname} {sname}: {time.perf_counter() - t0:.1f} s]", flush=True)
        report["tokenizers"][tname] = {"vocab_size": info.vocab_size, "schemas": rows}
        del engines
        gc.collect()
    report["total_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(table(report))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
