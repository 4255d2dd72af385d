"""One runner stream fed by concurrent callers: the batches a Ray worker is sent share its
slots.

Each `run(records)` call (a Ray actor call, on one of the actor's threads) queues its
records and waits for their rows; one thread runs `Runner.stream` (kor_cli/runner.py) over
every queued record in arrival order. A record of the next batch takes a slot the moment
any row ends, so no row waits for the slowest of its batch (continuous batching across
batches, as in a single-process run). The source never blocks while rows are in flight:
with nothing queued it yields `WAIT` and they go on; it sleeps only when idle. A failed
stream fails every waiting call with its error; the next call starts a fresh one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kor_cli.decode import WAIT

if TYPE_CHECKING:
    from kor_cli.records import Record
    from kor_cli.result import ExtractResult
    from kor_cli.runner import Runner


class _Call:
    """One caller's batch: how many rows it waits for, and them (or the stream's error)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.rows: list[ExtractResult] = []
        self.error: BaseException | None = None
        self.done = threading.Event()


class SharedStream:
    """Batches from concurrent `run` calls through one `Runner.stream`, rows per call."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.lock = threading.Condition()
        self.queued: deque[Record] = deque()  # records not yet pulled by the stream
        self.calls: deque[_Call] = deque()  # calls with rows to come, in queue order
        self.in_flight = 0  # records pulled whose rows are not out yet
        self.thread: threading.Thread | None = None

    def run(self, records: list[Record]) -> list[ExtractResult]:
        """The rows of `records`, in order, once all of them are done."""
        if not records:
            return []
        call = _Call(len(records))
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._serve, name="kor-cli-stream", daemon=True
                )
                self.thread.start()
            self.queued.extend(records)
            self.calls.append(call)
            self.lock.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.rows

    def _source(self) -> Iterator[Any]:
        """Queued records; WAIT while rows are in flight and none is queued; sleeps when
        nothing is in flight."""
        while True:
            with self.lock:
                while not self.queued and not self.in_flight:
                    self.lock.wait()
                if self.queued:
                    self.in_flight += 1
                    item: Any = self.queued.popleft()
                else:
                    item = WAIT
            yield item

    def _serve(self) -> None:
        try:
            for rows in self.runner.stream(self._source()):
                with self.lock:
                    self.in_flight -= len(rows)
                    for row in rows:
                        call = self.calls[0]
                        call.rows.append(row)
                        if len(call.rows) == call.size:
                            self.calls.popleft()
                            call.done.set()
        except BaseException as error:  # noqa: BLE001 - handed to every waiting caller
            with self.lock:
                self.thread = None
                self.queued.clear()
                self.in_flight = 0
                for call in self.calls:
                    call.error = error
                    call.done.set()
                self.calls.clear()
