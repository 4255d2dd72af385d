"""Summaries of `schemastore.py`'s per-schema rows: counts by outcome, percentiles of the
times, refusals grouped, ratios against a competing engine, the printed summary."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np


def percentiles(values: list[float], digits: int | None = 3) -> dict[str, float]:
    """p50/p90/p99 of `values`, rounded to `digits` (None: unrounded)."""
    if not values:
        return {}
    found = {f"p{q}": float(np.percentile(values, q)) for q in (50, 90, 99)}
    return found if digits is None else {q: round(v, digits) for q, v in found.items()}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    status = Counter(r["status"] for r in rows)
    compiled = [r for r in rows if r["status"] == "compiled"]
    refused = [r for r in rows if r["status"] == "refused"]

    def cases(key: str) -> list[str]:
        return [c for r in compiled for c in r.get(key, [])]

    by_keyword = Counter(r["reason"].split(":", 1)[0] for r in refused)
    return {
        "schemas": len(rows),
        "compiled": status["compiled"],
        "compiled_share": round(status["compiled"] / max(len(rows), 1), 4),
        "refused": status["refused"],
        "timeouts": status["timeout"],
        "walk_timeouts": status["walk_timeout"],
        "crashed": status["crashed"],
        "instances_checked": sum(len(cases(k)) for k in ("ok", "fa", "fr_ser", "fr")),
        "correct": len(cases("ok")),
        "false_accepts": len(cases("fa")),
        "false_rejects_serialization": len(cases("fr_ser")),
        "false_rejects_genuine": len(cases("fr")),
        "mask_dfa_disagreements": len(cases("disagree")),
        "instances_mislabelled": len(cases("mislabelled")),
        "compile_s": percentiles([r["compile_s"] for r in compiled]),
        "first_mask_s": percentiles([r["first_mask_s"] for r in compiled if "first_mask_s" in r]),
        "refused_by_keyword": dict(by_keyword.most_common()),
        "refused_by_reason": dict(Counter(r["reason"] for r in refused).most_common()),
        "timeout_schemas": [r["name"] for r in rows if "timeout" in r["status"]],
        "crash_cases": [
            f"{r['name']}: {r['reason']}: {r['error']}" for r in rows if r["status"] == "crashed"
        ],  # fmt: skip
        "false_accept_cases": cases("fa"),
        "mislabelled_cases": cases("mislabelled"),
        "false_reject_serialization_cases": cases("fr_ser"),
        "false_reject_genuine_cases": cases("fr"),
        "false_rejects_genuine_by_class": dict(
            Counter(k for r in compiled for k in r.get("fr_class", {}).values()).most_common()
        ),
        "false_reject_genuine_classes": {
            case: kind for r in compiled for case, kind in r.get("fr_class", {}).items()
        },
    }


def ratios(kor: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """Time to first mask, kor / other, over the schemas both compiled."""
    theirs = {r["name"]: r for r in other if r["status"] == "compiled"}
    both = [
        (r, theirs[r["name"]]) for r in kor if r["status"] == "compiled" and r["name"] in theirs
    ]
    if not both:
        return {"both_compiled": 0}
    ours, them = (
        percentiles([a["first_mask_s"] for a, _ in both], digits=None),
        percentiles([b["first_mask_s"] for _, b in both], digits=None),
    )
    return {  # ratios of the unrounded percentiles (at ms rounding, 13/3 or 13/4 ms)
        "both_compiled": len(both),
        "first_mask_s_kor": {q: round(v, 4) for q, v in ours.items()},
        "first_mask_s_other": {q: round(v, 4) for q, v in them.items()},
        "first_mask_kor_over_other": {
            q: round(ours[q] / them[q], 2) if them[q] else None for q in ours
        },
    }


def shown(result: dict[str, Any]) -> dict[str, Any]:
    """The summary without per-schema rows and case lists."""
    out = {k: v for k, v in result.items() if k != "rows" and not k.endswith("_cases")}
    if "competitors" in out:
        out["competitors"] = {e: shown(r) for e, r in out["competitors"].items()}
    return out
