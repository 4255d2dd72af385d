"""engines.py's report: the issue's goals checked on a run, markdown tables and the chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from engine_adapters import ENGINES


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "–"
    return f"{a / b:.2g}×"


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:.3g}{unit}"


def goals(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, checked on this run's numbers."""
    out: dict[str, Any] = {}
    rows = [(t, r) for t, rep in report["tokenizers"].items() for r in rep["schemas"]]

    def ours(r: dict[str, Any]) -> dict[str, Any]:
        return r["engines"].get("kor", {})

    qwen = [(t, r) for t, r in rows if t == "qwen" and "xgrammar" in r["engines"]]
    misses = [
        f"{r['schema']} {ours(r).get('first_mask_ms')} vs "
        f"{r['engines']['xgrammar']['compile_ms']} ms"
        for _, r in qwen
        if not ours(r).get("first_mask_ms", 1e9) <= r["engines"]["xgrammar"].get("compile_ms", 0)
    ]
    out["time to first mask <= XGrammar compile (qwen)"] = {
        "met": bool(qwen) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(qwen)} schemas",
    }
    llg = [(t, r) for t, r in rows if "mask_us_cold" in r["engines"].get("llguidance", {})]
    misses = [
        f"{t}/{r['schema']} {ours(r)['mask_us_cold']['mean']} vs "
        f"{r['engines']['llguidance']['mask_us_cold']['mean']} µs"
        for t, r in llg
        if ours(r)["mask_us_cold"]["mean"] > r["engines"]["llguidance"]["mask_us_cold"]["mean"]
    ]
    out["mean mask time <= llguidance (cold walk, first visits included)"] = {
        "met": bool(llg) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(llg)} pairs",
    }
    paired = [(t, r) for t, r in llg if "llguidance" in r.get("paired_cold_ratio", {})]
    misses = [
        f"{t}/{r['schema']} {r['paired_cold_ratio']['llguidance']}×"
        for t, r in paired
        if r["paired_cold_ratio"]["llguidance"] > 1
    ]
    out["mean mask time <= llguidance, repeat by repeat (median of the paired ratios)"] = {
        "met": bool(paired) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(paired)} pairs",
    }
    cpu = [(t, r) for t, r in llg if "mask_us_cold_cpu" in r["engines"]["llguidance"]]
    misses = [
        f"{t}/{r['schema']} {ours(r)['mask_us_cold_cpu']['mean']} vs "
        f"{r['engines']['llguidance']['mask_us_cold_cpu']['mean']} µs"
        for t, r in cpu
        if ours(r)["mask_us_cold_cpu"]["mean"]
        > r["engines"]["llguidance"]["mask_us_cold_cpu"]["mean"]
    ]
    out["mean mask process CPU time <= llguidance (cold walk, first visits included)"] = {
        "met": bool(cpu) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(cpu)} pairs",
    }
    worst = max((ours(r)["mask_us_warm"]["p99"], t, r["schema"]) for t, r in rows)
    out["p99 mask < 20 µs once states are built (warm walk)"] = {
        "met": worst[0] < 20,
        "detail": f"worst {worst[0]} µs ({worst[1]}/{worst[2]})",
    }
    wrong = sum(r["correctness"]["wrong_steps"] for _, r in rows)
    steps = sum(r["correctness"]["steps_checked"] for _, r in rows)
    out["zero wrong masks (brute force over our DFA)"] = {
        "met": wrong == 0,
        "detail": f"{wrong} wrong of {steps} steps checked",
    }
    return out


def groups(counts: dict[str, int]) -> str:
    """ "label ×n, ..." by decreasing count ("–" if none)."""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} ×{n}" for k, n in ranked) or "–"


def markdown(report: dict[str, Any], tokenizer: str) -> str:
    rows = report["tokenizers"][tokenizer]["schemas"]
    head = (
        "| schema | engine | compile ms | first mask ms | mask µs median | mean | p99 | "
        "mean CPU | p99 warm | ours ÷ them: first mask | median | mean | p99 | mean CPU |"
    )
    lines = [head, "|" + "---|" * 14]
    for row in rows:
        ours = row["engines"].get("kor", {})
        for ename in [e for e in ENGINES if e in row["engines"]]:
            r = row["engines"][ename]
            if "error" in r:
                lines.append(
                    f"| {row['schema']} | {ename} | refused: {r['error'][:60]} |" + " |" * 12
                )
                continue
            c, w = r.get("mask_us_cold", {}), r.get("mask_us_warm", {})
            oc = ours.get("mask_us_cold", {})
            cc, occ = r.get("mask_us_cold_cpu", {}), ours.get("mask_us_cold_cpu", {})
            ratios = (
                ["", "", "", "", ""]
                if ename == "kor"
                else [
                    ratio(ours.get("first_mask_ms"), r.get("first_mask_ms")),
                    ratio(oc.get("median"), c.get("median")),
                    ratio(oc.get("mean"), c.get("mean")),
                    ratio(oc.get("p99"), c.get("p99")),
                    ratio(occ.get("mean"), cc.get("mean")),
                ]
            )
            lines.append(
                f"| {row['schema']} | {ename} | {fmt(r.get('compile_ms'))} | "
                f"{fmt(r.get('first_mask_ms'))} | {fmt(c.get('median'))} | {fmt(c.get('mean'))}"
                f" | {fmt(c.get('p99'))} | {fmt(cc.get('mean'))} | {fmt(w.get('p99'))} | "
                + " | ".join(ratios)
                + " |"
            )
    return "\n".join(lines)


def plot(report: dict[str, Any], tokenizer: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["tokenizers"][tokenizer]["schemas"]
    names = [r["schema"] for r in rows]
    panels = [
        ("time to first mask (ms)", lambda r: r.get("first_mask_ms")),
        ("mask median (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("median")),
        ("mask mean (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("mean")),
        ("mask p99 (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("p99")),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    x = np.arange(len(names))
    bar = 0.2
    for ax, (title, get) in zip(axes, panels, strict=True):
        for k, ename in enumerate(ENGINES):
            values = [get(r["engines"].get(ename, {})) or np.nan for r in rows]
            ax.bar(x + (k - 1.5) * bar, values, bar, label=ename)
        ax.set_yscale("log")
        ax.set_xticks(x, names)
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        f"Constrained-decoding engines, {tokenizer} tokenizer "
        f"({report['tokenizers'][tokenizer]['vocab_size']:,} logits), compact JSON"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
