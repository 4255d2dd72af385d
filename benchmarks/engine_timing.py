"""How the engine benchmarks time an engine on a schema: compile, first mask, cold and warm
walks, with the engines interleaved (engines.py and engines_recursive.py share
`measure_engines`; any_value.py the pieces).

This machine's speed swings by tens of percent over seconds (two shared cores): timing one
engine's repeats after another's lets such a swing land on one engine alone. So every repeat
runs each engine's compile and cold walk in turn, the order rotating from repeat to repeat
(no engine always first after a collection, none always warming caches for the next), and
the ratio of two engines is also taken repeat by repeat (`paired_ratios`): within a repeat
the two walks are seconds apart, so a swing hits both.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SLOW_COMPILE_S = 2.0  # above this, compile once instead of every repeat


def stats_us(values: list[float]) -> dict[str, float]:
    """Median, mean, p99, max (µs) and count of per-step seconds."""
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


def median_stats(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each statistic's median over the repeated runs."""
    if not runs or not runs[0]:
        return {}
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


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


@dataclass
class EngineRuns:
    """One engine's repeats on one schema, as they are taken, and what they sum to."""

    engine: Any
    compile_s: list[float] = field(default_factory=list)
    first_s: list[float] = field(default_factory=list)
    cold: list[dict[str, float]] = field(default_factory=list)
    cold_cpu: list[dict[str, float]] = field(default_factory=list)
    cold_instances: list[dict[str, float]] = field(default_factory=list)
    accepts: list[float] = field(default_factory=list)
    kept: list[np.ndarray] = field(default_factory=list)  # the first repeat's masks
    rejected: list[list[int]] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    compiled: Any = None
    error: str | None = None

    def repeat(self, schema: Any, sequences: list[list[int]], words: int, instances: int) -> None:
        """A fresh compile (one over SLOW_COMPILE_S is compiled once and walked again), then
        a cold walk of every sequence, the first on the matcher that made the first mask."""
        first = not self.cold
        if first or self.compile_s[-1] <= SLOW_COMPILE_S:
            c, f, self.compiled, first_matcher = timed_compile(self.engine, schema, words)
            self.compile_s.append(c)
            self.first_s.append(f)
        else:
            first_matcher = self.engine.matcher(self.compiled)
        fills: list[float] = []
        cpu_fills: list[float] = []
        for seq_no, seq in enumerate(sequences):
            keep = np.zeros((len(seq), words), dtype=np.int32) if first else None
            matcher = first_matcher if seq_no == 0 else self.engine.matcher(self.compiled)
            fl, ac, rej, fc = walk(matcher, seq, words, keep)
            fills += fl
            cpu_fills += fc
            self.accepts += ac
            if seq_no + 1 == instances:
                self.cold_instances.append(stats_us(fills))
            if keep is not None:
                self.kept.append(keep[: len(fl)])
                if rej is not None:
                    self.rejected.append([seq_no, rej, seq[rej]])
        self.cold.append(stats_us(fills))
        self.cold_cpu.append(stats_us(cpu_fills))

    def walk_warm(self, sequences: list[list[int]], words: int) -> None:
        """A warm walk of every sequence: the last compiled grammar walked again, right
        after its cold walk (in the same turn, before another engine runs)."""
        for seq in sequences:
            self.warm += walk(self.engine.matcher(self.compiled), seq, words, None)[0]

    def result(self, instances: int) -> dict[str, Any]:
        """Medians over the repeats, each repeat's cold mean, and the warm walk's statistics."""
        result: dict[str, Any] = {
            "compile_ms": round(statistics.median(self.compile_s) * 1e3, 3),
            "first_mask_ms": round(statistics.median(self.first_s) * 1e3, 3),
            "compile_runs": len(self.compile_s),
            "cold_walks": len(self.cold),
            "mask_us_cold": median_stats(self.cold),
            "mask_us_cold_cpu": median_stats(self.cold_cpu),
            "cold_means_by_repeat": [run["mean"] for run in self.cold],
        }
        if instances:
            result["mask_us_cold_instances_only"] = median_stats(self.cold_instances)
        result["mask_us_warm"] = stats_us(self.warm)
        result["accept_us"] = stats_us(self.accepts)
        result["rejected"] = self.rejected  # [sequence, step, token] where its matcher said no
        return result


def measure_engines(
    engines: dict[str, Any],
    schema: Any,
    sequences: list[list[int]],
    words: int,
    repeats: int,
    instances: int = 0,
) -> dict[str, EngineRuns]:
    """Every engine on one schema, interleaved: repeat r runs each engine's compile and cold
    walk in turn, starting with the (r mod n)-th; the last repeat's turn ends with the warm
    walk. An engine whose compile or walk raises (a
    refusal is a result, not a crash) keeps its error and takes no more turns. With
    `instances`, the cold statistics of the first `instances` sequences alone too."""
    runs = {name: EngineRuns(engine) for name, engine in engines.items()}
    names = list(engines)
    for rep in range(repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            run = runs[name]
            if run.error is not None:
                continue
            try:
                run.repeat(schema, sequences, words, instances)
                if rep == repeats - 1:
                    run.walk_warm(sequences, words)
            except Exception as error:  # noqa: BLE001 - an engine refusing a schema
                run.error = f"{type(error).__name__}: {error}"[:300]
    return runs


def paired_ratios(results: dict[str, dict[str, Any]], ours: str = "kor") -> dict[str, float]:
    """Per competitor: the median over repeats of our cold mean over theirs in the same
    repeat (both walks seconds apart, so a swing of the machine's speed hits both)."""
    mine = results.get(ours, {}).get("cold_means_by_repeat")
    out: dict[str, float] = {}
    for name, result in results.items():
        theirs = result.get("cold_means_by_repeat")
        if name == ours or not mine or not theirs:
            continue
        out[name] = round(
            statistics.median(a / b for a, b in zip(mine, theirs, strict=False) if b), 3
        )
    return out


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
