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
_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_H16 = r"[0-9a-fA-F]{1,4}"
_IPV4 = r"{0}(?:\.{0}){{3}}"
_DIGITS = "[0-9]+"
_DUR_TIME = rf"T(?:{_DIGITS}H(?:{_DIGITS}M(?:{_DIGITS}S)?)?|{_DIGITS}M(?:{_DIGITS}S)?|{_DIGITS}S)"
_DUR_DATE = rf"(?:{_DIGITS}D|{_DIGITS}M(?:{_DIGITS}D)?|{_DIGITS}Y(?:{_DIGITS}M(?:{_DIGITS}D)?)?)"
_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
_NO_COLON = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
# RFC 3986 relative-part: a first segment without ":" up to the first "/", or a "/" path
_RELATIVE = rf"(?:{_NO_COLON}+(?:/(?:{_PCHAR}|/)*)?|/(?:{_PCHAR}|/)*)?"


def _ipv6() -> str:
    """RFC 4291 text forms (no zone index), following RFC 3986's IPv6address rule."""
    ls32 = rf"(?:{_H16}:{_H16}|{_IPV4.format(_OCTET)})"
    forms = [rf"(?:{_H16}:){{6}}{ls32}", rf"::(?:{_H16}:){{5}}{ls32}"]
    for before, after in ((0, 4), (1, 3), (2, 2), (3, 1)):
        head = rf"(?:(?:{_H16}:){{0,{before}}}{_H16})?"
        forms.append(rf"{head}::(?:{_H16}:){{{after}}}{ls32}")
    forms += [
        rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{ls32}",
        rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
        rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
    ]
    return "(?:" + "|".join(forms) + ")"


FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": rf"{_DATE}T{_TIME}",
    "email": rf"{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+",
    "hostname": rf"{_LABEL}(?:\.{_LABEL})*",
    "ipv4": _IPV4.format(_OCTET),
    "ipv6": _ipv6(),
    "uuid": rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    "uri": rf"{_SCHEME}:(?:{_PCHAR}|/)*{_TAIL}",
    "uri-reference": rf"(?:{_SCHEME}:(?:{_PCHAR}|/)*|{_RELATIVE}){_TAIL}",
    "duration": rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_DIGITS}W)",
    "json-pointer": _POINTER,
    "relative-json-pointer": rf"(?:0|[1-9][0-9]*)(?:#|{_POINTER})",
}
