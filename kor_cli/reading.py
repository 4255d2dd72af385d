"""The boundary for untrusted input: bounded reads, and JSON/YAML parsing with limits.

Every reader of user files goes through here, so every failure is a named error (the
`error` class the caller passes: InputError, SchemaError, ModelError) naming the file,
and nothing reads without bound: at most `limit` bytes (a text larger than that is
refused, never read to its end, so `/dev/zero` is harmless), a pipe that brings no data
within `PIPE_WAIT_SECONDS` is refused, nesting deeper than `MAX_DEPTH` is refused, YAML
aliases are counted before they are expanded (no "billion laughs"), and NaN/Infinity or
numbers that overflow never get past parsing.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kor_cli.errors import InputError, KorError

MAX_INPUT_BYTES = 8 << 20  # text inputs (--max-input-bytes raises it)
MAX_FILE_BYTES = 16 << 20  # schemas, templates, configs
MAX_DEPTH = 128  # nested arrays/objects in JSON and YAML
MAX_YAML_NODES = 200_000  # YAML nodes once aliases are expanded
PIPE_WAIT_SECONDS = 10.0  # a FIFO or pipe that brings no data is refused after this
_CHUNK = 1 << 16


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"


def read_limited(
    path: str | Path,
    *,
    limit: int = MAX_FILE_BYTES,
    error: type[KorError] = InputError,
    what: str = "file",
    flag: str | None = None,
) -> bytes:
    """At most `limit` bytes of a file, device or pipe; `error` if it holds more."""
    source = str(path)
    try:
        mode = os.stat(source).st_mode
    except FileNotFoundError:
        raise error(f"{source}: no such file ({what} not found)") from None
    except OSError as problem:
        raise error(f"{source}: cannot read {what} ({problem.strerror})") from None
    if stat.S_ISDIR(mode):
        raise error(f"{source}: is a directory, expected a {what}")
    regular = stat.S_ISREG(mode)
    try:
        fd = os.open(source, os.O_RDONLY | (0 if regular else os.O_NONBLOCK))
    except OSError as problem:
        raise error(f"{source}: cannot read {what} ({problem.strerror})") from None
    try:
        return _read_fd(fd, source, limit, error, what, flag, wait=not regular)
    finally:
        os.close(fd)


def read_stream(
    stream: Any,
    source: str,
    *,
    limit: int,
    error: type[KorError] = InputError,
    flag: str | None = None,
) -> bytes:
    """At most `limit` bytes of an open binary stream (stdin)."""
    try:
        data = stream.read(limit + 1)
    except OSError as problem:
        raise error(f"{source}: cannot read input ({problem.strerror})") from None
    if len(data) > limit:
        raise error(_too_large(source, "input", limit, flag))
    return bytes(data)


def _read_fd(
    fd: int,
    source: str,
    limit: int,
    error: type[KorError],
    what: str,
    flag: str | None,
    *,
    wait: bool,
) -> bytes:
    if wait:  # a pipe or device: wait for the first data, then read normally
        ready, _, _ = select.select([fd], [], [], PIPE_WAIT_SECONDS)
        if not ready:
            raise error(
                f"{source}: no data within {PIPE_WAIT_SECONDS:g} s (a pipe with no writer?)"
            )
        os.set_blocking(fd, True)
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        try:
            data = os.read(fd, min(_CHUNK, limit + 1 - size))
        except OSError as problem:
            raise error(f"{source}: cannot read {what} ({problem.strerror})") from None
        if not data:
            break
        parts.append(data)
        size += len(data)
    if size > limit:
        raise error(_too_large(source, what, limit, flag))
    return b"".join(parts)


def _too_large(source: str, what: str, limit: int, flag: str | None) -> str:
    hint = f" (raise it with {flag})" if flag else ""
    return f"{source}: {what} is larger than the limit of {human_bytes(limit)}{hint}"


# --- JSON ------------------------------------------------------------------------------------


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotFinite(f"number {text[:24]}{'...' if len(text) > 24 else ''} overflows")
    return value


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not valid JSON")


class _NotFinite(ValueError):
    pass


def load_json(text: str, source: str, *, error: type[KorError] = InputError) -> Any:
    """json.loads without NaN/Infinity/overflowing numbers, integers of at most 4,300
    digits, and at most MAX_DEPTH levels of nesting; `error` naming line and column.
    An empty `source` leaves the name out (a JSONL line names itself)."""
    try:
        value = json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as problem:
        if not source:
            raise error(f"malformed JSON: {problem.msg} at column {problem.colno}") from None
        raise error(
            f"{source}:{problem.lineno}:{problem.colno}: JSON syntax error: {problem.msg}"
        ) from None
    except _NotFinite as problem:
        raise error(_at(source, str(problem))) from None
    except ValueError as problem:  # an integer past Python's digit limit
        raise error(_at(source, first_line(problem))) from None
    except RecursionError:
        raise error(_at(source, f"nested deeper than {MAX_DEPTH} levels")) from None
    check_tree(value, source, error=error)
    return value


def _at(source: str, message: str) -> str:
    return f"{source}: {message}" if source else message


def check_tree(value: Any, source: str, *, error: type[KorError] = InputError) -> None:
    """Refuse nesting deeper than MAX_DEPTH, non-finite floats and lone surrogates."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise error(_at(source, f"nested deeper than {MAX_DEPTH} levels"))
            children = list(item.items()) if isinstance(item, dict) else item
            for child in children:
                if isinstance(item, dict):
                    key, child = child
                    _check_scalar(key, source, error)
                stack.append((child, depth + 1))
        else:
            _check_scalar(item, source, error)


def _check_scalar(item: Any, source: str, error: type[KorError]) -> None:
    if isinstance(item, float) and not math.isfinite(item):
        raise error(_at(source, f"a number is {item} (NaN and infinities are not allowed)"))
    if isinstance(item, str):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            raise error(
                _at(source, f"text {item[:20]!r} holds a lone surrogate (not valid Unicode)")
            ) from None


def first_line(problem: BaseException) -> str:
    """An exception's message, first line only (its type name when it has none)."""
    text = str(problem).strip()
    return text.splitlines()[0] if text else type(problem).__name__


# --- YAML ------------------------------------------------------------------------------------


def yaml_loader(cls: Any, text: str, source: str, *, error: type[KorError] = InputError) -> Any:
    """`cls(text)`: a YAML loader, or `error` for characters YAML does not allow (NUL,
    most control characters)."""
    import yaml

    try:
        return cls(text)
    except yaml.reader.ReaderError as problem:
        where = f" at offset {problem.position}" if problem.position is not None else ""
        raise error(f"{source}: not YAML text: {first_line(problem)}{where}") from None


def checked_yaml_data(loader: Any, source: str, *, error: type[KorError] = InputError) -> Any:
    """`loader.get_single_data()`, with the node graph checked before it is built:
    recursive aliases, more than MAX_YAML_NODES nodes once aliases are expanded, or
    nesting deeper than MAX_DEPTH are refused; then the data is checked by check_tree."""
    try:
        node = loader.get_single_node()
    except RecursionError:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    if node is None:
        return None
    _check_nodes(node, source, error)
    try:
        data = loader.construct_document(node)
    except RecursionError:
        raise error(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as problem:  # an integer past Python's digit limit
        raise error(f"{source}: {first_line(problem)}") from None
    check_tree(data, source, error=error)
    return data


def _check_nodes(root: Any, source: str, error: type[KorError]) -> None:
    """Expanded size and depth of a YAML node graph, without expanding it."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            depths[key] = 1 + max((depths[id(c)] for c in children), default=0)
            if sizes[key] > MAX_YAML_NODES:
                raise error(
                    f"{source}: more than {MAX_YAML_NODES:,} YAML nodes once aliases are "
                    "expanded (an alias bomb?)"
                )
            if depths[key] > MAX_DEPTH:
                raise error(f"{source}: nested deeper than {MAX_DEPTH} levels")
            continue
        if key in sizes:
            continue
        if key in on_path:
            mark = node.start_mark
            raise error(
                f"{source}:{mark.line + 1}:{mark.column + 1}: a recursive alias (a node "
                "that contains itself)"
            )
        if _is_mapping(node) and any(not _is_scalar(k) for k, _ in node.value):
            mark = node.start_mark
            raise error(
                f"{source}:{mark.line + 1}:{mark.column + 1}: a mapping key that is a list "
                "or mapping (keys must be plain scalars)"
            )
        on_path.add(key)
        stack.append((node, True))
        if len(on_path) > MAX_DEPTH:
            raise error(f"{source}: nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _is_mapping(node: Any) -> bool:
    import yaml

    return isinstance(node, yaml.MappingNode)


def _is_scalar(node: Any) -> bool:
    import yaml

    return isinstance(node, yaml.ScalarNode)


def _children(node: Any) -> list[Any]:
    value = node.value
    if not isinstance(value, list):
        return []
    out: list[Any] = []
    for item in value:
        out.extend(item if isinstance(item, tuple) else (item,))
    return out


# --- Python schema files -------------------------------------------------------------------


@contextlib.contextmanager
def untrusted_import() -> Iterator[None]:
    """Importing a `.py` schema runs its code: whatever it prints goes to stderr, never
    into the JSON on stdout (callers turn SystemExit into a schema error)."""
    with contextlib.redirect_stdout(sys.stderr):
        yield
