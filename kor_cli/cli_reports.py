"""`kor-cli compare` and `kor-cli trace`: the commands that report on decoding rather than
extract (registered on the app in cli.py). They only parse and print; the work is
kor_cli/compare.py's and kor_cli/trace.py's. No torch import on --help.
"""

from __future__ import annotations

import typer
from rich.console import Console

from kor_cli import cli_options as opts
from kor_cli.console import emit_json, info, plural, run_guarded, warn
from kor_cli.errors import EXIT_INVALID, EXIT_OK

COMPARE_EXIT_CODES = """\
Exit codes: 0 the run completed (bad input lines are counted, not fatal) · 2 usage, schema
or input error · 4 model failed to load · 130 interrupted."""


@opts.run_options(extraction=True)
def compare_cmd(
    schema: str = typer.Argument(..., help=opts.SCHEMA_HELP),
    inputs: list[str] = typer.Argument(
        ..., metavar="DATA...", help="JSONL files ('-' for stdin) with a text and a gold field."
    ),
    model: str | None = opts.MODEL,
    modes: str = typer.Option(
        "prompt,constrained",
        "--modes",
        help="Comma-separated: prompt, constrained, constrained-nojump.",
    ),
    text_key: str = typer.Option("text", "--text-key", help="JSONL field holding the text."),
    id_key: str = typer.Option("id", "--id-key", help="JSONL field holding the id."),
    gold_key: str = typer.Option(
        "gold", "--gold-key", help="JSONL field with the expected value (or whole record)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=0, help="Only the first N records."),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Records per batch."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report instead."),
    report: str | None = typer.Option(
        None, "--report", metavar="FILE.html", help="Also write a self-contained HTML report."
    ),
    *,
    run: opts.RunArgs,
) -> None:
    """Run prompt-only and constrained extraction on the same records and compare them.

    Prints a table (or --json) of parse and schema-valid rates, field accuracy and exact
    match against the gold field, tokens, forward passes, forced tokens and seconds per
    record. Progress goes to stderr.

    Example: kor-cli compare schemas/person.yaml samples/people.jsonl
    """

    def action() -> None:
        from kor_cli.compare import CompareOptions, comparison_table, parse_modes, run_compare
        from kor_cli.report import check_report_path, write_report

        chosen = parse_modes(modes)
        if report:
            check_report_path(report)
        base = run.extract_options()
        options = CompareOptions(
            inputs=tuple(inputs),
            modes=chosen,
            text_key=text_key,
            id_key=id_key,
            gold_key=gold_key,
            batch_size=batch_size,
            limit=limit,
        )
        result = run_compare(schema, model, base, options, **run.placement())
        if report:
            write_report(result, report)
        if as_json:
            emit_json(result, indent=2)
        else:
            _stdout_console().print(comparison_table(result))
        errors = result["input_errors"]
        if errors:
            count = plural(len(errors), "input error")
            warn(f"{count} (not compared), first: {errors[0]['error']}")

    run_guarded(action)


def _stdout_console() -> Console:
    """A rich console on stdout, for tables that are a command's result."""
    return Console(highlight=False, emoji=False)


TRACE_EXIT_CODES = """\
Exit codes: 0 decoding finished · 1 it stopped at --max-tokens · 2 usage, schema or input
error · 4 model failed to load · 130 interrupted."""


@opts.run_options(extraction=True)
def trace_cmd(
    schema: str = typer.Argument(..., help=opts.SCHEMA_HELP),
    input_path: str = typer.Argument("-", metavar="[INPUT|-]", help=opts.INPUT_HELP),
    max_input_bytes: int = opts.MAX_INPUT_BYTES,
    model: str | None = opts.MODEL,
    as_json: bool = typer.Option(False, "--json", help="Print the steps as a JSON list."),
    jump: bool = opts.JUMP,
    *,
    run: opts.RunArgs,
) -> None:
    """Show constrained decoding of one text step by step.

    Per sampled token: how many tokens the grammar allowed, the model's probability mass
    on them (how much of its distribution the schema kept), the chosen token and its
    probability. Jump-forward chunks get lines of their own. The summary is the table's
    caption (on stderr with --json); the output text goes to stderr.

    Example: kor-cli trace schemas/person.yaml samples/person.txt
    """

    def action() -> int:
        from kor_cli.backends import load_backend
        from kor_cli.schema import load_schema
        from kor_cli.trace import run_trace, summary, trace_table

        loaded_schema = load_schema(schema, lenient=run.lenient, open_objects=run.open_objects)
        text = opts.stdin_or(input_path, max_input_bytes)
        options = run.extract_options(jump=jump)
        backend = load_backend(model, **run.placement())
        opts.check_fits(text, input_path, backend)
        steps, decoded, warnings = run_trace(loaded_schema, backend, text, options)
        for message in warnings:
            warn(message)
        if as_json:
            emit_json([step.to_dict(number) for number, step in enumerate(steps)], indent=2)
        else:
            _stdout_console().print(trace_table(steps, decoded))
        if as_json:
            info(summary(steps, decoded))
        info(f"output: {decoded.text}")
        return EXIT_OK if decoded.finish_reason == "stop" else EXIT_INVALID

    raise typer.Exit(run_guarded(action))
