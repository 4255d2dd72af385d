"""A process-wide memo of schema-independent rules: built once per process, not per schema.

The "any value" rule at a name-free location (`json_containers.any_call`: `{}`, `true`,
free items and members; rule 1 of most small schemas) is the same for every schema
compiled with the same options: one level of value (scalars, `[` items `]`, `{` members
`}`) calling itself. Building its DFA costs a few milliseconds, so a cold compile paid
that for every schema. Here such a rule is kept, split into a `rules.Rule`, for the rest
of the process.

Keys are tight by construction: the caller's key names every compiler option that could
shape the rule (whitespace, lenient, open_objects, the recursion and any-value depths),
and `RuleBook` adds the rule's id (its calls to itself spell the id in the DFA) and the
state limit. An option missing from the key would be a wrong rule, so the key lists all
of `SchemaCompiler`'s options, not only those known to matter (more keys only cost a
build). `dfa_cache.clear()` (a benchmark's cold compile) does not drop this memo: it is a
one-off per process, reported as such beside the figures (README). `clear()` drops it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kor_cli.grammar.rules import Rule

_MAX_RULES = 64  # distinct keys kept (a few options x rule ids in practice)

_memo: OrderedDict[Hashable, Rule] = OrderedDict()
_built = 0  # rules built since `clear`
_seconds = 0.0  # seconds spent building them


def shared_rule(key: Hashable, build: Callable[[], Rule]) -> Rule:
    """The rule memoized under `key`, or `build()` (kept; the oldest dropped past the bound)."""
    global _built, _seconds
    found = _memo.get(key)
    if found is not None:
        _memo.move_to_end(key)
        return found
    start = time.perf_counter()
    rule = _memo[key] = build()
    _built += 1
    _seconds += time.perf_counter() - start
    if len(_memo) > _MAX_RULES:
        _memo.popitem(last=False)
    return rule


def memoized() -> int:
    """How many rules the memo holds."""
    return len(_memo)


def one_offs() -> tuple[int, float]:
    """(rules built, seconds spent building them) since the last `clear`: the one-off cost
    a process pays for the memo (benchmarks report it)."""
    return _built, _seconds


def clear() -> None:
    """Forget every memoized rule and the one-off cost (tests; benchmarks)."""
    global _built, _seconds
    _memo.clear()
    _built, _seconds = 0, 0.0
