"""Reading input texts: files or stdin, strict UTF-8, kept as they are (as Kor), never empty."""

from __future__ import annotations

import sys

from kor_cli.errors import InputError
from kor_cli.reading import MAX_INPUT_BYTES, read_limited, read_stream


def decode_text(data: bytes, source: str) -> str:
    """Decode UTF-8 strictly; name the source and byte offset of the first bad byte."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{source}: text is UTF-16 (convert it to UTF-8)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        bad = data[error.start]
        raise InputError(
            f"{source}: not valid UTF-8 (bad byte 0x{bad:02x} at offset {error.start})"
        ) from None
    if "\x00" in text:
        raise InputError(f"{source}: text holds NUL bytes (binary data?)")
    return text.removeprefix("\ufeff")


def read_text(spec: str, *, limit: int = MAX_INPUT_BYTES) -> str:
    """Read the input text from a file path or '-' (stdin); reject empty text and texts
    larger than `limit` bytes (never read past it: `/dev/zero` is refused, not read)."""
    flag = "--max-input-bytes"
    if spec == "-":
        source = "<stdin>"
        data = read_stream(sys.stdin.buffer, source, limit=limit, flag=flag)
    else:
        source = spec
        data = read_limited(spec, limit=limit, what="input text", flag=flag)
    text = decode_text(data, source)  # kept whole, trailing newlines too, as Kor does
    if not text.strip():
        raise InputError(f"{source}: input text is empty")
    return text


# No tokenizer averages more bytes per token than this over a whole text; a text longer
# than context x this cannot fit, and is refused before it is tokenized (a 1 MB single
# word can take a tokenizer minutes).
MAX_BYTES_PER_TOKEN = 16


def check_fits(text: str, context: int | None, source: str = "input text") -> None:
    """Refuse a text that cannot fit the model's context, without tokenizing it."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if context is not None and size > context * MAX_BYTES_PER_TOKEN:
        raise InputError(
            f"{source}: {size:,} bytes cannot fit the model's context of {context:,} tokens "
            "(kor-cli batch splits long texts; or use a model with a longer context)"
        )
