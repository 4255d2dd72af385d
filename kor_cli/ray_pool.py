"""Ray actors that extract micro-batches, and the driver's in-order, bounded pool of them.

Each `ExtractWorker` builds one `Extractor` and `Planner` (schema, model, grammar: once)
and runs the batches it is sent through one `Runner.stream` (kor_cli/runner.py via
kor_cli/shared_stream.py): the continuous batching of a single-process run, across
batches, so no row waits for the slowest of its batch. `WorkerPool.rows_of` streams
batches to the workers, at most `DEPTH` queued per worker (the actor runs that many calls
at once, on threads) and `WINDOW` per worker between the oldest unwritten batch and the
newest sent (a big input never sits in memory), and yields each batch's rows in input order.
A worker that dies has its batches sent again to the others and is replaced; a batch that
kills `MAX_ATTEMPTS` workers stops the run (the rows before it are written).
Imported only by a `--ray` run, with Ray installed.

Test hook, for tests only (no CLI option, not in --help): with `KOR_CLI_TEST_RAY_HOLD=N`
in the driver's environment (the driver passes it on to the actors it starts), worker 1 of
a run holds each batch whose first record comes after input line N for up to `HOLD_SECONDS`
before running it. tests/test_ray_batch.py sets N=1 and kills worker 1 once the first row is
written: worker 1 then always still has batches, so the kill requeues them (without the
hook the kill raced a run that takes ~0.1 s once loaded, and sometimes found nothing left).
"""

from __future__ import annotations

import heapq
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kor_cli.console import warn
from kor_cli.errors import KorError, ModelError
from kor_cli.result import ExtractResult

if TYPE_CHECKING:
    from kor_cli.batch import BatchOptions
    from kor_cli.distributed import WorkerPlan
    from kor_cli.extract import ExtractOptions
    from kor_cli.records import Record
    from kor_cli.schema import Schema

# Batches queued on one worker: its slots take the next batches' records while the oldest
# batch's last rows finish (a worker's rows come out in order).
DEPTH = 3
WINDOW = 4  # batches per worker between the oldest unwritten and the newest sent
MAX_ATTEMPTS = 3  # workers a batch may see die while running it
POLL_SECONDS = 0.2  # how often the driver wakes (Ctrl-C is handled between waits)
PLACE_SECONDS = 120  # workers not loaded by then: say what is being waited for

ACTOR_PREFIX = "kor-cli-worker-"  # actor names: prefix, run id, worker number
HOLD_ENV = "KOR_CLI_TEST_RAY_HOLD"  # the test hook (module docstring)
HOLD_SECONDS = 120  # a held batch runs after all if its worker is not killed by then

Rows = list[ExtractResult]


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker needs to build the same extractor as a single-process run."""

    schema: Schema
    model: str | None
    extract_options: ExtractOptions
    batch_options: BatchOptions
    device: str = "auto"
    dtype: str = "auto"
    threads: int = 0  # --threads (0: the backend's choice, at most the worker's CPU share)
    compile: bool | None = None


class ExtractWorker:
    """One Ray actor: a loaded extractor that turns batches of records into rows."""

    def __init__(self, spec: WorkerSpec, cpus: int) -> None:
        """Load as `kor-cli batch` does; a CPU worker (`cpus` > 0) keeps torch's threads
        within its share of the node, as Ray does not pin CPUs."""
        import torch

        from kor_cli.batch import load_runner
        from kor_cli.shared_stream import SharedStream

        self.error: KorError | None = None
        self.warnings: tuple[str, ...] = ()
        try:
            self.runner = load_runner(
                spec.schema,
                spec.model,
                spec.extract_options,
                spec.batch_options,
                device=spec.device,
                dtype=spec.dtype,
                threads=spec.threads,
                compile=spec.compile,
            )
            self.warnings = self.runner.extractor.warnings
            self.stream = SharedStream(self.runner)
        except KorError as error:  # reported by ready(), as the single-process run would
            self.error = error
        if cpus and not spec.threads and torch.get_num_threads() > cpus:
            torch.set_num_threads(cpus)
        self.hold_after = _hold_after()

    def ready(self) -> tuple[KorError | None, tuple[str, ...]]:
        """The load error (None when loaded) and the extractor's warnings."""
        return self.error, self.warnings

    def run(self, records: list[Record]) -> Rows:
        """The rows of `records`, in order, decoded in the worker's one stream alongside
        the other batches it was sent (calls run on the actor's threads)."""
        first = records[0].line if records else None
        if self.hold_after is not None and first is not None and first > self.hold_after:
            threading.Event().wait(HOLD_SECONDS)  # the test hook: until killed
        return self.stream.run(records)


@dataclass
class _Slot:
    """A started actor and the batches queued on it (all running), oldest first."""

    actor: Any
    number: int
    queued: list[int] = field(default_factory=list)


class WorkerPool:
    """Starts the actors, then streams batches through them in input order."""

    def __init__(self, ray: Any, spec: WorkerSpec, plan: WorkerPlan) -> None:
        self.ray = ray
        self.remote = ray.remote(ExtractWorker)
        # DEPTH batch calls at once, plus ready() (a threaded actor)
        self.resources = {
            "num_cpus": plan.cpus,
            "num_gpus": plan.gpus,
            "max_concurrency": DEPTH + 1,
        }
        self.spec = spec
        self.cpus = 0 if plan.gpus else int(plan.cpus)  # a CPU worker's share
        self.run_id = os.urandom(3).hex()
        self.started = 0
        self.live: list[_Slot] = []
        self.starting: dict[Any, _Slot] = {}  # ready() ref → actor loading the model
        self.sent: dict[Any, tuple[int, _Slot]] = {}  # run() ref → (batch number, actor)
        for _ in range(plan.workers):
            self._start()
        warned = waited = False
        while self.starting:  # every worker loaded: load errors surface before any row
            done, _ = ray.wait(list(self.starting), num_returns=1, timeout=PLACE_SECONDS)
            if not done:
                if not waited:
                    warn(
                        f"still waiting for Ray to start {len(self.starting)} worker(s) "
                        "(are other jobs holding the cluster's GPUs or CPUs?)"
                    )
                waited = True
                continue
            warnings = self._started(done[0])
            for message in () if warned else warnings:
                warn(message)
            warned = True

    def _start(self) -> None:
        self.started += 1
        name = f"{ACTOR_PREFIX}{self.run_id}-{self.started}"  # as `ray list actors` shows
        hold = os.environ.get(HOLD_ENV)  # the test hook, passed on; None: no runtime_env
        actor = self.remote.options(
            name=name,
            max_restarts=0,
            runtime_env={"env_vars": {HOLD_ENV: hold}} if hold else None,
            **self.resources,
        ).remote(self.spec, self.cpus)
        slot = _Slot(actor, self.started)
        self.starting[slot.actor.ready.remote()] = slot

    def _started(self, ref: Any) -> tuple[str, ...]:
        """Move a loaded actor to `live` and return its warnings; raise its load error."""
        slot = self.starting.pop(ref)
        try:
            error, warnings = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as died:
            raise ModelError(
                f"Ray worker {slot.number} died while loading the model: {_first_line(died)}"
            ) from None
        if error is not None:
            raise error
        self.live.append(slot)
        return warnings

    def rows_of(self, batches: Iterator[list[Record]], stop: threading.Event) -> Iterator[Rows]:
        """Each batch's rows, in input order; stops taking batches once `stop` is set."""
        held: dict[int, list[Record]] = {}  # sent, not yet written
        finished: dict[int, Rows] = {}
        again: list[int] = []  # batch numbers to send again, lowest first
        attempts: dict[int, int] = {}
        next_out = next_in = 0
        window = WINDOW * len(self.live)
        exhausted = False
        while True:
            while True:  # fill the least busy worker's queue until all are full
                slot = min(self.live, key=lambda s: len(s.queued), default=None)
                if slot is None or len(slot.queued) >= DEPTH:
                    break
                if again:
                    number = heapq.heappop(again)
                elif exhausted or stop.is_set() or next_in - next_out >= window:
                    break
                else:
                    batch = next(batches, None)
                    if batch is None:
                        exhausted = True
                        break
                    number, next_in = next_in, next_in + 1
                    held[number] = batch
                slot.queued.append(number)
                self.sent[slot.actor.run.remote(held[number])] = (number, slot)
            while next_out in finished:
                del held[next_out]
                yield finished.pop(next_out)
                next_out += 1
            if next_out == next_in and (exhausted or stop.is_set()):
                return
            if not self.sent and not self.starting:
                continue  # the rows written freed the window: send more before waiting
            done, _ = self.ray.wait([*self.sent, *self.starting], timeout=POLL_SECONDS)
            for ref in done:
                if ref in self.starting:  # a replacement has loaded
                    self._started(ref)
                elif ref in self.sent:  # not dropped with a dead worker
                    number, slot = self.sent.pop(ref)
                    try:
                        finished[number] = self.ray.get(ref)
                        slot.queued.remove(number)
                    except self.ray.exceptions.RayActorError as died:
                        self._lost(slot, died, attempts, again)

    def _lost(
        self, slot: _Slot, died: Exception, attempts: dict[int, int], again: list[int]
    ) -> None:
        """Requeue a dead worker's batches; each counts an attempt (a worker runs all the
        batches queued on it at once, in one stream)."""
        self.live.remove(slot)
        self.ray.kill(slot.actor)
        for number in slot.queued:
            attempts[number] = attempts.get(number, 0) + 1
        if any(attempts[number] >= MAX_ATTEMPTS for number in slot.queued):
            raise ModelError(
                f"{MAX_ATTEMPTS} Ray workers died running the same batch (the last: "
                f"{_first_line(died)}); the rows before it are written: rerun to resume"
            )
        self.sent = {ref: sent for ref, sent in self.sent.items() if sent[1] is not slot}
        for number in slot.queued:
            heapq.heappush(again, number)
        warn(
            f"Ray worker {slot.number} died ({_first_line(died)}); its {len(slot.queued)} "
            "batch(es) go to the other workers; starting a replacement"
        )
        self._start()

    def close(self) -> None:
        """Stop every actor this pool started."""
        for slot in [*self.live, *self.starting.values()]:
            self.ray.kill(slot.actor)
        self.live.clear()
        self.starting.clear()
        self.sent.clear()


def _hold_after() -> int | None:
    """The test hook's line N on worker 1 of a run (module docstring); None elsewhere."""
    value = os.environ.get(HOLD_ENV)
    if not value:
        return None
    import ray

    name = ray.get_runtime_context().get_actor_name() or ""
    return int(value) if name.startswith(ACTOR_PREFIX) and name.endswith("-1") else None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
