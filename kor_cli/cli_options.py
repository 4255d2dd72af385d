"""Typer option declarations shared by the commands that run a model, their assembly
into `ExtractOptions`, and the input checks those commands share. No torch import here."""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from kor_cli.errors import InputError

if TYPE_CHECKING:
    from kor_cli.decode import SamplingOptions
    from kor_cli.extract import ExtractOptions

Command = TypeVar("Command", bound=Callable[..., Any])

SCHEMA_HELP = (
    "Schema: file.yaml | file.json | path/to/file.py:Class | package.module:Class "
    "(a .py or module schema runs its code on import: use only files you trust)."
)
INPUT_HELP = "Input text file, or '-' for stdin (the default)."

MAX_INPUT_BYTES = typer.Option(
    8 << 20,
    "--max-input-bytes",
    min=1,
    max=1 << 40,
    help="Refuse an input text larger than this (it is never read past it).",
)
MODEL = typer.Option(
    None,
    "-m",
    "--model",
    help="Local model folder or hub id. Default: $KOR_CLI_MODEL, else the embedded demo "
    "model (a tiny stand-in trained on the sample schemas only).",
    show_default=False,
)
MODE = typer.Option(
    "constrained",
    "--mode",
    help="constrained (masked decoding: output always parses and matches the schema) | "
    "prompt (Kor's approach: ask, parse <json>, validate).",
)


def _finite(value: float | None) -> float | None:
    """Parse-time check: NaN and infinities are no setting."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def _device(value: str) -> str:
    """Parse-time check of the device's form (whether it exists is checked before loading)."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d{1,3})?", value):
        raise typer.BadParameter(f"{value!r} is not auto, cpu, cuda or cuda:N")
    return value


MAX_TOKENS = typer.Option(
    256, "--max-tokens", min=1, max=1_000_000, help="Most tokens to generate."
)
TEMPERATURE = typer.Option(
    0.0, "--temperature", min=0.0, max=100.0, callback=_finite, help="0 = greedy."
)
TOP_K = typer.Option(0, "--top-k", min=0, max=1 << 31, help="Sample from the k best (0 = off).")
TOP_P = typer.Option(1.0, "--top-p", min=0.0, max=1.0, callback=_finite, help="Nucleus sampling.")
SEED = typer.Option(None, "--seed", min=0, max=(1 << 63) - 1, help="Random seed for sampling.")
CHAT = typer.Option(
    None, "--chat/--no-chat", help="Apply the chat template (default: when the model has one)."
)
DEVICE = typer.Option("auto", "--device", callback=_device, help="auto | cpu | cuda | cuda:N.")
DTYPE = typer.Option("auto", "--dtype", help="auto | float32 | bfloat16 | float16.")
THREADS = typer.Option(
    0, "--threads", min=0, help="CPU threads for the model (0 = by model size: 1 for small ones)."
)
COMPILE = typer.Option(
    None,
    "--compile/--no-compile",
    help="CUDA graphs for decode steps (default: on for CUDA, falling back to eager if the "
    "capture fails).",
)
TEMPLATE = typer.Option(None, "--template", help="Instruction template file.")
INPUT_FORMATTER = typer.Option(
    "none", "--input-formatter", help="none | triple_quotes | text_prefix (as in Kor)."
)
JUMP = typer.Option(
    True, "--jump/--no-jump", help="Constrained: append text the schema fixes without sampling."
)
ALLOW_REFUSAL = typer.Option(
    False,
    "--allow-refusal",
    help='Constrained: also accept {"error": "..."} so the model can say there is no answer.',
)
ALLOW_EMPTY = typer.Option(
    None,
    "--allow-empty/--no-allow-empty",
    help="Accept Kor's 'nothing here' {} as a valid, empty result (default: when the "
    "schema has an example with empty output).",
    show_default=False,
)
LENIENT = typer.Option(
    False,
    "--lenient",
    help="Accept a JSON Schema whose keywords the grammar cannot all enforce: generation drops "
    "them with a warning; validation still checks them.",
)
OPEN_OBJECTS = typer.Option(
    False,
    "--open-objects",
    help="JSON Schema objects without 'additionalProperties' allow other members, as the "
    "spec says (default: closed, the right default for extraction).",
)


def build_extract_options(
    *,
    mode: str,
    max_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int | None,
    chat: bool | None,
    template: str | None,
    input_formatter: str,
    jump: bool,
    allow_refusal: bool,
    lenient: bool,
    open_objects: bool = False,
    allow_empty: bool | None = None,
) -> ExtractOptions:
    """Assemble and check the extraction options given on the command line."""
    from kor_cli.decode import SamplingOptions
    from kor_cli.extract import ExtractOptions, check_options
    from kor_cli.prompt import load_template

    options = ExtractOptions(
        mode=mode,  # type: ignore[arg-type]
        sampling=SamplingOptions(
            temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, max_new_tokens=max_tokens
        ),
        chat=chat,
        template=load_template(template) if template else None,
        input_formatter=input_formatter,
        jump=jump,
        allow_refusal=allow_refusal,
        allow_empty=allow_empty,
        lenient=lenient,
        open_objects=open_objects,
    )
    check_options(options)
    return options


# The options every model-running command shares, as (annotation, typer option), in --help
# order: sampling, then the model's placement, then (for extraction) prompt and schema.
_SAMPLING: dict[str, tuple[Any, Any]] = {
    "max_tokens": (int, MAX_TOKENS),
    "temperature": (float, TEMPERATURE),
    "top_k": (int, TOP_K),
    "top_p": (float, TOP_P),
    "seed": (int | None, SEED),
    "chat": (bool | None, CHAT),
}
_PLACEMENT: dict[str, tuple[Any, Any]] = {
    "device": (str, DEVICE),
    "dtype": (str, DTYPE),
    "threads": (int, THREADS),
    "compile": (bool | None, COMPILE),
}
_EXTRACTION: dict[str, tuple[Any, Any]] = {
    "template": (str | None, TEMPLATE),
    "input_formatter": (str, INPUT_FORMATTER),
    "allow_refusal": (bool, ALLOW_REFUSAL),
    "allow_empty": (bool | None, ALLOW_EMPTY),
    "lenient": (bool, LENIENT),
    "open_objects": (bool, OPEN_OBJECTS),
}


@dataclass(frozen=True)
class RunArgs:
    """The shared options as given on one command line (see `run_options`)."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def placement(self) -> dict[str, Any]:
        """`load_backend`'s keyword arguments: device, dtype, threads, compile."""
        return {name: self.values[name] for name in _PLACEMENT}

    def sampling(self) -> SamplingOptions:
        from kor_cli.decode import SamplingOptions

        v = self.values
        return SamplingOptions(
            temperature=v["temperature"],
            top_k=v["top_k"],
            top_p=v["top_p"],
            seed=v["seed"],
            max_new_tokens=v["max_tokens"],
        )

    def extract_options(self, mode: str = "constrained", jump: bool = True) -> ExtractOptions:
        """The checked `ExtractOptions` (an extraction command's `RunArgs`)."""
        extraction = {name: self.values[name] for name in _EXTRACTION}
        sampling = {name: self.values[name] for name in _SAMPLING}
        return build_extract_options(mode=mode, jump=jump, **sampling, **extraction)


def run_options(*, extraction: bool) -> Callable[[Command], Command]:
    """Give a command the shared sampling and placement options (and, with `extraction`,
    the prompt and schema ones) after its own, collected into its `run: RunArgs`
    parameter: declared once here instead of in every command's signature."""
    shared = {**_SAMPLING, **_PLACEMENT, **(_EXTRACTION if extraction else {})}

    def decorate(func: Command) -> Command:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "run"]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
            for name, (kind, option) in shared.items()
        ]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            run = RunArgs({name: kwargs.pop(name) for name in shared})
            return func(run=run, **kwargs)

        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command  # type: ignore[return-value]

    return decorate


def stdin_or(path: str, limit: int | None = None) -> str:
    """The text of file `path`, or of stdin for '-' (an InputError on a terminal)."""
    if path == "-" and sys.stdin.isatty():
        raise InputError("no input text: pass a file or pipe text on stdin")
    from kor_cli.inputs import read_text

    return read_text(path) if limit is None else read_text(path, limit=limit)


def check_fits(text: str, input_path: str, backend: object) -> None:
    """Refuse a text the model's context cannot hold before it is tokenized."""
    from kor_cli.inputs import check_fits as fits
    from kor_cli.runner import model_context

    loaded = getattr(backend, "loaded", backend)
    source = "<stdin>" if input_path == "-" else input_path
    fits(text, model_context(loaded), source)  # type: ignore[arg-type]
