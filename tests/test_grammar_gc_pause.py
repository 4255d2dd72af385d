"""The cyclic garbage collector pauses while a grammar compiles (`gc_pause`), and its state
is restored afterwards, also when pauses nest, overlap across threads or fail."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar import json_schema
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.gc_pause import paused


@pytest.fixture(autouse=True)
def _collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


def test_paused_disables_and_restores() -> None:
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    with paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_restores_the_collector() -> None:
    with pytest.raises(ValueError), paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_across_threads() -> None:
    """The first pause ending while another thread's is on leaves the collector off; it
    runs again when the last ends."""
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other() -> None:
        with paused():
            inside.set()
            release.wait(10)
            seen.append(gc.isenabled())

    thread = threading.Thread(target=other)
    with paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_compile_runs_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    states: list[bool] = []
    compile_schema = json_schema.SchemaCompiler.compile

    def recording(self: json_schema.SchemaCompiler):  # type: ignore[no-untyped-def]
        states.append(gc.isenabled())
        return compile_schema(self)

    monkeypatch.setattr(json_schema.SchemaCompiler, "compile", recording)
    compile_module._cache.clear()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    grammar = compile_json_schema(schema, GrammarOptions())
    assert states == [False]
    assert gc.isenabled()
    assert grammar.dfa.accepts(b'{"a":1}') and not grammar.dfa.accepts(b'{"a":"x"}')
    with pytest.raises(GrammarError):  # a refusal restores the collector too
        compile_json_schema({"type": "string", "pattern": "(?<=a)b"}, GrammarOptions())
    assert gc.isenabled()
