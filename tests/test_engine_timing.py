"""`benchmarks/engine_timing.py`: engines take turns in every repeat, in a rotating order; a
refusing engine is a result; paired ratios compare repeat with repeat."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def timing() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import engine_timing
    finally:
        sys.path.remove(str(BENCH))
    return engine_timing


class FakeMatcher:
    """Allows token `n` at step n: fills word 0 with the step number, rejects a wrong token."""

    def __init__(self) -> None:
        self.step = 0

    def fill(self, buf: np.ndarray) -> None:
        buf[0] = self.step

    def accept(self, token: int) -> bool:
        ok = token == self.step
        self.step += 1
        return ok


class FakeEngine:
    def __init__(self, name: str, log: list[str], refuse: bool = False) -> None:
        self.name, self.log, self.refuse = name, log, refuse

    def compile(self, schema: Any) -> str:
        self.log.append(self.name)
        if self.refuse:
            raise ValueError(f"{self.name} refuses {schema}")
        return f"{self.name}:{schema}"

    def matcher(self, compiled: str) -> FakeMatcher:
        self.log.append(f"{self.name}.m")
        return FakeMatcher()


def test_engines_take_turns_in_a_rotating_order(timing: Any) -> None:
    log: list[str] = []
    engines = {n: FakeEngine(n, log) for n in ("a", "b", "c")}
    runs = timing.measure_engines(engines, "s", [[0, 1, 2]], words=2, repeats=4)
    compiles = [entry for entry in log if "." not in entry]
    assert compiles == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # a compile makes the first matcher (the cold walk's); the last repeat's turn ends with
    # the warm walk's matcher, before the next engine compiles
    assert log[-9:] == ["a", "a.m", "a.m", "b", "b.m", "b.m", "c", "c.m", "c.m"]
    for run in runs.values():
        assert run.error is None
        assert len(run.cold) == len(run.compile_s) == 4
        result = run.result(0)
        assert len(result["cold_means_by_repeat"]) == 4
        assert result["mask_us_cold"]["n"] == result["mask_us_warm"]["n"] == 3


def test_a_refusing_engine_keeps_its_error_and_the_others_go_on(timing: Any) -> None:
    log: list[str] = []
    engines = {"a": FakeEngine("a", log), "b": FakeEngine("b", log, refuse=True)}
    runs = timing.measure_engines(engines, "s", [[0, 1]], words=1, repeats=3)
    assert runs["b"].error == "ValueError: b refuses s"
    assert log.count("b") == 1 and log.count("a") == 3 and "b.m" not in log
    assert runs["a"].error is None and len(runs["a"].cold) == 3


def test_first_repeat_keeps_masks_and_rejections(timing: Any) -> None:
    engines = {"a": FakeEngine("a", [])}
    run = timing.measure_engines(engines, "s", [[0, 1, 2], [0, 5, 2]], words=2, repeats=2)["a"]
    assert [k[:, 0].tolist() for k in run.kept] == [[0, 1, 2], [0, 1]]
    assert run.rejected == [[1, 1, 5]]


def test_paired_ratios_take_the_median_of_repeat_by_repeat_ratios(timing: Any) -> None:
    results = {
        "kor": {"cold_means_by_repeat": [10.0, 4.0, 6.0]},
        "llguidance": {"cold_means_by_repeat": [20.0, 2.0, 6.0]},
        "xgrammar": {"error": "refused"},
    }
    # 0.5, 2.0, 1.0 -> 1.0
    assert timing.paired_ratios(results) == {"llguidance": 1.0}
    results["llguidance"]["cold_means_by_repeat"] = [20.0, 8.0, 12.0]
    assert timing.paired_ratios(results) == {"llguidance": 0.5}
