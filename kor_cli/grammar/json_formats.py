"""String `format`s as regexes (matched in full against the decoded string).

Formats are annotations in JSON Schema 2020-12; the grammar enforces them anyway (only
ever narrowing what is accepted). Dates are calendar-exact (month lengths, leap years).
"""

from __future__ import annotations

_YEAR = r"(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    rf"(?:{_YEAR}-(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    rf"|{_YEAR}-(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    rf"|{_YEAR}-02-(?:0[1-9]|1[0-9]|2[0-8])"
    rf"|{_LEAP}-02-29)"
)
_HOUR_MINUTE = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_TIME = rf"{_HOUR_MINUTE}:[0-5][0-9](?:\.[0-9]+)?(?:Z|[+-]{_HOUR_MINUTE})"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_HEX = "[0-9a-fA-F]"
_URI_CHAR = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"

FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}T{_TIME}",
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+",
    "hostname": rf"{_LABEL}(?:\.{_LABEL})*",
    "ipv4": rf"{_OCTET}(?:\.{_OCTET}){{3}}",
    "uuid": rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    "uri": rf"[A-Za-z][A-Za-z0-9+.\-]*:{_URI_CHAR}+",
}
