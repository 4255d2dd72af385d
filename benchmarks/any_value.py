"""The "any value" (`{}`, `true`, free items, free members) forms: a recursive rule vs a DFA.

Outside products kor-cli compiles an unconstrained value as a call to one shared recursive
rule (any depth, the pushdown matcher); `GrammarOptions(bounded_any=True)` keeps a grammar
whose only calls would be those one DFA instead, `{}` unrolled `max_any_depth` deep (the
former engine). This script measures what the choice costs, side by side in one run with
llguidance, on the Qwen tokenizer:

- the schemas: a few synthetic ones with free values, and the SchemaStore schemas (every
  `--every`-th, as `schemastore.py`'s sample, or all) whose grammar is call-free in the
  bounded form but not in the rule form (the ones the choice moves to the pushdown path);
- the JSON-Schema-Test-Suite (draft 2020-12): time to first mask of every schema in both
  forms and llguidance's, taking turns, over the schemas the choice moves and over all;
- per engine: compile and time to first mask (median of `--repeats` fresh compiles, disk
  cache off, the structural DFA cache cleared: cold), then the mask per token along each
  valid instance (canonical text, then a stop token): "cold" right after the first
  compile, "warm" the same walks again. Engines take turns in each repeat, in rotating
  order.

    python benchmarks/any_value.py --every 8 --out benchmarks/results/any_value.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_out_argument, out_path, write_results
from engine_adapters import Kor, LLGuidance
from engine_timing import stats_us, timed_compile, walk
from grammar_masks import continuation
from json_schema_suite import SUITE_DIR as JSTS
from schemastore import CORPUS, label_holds, names
from schemastore_labels import schema_ordered

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_files import sibling_loader
from kor_cli.grammar.surface import GrammarMatcher, TokenizerInfo, compile_grammar
from kor_cli.grammar.token_tables import token_trie
from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer

MODES = {"rule": False, "bounded": True}  # kor's two forms: GrammarOptions.bounded_any
SYNTHETIC: dict[str, tuple[Any, list[Any]]] = {
    "any": ({}, [{"a": [1, {"b": None}], "c": "x"}, [[1, 2], {"k": True}], "text"]),
    "object": ({"type": "object"}, [{"id": 3, "tags": ["a", "b"], "meta": {"x": {"y": 1}}}]),
    "metadata": (
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "metadata": {}},
            "required": ["name"],
            "additionalProperties": False,
        },
        [{"name": "Ann", "metadata": {"source": "web", "scores": [1, 2.5], "ok": True}}],
    ),
    "free_items": (
        {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        [[{"a": 1}, {"b": [1, 2, {"c": "d"}]}]],
    ),
}


def moved(schema: Any, ref_dir: str) -> bool:
    """True when the rule form has calls and the bounded form is one DFA."""
    try:
        bounded = compile_json_schema(schema, GrammarOptions(bounded_any=True, ref_dir=ref_dir))
        if bounded.has_calls:
            return False
        return compile_json_schema(schema, GrammarOptions(ref_dir=ref_dir)).has_calls
    except GrammarError:
        return False


def corpus_cases(corpus: Path, every: int) -> dict[str, tuple[Any, list[str]]]:
    """SchemaStore schemas the choice moves, with their valid instances' canonical texts."""
    out = {}
    ref_dir = str(corpus / "schemas")
    loader = sibling_loader(ref_dir)
    for name in names(corpus)[::every]:
        schema = json.loads((corpus / "schemas" / f"{name}.json").read_text(encoding="utf-8"))
        if not moved(schema, ref_dir):
            continue
        texts = []
        for path in sorted((corpus / "valid" / name).glob("*.json")):
            instance = json.loads(path.read_text(encoding="utf-8"))
            if label_holds(schema, instance, loader) is not False:
                texts.append(serialize(schema_ordered(instance, schema, loader)))
        out[name] = (schema, texts)
    return out


def bench(
    engines: dict[str, Any], schema: Any, sequences: list[list[int]], repeats: int, words: int
) -> dict[str, Any]:
    """Per engine: compile / first mask medians and per-token mask statistics. The engines
    take turns in every repeat, in a rotating order (a compile warms process-wide caches,
    such as the structural DFA cache, for whoever comes next)."""
    runs: dict[str, dict[str, Any]] = {e: {"compile": [], "first": []} for e in engines}
    names = list(engines)
    for rep in range(repeats):
        for ename in names[rep % len(names) :] + names[: rep % len(names)]:
            run = runs[ename]
            if "error" in run:
                continue
            try:
                c, f, run["compiled"], _ = timed_compile(engines[ename], schema, words)
            except Exception as error:  # noqa: BLE001 - a refusal is a result
                run["error"] = f"{type(error).__name__}: {error}"[:200]
                continue
            run["compile"].append(c)
            run["first"].append(f)
            if rep == 0:  # the cold walk: right after the first compile
                fills: list[float] = []
                for seq in sequences:
                    fills += walk(engines[ename].matcher(run["compiled"]), seq, words, None)[0]
                run["cold"], run["walked"] = fills, run["compiled"]
    out: dict[str, Any] = {}
    for ename, run in runs.items():
        if "error" in run:
            out[ename] = {"error": run["error"]}
            continue
        warm: list[float] = []
        accepted = 0
        for seq in sequences:
            fills, _, rejected, _ = walk(engines[ename].matcher(run["walked"]), seq, words, None)
            warm += fills
            accepted += rejected is None
        out[ename] = {
            "compile_ms": round(statistics.median(run["compile"]) * 1e3, 3),
            "first_mask_ms": round(statistics.median(run["first"]) * 1e3, 3),
            "mask_us_cold": stats_us(run["cold"]),
            "mask_us_warm": stats_us(warm),
            "sequences_accepted": accepted,
        }
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per engine: first-mask p50/p90/max and mean cold/warm mask over the schemas, and the
    rule form's ratios to the bounded form and to llguidance."""
    out: dict[str, Any] = {}
    for engine in ("rule", "bounded", "llguidance"):
        got = [r["engines"][engine] for r in rows if "error" not in r["engines"].get(engine, {})]
        if not got:
            continue
        first = sorted(g["first_mask_ms"] for g in got)
        out[engine] = {
            "schemas": len(got),
            "first_mask_ms_p50": round(float(np.percentile(first, 50)), 3),
            "first_mask_ms_p90": round(float(np.percentile(first, 90)), 3),
            "first_mask_ms_max": first[-1],
            "mean_mask_us_cold": round(statistics.mean(g["mask_us_cold"]["mean"] for g in got), 2),
            "mean_mask_us_warm": round(statistics.mean(g["mask_us_warm"]["mean"] for g in got), 2),
            # robust to a preempted step on the shared machine: the median step of each walk
            "median_of_medians_us_cold": round(
                statistics.median(g["mask_us_cold"]["median"] for g in got), 2
            ),
            "median_of_medians_us_warm": round(
                statistics.median(g["mask_us_warm"]["median"] for g in got), 2
            ),
        }
    for other in ("bounded", "llguidance"):
        pairs = [
            (r["engines"]["rule"]["first_mask_ms"], r["engines"][other]["first_mask_ms"])
            for r in rows
            if "error" not in r["engines"].get("rule", {"error": 1})
            and "error" not in r["engines"].get(other, {"error": 1})
        ]
        if pairs:
            ratios = sorted(a / b for a, b in pairs)
            out[f"rule_over_{other}_first_mask"] = {
                "p50": round(float(np.percentile(ratios, 50)), 2),
                "max": round(ratios[-1], 2),
            }
    return out


def jsts_first_masks(kor: dict[str, Kor], other: Any, info: TokenizerInfo) -> dict[str, Any]:
    """Time to first mask of every JSON-Schema-Test-Suite schema in each form (and the
    other engine's), taking turns per schema; percentiles over the schemas the choice moves
    (call-free when bounded, calls as rules) and over all compiled by both forms. The two
    forms alternate in going first (the first warms the structural DFA cache)."""
    remotes = (JSTS.parent / "remotes").as_posix()
    options = {m: replace(k.options, ref_dir=None, ref_map=(("http://localhost:1234/", remotes),))
               for m, k in kor.items()}  # fmt: skip
    words = (info.vocab_size + 31) // 32
    times: dict[str, dict[str, float]] = {name: {} for name in [*kor, "llguidance"]}
    moved_names = []
    for path in sorted(JSTS.glob("*.json")):
        for k, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            name = f"{path.stem}#{k}"
            calls = {}
            for mode in list(kor)[:: 1 if k % 2 else -1]:  # turns: who goes first alternates
                Kor.clear_caches()
                start = time.perf_counter()
                try:
                    grammar = compile_json_schema(case["schema"], options[mode])
                    compiled = compile_grammar(grammar, info)
                    GrammarMatcher(compiled).fill_next_token_bitmask(np.zeros((1, words), np.int32))
                except GrammarError:
                    continue
                times[mode][name] = time.perf_counter() - start
                calls[mode] = grammar.has_calls
            if calls.get("rule") and calls.get("bounded") is False:
                moved_names.append(name)
            if other is not None:
                start = time.perf_counter()
                try:
                    other.matcher(other.compile(case["schema"])).fill(np.zeros(words, np.int32))
                    times["llguidance"][name] = time.perf_counter() - start
                except Exception:  # noqa: BLE001 - its refusal
                    pass

    def ms(names: list[str], engine: str) -> dict[str, float]:
        values = [times[engine][n] * 1e3 for n in names if n in times[engine]] or [0.0]
        return {f"p{q}": round(float(np.percentile(values, q)), 2) for q in (50, 90, 99)}

    both = [n for n in times["rule"] if n in times["bounded"]]
    out: dict[str, Any] = {"compiled": len(both), "moved": len(moved_names)}
    for label, names_ in (("moved", moved_names), ("all", both)):
        out[label + "_ms"] = {e: ms(names_, e) for e in times if times[e]}
        shared = [n for n in names_ if n in times["llguidance"]]
        out[label + "_ms_shared_with_llguidance"] = {e: ms(shared, e) for e in times if times[e]}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--every", type=int, default=8, help="every N-th SchemaStore schema")
    parser.add_argument("--repeats", type=int, default=3, help="fresh compiles per engine")
    add_out_argument(parser, "any_value.json")
    args = parser.parse_args(argv)
    tokenizer = load_offline_tokenizer("qwen")
    info = TokenizerInfo.from_hf(tokenizer, vocab_size=QWEN_LOGITS_WIDTH)
    token_trie(info)
    words = (info.vocab_size + 31) // 32
    ref_dir = str(args.corpus / "schemas")
    cases = {k: (s, [serialize(i) for i in insts]) for k, (s, insts) in SYNTHETIC.items()}
    cases |= corpus_cases(args.corpus, args.every)
    engines: dict[str, Any] = {
        m: Kor(tokenizer, info, GrammarOptions(bounded_any=b, ref_dir=ref_dir, time_limit_s=10.0))
        for m, b in MODES.items()
    }
    try:
        engines["llguidance"] = LLGuidance(tokenizer, info)
    except ImportError:
        print("llguidance is not installed: kor-cli alone", file=sys.stderr)
    start = time.perf_counter()
    kor = {m: engines[m] for m in MODES}
    jsts = jsts_first_masks(kor, engines.get("llguidance"), info)
    print("JSTS", json.dumps(jsts))
    rows = []
    for name, (schema, texts) in cases.items():
        stop = info.stop_ids[0]
        sequences = [continuation(tokenizer, info, t) + [stop] for t in texts]
        found = bench(engines, schema, sequences, args.repeats, words)
        row = {"schema": name, "instances": len(texts), "engines": found}
        rows.append(row)
        print(name, json.dumps({k: v.get("first_mask_ms") for k, v in row["engines"].items()}))
    result = {
        "summary": summarize(rows),
        "jsts_first_mask": jsts,
        "rows": rows,
        "sample": f"synthetic {len(SYNTHETIC)} + SchemaStore every {args.every}th, moved only",
        "seconds": round(time.perf_counter() - start, 1),
        "load": os.getloadavg(),
    }
    write_results(out_path(args), result)
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
