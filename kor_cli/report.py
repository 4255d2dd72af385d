"""The HTML report of a `kor-cli compare` run: one self-contained file (inline CSS and SVG
bar charts; no scripts, nothing fetched) with the settings, the table and a chart per metric.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from kor_cli.compare import METRICS, Metric, format_metric
from kor_cli.console import plural
from kor_cli.errors import UsageError

COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756")
SHOWN_INPUT_ERRORS = 20
SHOWN_FAILURES = 50  # per mode
CELL_CHARS = 300  # predicted / gold JSON beyond this is cut
_LABEL_W, _BAR_W, _VALUE_W, _BAR_H, _GAP = 150, 300, 120, 20, 6

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 62rem;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
table { border-collapse: collapse; }
th, td { padding: .3rem .8rem; border-bottom: 1px solid #ddd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { text-align: left; background: #f4f4f4; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(36rem, 1fr));
          gap: 1rem; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
.errors { color: #a00; } small { color: #666; }
td code { white-space: pre-wrap; word-break: break-word; font-size: 12px; }
"""


def render_html(report: dict[str, Any]) -> str:
    """The whole HTML document for a compare report (as returned by `run_compare`)."""
    modes: dict[str, dict[str, Any]] = report["modes"]
    colors = {mode: COLORS[i % len(COLORS)] for i, mode in enumerate(modes)}
    charts = "\n".join(_chart(metric, modes, colors) for metric in METRICS)
    title = f"kor-cli compare: {report['schema']}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{escape(title)}</h1>
{_settings(report)}
{_input_errors(report["input_errors"])}
<h2>Results</h2>
{_table(modes)}
<p><small>Rates are over the records the model ran. Field accuracy: gold leaves found at the
same path over all gold leaves (list items paired by best match; strings compared up to case
and whitespace); exact match: all gold leaves and nothing more. Schema-invalid results score
no field.</small></p>
<h2>Charts</h2>
<div class="charts">
{charts}
</div>
{_failures(modes)}
</body>
</html>
"""


def check_report_path(path: str) -> None:
    """Fail before a long run when the report could not be written."""
    target = Path(path)
    if target.is_dir() or not target.parent.is_dir():
        raise UsageError(f"--report {path}: not a writable file path (is its folder there?)")


def write_report(report: dict[str, Any], path: str) -> None:
    """Write the HTML report to `path`; a UsageError names a path that cannot be written."""
    try:
        Path(path).write_text(render_html(report), encoding="utf-8")
    except OSError as error:
        raise UsageError(f"--report {path}: cannot write ({error.strerror})") from None


def _settings(report: dict[str, Any]) -> str:
    settings = ", ".join(f"{key} {value}" for key, value in report["settings"].items())
    items = {
        "model": report["model"],
        "data": ", ".join(report["inputs"]),
        "records": f"{report['records']} ({plural(len(report['input_errors']), 'input error')})",
        "gold field": report["gold_key"],
        "settings": settings,
    }
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in items.items())
    return f"<dl>{rows}</dl>"


def _failures(modes: dict[str, dict[str, Any]]) -> str:
    """Per mode, the records that failed: id, error, what was predicted and the gold."""
    sections = []
    for mode, stats in modes.items():
        failures = stats.get("failures") or []
        if not failures:
            continue
        rows = "".join(
            f"<tr><td>{escape(str(f['id']))}</td><td>{escape(f['error'])}</td>"
            f"<td><code>{escape(_short_json(f['predicted']))}</code></td>"
            f"<td><code>{escape(_short_json(f['gold']))}</code></td></tr>"
            for f in failures[:SHOWN_FAILURES]
        )
        more = len(failures) - SHOWN_FAILURES
        tail = f"<p><small>… and {more} more in the --json report</small></p>" if more > 0 else ""
        sections.append(
            f"<h3>{escape(mode)}: {plural(len(failures), 'failed record')}</h3>\n<table>"
            f"<tr><th>id</th><th>error</th><th>predicted</th><th>gold</th></tr>{rows}</table>{tail}"
        )
    return "<h2>Failed records</h2>\n" + "\n".join(sections) if sections else ""


def _short_json(value: Any) -> str:
    if value is None:
        return "–"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _input_errors(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return ""
    shown = "".join(
        f"<li>{escape(str(e['id']))}: {escape(e['error'])}</li>"
        for e in errors[:SHOWN_INPUT_ERRORS]
    )
    more = len(errors) - SHOWN_INPUT_ERRORS
    tail = f"<li>… and {more} more</li>" if more > 0 else ""
    return f'<h2>Input errors</h2>\n<ul class="errors">{shown}{tail}</ul>'


def _table(modes: dict[str, dict[str, Any]]) -> str:
    lines = [("records", [str(stats["records"]) for stats in modes.values()])]
    lines += [
        (metric.label, [format_metric(stats, metric) for stats in modes.values()])
        for metric in METRICS
    ]
    head = "".join(f"<th>{escape(mode)}</th>" for mode in modes)
    body = "\n".join(
        f"<tr><td>{escape(label)}</td>"
        + "".join(f'<td class="num">{escape(cell)}</td>' for cell in cells)
        + "</tr>"
        for label, cells in lines
    )
    return (
        f"<table>\n<thead><tr><th>metric</th>{head}</tr></thead>\n"
        f"<tbody>\n{body}\n</tbody>\n</table>"
    )


def _chart(metric: Metric, modes: dict[str, dict[str, Any]], colors: dict[str, str]) -> str:
    """A horizontal bar per mode; rates on a 0–100% scale, other figures on their maximum."""
    values = {mode: stats[metric.key] for mode, stats in modes.items()}
    known = [v for v in values.values() if v is not None]
    top = 1.0 if metric.rate else max(known, default=0.0) or 1.0
    width = _LABEL_W + _BAR_W + _VALUE_W
    height = len(values) * (_BAR_H + _GAP) + _GAP
    parts = []
    for i, (mode, value) in enumerate(values.items()):
        y = _GAP + i * (_BAR_H + _GAP)
        middle = y + _BAR_H / 2 + 4
        bar = 0.0 if value is None else _BAR_W * max(value, 0.0) / top
        text = format_metric(modes[mode], metric)
        parts.append(
            f'<text x="{_LABEL_W - 8}" y="{middle}" text-anchor="end">{escape(mode)}</text>'
            f'<rect x="{_LABEL_W}" y="{y}" width="{bar:.1f}" height="{_BAR_H}" '
            f'fill="{colors[mode]}"><title>{escape(mode)}: {escape(text)}</title></rect>'
            f'<text x="{_LABEL_W + bar + 6:.1f}" y="{middle}">{escape(text)}</text>'
        )
    label = escape(metric.label)
    return (
        f"<figure><figcaption>{label}</figcaption>"
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}" '
        f'font-family="system-ui, sans-serif" font-size="12">'
        f'<line x1="{_LABEL_W}" y1="0" x2="{_LABEL_W}" y2="{height}" stroke="#999"/>'
        + "".join(parts)
        + "</svg></figure>"
    )
