"""`kor-cli compare`: several decoding modes over the same records → one report.

Modes: `prompt` (Kor's ask-and-parse), `constrained` (masked decoding with jump-forward)
and `constrained-nojump`. Every mode extracts every record through the runner that
`kor-cli batch` uses (kor_cli/runner.py: planning, chunking, error rows, continuous
batching). After one untimed warm-up pass the modes take turns of `TURN_BATCHES` batches
of records (they share one model and its KV cache, so one mode runs at a time): within a
turn a finished row's slot takes the next record at once, so a row waits for no slower
batch-mate (only a turn's last rows run with slots to spare). Each mode's seconds are the
wall time of its own streams, scoring left out.

Scoring against a gold field (the value under the root id, or the whole record
`{root_id: value}`; null means no gold):

- field accuracy: gold leaves (scalars, and empty objects/lists) the prediction holds at
  the same path, over all gold leaves (micro-average). List items are paired greedily by
  best score, ties going to the same position, so extraction order does not matter.
  Strings match case-insensitively with runs of whitespace collapsed.
- exact match: every gold leaf matched and no extra predicted leaf.
- "nothing here": gold `{}` (Kor's empty output; `[]` too under a `many` root) is one
  leaf, matched by an empty result (`"empty": true`) and by nothing else; empty results
  are counted apart ("said nothing") and score no field against gold that has one.

Only schema-valid results are scored: an invalid one would be rejected downstream, so it
scores no field.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from itertools import islice
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from kor_cli.console import err_console, plural, warn
from kor_cli.errors import InputError, UsageError
from kor_cli.records import Record, iter_records, resolve_sources

if TYPE_CHECKING:
    from kor_cli.extract import ExtractOptions, Extractor
    from kor_cli.result import ExtractResult
    from kor_cli.runner import Runner

# mode name → (extraction mode, jump-forward)
MODES: dict[str, tuple[str, bool]] = {
    "prompt": ("prompt", True),
    "constrained": ("constrained", True),
    "constrained-nojump": ("constrained", False),
}
DEFAULT_MODES = "prompt,constrained"
MISSING: Any = object()  # no gold / no (valid) prediction
KEPT_FAILURES = 200  # failed records listed per mode (the report shows them)
NOTHING: dict[str, Any] = {}  # Kor's "nothing here", as gold and as an empty prediction
# Batches of records per mode's turn: longer turns leave fewer slots idle at turn ends,
# shorter ones spread load changes of a shared machine more evenly over the modes.
TURN_BATCHES = 8


@dataclass(frozen=True)
class Metric:
    """One reported figure: `count` over `of` (a rate) or per record."""

    key: str
    label: str
    count: str
    of: str = "records"
    rate: bool = True


METRICS: tuple[Metric, ...] = (
    Metric("parse_rate", "parse rate", "parsed"),
    Metric("valid_rate", "schema-valid rate", "valid"),
    Metric("field_accuracy", "field accuracy", "matched_fields", "gold_fields"),
    Metric("exact_match", "exact match", "exact_matches", "gold_records"),
    Metric("empty_rate", "said nothing", "empty"),
    Metric("empty_accuracy", "nothing, rightly", "empty_matches", "gold_empty"),
    Metric("truncated_rate", "truncated", "truncated"),
    Metric("tokens_per_record", "tokens / record", "tokens", rate=False),
    Metric("forward_passes_per_record", "passes / record", "forward_passes", rate=False),
    Metric("forced_tokens_per_record", "forced / record", "forced_tokens", rate=False),
    Metric("seconds_per_record", "seconds / record", "seconds", rate=False),
)


def parse_modes(text: str) -> tuple[str, ...]:
    """`prompt,constrained` → ("prompt", "constrained"); unknown or no mode is a UsageError."""
    modes = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown or not modes:
        raise UsageError(
            f"--modes: unknown mode {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"choose from {', '.join(MODES)}"
        )
    return modes


def mode_options(base: ExtractOptions, mode: str) -> ExtractOptions:
    """The extraction options of one compared mode (refusal/lenient apply to constrained)."""
    kind, jump = MODES[mode]
    if kind == "prompt":
        return replace(base, mode="prompt", jump=True, allow_refusal=False, lenient=False)
    return replace(base, mode="constrained", jump=jump)


# --- scoring -------------------------------------------------------------------------


def unwrap_gold(gold: Any, root_id: str) -> Any:
    """Gold given as the whole record `{root_id: value}` → value; any other gold as is."""
    if isinstance(gold, dict) and set(gold) == {root_id}:
        return gold[root_id]
    return gold


def is_nothing(gold: Any) -> bool:
    """Gold that says "nothing here": `{}` or `[]` (the value under the root id, unwrapped)."""
    return gold == {} or gold == []


def leaf_count(value: Any) -> int:
    """Leaves of a JSON value: scalars and empty containers."""
    if isinstance(value, dict) and value:
        return sum(leaf_count(item) for item in value.values())
    if isinstance(value, list) and value:
        return sum(leaf_count(item) for item in value)
    return 1


def same_leaf(gold: Any, pred: Any) -> bool:
    """Leaf equality: strings up to case and whitespace, booleans never equal to numbers."""
    if isinstance(gold, str) and isinstance(pred, str):
        return " ".join(gold.casefold().split()) == " ".join(pred.casefold().split())
    if isinstance(gold, bool) or isinstance(pred, bool):
        return type(gold) is type(pred) and gold == pred
    return bool(gold == pred)


def matched_leaves(gold: Any, pred: Any) -> int:
    """How many of `gold`'s leaves `pred` holds at the same path (list items best-paired)."""
    if isinstance(gold, dict) and gold:
        if not isinstance(pred, dict):
            return 0
        return sum(matched_leaves(value, pred[key]) for key, value in gold.items() if key in pred)
    if isinstance(gold, list) and gold:
        return _paired_matches(gold, pred) if isinstance(pred, list) else 0
    return int(pred is not MISSING and same_leaf(gold, pred))


def _paired_matches(gold: list[Any], pred: list[Any]) -> int:
    """Pair gold and predicted items one to one, best scores first (ties: same position)."""
    candidates = sorted(
        (-matched_leaves(g, p), abs(i - j), i, j)
        for i, g in enumerate(gold)
        for j, p in enumerate(pred)
    )
    used_gold: set[int] = set()
    used_pred: set[int] = set()
    total = 0
    for negative, _, i, j in candidates:
        if i not in used_gold and j not in used_pred:
            used_gold.add(i)
            used_pred.add(j)
            total -= negative
    return total


def score(gold: Any, pred: Any = MISSING) -> tuple[int, int, bool]:
    """(matched leaves, gold leaves, exact match) of a prediction; no prediction scores 0."""
    total = leaf_count(gold)
    matched = matched_leaves(gold, pred)
    exact = pred is not MISSING and matched == total and leaf_count(pred) == total
    return matched, total, exact


# --- per-mode tallies ---------------------------------------------------------------


@dataclass
class ModeStats:
    """What one mode did over the records; rates are over the records the model ran."""

    mode: str
    records: int = 0
    input_errors: int = 0
    parsed: int = 0
    valid: int = 0
    empty: int = 0
    truncated: int = 0
    gold_records: int = 0
    gold_empty: int = 0
    empty_matches: int = 0
    gold_fields: int = 0
    matched_fields: int = 0
    exact_matches: int = 0
    tokens: int = 0
    forward_passes: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    finish_reasons: Counter[str] = field(default_factory=Counter)
    # per record that failed (invalid, or not its gold record): id, error, predicted, gold
    failures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: ExtractResult, gold: Any, root_id: str) -> None:
        """Count one result row; `gold` is MISSING when absent."""
        if row.finish_reason == "input":
            self.input_errors += 1
            return
        self.records += 1
        self.finish_reasons[row.finish_reason] += 1
        self.parsed += row.data is not None
        self.valid += bool(row.valid)
        self.empty += row.empty
        self.truncated += row.finish_reason == "length"
        self.tokens += row.tokens
        self.forward_passes += row.forward_passes
        self.forced_tokens += row.forced_tokens
        exact = True
        if gold is not MISSING:
            gold = unwrap_gold(gold, root_id)
            pred = MISSING
            if row.valid:
                pred = NOTHING if row.empty else row.data[root_id]
            if is_nothing(gold):
                gold = NOTHING
                self.gold_empty += 1
                self.empty_matches += row.valid and row.empty
            matched, total, exact = score(gold, pred)
            self.gold_records += 1
            self.gold_fields += total
            self.matched_fields += matched
            self.exact_matches += exact
        if (not row.valid or not exact) and len(self.failures) < KEPT_FAILURES:
            self.failures.append({
                "id": row.id,
                "error": "; ".join(row.errors) or "not the gold record",
                "predicted": row.data if row.data is not None else row.raw,
                "gold": None if gold is MISSING else gold,
            })  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Counts plus every metric of METRICS (None where its denominator is 0)."""
        out = asdict(self)
        out["seconds"] = round(self.seconds, 4)
        out["finish_reasons"] = dict(self.finish_reasons)
        for metric in METRICS:
            count, of = getattr(self, metric.count), getattr(self, metric.of)
            value = count / of if of else None
            out[metric.key] = None if value is None else round(value, 4)
        return out


# --- the run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareOptions:
    """What `kor-cli compare` reads and how it groups the work."""

    inputs: tuple[str, ...]
    modes: tuple[str, ...] = ("prompt", "constrained")
    text_key: str = "text"
    id_key: str = "id"
    gold_key: str = "gold"
    batch_size: int = 8
    limit: int | None = None


def load_records(options: CompareOptions) -> list[Record]:
    """The records to compare on; InputError when there is none the model could run."""
    sources = resolve_sources(options.inputs)
    records = iter_records(
        sources, text_key=options.text_key, id_key=options.id_key, keep=(options.gold_key,)
    )
    loaded = list(islice(records, options.limit))
    usable = [record for record in loaded if record.error is None]
    if not usable:
        first = f" (first: {loaded[0].error})" if loaded else ""
        raise InputError(
            f"{', '.join(options.inputs)}: no usable records, {len(loaded)} input errors{first}"
        )
    return loaded


def run_compare(
    schema_spec: str,
    model: str | None,
    base: ExtractOptions,
    options: CompareOptions,
    *,
    device: str = "auto",
    dtype: str = "auto",
    threads: int = 0,
    compile: bool | None = None,
) -> dict[str, Any]:
    """Run every mode over the records and return the report (see `kor-cli compare`).

    Modes take turns of TURN_BATCHES batches, so load changes on a shared machine hit
    them alike.
    """
    from kor_cli.backends import load_backend
    from kor_cli.extract import Extractor
    from kor_cli.runner import Runner
    from kor_cli.schema import load_schema

    if options.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    schema = load_schema(schema_spec, lenient=base.lenient, open_objects=base.open_objects)
    records = load_records(options)
    backend = load_backend(model, device=device, dtype=dtype, threads=threads, compile=compile)
    runners: dict[str, Runner] = {}
    for mode in options.modes:
        extractor = Extractor(schema, backend, mode_options(base, mode))
        runners[mode] = Runner(extractor, batch_size=options.batch_size)
    for message in dict.fromkeys(m for r in runners.values() for m in r.extractor.warnings):
        warn(message)
    first = runners[options.modes[0]].extractor
    _warm_up(first, next(r.text for r in records if r.text is not None))
    golds = [_gold(record, options.gold_key) for record in records]
    if all(gold is MISSING for gold in golds):
        warn(f"no gold: accuracy not computed (no record has a '{options.gold_key}' field)")
    stats = {mode: ModeStats(mode) for mode in options.modes}
    input_errors: list[dict[str, Any]] = []
    turn = options.batch_size * TURN_BATCHES
    with _progress(options.modes, len(records)) as advance:
        for start in range(0, len(records), turn):
            for mode, runner in runners.items():
                at = start
                for rows in _timed(runner.stream(records[start : start + turn]), stats[mode]):
                    for row in rows:
                        stats[mode].add(row, golds[at], schema.root.id)
                        at += 1
                        if mode == options.modes[0] and row.finish_reason == "input":
                            # the same in every mode
                            input_errors.append(
                                {"id": row.id, "line": row.line, "error": row.errors[0]}
                            )
                    advance(mode, len(rows))
    sampling = base.sampling
    return {
        "schema": schema_spec,
        "model": backend.loaded.name,
        "inputs": list(options.inputs),
        "records": len(records),
        "input_errors": input_errors,
        "gold_key": options.gold_key,
        "settings": {
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_k": sampling.top_k,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "batch_size": options.batch_size,
            "limit": options.limit,
        },
        "modes": {mode: tally.to_dict() for mode, tally in stats.items()},
    }


def _timed(
    stream: Iterator[list[ExtractResult]], stats: ModeStats
) -> Iterator[list[ExtractResult]]:
    """The stream's lists of rows; the time spent producing them is added to `stats`."""
    while True:
        began = time.perf_counter()
        rows = next(stream, None)
        stats.seconds += time.perf_counter() - began
        if rows is None:
            return
        yield rows


def _gold(record: Record, gold_key: str) -> Any:
    value = record.extra.get(gold_key)
    return MISSING if value is None else value


def _warm_up(extractor: Extractor, text: str) -> None:
    """One untimed single-token generation, so no mode pays the model's first-call costs."""
    from kor_cli.decode import SamplingOptions

    extractor.decoder.generate(extractor.prompt_ids(text), SamplingOptions(max_new_tokens=1))


@contextmanager
def _progress(modes: tuple[str, ...], total: int) -> Iterator[Any]:
    """One progress bar per mode on stderr; yields advance(mode, n)."""
    progress = Progress(
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    tasks = {mode: progress.add_task(mode, total=total) for mode in modes}
    with progress:
        yield lambda mode, n: progress.update(tasks[mode], advance=n)


# --- presentation ------------------------------------------------------------------------


def format_metric(stats: dict[str, Any], metric: Metric) -> str:
    """A metric as table text: `83.3% (10/12)`, `31.5`, or `–` when undefined."""
    value = stats[metric.key]
    if value is None:
        return "–"
    if metric.rate:
        return f"{value:.1%} ({stats[metric.count]}/{stats[metric.of]})"
    return f"{value:.3f}" if metric.key == "seconds_per_record" else f"{value:.1f}"


def comparison_table(report: dict[str, Any]) -> Table:
    """The report as a rich table: one row per metric, one column per mode."""
    modes = report["modes"]
    title = Text(f"kor-cli compare: {report['schema']}")
    table = Table(title=title, title_justify="left")
    table.add_column("metric", style="bold")
    for mode in modes:
        table.add_column(mode, justify="right")
    table.add_row("records", *(str(stats["records"]) for stats in modes.values()))
    for metric in METRICS:
        table.add_row(metric.label, *(format_metric(stats, metric) for stats in modes.values()))
    errors = plural(len(report["input_errors"]), "input error")
    table.caption = f"{plural(report['records'], 'record')}, {errors}"
    return table
