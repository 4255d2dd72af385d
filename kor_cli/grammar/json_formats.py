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


# format "regex": a sound subset of the patterns both ECMA-262 (u flag) and Python `re`
# compile. Outside classes `\-` is no escape under the u flag; `&`, `~`, `|` and `^` are
# left out of classes (Python warns on `&&`, `~~`, `||`; `[^]` differs), `-` only at a
# class's ends or in ranges within a-z, A-Z, 0-9; `{n,m}` only where n <= m is regular
# at a glance (n shorter than m, or both one or two digits). Groups nest 3 deep.
_META = r"\\^$.|?*+()\[\]{}"
_NUM = r"(?:0|[1-9][0-9]{0,3})"


def _digits(n: int) -> str:
    return "[0-9]" if n == 1 else rf"[1-9][0-9]{{{n - 1}}}"


def _bounds() -> str:
    """`n,m` with n <= m: m longer than n, or both one or two digits (any ordered pair)."""
    forms = [f"{_digits(a)},{_digits(b)}" for a in range(1, 4) for b in range(a + 1, 5)]
    forms += [f"{a},[{a}-9]" for a in range(10)]
    for a in range(1, 10):
        forms += [f"{a}{b},{a}[{b}-9]" for b in range(10)]
        forms += [f"{a}[0-9],[{a + 1}-9][0-9]"] if a < 9 else []
    return "(?:" + "|".join(forms) + ")"


def _class() -> str:
    """A character class: `[`, maybe `^`, ranges within a-z/A-Z/0-9, escapes, `]`."""
    ranges = "|".join(
        f"{chr(c)}-[{chr(c)}-{last}]"
        for first, last in ("az", "AZ", "09")
        for c in range(ord(first), ord(last) + 1)
    )
    item = rf"(?:{ranges}|\\[{_META}/\-dDwWsS]|[^\x00-\x1f\x7f\]\\\[\-&~|^])"
    return rf"\[\^?(?:-?{item}+-?|-)\]"


REGEX_CLASS = _class()
REGEX_BRACES = rf"\{{(?:{_NUM},?|{_bounds()})\}}"  # a counted quantifier
REGEX_CHAR = rf"(?:[^\x00-\x1f\x7f{_META}]|\\[{_META}/dDwWsS]|\.)"  # an atom but a class
REGEX_DEPTH = 3  # groups nest this deep


def _regex_format(depth: int = REGEX_DEPTH) -> str:
    atom = rf"(?:{REGEX_CHAR}|{REGEX_CLASS})"
    quantifier = rf"(?:(?:[*+?]|{REGEX_BRACES})\??)?"
    alternatives = ""  # unused at level 0
    for level in range(depth + 1):
        group = rf"|\((?:\?:)?{alternatives}\)" if level else ""
        sequence = rf"(?:[\^$]|(?:{atom}{group}){quantifier})*"
        alternatives = rf"{sequence}(?:\|{sequence})*"
    return alternatives


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
    "regex": _regex_format(),
}
