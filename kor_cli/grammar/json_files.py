"""References between schema files: a folder of sibling schemas, found by file name.

`sibling_loader(folder)` maps a `$ref` target to `folder/<name>` (or `<name>.json`) when it
is relative to the document (`"other.json"`, `"other.json#/definitions/x"`) or on
SchemaStore's hosts (`https://json.schemastore.org/other.json`). `prefix_loader` maps URIs
under given prefixes to files under folders (as the JSON-Schema-Test-Suite serves its
`remotes/` at `http://localhost:1234/`). Any other remote reference stays a named
`GrammarError` (nothing is ever downloaded).
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
    cache: dict[str, Any] = {}  # the folder's Path is made per reference to a sibling
    # file (most compiles follow none), not per compile

    def load(uri: str) -> Any:
        parts = urlsplit(uri)
        name = parts.path.rsplit("/", 1)[-1]
        if parts.hostname not in LOCAL_HOSTS or not name or name.startswith("."):
            return None
        return _read(Path(folder), [name, name + ".json"], cache)

    return load


def prefix_loader(mapping: tuple[tuple[str, str], ...], fallback: Loader | None = None) -> Loader:
    """A loader for `Resolver`: `prefix + path` -> `folder/path` for each (prefix, folder)."""
    cache: dict[str, Any] = {}

    def load(uri: str) -> Any:
        for prefix, folder in mapping:
            rest = uri[len(prefix) :] if uri.startswith(prefix) else ""
            if rest and ".." not in rest.split("/"):
                found = _read(Path(folder), [rest, rest + ".json"], cache)
                if found is not None:
                    return found
        return fallback(uri) if fallback else None

    return load


def _read(root: Path, candidates: list[str], cache: dict[str, Any]) -> Any:
    """The parsed first existing file of `candidates` under `root`, or None."""
    for candidate in candidates:
        path = root / candidate
        if path.is_file():
            key = str(path)
            if key not in cache:
                try:
                    cache[key] = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as error:
                    message = f"cannot read referenced schema {candidate!r}: {error}"
                    raise GrammarError(message, keyword="$ref") from None
            return cache[key]
    return None
