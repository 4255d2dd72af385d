"""Time to first mask with the disk cache: a first run and a second run of the same schemas,
each in a fresh process.

Per schema (the five of tests/data/grammar_schemas.json, wrapped as records like
`kor-cli extract` does): from the JSON Schema to the first token bitmask filled by a new
matcher, i.e. `record_grammar` (compile, or read from the disk cache) + `compile_grammar`
(token index; cached masks read) + `GrammarMatcher(...).fill_next_token_bitmask`. The
tokenizer and its `TokenizerInfo` are loaded before the clock starts (once per model load
in the CLI; reported apart). Run 1 starts from an empty cache folder (`--cache-dir`, default
a fresh temporary one) and fills it; then `--repeat` second runs, each a new process,
read it (median and max per schema: the machine is shared, single runs are noisy).

    python benchmarks/grammar_cache.py [--tokenizer qwen] [--repeat 5]

Writes `--out` (default benchmarks/out/grammar_cache_<tokenizer>.json, untracked) and prints
a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_out_argument, out_path, write_results

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grammar_schemas.json"


def child(tokenizer_name: str) -> dict[str, Any]:
    """One run (in its own process): per schema, milliseconds to the first mask."""
    started = time.perf_counter()
    from kor_cli.constrain import record_grammar
    from kor_cli.grammar.surface import (
        GrammarMatcher,
        TokenizerInfo,
        allocate_token_bitmask,
        compile_grammar,
    )
    from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer

    import_s = time.perf_counter() - started
    tokenizer = load_offline_tokenizer(tokenizer_name)
    width = QWEN_LOGITS_WIDTH if tokenizer_name == "qwen" else None
    started = time.perf_counter()
    info = TokenizerInfo.from_hf(tokenizer, vocab_size=width)
    info_s = time.perf_counter() - started
    schemas = {k: v["schema"] for k, v in json.loads(DATA.read_text()).items() if k[0] != "_"}
    rows = []
    for name, schema in schemas.items():
        cpu = time.process_time()
        started = time.perf_counter()
        grammar = record_grammar(schema)
        grammar_s = time.perf_counter() - started
        compiled = compile_grammar(grammar, info)
        compiled_s = time.perf_counter() - started
        bitmask = allocate_token_bitmask(1, compiled.vocab_size)
        GrammarMatcher(compiled).fill_next_token_bitmask(bitmask)
        first_s = time.perf_counter() - started
        cpu = time.process_time() - cpu
        rows.append(
            {
                "schema": name,
                "engine": type(compiled.engine).__name__,  # TokenIndex (DFA) | PushdownGrammar
                "dfa_states": grammar.dfa.num_states,
                "grammar_ms": round(grammar_s * 1e3, 3),
                "compile_grammar_ms": round((compiled_s - grammar_s) * 1e3, 3),
                "first_mask_ms": round((first_s - compiled_s) * 1e3, 3),
                "time_to_first_mask_ms": round(first_s * 1e3, 3),
                "cpu_ms": round(cpu * 1e3, 3),
                "allowed_first": int(np.unpackbits(bitmask.view(np.uint8)).sum()),
            }
        )
    return {"import_s": round(import_s, 3), "tokenizer_info_s": round(info_s, 3), "schemas": rows}


def run_child(tokenizer: str, cache_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "KOR_CLI_CACHE": str(cache_dir), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, __file__, "--child", "--tokenizer", tokenizer]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", choices=["qwen", "mistral-sp", "tekken"], default="qwen")
    parser.add_argument("--cache-dir", type=Path, default=None, help="(default: a new temp dir)")
    parser.add_argument("--repeat", type=int, default=5, help="second runs (new processes)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_out_argument(parser, "grammar_cache_{tokenizer}.json")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.tokenizer)))
        return
    with tempfile.TemporaryDirectory(prefix="kor-cli-cache-bench-") as scratch:
        cache_dir = args.cache_dir or Path(scratch)
        first = run_child(args.tokenizer, cache_dir)
        seconds = [run_child(args.tokenizer, cache_dir) for _ in range(args.repeat)]
    summary = []
    for at, one in enumerate(first["schemas"]):
        times = [run["schemas"][at]["time_to_first_mask_ms"] for run in seconds]
        cpu = [run["schemas"][at]["cpu_ms"] for run in seconds]
        assert all(run["schemas"][at]["allowed_first"] == one["allowed_first"] for run in seconds)
        summary.append(
            {
                "schema": one["schema"],
                "engine": one["engine"],
                "dfa_states": one["dfa_states"],
                "first_run_ms": one["time_to_first_mask_ms"],
                "second_run_median_ms": round(statistics.median(times), 3),
                "second_run_max_ms": round(max(times), 3),
                "second_run_cpu_median_ms": round(statistics.median(cpu), 3),
            }
        )
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs shared with other jobs",
        "python": platform.python_version(),
        "tokenizer": args.tokenizer,
        "what": "ms from a JSON Schema to the first filled bitmask (wall clock; cpu: this"
        " process's CPU time, without the time other jobs held the cores); second runs are"
        " new processes reading the disk cache the first run wrote",
        "summary": summary,
        "first_run": first,
        "second_runs": seconds,
    }
    write_results(out_path(args), report)
    print(
        f"{'schema':<10} {'states':>6} {'run 1 ms':>10} {'run 2 median':>13} {'max':>8} {'cpu':>6}"
    )
    for row in summary:
        print(
            f"{row['schema']:<10} {row['dfa_states']:>6} {row['first_run_ms']:>10.2f}"
            f" {row['second_run_median_ms']:>13.2f} {row['second_run_max_ms']:>8.2f}"
            f" {row['second_run_cpu_median_ms']:>6.2f}"
        )


if __name__ == "__main__":
    main()
