"""Schema + text → the extraction prompt, exactly as Kor lays it out.

    <template formatted with {type_description} and {format_instructions}>
    \n\n
    Input: <example text>
    Output: <json>{"<root id>": ...}</json>
    ...
    Input: <text>
    Output:

The default template is Kor's (`kor_cli/resources/prompts/kor_default.txt`, copied to
`prompts/kor_default.txt` for users); the format instructions and example outputs come
from the output envelope (`kor_cli/envelope.py`; by default Kor's JSON encoder with
`<json>` tags, `json.dumps` with non-ASCII kept).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope
from kor_cli.errors import InputError, UsageError
from kor_cli.reading import read_limited
from kor_cli.schema import Example, Schema

InputFormatter = Literal["none", "triple_quotes", "text_prefix"]
INPUT_FORMATTERS: tuple[str, ...] = get_args(InputFormatter)
PLACEHOLDERS = ("type_description", "format_instructions")


@cache
def default_template() -> str:
    """Kor's default instruction template, from the package data."""
    path = resources.files("kor_cli").joinpath("resources/prompts/kor_default.txt")
    return path.read_text(encoding="utf-8")


def check_template(template: str, source: str = "template") -> str:
    """Return `template` if it uses Kor's placeholders only, at least one of them (Kor fills
    those a template has: one without {format_instructions} is fine); InputError otherwise."""
    try:
        parsed = [
            (name, spec, conversion)
            for _, name, spec, conversion in string.Formatter().parse(template)
            if name is not None
        ]
    except ValueError as error:
        raise InputError(
            f"{source}: bad template ({error}); write literal braces as '{{{{' and '}}}}'"
        ) from None
    fields = {name for name, _, _ in parsed}
    if any(spec or conversion for _, spec, conversion in parsed):
        raise InputError(f"{source}: placeholders take no format spec or conversion (':', '!')")
    if not fields & set(PLACEHOLDERS):
        raise InputError(
            f"{source}: template has neither {{type_description}} nor {{format_instructions}}, "
            "so the model would see no schema"
        )
    unknown = sorted(fields - set(PLACEHOLDERS))
    if unknown:
        names = ", ".join("{" + name + "}" for name in unknown)
        raise InputError(
            f"{source}: unknown placeholder(s) {names}; only {{type_description}} and "
            "{format_instructions} are filled (write literal braces as '{{' and '}}')"
        )
    return template


def load_template(path: str | Path) -> str:
    """Read and check an instruction template file (UTF-8)."""
    try:
        text = read_limited(path, what="template file").decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: template file is not UTF-8 text") from None
    return check_template(text, str(path))


def format_input(text: str, input_formatter: str = "none") -> str:
    """Kor's input formatters: as is, in triple quotes, or in triple quotes after 'Text: '."""
    if input_formatter == "none":
        return text
    if input_formatter == "triple_quotes":
        return '"""\n' + text + '\n"""'
    if input_formatter == "text_prefix":
        return 'Text: """\n' + text + '\n"""'
    raise UsageError(
        f"unknown input formatter {input_formatter!r}; use one of {', '.join(INPUT_FORMATTERS)}"
    )


def encode_output(record: dict[str, Any], envelope: Envelope = DEFAULT_ENVELOPE) -> str:
    """A record as an example output: `<json>{...}</json>` with the default envelope."""
    return envelope.encode(record)


def instruction_segment(
    schema: Schema, template: str | None = None, envelope: Envelope = DEFAULT_ENVELOPE
) -> str:
    """The template filled with the TypeScript block and the format instructions."""
    text = default_template() if template is None else check_template(template)
    return text.format(
        type_description=schema.typescript(), format_instructions=envelope.instructions
    )


def render_prompt(
    schema: Schema,
    text: str,
    *,
    template: str | None = None,
    input_formatter: str = "none",
    examples: Sequence[Example] | None = None,
    envelope: Envelope = DEFAULT_ENVELOPE,
) -> str:
    """The full prompt for `text`; `examples` defaults to the schema's own.

    Example values are those under the root id; None renders as `{}` ("nothing here").
    """
    lines: list[str] = []
    for example_text, value in schema.examples if examples is None else examples:
        record = {} if value is None else {schema.root.id: value}
        lines.append(f"Input: {format_input(example_text, input_formatter)}")
        lines.append(f"Output: {envelope.encode(record)}")
    lines.append(f"Input: {format_input(text, input_formatter)}\nOutput:")
    return f"{instruction_segment(schema, template, envelope)}\n\n" + "\n".join(lines)
