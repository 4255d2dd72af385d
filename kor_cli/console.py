"""Output channels: data (JSON) goes to stdout, messages for people go to stderr.

`run_guarded` turns kor-cli's named errors into a one-line message and an exit code,
so users never see a traceback for bad input (set KOR_CLI_DEBUG=1 to see one).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from rich.console import Console

from kor_cli.errors import EXIT_INTERRUPTED, KorError

T = TypeVar("T")

# emoji=False: user text such as ':cat:' stays as written (messages also print markup=False,
# so '[red]' in a file name is text, not a style)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

EXIT_INTERNAL = 70


def plural(count: int, noun: str) -> str:
    """'1 record', '2 records', '2 forward passes' (regular English plurals)."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}es" if noun.endswith(("s", "x", "sh", "ch")) else f"{count} {noun}s"


def emit_json(obj: Any, *, indent: int | None = None) -> None:
    """Write one JSON document to stdout (non-ASCII kept as is)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=indent) + "\n")
    sys.stdout.flush()


def emit_text(text: str) -> None:
    """Write plain text to stdout exactly as given (plus a final newline)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def info(message: str) -> None:
    """A message for people, on stderr."""
    err_console.print(message, markup=False)


def warn(message: str) -> None:
    """A warning, on stderr."""
    err_console.print(f"kor-cli: warning: {message}", style="yellow", markup=False)


def fail(error: KorError) -> NoReturn:
    """Print `error` as one line on stderr and exit with its code."""
    err_console.print(f"kor-cli: {error.kind}: {error.message}", style="red", markup=False)
    raise SystemExit(error.exit_code)


def run_guarded(action: Callable[[], T]) -> T:
    """Run `action`, mapping named errors, Ctrl-C and unexpected crashes to exit codes."""
    try:
        return action()
    except KorError as error:
        fail(error)
    except KeyboardInterrupt:
        err_console.print("kor-cli: interrupted", style="red")
        raise SystemExit(EXIT_INTERRUPTED) from None
    except (SystemExit, BrokenPipeError):
        raise
    except Exception as error:  # noqa: BLE001 - last line of defence against tracebacks
        if os.environ.get("KOR_CLI_DEBUG"):
            raise
        name = type(error).__name__
        err_console.print(
            f"kor-cli: internal error: {name}: {error} (set KOR_CLI_DEBUG=1 for a traceback)",
            style="red",
            markup=False,
        )
        raise SystemExit(EXIT_INTERNAL) from None
