"""The Ray worker pool's bookkeeping, without Ray: a stand-in `ray` module whose actors run
their calls in order (as Ray actors do) but finish in a random order across actors, and
die on request. Checks order, exactly-once, the bounded read-ahead, retries, the
poison-batch limit and Ctrl-C, in the plain suite (no cluster, no model)."""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kor_cli.distributed import WorkerPlan
from kor_cli.errors import ModelError
from kor_cli.ray_pool import MAX_ATTEMPTS, WINDOW, WorkerPool


class Died(Exception):
    """Stands in for ray.exceptions.RayActorError."""


class Ref:
    def __init__(self, actor: FakeActor, method: str, args: tuple[Any, ...]) -> None:
        self.actor, self.method, self.args = actor, method, args
        self.done, self.value, self.error = False, None, None


class FakeActor:
    def __init__(self, ray: FakeRay) -> None:
        self.ray, self.queue, self.dead = ray, deque(), False
        self.ready = SimpleNamespace(remote=lambda: self._call("ready", ()))
        self.run = SimpleNamespace(remote=lambda records: self._call("run", (records,)))

    def _call(self, method: str, args: tuple[Any, ...]) -> Ref:
        ref = Ref(self, method, args)
        self.queue.append(ref)
        return ref

    def finish_one(self) -> Ref:
        """Run the oldest call: a worker runs its batches one after the other."""
        ref = self.queue.popleft()
        ref.done = True
        if not self.dead and ref.method == "run" and self.ray.poison in ref.args[0]:
            if self.ray.deaths > 0:
                self.ray.deaths -= 1
                self.dead = True
        if self.dead:
            ref.error = Died("the actor died unexpectedly")
        elif ref.method == "ready":
            ref.value = (None, ())
        else:
            ref.value = [f"row {record}" for record in ref.args[0]]
        return ref


class FakeRay:
    def __init__(self, seed: int, poison: int | None = None, deaths: int = 0) -> None:
        self.rng = random.Random(seed)
        self.poison, self.deaths = poison, deaths
        self.actors: list[FakeActor] = []
        self.killed: list[FakeActor] = []
        self.exceptions = SimpleNamespace(RayActorError=Died)

    def remote(self, cls: type) -> Any:
        def start(*args: Any) -> FakeActor:
            self.actors.append(FakeActor(self))
            return self.actors[-1]

        options = SimpleNamespace(remote=start)
        return SimpleNamespace(options=lambda **kwargs: options)

    def wait(self, refs: list[Ref], num_returns: int = 1, timeout: float | None = None) -> Any:
        busy = [actor for actor in self.actors if actor.queue]
        assert busy or any(ref.done for ref in refs), "the pool waits for nothing"
        if busy:
            self.rng.choice(busy).finish_one()
        done = [ref for ref in refs if ref.done][:num_returns]
        return done, [ref for ref in refs if ref not in done]

    def get(self, ref: Ref) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, actor: FakeActor) -> None:
        actor.dead = True
        self.killed.append(actor)


def run_pool(
    ray: FakeRay, workers: int, batches: int, stop_after: int | None = None
) -> tuple[list[str], list[int], list[int]]:
    """Rows written, read-ahead after each write, and how many batches were pulled."""
    pool = WorkerPool(ray, None, WorkerPlan(workers, 0.0, 1.0))  # type: ignore[arg-type]
    pulled = [0]
    stop = threading.Event()

    def source() -> Iterator[list[int]]:
        for number in range(batches):
            pulled[0] += 1
            yield [2 * number, 2 * number + 1]

    rows: list[str] = []
    ahead: list[int] = []
    for batch_rows in pool.rows_of(source(), stop):  # type: ignore[arg-type]
        rows += batch_rows
        ahead.append(pulled[0] - len(rows) // 2)
        if stop_after is not None and len(rows) // 2 >= stop_after:
            stop.set()
    return rows, ahead, pulled


def expected(batches: int) -> list[str]:
    return [f"row {record}" for record in range(2 * batches)]


@pytest.mark.parametrize("seed", range(8))
def test_rows_come_out_in_input_order_once_with_a_bounded_read_ahead(seed: int) -> None:
    rows, ahead, _ = run_pool(FakeRay(seed), workers=3, batches=40)
    assert rows == expected(40)
    assert max(ahead) <= WINDOW * 3


@pytest.mark.parametrize("seed", range(8))
def test_a_dead_workers_batches_go_to_the_others_and_it_is_replaced(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    ray = FakeRay(seed, poison=14, deaths=1)  # dies running the batch of record 14
    rows, _, _ = run_pool(ray, workers=3, batches=30)
    assert rows == expected(30)
    assert len(ray.killed) == 1 and len(ray.actors) == 4  # one replacement started
    assert "died" in capsys.readouterr().err


def test_a_batch_that_kills_every_worker_stops_the_run_after_the_rows_before_it() -> None:
    ray = FakeRay(0, poison=14, deaths=100)
    pool = WorkerPool(ray, None, WorkerPlan(2, 0.0, 1.0))  # type: ignore[arg-type]
    rows: list[str] = []
    batches = iter([[2 * n, 2 * n + 1] for n in range(20)])
    with pytest.raises(ModelError, match=f"{MAX_ATTEMPTS} Ray workers died running the same"):
        for batch_rows in pool.rows_of(batches, threading.Event()):  # type: ignore[arg-type]
            rows += batch_rows
    assert rows == expected(7)  # batch 7 holds record 14
    assert len(ray.killed) == MAX_ATTEMPTS


@pytest.mark.parametrize("seed", range(4))
def test_stop_writes_every_batch_already_read_and_reads_no_more(seed: int) -> None:
    rows, _, pulled = run_pool(FakeRay(seed), workers=2, batches=40, stop_after=5)
    assert rows == expected(len(rows) // 2) and len(rows) // 2 >= 5
    assert pulled[0] == len(rows) // 2 < 40  # nothing read is lost, nothing more is read
