"""kor-cli's grammar engine side by side with XGrammar, llguidance and outlines-core.

One run, same inputs: the five schemas of docs/design.md §7 (tests/data/grammar_schemas.json,
shared with grammar_masks.py) × the three offline tokenizers (mistral-sp, tekken, qwen with
151,936 logits). Every engine is set to compact JSON (`,` and `:`, no whitespace, members in
schema order), so all four should accept the same texts and masks can be compared bit by
bit. OpenAI's recursive UI schema keeps its recursion in kor-cli (the pushdown matcher),
XGrammar and llguidance; outlines-core unrolls it (a DFA). Our masks are checked against a
brute force over the DFA with the recursion unrolled ORACLE_DEPTH deep, deeper than the
walked sequences nest.

Per tokenizer, once: each engine's tokenizer setup (ours: TokenizerInfo, byte trie,
string-body tables and the sorted tokens' padded matrix; XGrammar: TokenizerInfo +
GrammarCompiler; llguidance: LLTokenizer; outlines-core: a Vocabulary built from our byte
table, since it cannot read a local HF tokenizer).
Per engine × schema × tokenizer:

- compile: schema → ready matcher (ours: compile_json_schema + compile_grammar, the matcher
  surface: the DFA engine for person and weather, the pushdown matcher for the schemas with
  calls; grammar cache cleared, disk cache off; XGrammar: compile_json_schema with its cache
  off; llguidance: grammar_from_json_schema + LLMatcher; outlines-core:
  build_regex_from_schema + Index); time to first mask
  adds a matcher and the start state's mask.
- per-token mask time: along the token sequences (the instances serialised compactly and
  tokenized mid-text, then the stop token; plus seeded random walks over our allowed
  tokens), each step fills a caller-owned int32 bitmask [ceil(V/32)] (ours: copy of the
  packed mask) and is timed alone, then the token is accepted (timed apart). "cold": the
  walk right after a compile (our lazily built states are first visits in it); "warm": the
  same walk again. Compile, first mask and the cold statistics are medians over --repeats
  fresh compiles (a compile over 2 s runs once and its grammar is walked again), the
  engines interleaved (each repeat runs every engine in turn, the order rotating; since
  session 20), and `paired_cold_ratio` is per competitor the median over repeats of our
  cold mean over theirs in the same repeat. Each fill
  is timed on the wall clock and in process CPU time (`mask_us_cold_cpu`, every engine
  alike): on a shared machine a step another process preempted (a 4 ms time slice) lands
  in the wall mean of whichever engine was running; the CPU mean counts only the work.
- memory: ours after the walks (DFA engine: TokenIndex.nbytes, also with all states built;
  pushdown: frame, stack and configuration masks);
  XGrammar's CompiledGrammar.memory_size_bytes.
- correctness: at every step our mask is compared with a brute-force walk of every token
  over the DFA (a padded token × byte array, no trie, dead states pruned by its own
  fixpoint; per distinct state); on two states also a byte-by-byte Python walk.
  Competitors' masks are compared with ours at every step: tokens only they allow, tokens
  only we allow, grouped by kind (text, forced text, special, stop) and telling byte.
  Spot check of who is right: a token only we allow is completed by the shortest path to
  an accepting DFA state, a token only they allow by a greedy walk of their own matcher
  (closing bytes first); the text is validated with jsonschema (formats checked). Valid:
  the engine that forbade the token was wrong (or stricter by design); invalid or stuck:
  the engine that allowed it had no valid completion we could find.

    python benchmarks/engines.py [--tokenizers qwen ...] [--walks 6] [--repeats 5]

The engine adapters are `engine_adapters.py`, the timing protocol `engine_timing.py` (shared with
`engines_recursive.py`: a tree and JSON-RPC-like nested params on our pushdown matcher, and
`any_value.py`); the brute-force check is `engines_oracle.py`, tables and chart
`engines_report.py`.

Writes `--out` (default benchmarks/out/engines.json, untracked) and a .png next to it, prints
markdown tables. Without the `bench` extra (pip install -e '.[bench]') it runs kor-cli alone,
with a note saying which engines are missing.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import time
from importlib.metadata import version
from typing import Any

import numpy as np
from _common import add_out_argument, out_path
from engine_adapters import (
    ENGINE_CLASSES,
    PACKAGES,
    add_engines_argument,
    chosen_engines,
    kor_memory,
    vocab_agreement,
)
from engine_timing import measure_engines, paired_ratios
from engines_oracle import BruteForce, check
from engines_report import goals, groups, markdown, plot
from grammar_masks import INSTANCES, SCHEMAS, continuation, index_walk

from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.surface import TokenizerInfo
from kor_cli.testing import QWEN_LOGITS_WIDTH, TOKENIZER_NAMES, load_offline_tokenizer

ORACLE_DEPTH = 6


def bench_schema(
    name: str,
    engines: dict[str, Any],
    info: TokenizerInfo,
    tokenizer: Any,
    brute: BruteForce,
    walks: int,
    repeats: int,
) -> dict[str, Any]:
    schema = SCHEMAS[name]
    words = (info.vocab_size + 31) // 32
    # the brute force's DFA: recursion unrolled deeper than any walked sequence nests (the
    # default view stops at max_recursion_depth 3, where the pushdown matcher goes on)
    dfa = compile_json_schema(schema, GrammarOptions(max_recursion_depth=ORACLE_DEPTH)).dfa
    oracle = brute.for_dfa(dfa)
    rng = np.random.default_rng(0)
    sequences = [
        continuation(tokenizer, info, serialize(inst)) + [info.stop_ids[0]]
        for inst in INSTANCES[name]
    ]
    walk_index = TokenIndex(dfa, info)
    n_instances = len(sequences)
    sequences += [index_walk(walk_index, rng) for _ in range(walks)]
    del walk_index

    row: dict[str, Any] = {
        "schema": name,
        "dfa_states": dfa.num_states,
        "steps": sum(map(len, sequences)),
        "instance_steps": sum(map(len, sequences[:n_instances])),
        "engines": {},
    }
    masks: dict[str, list[np.ndarray]] = {}
    compiled_by: dict[str, Any] = {}
    runs = measure_engines(engines, schema, sequences, words, repeats, instances=n_instances)
    for ename, run in runs.items():
        if run.error is not None:
            row["engines"][ename] = {"error": run.error}
            continue
        result = run.result(n_instances)
        if ename == "kor":
            result |= kor_memory(run.compiled)
        elif ename == "xgrammar":
            result["compiled_mb"] = round(run.compiled.memory_size_bytes / 1e6, 3)
        compiled_by[ename] = run.compiled
        masks[ename] = run.kept
        row["engines"][ename] = result
    row["paired_cold_ratio"] = paired_ratios(row["engines"])

    row["correctness"] = check(name, schema, sequences, masks, oracle, info, engines, compiled_by)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokenizers", nargs="+", choices=TOKENIZER_NAMES, default=list(TOKENIZER_NAMES)
    )
    parser.add_argument("--schemas", nargs="+", choices=list(SCHEMAS), default=list(SCHEMAS))
    add_engines_argument(parser)
    parser.add_argument("--walks", type=int, default=6, help="random walks per schema")
    parser.add_argument("--repeats", type=int, default=5, help="compiles per engine × schema")
    add_out_argument(parser, "engines.json")
    args = parser.parse_args()
    args.out = out_path(args)
    args.engines = chosen_engines(parser, args.engines)

    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}",
        "versions": {PACKAGES[e]: version(PACKAGES[e]) for e in args.engines},
        "whitespace": "compact everywhere: ',' and ':' with no spaces",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "tokenizers": {},
    }
    for tname in args.tokenizers:
        tokenizer = load_offline_tokenizer(tname)
        width = QWEN_LOGITS_WIDTH if tname == "qwen" else None
        setup: dict[str, float] = {}
        t0 = time.perf_counter()
        info = TokenizerInfo.from_hf(tokenizer, vocab_size=width)
        setup["kor_tokenizer_info"] = time.perf_counter() - t0
        engines = {}
        for ename in args.engines:
            t0 = time.perf_counter()
            engines[ename] = ENGINE_CLASSES[ename](tokenizer, info)
            setup[ename] = time.perf_counter() - t0
        setup["kor"] += setup.pop("kor_tokenizer_info")  # ours: TokenizerInfo + trie
        agreement = vocab_agreement(engines, info)
        brute = BruteForce(info)
        rows = []
        for sname in args.schemas:
            t0 = time.perf_counter()
            rows.append(
                bench_schema(sname, engines, info, tokenizer, brute, args.walks, args.repeats)
            )
            print(f"[{tname} {sname}: {time.perf_counter() - t0:.1f} s]", flush=True)
        report["tokenizers"][tname] = {
            "vocab_size": info.vocab_size,
            "tokenizer_setup_ms": {k: round(v * 1e3, 1) for k, v in setup.items()},
            "vocab_agreement": agreement,
            "schemas": rows,
        }
        del engines, brute
        gc.collect()
    report["goals"] = goals(report)
    report["total_s"] = round(time.perf_counter() - started, 1)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    for tname in args.tokenizers:
        setup_ms = report["tokenizers"][tname]["tokenizer_setup_ms"]
        print(
            f"\n### {tname} (tokenizer setup ms: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in setup_ms.items())
            + ")\n"
        )
        print(markdown(report, tname))
        for row in report["tokenizers"][tname]["schemas"]:
            c = row["correctness"]
            print(
                f"  {row['schema']}: ours wrong at {c['wrong_steps']}/{c['steps_checked']} "
                "steps (brute force)"
            )
            for e, p in c["vs_ours"].items():
                print(
                    f"    vs {e}: {p['steps_differing']}/{p['steps_compared']} steps differ;"
                    f" only {e} allows: {groups(p['labels_only_them'])};"
                    f" only kor allows: {groups(p['labels_only_ours'])}"
                )
    print("\nGoals:")
    for goal, result in report["goals"].items():
        print(f"  {goal}: {'met' if result['met'] else 'NOT met'}; {result['detail']}")
    plot_tok = "qwen" if "qwen" in args.tokenizers else args.tokenizers[0]
    if importlib.util.find_spec("matplotlib") is None:
        print(f"\nnote: matplotlib not installed, no chart; wrote {args.out}")
        return
    plot(report, plot_tok, args.out.with_suffix(".png"))
    print(f"\n{report['total_s']} s in all; wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
