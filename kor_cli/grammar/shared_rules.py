"""Process-wide memos of schema-independent pieces: built once per process, not per schema.

Rules. The "any value" rule at a name-free location (`json_containers.any_call`: `{}`,
`true`, free items and members; rule 1 of most small schemas) is the same for every schema
compiled with the same options: one level of value (scalars, `[` items `]`, `{` members
`}`) calling itself. Building its DFA costs a few milliseconds, so a cold compile paid
that for every schema. `shared_rule` keeps such a rule, split into a `rules.Rule`, for the
rest of the process. Keys are tight by construction: the caller's key names every compiler
option that could shape the rule (whitespace, lenient, open_objects, the recursion and
any-value depths), and `RuleBook` adds the rule's id (its calls to itself spell the id in
the DFA) and the state limit. An option missing from the key would be a wrong rule, so the
key lists all of `SchemaCompiler`'s options, not only those known to matter (a test checks
it; more keys only cost a build).

Automata. `once` marks a builder of a fixed automaton (every number spelling, any string
character, any string): built on first use and kept, like `functools.cache`.

Nodes. `shared_node` keeps a schema-independent AST piece, e.g. a string `format` parsed
from its regex (`date-time` is ~465 characters, ~1 ms to parse): the caller's key names
all it depends on (format name, dialect, repeat limit). Nodes are immutable; within one
compile the piece is one object wherever it is used, as when each compile parsed it once.

Frames. A shared rule's frame masks over a tokenizer (`frame_masks`) depend only on the
rule, the rules it calls (shared too) and the tokenizer: `shared_frame` keeps them per
(rule key, state) and tokenizer object, so the next grammar with that rule reads them.

`dfa_cache.clear()` (a benchmark's cold compile) drops none of these: they are a one-off
per process, and `one_offs` says what they cost (benchmarks report it beside their
figures; nodes are counted with the automata). `clear()` drops the rules and frames
(tests; a benchmark's timed pass) but not the automata and nodes.
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from kor_cli.grammar.ast import Node
    from kor_cli.grammar.rules import Rule

_MAX_RULES = 64  # distinct keys kept (a few options x rule ids in practice)
_MAX_NODES = 256  # AST pieces kept (formats x dialects x repeat limits in practice)
_MAX_FRAMES = 1024  # frame masks kept (~20 KiB each on Qwen)
T = TypeVar("T")
F = TypeVar("F")

_memo: OrderedDict[Hashable, Rule] = OrderedDict()
_rules = [0, 0]  # rules built since `clear`, nanoseconds spent building them
_automata: dict[str, int] = {}  # automaton builder -> nanoseconds its one build took
_nodes: OrderedDict[Hashable, Node] = OrderedDict()
_building = [0]  # automata being built right now (nested ones are counted in the outer)
_frames: OrderedDict[Hashable, tuple[object, object]] = OrderedDict()  # -> (info, frame)
_built_frames = [0, 0]  # frame masks built since `clear`, nanoseconds spent


def shared_rule(key: Hashable, build: Callable[[], Rule]) -> Rule:
    """The rule memoized under `key`, or `build()` (kept; the oldest dropped past the bound)."""
    found = _memo.get(key)
    if found is not None:
        _memo.move_to_end(key)
        return found
    start = time.perf_counter_ns()
    rule = _memo[key] = build()
    _rules[0] += 1
    _rules[1] += time.perf_counter_ns() - start
    if len(_memo) > _MAX_RULES:
        _memo.popitem(last=False)
    return rule


def once(build: Callable[[], T]) -> Callable[[], T]:
    """`build()` on the first call, the same object after (its cost kept for `one_offs`)."""

    @functools.cache
    def built() -> T:
        start = time.perf_counter_ns()
        _building[0] += 1
        try:
            out = build()
        finally:
            _building[0] -= 1
        if not _building[0]:
            _automata[build.__qualname__] = time.perf_counter_ns() - start
        return out

    return functools.wraps(build)(built)


def shared_node(label: str, key: Hashable, build: Callable[[], Node]) -> Node:
    """The AST piece memoized under `key`, or `build()` (kept, its cost counted with the
    automata under `label`; the oldest dropped past the bound). An error is not kept."""
    found = _nodes.get(key)
    if found is not None:
        return found
    start = time.perf_counter_ns()
    node = _nodes[key] = build()
    if not _building[0]:
        _automata[label] = _automata.get(label, 0) + time.perf_counter_ns() - start
    if len(_nodes) > _MAX_NODES:
        _nodes.popitem(last=False)
    return node


def shared_frame(key: Hashable, info: object, build: Callable[[], F]) -> F:
    """The frame mask memoized under `key` (a shared rule's memo key and a state) for the
    tokenizer `info` (the very object: kept with the frame, so no other can match), or
    `build()` (kept; the oldest dropped past the bound)."""
    found = _frames.get(key)
    if found is not None and found[0] is info:
        _frames.move_to_end(key)
        return cast(F, found[1])
    start = time.perf_counter_ns()
    frame = build()
    _frames[key] = (info, frame)
    _built_frames[0] += 1
    _built_frames[1] += time.perf_counter_ns() - start
    if len(_frames) > _MAX_FRAMES:
        _frames.popitem(last=False)
    return frame


def memoized() -> int:
    """How many rules the memo holds."""
    return len(_memo)


def one_offs() -> dict[str, float]:
    """What the process paid for these memos: the rules built since the last `clear` and
    the milliseconds they took, the automata built and theirs."""
    return {
        "rules": _rules[0],
        "rules_ms": round(_rules[1] / 1e6, 2),
        "automata": len(_automata),
        "automata_ms": round(sum(_automata.values()) / 1e6, 2),
        "frames": _built_frames[0],
        "frames_ms": round(_built_frames[1] / 1e6, 2),
    }


def clear() -> None:
    """Forget every memoized rule and what they cost (the automata stay)."""
    _memo.clear()
    _rules[:] = [0, 0]
    _frames.clear()
    _built_frames[:] = [0, 0]
