"""Reading input texts: files or stdin, strict UTF-8, kept as they are (as Kor), never empty."""

from __future__ import annotations

import sys
from pathlib import Path

from kor_cli.errors import InputError


def decode_text(data: bytes, source: str) -> str:
    """Decode UTF-8 strictly; name the source and byte offset of the first bad byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start]
        raise InputError(
            f"{source}: not valid UTF-8 (bad byte 0x{bad:02x} at offset {error.start})"
        ) from None
    return text.removeprefix("\ufeff")


def read_text(spec: str) -> str:
    """Read the input text from a file path or '-' (stdin); reject empty text."""
    if spec == "-":
        source = "<stdin>"
        data = sys.stdin.buffer.read()
    else:
        path = Path(spec)
        source = str(path)
        if not path.exists():
            raise InputError(f"{source}: no such file")
        if path.is_dir():
            raise InputError(f"{source}: is a directory, expected a text file")
        try:
            data = path.read_bytes()
        except OSError as error:
            raise InputError(f"{source}: cannot read ({error.strerror})") from None
    text = decode_text(data, source)  # kept whole, trailing newlines too, as Kor does
    if not text.strip():
        raise InputError(f"{source}: input text is empty")
    return text
