"""`kor-cli batch`: many texts → one resumable JSONL file of result rows, in input order.

The run: resolve inputs and lock the output (fail fast, before the model loads), skip
the ids an earlier run already wrote, then extract with `--batch-size` records in flight
(a finished record's slot takes the next one at once) and append the rows, in input order,
with one fsync'd write whenever rows are ready. The extraction itself (planning, chunking,
error rows, continuous batching) is kor_cli/runner.py's, shared with `compare`; the row
type is kor_cli/result.py's. Progress goes to stderr, never data. Ctrl-C takes no new
record, finishes those in flight, prints the summary and exits 130.
"""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from kor_cli.console import err_console, info, plural, warn
from kor_cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PARTIAL, InputError, UsageError
from kor_cli.records import (
    STDIN,
    Record,
    Source,
    count_records,
    iter_records,
    resolve_sources,
)
from kor_cli.result import ROW_FIELDS, ExtractResult
from kor_cli.sink import Existing, OutputSink, row_key

if TYPE_CHECKING:
    from kor_cli.distributed import RayOptions
    from kor_cli.extract import ExtractOptions
    from kor_cli.runner import Runner
    from kor_cli.schema import Schema


@dataclass(frozen=True)
class BatchOptions:
    """What `kor-cli batch` reads, where it writes, and how it groups the work."""

    inputs: tuple[str, ...]
    output: str
    text_key: str = "text"
    id_key: str = "id"
    keep: tuple[str, ...] = ()
    batch_size: int = 8
    limit: int | None = None
    overwrite: bool = False
    chunk_tokens: int | None = None  # None: what fits the context; 0: never split


@dataclass
class Tally:
    """Counts for the progress bar, the summary and the exit code."""

    total: int | None
    existing: Existing
    skipped: int = 0
    valid: int = 0
    empty: int = 0  # valid rows that say "nothing here"
    failed: int = 0
    input_errors: int = 0
    chunked: int = 0
    duplicate_ids: int = 0
    interrupted: bool = False
    started: float = field(default_factory=time.perf_counter)

    @property
    def done(self) -> int:
        return self.valid + self.failed

    @property
    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def count(self, row: ExtractResult) -> None:
        if row.valid:
            self.valid += 1
            self.empty += row.empty
        else:
            self.failed += 1
        if row.finish_reason == "input":
            self.input_errors += 1
        if row.chunks:
            self.chunked += 1


def check_options(options: BatchOptions) -> None:
    """Usage errors that need no file or model."""
    if options.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    if options.limit is not None and options.limit < 0:
        raise UsageError("--limit must be 0 or more")
    if options.chunk_tokens is not None and options.chunk_tokens < 0:
        raise UsageError("--chunk-tokens must be 0 (never split) or more")
    if options.output == "-":
        raise UsageError("-o must be a file: batch output is resumable, stdout is not")
    clashes = [key for key in options.keep if key in ROW_FIELDS]
    if clashes:
        raise UsageError(f"--keep cannot copy {', '.join(clashes)}: kor-cli writes that field")


def pending_batches(
    records: Iterator[Record],
    tally: Tally,
    limit: int | None,
    size: int,
    seen: Counter[str] | None = None,
) -> Iterator[list[Record]]:
    """Records not yet in the output, `size` at a time; counts skips and repeated ids
    (into `seen`, by row_key). `seen` holds one entry per distinct id of the input (about
    100 bytes each: ~1 GB for 10M records), what counting repeated ids needs."""
    seen = Counter() if seen is None else seen
    batch: list[Record] = []
    for record in islice(records, limit):
        key = row_key(record.id)
        seen[key] += 1
        if seen[key] > 1:
            tally.duplicate_ids += 1
        if seen[key] <= tally.existing.done[key]:
            tally.skipped += 1
            continue
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_settings(
    schema: Schema, model: str | None, extract: ExtractOptions, options: BatchOptions
) -> dict[str, Any]:
    """What makes rows of one run comparable: a resume continues only these settings."""
    from kor_cli.models import resolve_model_name
    from kor_cli.prompt import render_prompt

    prompt = render_prompt(
        schema,
        "",
        template=extract.template,
        input_formatter=extract.input_formatter,
        envelope=extract.envelope,
    )
    document = json.dumps(schema.json_schema(), sort_keys=True, ensure_ascii=True)
    sampling = extract.sampling
    return {
        "schema_sha256": hashlib.sha256(
            (document + "\n" + prompt).encode("utf-8", "replace")
        ).hexdigest(),
        "mode": extract.mode,
        "model": resolve_model_name(model),
        "max_tokens": sampling.max_new_tokens,
        "temperature": sampling.temperature,
        "top_k": sampling.top_k,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "chat": extract.chat,
        "jump": extract.jump,
        "allow_refusal": extract.allow_refusal,
        "allow_empty": extract.allow_empty,  # None: by the schema's examples (hashed above)
        "lenient": extract.lenient,
        "open_objects": extract.open_objects,
        "text_key": options.text_key,
        "id_key": options.id_key,
        "keep": list(options.keep),
        "chunk_tokens": options.chunk_tokens,
    }


def input_ids(sources: list[Source], options: BatchOptions, wanted: Counter[str]) -> Counter[str]:
    """How often the input holds each id of `wanted` (the rows already written), read as a
    stream that stops once every one is found as often (files only: stdin is read once).
    Memory is bounded by the rows already written, not by the input."""
    records = iter_records(sources, text_key=options.text_key, id_key=options.id_key)
    found: Counter[str] = Counter()
    missing = len(wanted)
    for record in records:
        key = row_key(record.id)
        if key in wanted:
            found[key] += 1
            missing -= found[key] == wanted[key]
            if not missing:
                break
    return found


def check_rows_match_input(existing: Existing, ids: Counter[str], output: str) -> None:
    """Rows whose id the input does not hold (as often) were written for another input."""
    extra = [key for key, count in existing.done.items() if count > ids[key]]
    if extra:
        raise InputError(
            f"{output}: holds rows for ids this input does not have (e.g. id {extra[0]}); "
            "it was written for another input: choose another -o, or pass --overwrite"
        )


def run_batch(
    schema_spec: str,
    model: str | None,
    extract_options: ExtractOptions,
    options: BatchOptions,
    *,
    device: str = "auto",
    dtype: str = "auto",
    scale_out: RayOptions | None = None,
    threads: int = 0,
    compile: bool | None = None,
) -> int:
    """Run `kor-cli batch` end to end; return the exit code (0, 3 or 130).

    With `scale_out`, Ray actors extract the batches (kor_cli/distributed.py); this
    process still reads, skips, orders and writes every row.
    """
    from kor_cli.schema import load_schema

    check_options(options)
    if scale_out is not None:
        from kor_cli.distributed import check_ray_options

        check_ray_options(scale_out, device)
    schema = load_schema(
        schema_spec, lenient=extract_options.lenient, open_objects=extract_options.open_objects
    )
    sources = resolve_sources(options.inputs, output=options.output)
    total = count_records(sources)
    if total is not None and options.limit is not None:
        total = min(total, options.limit)
    settings = run_settings(schema, model, extract_options, options)
    with OutputSink(options.output, overwrite=options.overwrite, settings=settings) as sink:
        existing = sink.open()
        if existing.rows and not any(source.path == STDIN for source in sources):
            ids = input_ids(sources, options, existing.done)
            check_rows_match_input(existing, ids, options.output)
        if existing.dropped_bytes:
            warn(f"{options.output}: dropped a torn last line ({existing.dropped_bytes} bytes)")
        tally = Tally(total=total, existing=existing)
        records = iter_records(
            sources, text_key=options.text_key, id_key=options.id_key, keep=options.keep
        )
        seen: Counter[str] = Counter()
        batches = pending_batches(records, tally, options.limit, options.batch_size, seen)
        first = next(batches, None)  # skips what is done; no model load when all is
        if first is None:
            from kor_cli.models import locate_model

            locate_model(model)  # nothing to run, but a bad -m is still an error (exit 4)
        else:
            if scale_out is None:
                engine = local_engine(
                    schema, model, extract_options, options, device, dtype, threads, compile
                )
            else:
                from kor_cli.distributed import ray_engine

                engine = ray_engine(
                    schema, model, extract_options, options, scale_out, device, dtype, threads,
                    compile,
                )  # fmt: skip
            with engine as rows_of:  # the model is loaded (on every worker)
                tally.started = time.perf_counter()
                with _stop_on_ctrl_c() as stop, _progress(tally) as update:
                    for rows in rows_of(chain([first], batches), stop):
                        sink.write([row.to_dict() for row in rows])
                        for row in rows:
                            tally.count(row)
                        update()
                    tally.interrupted = stop.is_set()
        if existing.rows and not tally.interrupted and options.limit is None:
            check_rows_match_input(existing, seen, options.output)  # stdin: known only now
    print_summary(tally, options.output)
    if tally.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_PARTIAL if existing.failed + tally.failed else EXIT_OK


# Per batch of records, their rows; stops pulling batches once the event is set.
RowsOf = Callable[[Iterator[list[Record]], threading.Event], Iterator[list[ExtractResult]]]


def load_runner(
    schema: Schema,
    model: str | None,
    extract_options: ExtractOptions,
    options: BatchOptions,
    *,
    device: str = "auto",
    dtype: str = "auto",
    threads: int = 0,
    compile: bool | None = None,
) -> Runner:
    """Load the model and build this run's runner (here, or once on each Ray worker)."""
    from kor_cli.backends import load_backend
    from kor_cli.extract import Extractor
    from kor_cli.runner import Runner

    backend = load_backend(model, device=device, dtype=dtype, threads=threads, compile=compile)
    extractor = Extractor(schema, backend, extract_options)
    return Runner(
        extractor,
        batch_size=options.batch_size,
        chunk_tokens=options.chunk_tokens,
        keep=options.keep,
    )


@contextmanager
def local_engine(
    schema: Schema,
    model: str | None,
    extract_options: ExtractOptions,
    options: BatchOptions,
    device: str,
    dtype: str,
    threads: int = 0,
    compile: bool | None = None,
) -> Iterator[RowsOf]:
    """Load the model here and extract the batches in this process."""
    runner = load_runner(
        schema, model, extract_options, options, device=device, dtype=dtype, threads=threads,
        compile=compile,
    )  # fmt: skip
    for message in runner.extractor.warnings:
        warn(message)

    def rows_of(
        batches: Iterator[list[Record]], stop: threading.Event
    ) -> Iterator[list[ExtractResult]]:
        """One stream over every batch: records are pulled as slots free up, none after
        `stop` is set; every record pulled gets its row."""

        def records() -> Iterator[Record]:
            for batch in batches:
                for record in batch:
                    if stop.is_set():
                        return
                    yield record

        yield from runner.stream(records())

    yield rows_of


@contextmanager
def _stop_on_ctrl_c() -> Iterator[threading.Event]:
    """First Ctrl-C: finish the records in flight, then stop. Second Ctrl-C: stop now."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        info("kor-cli: stopping after the records in flight (Ctrl-C again to stop now)")

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _progress(tally: Tally) -> Iterator[Callable[[], None]]:
    """A live progress bar on stderr; yields a function that refreshes it."""
    progress = Progress(
        TextColumn("batch"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TextColumn("[green]{task.fields[valid]} valid[/] [red]{task.fields[failed]} failed[/]"),
        TextColumn("{task.fields[rate]:.2f} rec/s"),
        TextColumn("ETA {task.fields[eta]}"),
        console=err_console,
        redirect_stdout=False,  # rows go to the output file; never mix stdout into stderr
        redirect_stderr=False,
    )
    task = progress.add_task("batch", total=tally.total, **_fields(tally))

    def update() -> None:
        progress.update(task, completed=tally.skipped + tally.done, **_fields(tally))

    with progress:
        update()  # records skipped before the first batch count as done
        yield update


def _fields(tally: Tally) -> dict[str, Any]:
    done = tally.skipped + tally.done
    eta = "?"
    if tally.total is not None and tally.rate > 0:
        eta = _duration((tally.total - done) / tally.rate)
    return {
        "count": f"{done}/{'?' if tally.total is None else tally.total}",
        "valid": tally.existing.valid + tally.valid,
        "failed": tally.existing.failed + tally.failed,
        "rate": tally.rate,
        "eta": eta,
    }


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def print_summary(tally: Tally, output: str) -> None:
    """The end-of-run table, on stderr."""
    existing = tally.existing
    table = Table(title="kor-cli batch", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = plural(existing.rows + tally.done, "row")
    table.add_row("output", Text(f"{output} ({rows})"))  # a path is text, never markup
    if existing.rows:
        table.add_row("already there", f"{existing.rows} (skipped {tally.skipped})")
    table.add_row("extracted now", str(tally.done))
    table.add_row("valid", str(existing.valid + tally.valid))
    if existing.empty + tally.empty:
        table.add_row("empty", f"{existing.empty + tally.empty} (nothing to extract)")
    failed = f"{existing.failed + tally.failed}"
    if tally.input_errors:
        failed += f" ({plural(tally.input_errors, 'input error')} this run)"
    table.add_row("failed", failed)
    if tally.chunked:
        table.add_row("chunked texts", str(tally.chunked))
    table.add_row("speed", f"{tally.rate:.2f} records/s")
    table.add_row("time", _duration(time.perf_counter() - tally.started))
    if tally.interrupted:
        table.add_row("stopped", "interrupted; rerun the same command to finish")
    err_console.print(table)
    if tally.duplicate_ids:
        warn(
            f"{tally.duplicate_ids} records repeat an earlier id; rows are matched by id "
            "and occurrence on resume (choose a unique field with --id-key)"
        )
