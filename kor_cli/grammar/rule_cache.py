"""Grammars with calls on the disk cache: the rules built so far, read back without a compile.

A grammar with calls (`RuleSet`: recursion, large values split into rules) is stored as its
public surface only: the start rule, the names, the grammar key, and each rule built so far
by id, in build order (its split DFA, its calls, whether it generates the empty string).
Nothing of the compiler's ASTs is stored, so how the compiler defers its rules does not
matter as long as the same source compiles to the same rules by id.

A grammar read back (`CachedRules`) builds nothing while the matcher stays inside the
rules it holds. When it reaches a rule the file lacks, it compiles the source once (the
`build` the caller passes), asks the fresh grammar for the rules in the order the file
built them (so a compiler that numbers rules as it reaches them numbers them the same) and
checks that each is the rule the file holds; then it takes the missing rule from it. A
mismatch (a stale file the key did not catch) is a named `GrammarError`, and the file is
removed. Rules built later in a run are written back at exit (`save_cached_rules`), so the
next run holds them too.

The key covers the grammar source and options (the caller's), `ENGINE_VERSION`, and the
size and modification time of the grammar package's modules (a changed compiler never reads
an old file; a hash of their text would cost more than the whole read).
"""

from __future__ import annotations

import atexit
import json
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.compile import Grammar
from kor_cli.grammar.disk_cache import (
    blob_key,
    blob_path,
    engine_stamp,
    read_arrays,
    write_arrays,
)
from kor_cli.grammar.rules import Rule, RuleSet

_FORMAT = "kor-rule-cache-v1"


def rules_path(root: Path | str, source: Sequence[str]) -> Path:
    """The cache file of the grammar with calls compiled from `source`."""
    return blob_path(root, "rules", blob_key(_FORMAT, engine_stamp(), *source), "bin")


class CachedRules(RuleSet):
    """A `RuleSet` read back from the disk cache; a rule it lacks comes from one fresh
    compile of the source (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        rules: list[tuple[int, Rule, bool]],
        fresh: Callable[[], RuleSet],
    ) -> None:
        names = {int(k): str(v) for k, v in meta["names"].items()}
        checked = {int(a): int(i) for a, i in meta.get("checked", [])}
        super().__init__(
            int(meta["start"]), self._fresh_body, names, str(meta["key"]), checked=checked
        )
        self.free = int(meta["free"])
        for rule_id, rule, nullable in rules:
            self.seed(rule_id, rule, nullable)
        self._path = path
        self._stored_key = str(meta["key"])  # the compiled grammar's `key()`
        self._stored = {rule_id: rule.dfa for rule_id, rule, _ in rules}  # in build order
        self._compile = fresh
        self._replayed: RuleSet | None = None

    def fresh(self) -> RuleSet:
        """The source compiled anew, asked for the stored rules in their order (checked)."""
        if self._replayed is None:
            rules = self._compile()
            for rule_id, dfa in self._stored.items():
                if rules.rule(rule_id).dfa.fingerprint() != dfa.fingerprint():
                    try:
                        self._path.unlink()
                    except OSError:
                        pass
                    raise GrammarError(
                        f"the disk cache of this grammar is stale ({self._path}; removed):"
                        " run again"
                    )
            self._replayed = rules
        return self._replayed

    def key(self) -> str:
        return self._stored_key

    def _make(self, rule_id: int) -> Rule:
        return self.fresh().rule(rule_id)

    def _fresh_body(self, rule_id: int) -> ByteDFA:
        return self.fresh().body(rule_id)


def load_rules(
    path: Path, fresh: Callable[[], RuleSet]
) -> tuple[CachedRules, dict[str, Any]] | None:
    """The rules stored at `path` and the caller's metadata (`extra` of `save_rules`), or
    None when the file is missing or unreadable."""
    data = read_arrays(path)
    if data is None:
        return None
    try:
        meta = json.loads(str(data["meta"]))
        if meta.get("format") != _FORMAT:
            return None
        heads = data["heads"]  # per rule: id, states, start, nullable, calls
        tables, accepting, calls = data["tables"], data["accepting"], data["calls"]
        rules, row, call_at = [], 0, 0
        for rule_id, states, start, nullable, count in heads.tolist():
            dfa = ByteDFA(tables[row : row + states], accepting[row : row + states], start)
            found: dict[int, list[tuple[int, int]]] = {}
            for state, callee, ret in calls[call_at : call_at + count].tolist():
                found.setdefault(state, []).append((callee, ret))
            frozen = {s: tuple(pairs) for s, pairs in found.items()}
            rules.append((rule_id, Rule(dfa, MappingProxyType(frozen)), bool(nullable)))
            row, call_at = row + states, call_at + count
        out = CachedRules(path, meta, rules, fresh)
    except (KeyError, ValueError, TypeError, IndexError):
        return None
    extra = meta.get("extra", {})
    track(out, path, extra, out.built)
    return out, extra


def save_rules(path: Path, rules: RuleSet, extra: dict[str, Any]) -> bool:
    """Store the rules built so far (a keyed `RuleSet` only) with the caller's JSON
    metadata `extra`; False when nothing was written."""
    if not rules.keyed:
        return False
    built = rules.built_rules()
    heads, tables, accepting, calls = [], [], [], []
    for rule_id, rule, nullable in built:
        dfa = rule.dfa
        table = np.asarray(dfa.transitions, dtype=np.int32)
        pairs = [(s, c, r) for s, group in sorted(rule.calls.items()) for c, r in group]
        heads.append((rule_id, len(table), int(dfa.start), int(nullable), len(pairs)))
        tables.append(table)
        accepting.append(np.asarray(dfa.accepting, dtype=bool))
        calls.extend(pairs)
    meta = {
        "format": _FORMAT,
        "start": rules.start,
        "names": {str(k): v for k, v in rules.names.items()},
        "key": rules.key(),
        "free": rules.free,
        "checked": sorted(rules.checked.items()),  # uniqueItems arrays checked at run time
        "extra": extra,
    }
    written = write_arrays(
        path,
        {
            "meta": np.asarray(json.dumps(meta)),
            "heads": np.asarray(heads, dtype=np.int64).reshape(-1, 5),
            "tables": np.concatenate(tables) if tables else np.zeros((0, 256), np.int32),
            "accepting": np.concatenate(accepting) if accepting else np.zeros(0, bool),
            "calls": np.asarray(calls, dtype=np.int64).reshape(-1, 3),
        },
    )
    if written:
        track(rules, path, extra, len(built))
    return written


# grammar -> (its file, its metadata, how many rules the file holds)
_TRACKED: weakref.WeakKeyDictionary[RuleSet, tuple[Path, dict[str, Any], int]] = (
    weakref.WeakKeyDictionary()
)


def track(rules: RuleSet, path: Path, extra: dict[str, Any], saved: int) -> None:
    """Write `rules` back to `path` at exit when more than `saved` rules are built by then."""
    _TRACKED[rules] = (path, extra, saved)


def save_cached_rules() -> None:
    """Write back every tracked grammar that built rules since it was read or saved."""
    for rules, (path, extra, saved) in list(_TRACKED.items()):
        if rules.built > saved:
            save_rules(path, rules, extra)


atexit.register(save_cached_rules)


def load_grammar(
    root: Path | str, source: Sequence[str], build: Callable[[], Grammar]
) -> Grammar | None:
    """The grammar with calls stored for `source`, or None (not stored, unreadable).
    `build` compiles the source; it runs only when the matcher reaches a rule the file
    lacks or a consumer asks for the DFA view."""
    fresh: list[Grammar] = []

    def compiled() -> Grammar:
        if not fresh:
            fresh.append(build())
        return fresh[0]

    found = load_rules(rules_path(root, source), lambda: compiled().rules)
    if found is None:
        return None
    rules, extra = found
    try:
        kind, warnings = str(extra["kind"]), tuple(str(w) for w in extra["warnings"])
    except (KeyError, TypeError):
        return None
    return Grammar(None, kind, warnings, rules, lambda: compiled().dfa)


def store_grammar(root: Path | str, source: Sequence[str], grammar: Grammar) -> None:
    """Store a grammar with calls (the rules built so far; more are added at exit)."""
    extra = {"kind": grammar.kind, "warnings": list(grammar.warnings)}
    save_rules(rules_path(root, source), grammar.rules, extra)
