"""`benchmarks/engine_adapters.py`: a cold compile reuses nothing an earlier compile left."""

from __future__ import annotations

import sys
from pathlib import Path

from kor_cli.grammar import shared_rules
from kor_cli.grammar.compile import compile_json_schema

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_clear_caches_drops_the_shared_rules_and_their_frames() -> None:
    """A `{}` value's "any value" rule and its frame masks are process-wide memos
    (`shared_rules`): a benchmark's next cold repeat must build them again."""
    sys.path.insert(0, str(BENCH))
    try:
        from engine_adapters import Kor
    finally:
        sys.path.remove(str(BENCH))
    grammar = compile_json_schema({"type": "object", "properties": {"a": {}}})
    grammar.rules.reachable_rules()
    assert shared_rules.memoized()
    Kor.clear_caches()
    assert not shared_rules.memoized()
    assert shared_rules.one_offs()["rules"] == shared_rules.one_offs()["frames"] == 0
