"""The engines the benchmarks compare, behind one small interface, and how they are timed.

Each adapter is built once per tokenizer (`Engine(tokenizer, info)`, its tokenizer setup) and
has `compile(schema)` (schema → compiled grammar, caches cleared) and `matcher(compiled)` →
an object with `fill(buf)` (a caller-owned int32 bitmask [ceil(V/32)]) and `accept(token)`.
`Kor` is kor-cli through its matcher surface (`compile_grammar` over `compile_json_schema`,
disk cache off); XGrammar, llguidance and outlines-core are the competitors (the `bench`
extra). `measure` is the cold/warm walk protocol that engines.py, engines_recursive.py and
any_value.py share.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kor_cli.grammar import compile as kor_compile
from kor_cli.grammar import dfa_cache, disk_cache, shared_rules
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.surface import CompiledGrammar, GrammarMatcher, TokenizerInfo, compile_grammar
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.grammar.token_tables import token_trie
from kor_cli.grammar.unique_matcher import unique_token_sets

ENGINES = ("kor", "xgrammar", "llguidance", "outlines")
COMPETITORS = ENGINES[1:]
SLOW_COMPILE_S = 2.0  # above this, compile once instead of --repeats times
MODULES = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines": "outlines_core"}
PACKAGES = {
    "kor": "kor-cli",
    "xgrammar": "xgrammar",
    "llguidance": "llguidance",
    "outlines": "outlines_core",
}


def installed(engine: str) -> bool:
    """True for kor, and for a competitor whose package is installed (the bench extra)."""
    return engine == "kor" or importlib.util.find_spec(MODULES[engine]) is not None


def add_engines_argument(parser: argparse.ArgumentParser) -> None:
    """`--engines`: which engines a benchmark runs (read back by `chosen_engines`)."""
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES, help="default: every installed engine"
    )


def chosen_engines(parser: argparse.ArgumentParser, engines: list[str] | None) -> list[str]:
    """The engines to run: those named (kor among them: it is the reference of every ratio;
    each installed), else every installed one, with a note on stdout naming those missing."""
    if engines is not None and "kor" not in engines:
        parser.error("kor is the reference for every comparison")
    missing = [e for e in engines or ENGINES if not installed(e)]
    if engines is None:
        engines = [e for e in ENGINES if installed(e)]
        if missing:
            print(
                f"note: {', '.join(missing)} not installed (pip install -e '.[bench]'): "
                "running without them, so there are no ratios to them",
                flush=True,
            )
    elif missing:
        parser.error(f"not installed: {', '.join(missing)} (pip install -e '.[bench]')")
    return engines


class Kor:
    """kor-cli through its one matcher surface: `compile_grammar` over `compile_json_schema`
    (a call-free grammar on its DFA's TokenIndex, one with calls on the pushdown matcher),
    `GrammarMatcher.fill_next_token_bitmask`. The disk cache is off (cold compiles)."""

    name = "kor"

    def __init__(
        self, tokenizer: Any, info: TokenizerInfo, options: GrammarOptions | None = None
    ) -> None:
        self.info = info
        self.options = options or GrammarOptions()
        token_trie(info)  # shared trie and string-body tables: per-tokenizer setup,
        sorted_tokens(info).prepare()  # the sorted tokens' padded matrix (frame masks),
        unique_token_sets(info)  # and which tokens hold `,`/`[` (uniqueItems arrays)
        os.environ[disk_cache.ENV] = "off"  # compiles and masks are timed cold, not read back

    @staticmethod
    def clear_caches() -> None:
        """Forget earlier compiles: the compile LRU, the structural DFA cache and the
        schema-independent rules with their frame masks (`shared_rules`: the "any value"
        and free types' rules), so a repeat reuses no DFA or mask an earlier compile left.
        The fixed automata (any string, any number) and parsed formats stay, as the
        tokenizer's tables do: a one-off per process."""
        kor_compile._cache.clear()
        dfa_cache.clear()
        shared_rules.clear()

    def compile(self, schema: Any) -> CompiledGrammar:
        self.clear_caches()
        return compile_grammar(compile_json_schema(schema, self.options), self.info)

    def matcher(self, compiled: CompiledGrammar) -> Any:
        return KorMatcher(GrammarMatcher(compiled))


class KorMatcher:
    def __init__(self, m: GrammarMatcher) -> None:
        self.m = m

    def fill(self, buf: np.ndarray) -> None:
        self.m.fill_next_token_bitmask(buf[None])  # a one-row view of the caller's buffer

    def accept(self, token: int) -> bool:
        return self.m.accept_token(token)


def kor_memory(compiled: CompiledGrammar) -> dict[str, Any]:
    """Memory of our compiled grammar after the walks (and, on the DFA engine, with every
    state built)."""
    engine = compiled.engine
    if not isinstance(engine, TokenIndex):  # the pushdown matcher: frames, stacks, masks
        return {
            "engine": "pushdown",
            "mb_visited": round(engine.nbytes / 1e6, 3),
            "frames_built": engine.frames.built,
            "rules_built": engine.rules.built,
        }
    out = {
        "engine": "dfa",
        "index_mb_visited": round(engine.nbytes / 1e6, 3),
        "states_built": engine.built_states,
    }
    engine.precompute_all()
    out["index_mb_all_states"] = round(engine.nbytes / 1e6, 3)
    out["states_reachable"] = len(engine.reachable_states())
    return out


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.tinfo = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=info.vocab_size, stop_token_ids=list(info.stop_ids)
        )
        self.compiler = xgr.GrammarCompiler(self.tinfo, cache_enabled=False)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":")
        )

    def matcher(self, compiled: Any) -> Any:
        return XGrammarMatcher(self.xgr.GrammarMatcher(compiled))


class XGrammarMatcher:
    def __init__(self, m: Any) -> None:
        self.m = m
        self._tensor: Any = None
        self._buf: Any = None

    def fill(self, buf: np.ndarray) -> None:
        if self._buf is not buf:  # a torch view of the same memory (DLPack)
            import torch

            self._buf, self._tensor = buf, torch.from_numpy(buf.reshape(1, -1))
        self.m.fill_next_token_bitmask(self._tensor)

    def accept(self, token: int) -> bool:
        return self.m.accept_token(token)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(
            tokenizer, n_vocab=info.vocab_size, eos_token=list(info.stop_ids)
        )

    def compile(self, schema: Any) -> Any:
        options = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, overrides=options)
        matcher = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher  # pristine: each request gets a deep copy

    def matcher(self, pristine: Any) -> Any:
        return LLGuidanceMatcher(pristine.deep_copy())


class LLGuidanceMatcher:
    def __init__(self, m: Any) -> None:
        self.m = m

    def fill(self, buf: np.ndarray) -> None:
        self.m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)

    def accept(self, token: int) -> bool:
        return self.m.consume_token(token) and not self.m.is_error()


class Outlines:
    name = "outlines"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import outlines_core

        self.oc = outlines_core
        by_bytes: dict[bytes, list[int]] = {}
        for i, data in enumerate(info.token_bytes):
            if data and i not in info.stop_ids:
                by_bytes.setdefault(data, []).append(i)
        self.eos = info.stop_ids[0]
        self.vocab = outlines_core.Vocabulary(self.eos, by_bytes)

    def compile(self, schema: Any) -> Any:
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), "")
        return self.oc.Index(regex, self.vocab)

    def matcher(self, index: Any) -> Any:
        return OutlinesMatcher(self.oc.Guide(index), self.eos)


class OutlinesMatcher:
    def __init__(self, m: Any, eos: int) -> None:
        self.m = m
        self.eos = eos

    def fill(self, buf: np.ndarray) -> None:
        self.m.write_mask_into(buf.ctypes.data, buf.size, 4)

    def accept(self, token: int) -> bool:
        if token == self.eos:  # in its mask in final states, but advance() refuses it
            return self.m.is_finished()
        try:
            self.m.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True


ENGINE_CLASSES = {"kor": Kor, "xgrammar": XGrammar, "llguidance": LLGuidance, "outlines": Outlines}


def vocab_agreement(engines: dict[str, Any], info: TokenizerInfo) -> dict[str, Any]:
    """Token ids whose bytes an engine reads differently from our TokenizerInfo."""
    tables: dict[str, list[bytes | None]] = {}
    if "xgrammar" in engines:  # its decoded vocabulary: specials it knows of are empty
        xinfo = engines["xgrammar"].tinfo
        special = set(xinfo.special_token_ids)
        decoded = xinfo.decoded_vocab
        tables["xgrammar"] = [
            None if i in special or i >= len(decoded) else decoded[i]
            for i in range(info.vocab_size)
        ]
    if "llguidance" in engines:
        tok = engines["llguidance"].tok
        tables["llguidance"] = [
            None if i >= tok.vocab_size or tok.is_special_token(i) else tok.decode_bytes([i])
            for i in range(info.vocab_size)
        ]
    out: dict[str, Any] = {}
    for ename, table in tables.items():
        as_text = [i for i, b in enumerate(table) if b and not info.token_bytes[i]]
        as_special = [i for i, b in enumerate(table) if not b and info.token_bytes[i]]
        differ = [
            i for i, b in enumerate(table) if b and info.token_bytes[i] and b != info.token_bytes[i]
        ]
        out[ename] = {
            "our_specials_read_as_text": len(as_text),
            "examples_as_text": [
                (i, (table[i] or b"").decode("utf-8", "replace")) for i in as_text[:5]
            ],
            "our_text_read_as_special": len(as_special),
            "examples_as_special": [
                (i, (info.token_bytes[i] or b"").hex()) for i in as_special[:5]
            ],
            "different_bytes": len(differ),
        }
    return out


def stats_us(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values) * 1e6
    return {
        "median": round(float(np.median(arr)), 2),
        "mean": round(float(arr.mean()), 2),
        "p99": round(float(np.percentile(arr, 99)), 2),
        "max": round(float(arr.max()), 1),
        "n": len(values),
    }


# -- timing: compile, first mask, cold and warm walks --------------------------------------
def timed_compile(engine: Any, schema: Any, words: int) -> tuple:
    """Seconds to compile and to the first mask, the compiled grammar and the matcher that
    made the first mask."""
    gc.collect()
    t0 = time.perf_counter()
    compiled = engine.compile(schema)
    t1 = time.perf_counter()
    matcher = engine.matcher(compiled)
    matcher.fill(np.zeros(words, dtype=np.int32))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0, compiled, matcher


def median_stats(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each statistic's median over the repeated runs."""
    if not runs or not runs[0]:
        return {}
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def walk(engine_matcher: Any, sequence: list[int], words: int, keep: np.ndarray | None) -> tuple:
    """Mask then accept along `sequence`; per-step seconds (wall clock: fills, accepts), the
    step it stopped at (the first rejection; None) and each fill's process CPU seconds
    (`time.process_time` around the wall clock's reads: a step another process preempted
    counts only its own work)."""
    buf = np.zeros(words, dtype=np.int32)
    fills, accepts, cpu_fills = [], [], []
    rejected = None
    clock, cpu = time.perf_counter, time.process_time
    for step, token in enumerate(sequence):
        used = cpu()
        start = clock()
        engine_matcher.fill(buf)
        mid = clock()
        used = cpu() - used
        ok = engine_matcher.accept(token)
        end = clock()
        fills.append(mid - start)
        cpu_fills.append(used)
        accepts.append(end - mid)
        if keep is not None:
            keep[step] = buf
        if not ok:
            rejected = step
            break
    return fills, accepts, rejected, cpu_fills


def measure(
    engine: Any,
    schema: Any,
    sequences: list[list[int]],
    words: int,
    repeats: int,
    instances: int = 0,
) -> tuple[dict[str, Any], Any, list[np.ndarray]]:
    """One engine on one schema: `repeats` fresh compiles (a compile over SLOW_COMPILE_S runs
    once and its grammar is walked again), each followed by a cold walk of every sequence
    (the first on the matcher that made the first mask), then a warm walk of them all.
    Returns the results (medians over the repeats), the last compiled grammar, and the
    first repeat's masks per sequence (int32 [steps, words]). With `instances`, the cold
    statistics of the first `instances` sequences alone too. A refusal raises."""
    compile_s: list[float] = []
    first_s: list[float] = []
    cold: list[dict[str, float]] = []
    cold_cpu: list[dict[str, float]] = []
    cold_instances: list[dict[str, float]] = []
    accepts: list[float] = []
    kept: list[np.ndarray] = []
    rejected: list[list[int]] = []
    for rep in range(repeats):
        if rep == 0 or compile_s[-1] <= SLOW_COMPILE_S:
            c, f, compiled, first_matcher = timed_compile(engine, schema, words)
            compile_s.append(c)
            first_s.append(f)
        else:
            first_matcher = engine.matcher(compiled)
        fills: list[float] = []
        cpu_fills: list[float] = []
        for seq_no, seq in enumerate(sequences):
            keep = np.zeros((len(seq), words), dtype=np.int32) if rep == 0 else None
            matcher = first_matcher if seq_no == 0 else engine.matcher(compiled)
            fl, ac, rej, fc = walk(matcher, seq, words, keep)
            fills += fl
            cpu_fills += fc
            accepts += ac
            if seq_no + 1 == instances:
                cold_instances.append(stats_us(fills))
            if keep is not None:
                kept.append(keep[: len(fl)])
                if rej is not None:
                    rejected.append([seq_no, rej, seq[rej]])
        cold.append(stats_us(fills))
        cold_cpu.append(stats_us(cpu_fills))
    warm: list[float] = []
    for seq in sequences:
        warm += walk(engine.matcher(compiled), seq, words, None)[0]
    result: dict[str, Any] = {
        "compile_ms": round(statistics.median(compile_s) * 1e3, 3),
        "first_mask_ms": round(statistics.median(first_s) * 1e3, 3),
        "compile_runs": len(compile_s),
        "cold_walks": len(cold),
        "mask_us_cold": median_stats(cold),
        "mask_us_cold_cpu": median_stats(cold_cpu),
    }
    if instances:
        result["mask_us_cold_instances_only"] = median_stats(cold_instances)
    result["mask_us_warm"] = stats_us(warm)
    result["accept_us"] = stats_us(accepts)
    result["rejected"] = rejected  # [sequence, step, token] where its matcher said no
    return result, compiled, kept


def random_walk(
    matcher: Any,
    stops: list[int],
    rng: np.random.Generator,
    cap: int,
    done: Callable[[], bool] | None = None,
) -> list[int]:
    """Tokens a kor-cli matcher allows (`allowed_mask`, `accept_token`), chosen uniformly,
    stopping (when one of `stops` is allowed) with probability 0.3, until `done()` (default:
    `matcher.is_terminated()`) or `cap` tokens."""
    ids: list[int] = []
    done = done or matcher.is_terminated
    while len(ids) < cap and not done():
        allowed = matcher.allowed_mask().copy()
        can_stop = bool(allowed[stops].any())
        allowed[stops] = False
        if can_stop and (rng.random() < 0.3 or not allowed.any()):
            token = stops[0]
        else:
            token = int(rng.choice(np.flatnonzero(allowed)))
        matcher.accept_token(token)
        ids.append(token)
    return ids
