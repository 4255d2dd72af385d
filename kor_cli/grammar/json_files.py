"""References between schema files: a folder of sibling schemas, found by file name.

`sibling_loader(folder)` maps a `$ref` target to `folder/<name>` (or `<name>.json`) when it
is relative to the document (`"other.json"`, `"other.json#/definitions/x"`) or on
SchemaStore's hosts (`https://json.schemastore.org/other.json`). Any other remote
reference stays a named `GrammarError` (nothing is ever downloaded).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kor_cli.errors import GrammarError

LOCAL_HOSTS = frozenset({"kor-cli.invalid", "json.schemastore.org", "www.schemastore.org",
                         "schemastore.org"})  # fmt: skip
Loader = Callable[[str], Any]


def sibling_loader(folder: str | Path) -> Loader:
    """A loader for `Resolver`: the parsed sibling file a URI names, or None."""
    root = Path(folder)
    cache: dict[str, Any] = {}

    def load(uri: str) -> Any:
        parts = urlsplit(uri)
        name = parts.path.rsplit("/", 1)[-1]
        if parts.hostname not in LOCAL_HOSTS or not name or name.startswith("."):
            return None
        for candidate in (name, name + ".json"):
            path = root / candidate
            if path.is_file():
                if candidate not in cache:
                    try:
                        cache[candidate] = json.loads(path.read_text(encoding="utf-8"))
                    except (OSError, ValueError) as error:
                        message = f"cannot read referenced schema {candidate!r}: {error}"
                        raise GrammarError(message, keyword="$ref") from None
                return cache[candidate]
        return None

    return load
