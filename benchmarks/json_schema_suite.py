"""Run kor-cli's grammar compiler over the JSON-Schema-Test-Suite (draft 2020-12).

For every schema: compile it (a named `GrammarError` counts as "refused"). For every test
instance of a compiled schema: a valid instance must be accepted by the DFA (in canonical
form: `serialize` with object keys in the schema's order, see `json_location.reorder`),
an invalid one rejected (in every form tried). References to the suite's `remotes/` (served
at `http://localhost:1234/` by its harness) load those files (`GrammarOptions.ref_map`).
Writes the counts to `--out` (default benchmarks/out/json_schema_suite.json, untracked; the
committed counts are benchmarks/results/json_schema_suite.json). The `optional/` folder is
skipped.

Time to first mask (`first_mask`): per schema, compile (cold: the grammar LRU cache and
the structural DFA cache cleared, so the correctness pass before it helps nothing) +
`surface.compile_grammar` against the Qwen tokenizer (no disk cache) + the first
`GrammarMatcher.fill_next_token_bitmask`, p50/p90/p99 over the schemas compiled; the
competing engines named by `--engines` (llguidance by default, when installed) are timed
the same way in the same run (compile + first mask through `engines.py`'s adapters), and
the ratios kor / engine are taken over the schemas both compiled. The cyclic collector:
by default the heap is collected before each timed compile, of every engine (untimed, as
`engines.py` does), so its full passes over the process's heap (tokenizer, transformers,
the correctness pass's leftovers; ~30-80 ms each, 16 in one cold pass) no longer land on
whichever schema triggers them; that also leaves the CPU caches cold before every timing
(both engines' p50 rise by some 0.2-0.5 ms, which favours the slower one's ratio).
`--gc freeze` instead collects once and freezes that heap (`gc.freeze()`, as a server
does after start-up) and times every compile in the steady state. Schema-independent
rules (the "any value" rule, the free types' rules, `shared_rules`) and their frame masks
are built once per process and kept through the cold clears: the timed pass starts with
that memo empty, so the first schema that needs one pays for it, and `memo_one_off`
reports what it cost (rules and frames built, ms), and what the fixed automata (any
number, any string) cost when the process first built them. The per-tokenizer setup (byte
trie, the sorted tokens' padded matrix `sorted_tokens(info).prepare()`, the `,`/`[` token
sets) is done before the timed pass by `schemastore.load_tokenizer`, as `engines.py`'s
adapters do: no schema pays for it.

Usage: python benchmarks/json_schema_suite.py [SUITE_DIR] [--out PATH] [--engines E,..]
       [--gc collect|freeze]
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import dfa_cache, shared_rules
from kor_cli.grammar.compile import Grammar, GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver

sys.path.insert(0, str(Path(__file__).resolve().parent))  # siblings, also when loaded by path
from _common import add_out_argument, out_path, sorted_keys, write_results  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SUITE_DIR = REPO.parent / "shared" / "testdata" / "json-schema-test-suite" / "draft2020-12"


def texts(instance: Any, schema: Any) -> list[bytes]:
    """Serialisations to try: schema order first, then as given and with sorted keys."""
    location = LocationSpace(Resolver(schema)).at([schema])
    forms = [reorder(instance, location), instance, sorted_keys(instance)]
    return list(dict.fromkeys(serialize(form).encode() for form in forms))


def run(suite_dir: Path = SUITE_DIR) -> dict[str, Any]:
    """Counts over every case of every file of `suite_dir` (not recursing into optional/)."""
    counts: Counter[str] = Counter()
    false_accepts: list[str] = []
    false_rejects: list[str] = []
    refusals: Counter[str] = Counter()
    remotes = suite_dir.parent / "remotes"  # served at localhost:1234 by the suite's harness
    options = GrammarOptions(ref_map=(("http://localhost:1234/", str(remotes)),))
    for path in sorted(suite_dir.glob("*.json")):
        for case in json.loads(path.read_text()):
            where = f"{path.stem}: {case['description']}"
            try:
                grammar: Grammar = compile_json_schema(case["schema"], options)
            except GrammarError as error:
                counts["schemas_refused"] += 1
                counts["tests_refused"] += len(case["tests"])
                refusals[str(getattr(error, "keyword", None))] += 1
                continue
            counts["schemas_compiled"] += 1
            for test in case["tests"]:
                accepted = any(grammar.accepts(t) for t in texts(test["data"], case["schema"]))
                label = f"{where} / {test['description']}"
                if test["valid"] and accepted:
                    counts["accepted_correctly"] += 1
                elif test["valid"]:
                    counts["false_rejects"] += 1
                    false_rejects.append(label)
                elif accepted:
                    counts["false_accepts"] += 1
                    false_accepts.append(label)
                else:
                    counts["rejected_correctly"] += 1
    keys = ("schemas_compiled", "schemas_refused", "accepted_correctly", "rejected_correctly",
            "false_accepts", "false_rejects", "tests_refused")  # fmt: skip
    return {
        **{k: counts[k] for k in keys},
        "refused_by_keyword": dict(refusals.most_common()),
        "false_accept_cases": false_accepts,
        "false_reject_cases": false_rejects,
    }


def first_masks(
    suite_dir: Path = SUITE_DIR, engines: tuple[str, ...] = (), frozen: bool = False
) -> dict[str, Any]:
    """Time to first mask per schema (see the module docstring), kor's and `engines`'."""
    import schemastore  # beside this script: the Qwen tokenizer and the engines' adapters

    from kor_cli.grammar.surface import GrammarMatcher, compile_grammar

    schemastore.load_tokenizer(engines)
    info = schemastore._info
    assert info is not None
    remotes = suite_dir.parent / "remotes"
    options = GrammarOptions(ref_map=(("http://localhost:1234/", str(remotes)),))
    times: dict[str, dict[str, float]] = {e: {} for e in ("kor", *engines)}
    shared_rules.clear()  # the correctness pass built them: the timed pass pays once again
    gc.collect()
    if frozen:
        gc.freeze()  # the heap so far is never rescanned by the timed pass's collections
    for path in sorted(suite_dir.glob("*.json")):
        for k, case in enumerate(json.loads(path.read_text())):
            name = f"{path.stem}#{k}"
            compile_module._cache.clear()
            dfa_cache.clear()
            if not frozen:
                gc.collect()  # each timed compile starts from a collected heap (engines.py)
            start = time.perf_counter()
            try:
                grammar = compile_json_schema(case["schema"], options)
                compiled = compile_grammar(grammar, info, cache_dir=schemastore._NO_CACHE)
                buf = np.zeros((1, compiled.words), dtype=np.int32)
                GrammarMatcher(compiled).fill_next_token_bitmask(buf, 0)
                times["kor"][name] = time.perf_counter() - start
            except GrammarError:
                pass
            for engine in engines:
                adapter = schemastore._engines[engine]
                if not frozen:
                    gc.collect()
                start = time.perf_counter()
                try:
                    matcher = adapter.matcher(adapter.compile(case["schema"]))
                    matcher.fill(np.zeros((info.vocab_size + 31) // 32, dtype=np.int32))
                    times[engine][name] = time.perf_counter() - start
                except Exception:  # noqa: BLE001 - the engine's refusal
                    pass
    gc.unfreeze()
    ours = times["kor"]
    out: dict[str, Any] = {"kor": {"compiled": len(ours), **_ms(list(ours.values()))}}
    out["kor"]["memo_one_off"] = shared_rules.one_offs()
    for engine in engines:
        theirs = times[engine]
        both = [n for n in ours if n in theirs]
        mine, other = _ms([ours[n] for n in both]), _ms([theirs[n] for n in both])
        out[engine] = {
            "compiled": len(theirs), **_ms(list(theirs.values())), "both_compiled": len(both),
            "both_kor_ms": mine, "both_other_ms": other,
            "kor_over_other": {q: round(mine[q] / other[q], 2) for q in mine if other[q]},
        }  # fmt: skip
    return out


def _ms(values: list[float]) -> dict[str, float]:
    """p50/p90/p99 in milliseconds."""
    values = values or [0.0]
    return {f"p{q}": round(float(np.percentile(values, q)) * 1000, 2) for q in (50, 90, 99)}


def main() -> None:
    import argparse
    import importlib.util

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite_dir", nargs="?", type=Path, default=SUITE_DIR)
    parser.add_argument("--engines", default="llguidance",
                        help="engines timed beside kor for the first mask, comma-separated "
                        "(those installed; '' for none)")  # fmt: skip
    parser.add_argument("--gc", choices=("collect", "freeze"), default="collect",
                        help="collect before each timed compile (default), or freeze the "
                        "heap once before the timed pass")  # fmt: skip
    add_out_argument(parser, "json_schema_suite.json")
    args = parser.parse_args()
    engines = tuple(e for e in args.engines.split(",") if e and importlib.util.find_spec(e))
    start = time.perf_counter()
    result = run(args.suite_dir)
    result["first_mask_ms"] = first_masks(args.suite_dir, engines, args.gc == "freeze")
    result["gc"] = args.gc
    result["seconds"] = round(time.perf_counter() - start, 2)
    write_results(out_path(args), result)
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_cases")}, indent=2))


if __name__ == "__main__":
    main()
