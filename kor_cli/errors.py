"""One exception family; each error carries the process exit code it maps to.

Exit codes: 0 valid record(s); 1 no valid record; 2 usage, schema, input or output error;
3 some records in a batch failed; 4 model failed to load; 130 interrupted; 70 is kept
for kor-cli's own bugs (an unexpected exception).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_MODEL = 4
EXIT_INTERRUPTED = 130


class KorError(Exception):
    """Base class: a user-facing, one-line error with an exit code."""

    exit_code: int = EXIT_USAGE
    kind: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(KorError):
    """Bad command-line arguments or option combinations."""

    kind = "usage error"


class InputError(KorError):
    """An input file or text that cannot be read or used."""

    kind = "input error"


class OutputError(KorError):
    """An output file that cannot be written (disk full, file too large, permission lost)."""

    kind = "output error"


class SchemaError(KorError):
    """A schema file that cannot be loaded, parsed or trusted."""

    kind = "schema error"


class GrammarError(SchemaError):
    """A schema, regex or choice list the constrained decoder cannot enforce.

    `keyword` names the offending keyword (or regex feature) and `pointer` the JSON
    pointer where it was found, so users can fix or `--lenient` it.
    """

    kind = "grammar error"

    def __init__(self, message: str, keyword: str | None = None, pointer: str = "") -> None:
        where = f" at '{pointer or '/'}'" if keyword is not None else ""
        label = f"unsupported keyword '{keyword}'{where}: " if keyword is not None else ""
        super().__init__(f"{label}{message}")
        self.keyword = keyword
        self.pointer = pointer


class ModelError(KorError):
    """A model or tokenizer that does not exist or will not load."""

    kind = "model error"
    exit_code = EXIT_MODEL
