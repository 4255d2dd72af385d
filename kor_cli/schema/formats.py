"""String `format` values kor-cli understands, with the checks validation runs.

Checks follow JSON Schema's formats (RFC 3339 dates and times, except that a time zone
is optional), so a value the model accepts also fits the JSON Schema given to the decoder.
Every other format the grammar engine enforces (hostname, uri, uri-reference, duration,
json-pointer, ...) is checked with the very regex the engine uses; `regex` is checked by
Python's `re` (the grammar enforces a subset). Validation
enforces `format` (an annotation in JSON Schema 2020-12), as the grammar does.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import uuid
from collections.abc import Callable

from kor_cli.grammar.json_formats import FORMATS as ENGINE_FORMATS

_DATE = r"\d{4}-\d{2}-\d{2}"
_TIME = r"\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})?"
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _date(value: str) -> None:
    if not re.fullmatch(_DATE, value):
        raise ValueError("expected a date as YYYY-MM-DD")
    datetime.date.fromisoformat(value)


def _time(value: str) -> None:
    if not re.fullmatch(_TIME, value):
        raise ValueError("expected a time as HH:MM:SS with an optional time zone")
    datetime.time.fromisoformat(value[:8])


def _date_time(value: str) -> None:
    if not re.fullmatch(f"{_DATE}[Tt]{_TIME}", value):
        raise ValueError("expected a date-time as YYYY-MM-DDTHH:MM:SS")
    _date(value[:10])
    _time(value[11:])


def _email(value: str) -> None:
    if not _EMAIL.fullmatch(value):
        raise ValueError("expected an email address")


def _uuid(value: str) -> None:
    if not _UUID.fullmatch(value):
        raise ValueError("expected a UUID such as 123e4567-e89b-12d3-a456-426614174000")
    uuid.UUID(value)


def _ipv4(value: str) -> None:
    ipaddress.IPv4Address(value)


def _ipv6(value: str) -> None:
    ipaddress.IPv6Address(value)


def _regex(value: str) -> None:
    """Python `re` compiles it (as jsonschema checks `regex`); the grammar accepts a subset
    that ECMA-262 compiles too."""
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError) as error:
        raise ValueError(f"expected a regular expression: {error}") from None


def _engine_check(name: str) -> Callable[[str], None]:
    pattern = re.compile(ENGINE_FORMATS[name])

    def check(value: str) -> None:
        if not pattern.fullmatch(value):
            raise ValueError(f"expected a {name}")

    return check


FORMAT_CHECKS: dict[str, Callable[[str], None]] = {
    "date": _date,
    "time": _time,
    "date-time": _date_time,
    "email": _email,
    "uuid": _uuid,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "regex": _regex,
}
FORMAT_CHECKS.update({n: _engine_check(n) for n in ENGINE_FORMATS if n not in FORMAT_CHECKS})
FORMATS: tuple[str, ...] = tuple(FORMAT_CHECKS)


def format_checker(name: str) -> Callable[[str], str]:
    """A Pydantic after-validator enforcing format `name` (ValueError on mismatch)."""
    check = FORMAT_CHECKS[name]

    def validate(value: str) -> str:
        check(value)
        return value

    return validate


def is_valid_format(name: str, value: object) -> bool:
    """True when `value` is no string, `name` is no known format, or the check passes."""
    check = FORMAT_CHECKS.get(name)
    if check is None or not isinstance(value, str):
        return True
    try:
        check(value)
    except ValueError:
        return False
    return True
