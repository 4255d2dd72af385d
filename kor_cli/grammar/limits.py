"""Compile limits: the compiler refuses in bounded time and memory, with a named error.

`Limits` are read by the JSON Schema compiler (enum sizes, property counts, regex
repetition counts) and `deadline` bounds the CPU time of a whole compile (the compiling
thread's: on a loaded machine the wall clock says little about the work done): the
loops that can grow (NFA construction, subset construction, minimisation, products, the
schema walk) call `check()`. Every limit names the `GrammarOptions` field that raises it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kor_cli.errors import GrammarError

_local = threading.local()


@dataclass(frozen=True)
class Limits:
    """Size limits of one compile (see `GrammarOptions`)."""

    max_repeat: int = 1000  # regex {m,n} counts
    max_enum: int = 2000  # values of one enum
    max_properties: int = 1000  # properties of one object schema


def current() -> Limits:
    """The limits of the compile running in this thread (defaults outside one)."""
    return getattr(_local, "limits", None) or Limits()


@contextmanager
def applied(limits: Limits, seconds: float | None) -> Iterator[None]:
    """Compile under `limits` and a wall-clock limit of `seconds`."""
    saved = getattr(_local, "limits", None)
    _local.limits = limits
    try:
        with deadline(seconds):
            yield
    finally:
        _local.limits = saved


_LOOK_S = 0.005


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Within the block, `check()` raises once this thread has used `seconds` of CPU time
    (None: no limit)."""
    saved = getattr(_local, "until", None), getattr(_local, "seconds", None)
    if seconds is not None:
        until = time.thread_time() + seconds
        if saved[0] is None or until < saved[0]:
            _local.until, _local.seconds = until, seconds
            _local.next_look = 0.0
    try:
        yield
    finally:
        _local.until, _local.seconds = saved


def check() -> None:
    """Raise `GrammarError` if the current compile has run past its time limit. The CPU
    clock (a system call, slow on a loaded machine) is read at most every `_LOOK_S` of
    wall time: a thread uses no more CPU than wall time, so this answers at most that late."""
    until = getattr(_local, "until", None)
    if until is None:
        return
    now = time.perf_counter()
    if now < getattr(_local, "next_look", 0.0):
        return
    _local.next_look = now + _LOOK_S
    if time.thread_time() > until:
        raise GrammarError(
            f"compiling took more than {_local.seconds:g} s of CPU time (the grammar is too "
            "large to build in time; raise GrammarOptions.time_limit_s to wait longer)"
        )


def too_many(what: str, count: int, limit: int, option: str, keyword: str, pointer: str) -> None:
    """Raise if `count` exceeds `limit` (a named error saying which option raises it)."""
    if count > limit:
        raise GrammarError(
            f"{count} {what} exceed the limit of {limit} (raise GrammarOptions.{option})",
            keyword=keyword,
            pointer=pointer,
        )
