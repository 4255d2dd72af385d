"""Token-mask cost of kor-cli's engine (TokenIndex + GrammarMatcher) on five JSON schemas.

The five schemas of docs/design.md §7 (tests/data/grammar_schemas.json): flat person, Kor's
review list, weather tool call, nested person (date/email/pattern/nullable/array bounds)
and OpenAI's recursive UI schema. Per tokenizer (one-off): TokenizerInfo, byte trie and
string-body tables. Per schema: DFA compile, time to the first mask (a new TokenIndex plus
the start state's mask), the build time of every state's mask (precompute_all), and the
cost per token of a decode step (mask tensor + accept) along the tokenization of sample
instances and of seeded random walks over allowed tokens: "cold" on a fresh index (first
visits build masks on the fly), "warm" with states cached.

    python benchmarks/grammar_masks.py [--tokenizer qwen] [--walks 20]

Writes `--out` (default benchmarks/out/grammar_masks_<tokenizer>.json, untracked) and prints
a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_out_argument, out_path, write_results
from engine_timing import random_walk

from kor_cli.grammar.compile import compile_json_schema, serialize
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.matcher import GrammarMatcher
from kor_cli.grammar.token_tables import shared_nbytes, token_trie
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.testing import QWEN_LOGITS_WIDTH, TOKENIZER_NAMES, load_offline_tokenizer

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "grammar_schemas.json"
FIVE = {k: v for k, v in json.loads(DATA.read_text()).items() if not k.startswith("_")}
SCHEMAS: dict[str, Any] = {name: entry["schema"] for name, entry in FIVE.items()}
INSTANCES: dict[str, list[Any]] = {name: entry["instances"] for name, entry in FIVE.items()}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def micro(seconds: float) -> float:
    return round(seconds * 1e6, 2)


def continuation(tokenizer: Any, info: TokenizerInfo, text: str) -> list[int]:
    """Tokens spelling exactly `text` mid-output (SentencePiece adds a space up front:
    tokenize after a newline and drop that prefix's tokens)."""
    ids = tokenizer("\n" + text, add_special_tokens=False).input_ids
    for cut in range(len(ids)):
        if b"".join(info.token_bytes[i] or b"" for i in ids[:cut]) in (b"\n", b" \n"):
            return ids[cut:]
    raise ValueError(f"cannot split the newline off the tokens of {text!r}")


def index_walk(index: TokenIndex, rng: np.random.Generator, cap: int = 300) -> list[int]:
    """A seeded random walk over the tokens a DFA's index allows (engine_timing.random_walk)."""
    matcher = GrammarMatcher(index)
    stops = list(index.info.stop_ids)
    return random_walk(matcher, stops, rng, cap, done=lambda: matcher.is_finished)


def step_costs(index: TokenIndex, sequences: list[list[int]]) -> list[float]:
    """Seconds per decode step (mask tensor, then accept) along each token sequence."""
    costs = []
    for ids in sequences:
        matcher = GrammarMatcher(index)
        for token in ids:
            start = time.perf_counter()
            matcher.mask_tensor("cpu")
            accepted = matcher.accept_token(token)
            costs.append(time.perf_counter() - start)
            assert accepted, token
    return costs


def bench_schema(name: str, info: TokenizerInfo, tokenizer: Any, walks: int) -> dict[str, Any]:
    start = time.perf_counter()
    dfa = compile_json_schema(SCHEMAS[name]).dfa
    compile_s = time.perf_counter() - start

    start = time.perf_counter()
    first = TokenIndex(dfa, info)
    first.allowed(first.start)
    first_mask_s = time.perf_counter() - start

    rng = np.random.default_rng(0)
    sequences = [
        continuation(tokenizer, info, serialize(inst)) + [info.stop_ids[0]]
        for inst in INSTANCES[name]
    ]
    sequences += [index_walk(first, rng) for _ in range(walks)]

    fresh = TokenIndex(dfa, info)
    cold = step_costs(fresh, sequences)
    warm = step_costs(fresh, sequences)  # every mask and tensor on these paths is cached

    index = TokenIndex(dfa, info)
    builds = []
    for state in index.reachable_states():
        start = time.perf_counter()
        index.packed(state)
        builds.append(time.perf_counter() - start)
    return {
        "schema": name,
        "dfa_states": dfa.num_states,
        "compile_ms": round(compile_s * 1e3, 2),
        "first_mask_ms": round(first_mask_s * 1e3, 3),
        "state_build_ms": {
            "median": round(statistics.median(builds) * 1e3, 3),
            "p90": round(percentile(builds, 90) * 1e3, 3),
            "max": round(max(builds) * 1e3, 3),
            "all_states_total": round(sum(builds) * 1e3, 1),
        },
        "steps": len(cold),
        "step_us_cold": {"median": micro(percentile(cold, 50)), "p99": micro(percentile(cold, 99))},
        "step_us_warm": {"median": micro(percentile(warm, 50)), "p99": micro(percentile(warm, 99))},
        "index_mb_all_states": round(index.nbytes / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", choices=TOKENIZER_NAMES, default="qwen")
    parser.add_argument("--walks", type=int, default=20, help="random walks per schema")
    add_out_argument(parser, "grammar_masks_{tokenizer}.json")
    args = parser.parse_args()

    tokenizer = load_offline_tokenizer(args.tokenizer)
    width = QWEN_LOGITS_WIDTH if args.tokenizer == "qwen" else None
    start = time.perf_counter()
    info = TokenizerInfo.from_hf(tokenizer, vocab_size=width)
    info_s = time.perf_counter() - start
    start = time.perf_counter()
    trie = token_trie(info)  # and the string-body tables
    tables_s = time.perf_counter() - start

    rows = [bench_schema(name, info, tokenizer, args.walks) for name in SCHEMAS]
    report = {
        "tokenizer": args.tokenizer,
        "vocab_size": info.vocab_size,
        "tokenizer_info_ms": round(info_s * 1e3, 1),
        "shared_tables_ms": round(tables_s * 1e3, 1),
        "trie_nodes": trie.num_nodes,
        "trie_mb": round(trie.nbytes / 1e6, 2),
        "shared_tables_mb": round(shared_nbytes(info) / 1e6, 2),
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}",
        "schemas": rows,
    }
    write_results(out_path(args), report)
    print(f"{args.tokenizer}: TokenizerInfo {info_s * 1e3:.0f} ms, trie + string-body tables "
          f"{tables_s * 1e3:.0f} ms ({trie.num_nodes} trie nodes, {trie.nbytes / 1e6:.1f} MB; "
          f"{report['shared_tables_mb']} MB in all)")  # fmt: skip
    header = "schema    states  first-mask  build med/p90/max (ms)   step cold med/p99 (us)"
    print(header + "   step warm med/p99 (us)   index MB")
    for r in rows:
        b, c, w = r["state_build_ms"], r["step_us_cold"], r["step_us_warm"]
        print(
            f"{r['schema']:<9} {r['dfa_states']:>6} {r['first_mask_ms']:>8.2f} ms"
            f"  {b['median']:>6.3f}/{b['p90']:.3f}/{b['max']:.3f}"
            f"         {c['median']:>7.2f}/{c['p99']:<8.1f}"
            f"         {w['median']:>6.2f}/{w['p99']:<7.1f}   {r['index_mb_all_states']:>6.2f}"
        )


if __name__ == "__main__":
    main()
