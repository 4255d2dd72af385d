"""Command line: parse arguments, call the library, print. No torch import at module load."""

from __future__ import annotations

import sys

import typer

from kor_cli import cli_options as opts
from kor_cli import cli_reports
from kor_cli.console import emit_json, emit_text, info, run_guarded, warn
from kor_cli.errors import EXIT_INVALID, EXIT_OK, UsageError

EXIT_CODES = """\
Exit codes: 0 valid record(s) · 1 no valid record · 2 usage, schema or input error ·
3 batch: some records failed · 4 model failed to load · 130 interrupted."""

app = typer.Typer(
    name="kor-cli",
    help=(
        "Extract structured records from text with a local language model.\n\n"
        "Schemas are YAML (Kor-like), JSON Schema or a Pydantic class; prompts follow Kor's "
        "layout. Data goes to stdout as JSON, messages to stderr.\n\n"
        "Examples:\n\n"
        "  kor-cli schema show schemas/person.yaml --as typescript\n\n"
        "  kor-cli prompt schemas/person.yaml samples/person.txt\n\n"
        "  kor-cli extract schemas/person.yaml samples/person.txt\n\n" + EXIT_CODES
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
schema_app = typer.Typer(
    help="Inspect schemas.\n\nExample: kor-cli schema show schemas/receipt.yaml --as json-schema",
    no_args_is_help=True,
)
app.add_typer(schema_app, name="schema")

SCHEMA_HELP = opts.SCHEMA_HELP
INPUT_HELP = opts.INPUT_HELP


def _print_version(value: bool) -> None:
    if value:
        from kor_cli import __version__

        emit_text(__version__)
        raise typer.Exit(EXIT_OK)


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """kor-cli root options."""


PRINT_EXIT_CODES = """\
Exit codes: 0 printed · 2 usage, schema or input error (one line on stderr)."""


@schema_app.command("show", epilog=PRINT_EXIT_CODES)
def schema_show(
    schema: str = typer.Argument(..., help=SCHEMA_HELP),
    as_: str = typer.Option(
        "typescript", "--as", help="Output form: typescript | json-schema.", metavar="FORM"
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="List the keywords ignored as annotations (on stderr)."
    ),
    lenient: bool = opts.LENIENT,
    open_objects: bool = opts.OPEN_OBJECTS,
) -> None:
    """Print a schema as Kor's TypeScript block or as JSON Schema.

    The JSON Schema is the record's: what the grammar compiles and validation checks.
    Keywords no JSON Schema draft defines are annotations: ignored, listed by --verbose.

    Example: kor-cli schema show schemas/person.yaml --as json-schema
    """

    def action() -> None:
        from kor_cli.errors import UsageError
        from kor_cli.schema import load_schema

        if as_ not in ("typescript", "json-schema"):
            raise UsageError(f"--as must be typescript or json-schema, not {as_!r}")
        loaded = load_schema(schema, lenient=lenient, open_objects=open_objects)
        for message in loaded.warnings:
            warn(message)
        if verbose:
            for line in loaded.ignored_keywords_report():
                info(line)
        if as_ == "typescript":
            emit_text(loaded.typescript())
        elif as_ == "json-schema":
            emit_json(loaded.json_schema(), indent=2)
        else:
            raise UsageError(f"--as must be typescript or json-schema, not {as_!r}")

    run_guarded(action)


@app.command("prompt", epilog=PRINT_EXIT_CODES)
def prompt_cmd(
    schema: str = typer.Argument(..., help=SCHEMA_HELP),
    input_path: str = typer.Argument("-", metavar="[INPUT|-]", help=INPUT_HELP),
    max_input_bytes: int = opts.MAX_INPUT_BYTES,
    template: str | None = opts.TEMPLATE,
    input_formatter: str = opts.INPUT_FORMATTER,
    lenient: bool = opts.LENIENT,
    open_objects: bool = opts.OPEN_OBJECTS,
) -> None:
    """Print the exact extraction prompt for a text, without loading a model.

    Example: kor-cli prompt schemas/person.yaml samples/person.txt
    """

    def action() -> None:
        from kor_cli.prompt import load_template, render_prompt
        from kor_cli.schema import load_schema

        loaded = load_schema(schema, lenient=lenient, open_objects=open_objects)
        for message in loaded.warnings:
            warn(message)
        text = opts.stdin_or(input_path, max_input_bytes)
        template_text = load_template(template) if template else None
        emit_text(
            render_prompt(loaded, text, template=template_text, input_formatter=input_formatter)
        )

    run_guarded(action)


@app.command("extract", epilog=EXIT_CODES)
@opts.run_options(extraction=True)
def extract_cmd(
    schema: str = typer.Argument(..., help=SCHEMA_HELP),
    input_path: str = typer.Argument("-", metavar="[INPUT|-]", help=INPUT_HELP),
    max_input_bytes: int = opts.MAX_INPUT_BYTES,
    model: str | None = opts.MODEL,
    mode: str = opts.MODE,
    jump: bool = opts.JUMP,
    pretty: bool = typer.Option(False, "--pretty", help="Indent the JSON result."),
    *,
    run: opts.RunArgs,
) -> None:
    """Extract one record from a text and print the JSON result.

    The result has data, valid, errors, raw, finish_reason, mode, tokens, forward_passes,
    forced_tokens, seconds, refusal and empty. Constrained mode (the default) masks every
    token that would break the schema, so a finished output always parses and validates.
    Kor's "nothing here" ({}) is a valid result with "empty": true when the schema has an
    example with empty output (or with --allow-empty).

    Example: kor-cli extract schemas/person.yaml samples/person.txt
    """

    def action() -> int:
        from kor_cli.backends import load_backend
        from kor_cli.extract import Extractor
        from kor_cli.schema import load_schema

        loaded_schema = load_schema(schema, lenient=run.lenient, open_objects=run.open_objects)
        text = opts.stdin_or(input_path, max_input_bytes)
        options = run.extract_options(mode, jump)
        backend = load_backend(model, **run.placement())
        opts.check_fits(text, input_path, backend)
        extractor = Extractor(loaded_schema, backend, options)
        for message in extractor.warnings:
            warn(message)
        result = extractor.extract(text)
        emit_json(result.to_dict(), indent=2 if pretty else None)
        if result.empty:
            info("nothing to extract: the model says the text holds no record")
        if not result.valid:
            warn("no valid record: " + "; ".join(result.errors[:3]))
        return EXIT_OK if result.valid else EXIT_INVALID

    raise typer.Exit(run_guarded(action))


@app.command("generate", epilog=EXIT_CODES)
@opts.run_options(extraction=False)
def generate_cmd(
    prompt_path: str = typer.Argument(
        "-", metavar="[PROMPT|-]", help="File holding the prompt, or '-' for stdin (default)."
    ),
    regex: str | None = typer.Option(
        None, "--regex", help="The output must match this regex in full (Python re subset)."
    ),
    choice: str | None = typer.Option(
        None, "--choice", help="The output must be one of these comma-separated options."
    ),
    model: str | None = opts.MODEL,
    jump: bool = opts.JUMP,
    *,
    run: opts.RunArgs,
) -> None:
    """Generate free text constrained by --regex or --choice, with no schema.

    The prompt is used as is (inside the chat template when the model has one). The result
    has text, valid, finish_reason, tokens, forward_passes, forced_tokens and seconds.

    Example: echo "Is this review positive?" | kor-cli generate --choice yes,no
    """

    def action() -> int:
        from kor_cli.backends import load_backend
        from kor_cli.generate import generate_text, text_grammar

        grammar = text_grammar(regex, choice)
        prompt = opts.stdin_or(prompt_path)
        sampling = run.sampling()
        backend = load_backend(model, **run.placement())
        result = generate_text(backend, prompt, grammar, sampling, chat=run.chat, jump=jump)
        emit_json(result.to_dict())
        return EXIT_OK if result.valid else EXIT_INVALID

    raise typer.Exit(run_guarded(action))


BATCH_EXIT_CODES = """\
Exit codes: 0 every record valid · 2 usage, schema or input error · 3 some records failed ·
4 model failed to load · 130 interrupted (rerun the same command to resume)."""


@app.command("batch", epilog=BATCH_EXIT_CODES)
@opts.run_options(extraction=True)
def batch_cmd(
    schema: str = typer.Argument(..., help=SCHEMA_HELP),
    inputs: list[str] = typer.Argument(
        ...,
        metavar="INPUT...",
        help="JSONL files (.jsonl/.ndjson, '-' for stdin), text files, folders or globs.",
    ),
    output: str = typer.Option(
        ..., "-o", "--output", help="Result JSONL file; rerunning resumes where it stopped."
    ),
    model: str | None = opts.MODEL,
    mode: str = opts.MODE,
    text_key: str = typer.Option("text", "--text-key", help="JSONL field holding the text."),
    id_key: str = typer.Option(
        "id", "--id-key", help="JSONL field holding the id (else the line number)."
    ),
    keep: str = typer.Option(
        "", "--keep", help="Comma-separated JSONL fields to copy into each row, e.g. gold,source."
    ),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Records per batch."),
    limit: int | None = typer.Option(None, "--limit", min=0, help="Only the first N records."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Start afresh, emptying -o."),
    chunk_tokens: int | None = typer.Option(
        None,
        "--chunk-tokens",
        min=0,
        help="Split texts longer than N tokens (default: what fits the context; 0: never).",
    ),
    jump: bool = opts.JUMP,
    ray: str | None = typer.Option(
        None,
        "--ray",
        metavar="ADDRESS",
        help="Extract on Ray workers: local or no address (start a cluster here), auto (join "
        "the running one) or HOST:PORT. Needs the ray extra.",
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="--ray: worker actors (default: one per GPU, else 1)."
    ),
    gpus_per_worker: float | None = typer.Option(
        None, "--gpus-per-worker", min=0, help="--ray: GPUs per worker (default: 1 if any, else 0)."
    ),
    *,
    run: opts.RunArgs,
) -> None:
    """Extract a record from every JSONL line or text file into one JSONL file.

    Rows keep input order and carry id, input, line, the --keep fields and the extract
    result. Bad input lines become error rows; long texts are chunked and merged. Progress
    and the summary go to stderr.

    Example: kor-cli batch schemas/person.yaml samples/people.jsonl -o out.jsonl
    """

    def action() -> int:
        from kor_cli.batch import BatchOptions, run_batch

        options = run.extract_options(mode, jump)
        batch = BatchOptions(
            inputs=tuple(inputs),
            output=output,
            text_key=text_key,
            id_key=id_key,
            keep=tuple(key.strip() for key in keep.split(",") if key.strip()),
            batch_size=batch_size,
            limit=limit,
            overwrite=overwrite,
            chunk_tokens=chunk_tokens,
        )
        scale_out = None
        if ray is not None:
            from kor_cli.distributed import RayOptions

            scale_out = RayOptions(ray, workers, gpus_per_worker)
        elif workers is not None or gpus_per_worker is not None:
            raise UsageError("--workers and --gpus-per-worker need --ray")
        return run_batch(schema, model, options, batch, scale_out=scale_out, **run.placement())

    raise typer.Exit(run_guarded(action))


# `compare` and `trace` (kor_cli/cli_reports.py), after the others in --help
app.command("compare", epilog=cli_reports.COMPARE_EXIT_CODES)(cli_reports.compare_cmd)
app.command("trace", epilog=cli_reports.TRACE_EXIT_CODES)(cli_reports.trace_cmd)


def run() -> None:
    """Console-script entry: `app` after the one argv rewrite the parser cannot express."""
    from kor_cli.distributed import bare_ray_flag

    sys.argv[1:] = bare_ray_flag(sys.argv[1:])
    app()
