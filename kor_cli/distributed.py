"""`kor-cli batch --ray`: the same batch run with the extraction on Ray actors.

This process stays the driver: it reads and skips the inputs, keeps rows in input order,
writes and fsyncs them, shows progress and handles Ctrl-C (kor_cli/batch.py). Workers are
Ray actors (kor_cli/ray_pool.py), one per GPU by default, each loading the schema, the
model and the grammar once and running the same `Runner` on micro-batches.

Ray is an optional extra (`pip install 'kor-cli[ray]'`); nothing here imports it until a
run with `--ray` starts, and without it `--ray` is a one-line usage error.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kor_cli.console import info
from kor_cli.errors import UsageError

if TYPE_CHECKING:
    from kor_cli.batch import BatchOptions, RowsOf
    from kor_cli.extract import ExtractOptions
    from kor_cli.schema import Schema

RAY_MISSING = "--ray needs Ray, an optional extra: pip install 'kor-cli[ray]'"
# The object store of a cluster started here: rows and micro-batches are small.
LOCAL_OBJECT_STORE = 256 * 1024**2
CONNECT_SECONDS = 5  # to reach a HOST:PORT cluster before Ray's own long retries
_ADDRESS = re.compile(r"^(ray://)?[\w.\-]+:\d+$|^\[[0-9a-fA-F:]+\]:\d+$")


def bare_ray_flag(argv: list[str]) -> list[str]:
    """`--ray` with no address means `--ray local`: the command line's optional value.

    The option parser wants a value after `--ray`, so one that is missing (end of line, the
    next option, or an input file rather than local/auto/HOST:PORT) is written in here.
    """
    out: list[str] = []
    for index, arg in enumerate(argv):
        out.append(arg)
        if arg != "--ray":
            continue
        following = argv[index + 1] if index + 1 < len(argv) else None
        if following is None or not (following in ("local", "auto") or _ADDRESS.match(following)):
            out.append("local")
    return out


@dataclass(frozen=True)
class RayOptions:
    """Where the Ray cluster is and how many workers to run on it."""

    address: str = "local"  # local: start one here; auto: join a running one; HOST:PORT
    workers: int | None = None  # None: one per GPU in the cluster (at least 1)
    gpus_per_worker: float | None = None  # None: 1 when the cluster has GPUs, else 0


@dataclass(frozen=True)
class WorkerPlan:
    """What each actor asks Ray for."""

    workers: int
    gpus: float
    cpus: float


def ray_available() -> bool:
    """True when Ray is installed (checked without importing it)."""
    return importlib.util.find_spec("ray") is not None


def check_ray_options(options: RayOptions, device: str) -> None:
    """Usage errors, before any file or model is touched."""
    if not ray_available():
        raise UsageError(RAY_MISSING)
    address = options.address
    if address not in ("local", "auto") and not _ADDRESS.match(address):
        raise UsageError(f"--ray {address}: expected local, auto or HOST:PORT (ray://HOST:PORT)")
    if options.workers is not None and options.workers < 1:
        raise UsageError("--workers must be at least 1")
    if options.gpus_per_worker is not None and options.gpus_per_worker < 0:
        raise UsageError("--gpus-per-worker must be 0 or more")
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(
            f"--device {device}: with --ray each worker sees only its own GPU(s); "
            "use --device auto, cuda or cpu"
        )


def plan_workers(options: RayOptions, node_resources: list[dict[str, float]]) -> WorkerPlan:
    """Workers and per-actor resources for a cluster whose alive nodes have these resources.

    GPU workers take one CPU each; CPU-only workers split the CPUs evenly (the largest
    whole share that still places every worker on some node).
    """
    total_gpus = sum(node.get("GPU", 0.0) for node in node_resources)
    gpus = options.gpus_per_worker
    if gpus is None:
        gpus = 1.0 if total_gpus else 0.0
    workers = options.workers
    if workers is None:
        workers = max(1, int(total_gpus // gpus)) if gpus and total_gpus else 1
    if gpus * workers > total_gpus:
        raise UsageError(
            f"--workers {workers} with --gpus-per-worker {gpus:g} needs {gpus * workers:g} "
            f"GPUs; the Ray cluster has {total_gpus:g}"
        )
    if gpus:
        return WorkerPlan(workers, gpus, 1.0)
    node_cpus = [int(node.get("CPU", 0.0)) for node in node_resources]
    for share in range(max(node_cpus, default=0), 0, -1):
        if sum(count // share for count in node_cpus) >= workers:
            return WorkerPlan(workers, 0.0, float(share))
    raise UsageError(f"--workers {workers} needs a CPU each; the Ray cluster has {sum(node_cpus)}")


def _check_reachable(address: str) -> None:
    """Fail fast when nothing listens at HOST:PORT (Ray itself retries for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as error:
        raise UsageError(
            f"--ray {address}: nothing answers there ({error.strerror or error}); start the "
            "cluster with `ray start --head`, or use --ray local"
        ) from None


def _connect(ray: Any, address: str) -> bool:
    """Join or start the cluster; False when this process was already connected."""
    if ray.is_initialized():  # embedded use: tests, notebooks
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls of our making
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address == "local":
            os.environ.setdefault("RAY_worker_niceness", "0")  # Ray's 15: the job's own workers
            ray.init(
                address="local",
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE,
                **quiet,
            )
        else:
            if address != "auto":
                _check_reachable(address)
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as error:
        hint = " (start one with `ray start --head`, or use --ray local)"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"--ray {address}: cannot join a Ray cluster: {first}{hint}") from None
    return True


@contextmanager
def ray_engine(
    schema: Schema,
    model: str | None,
    extract_options: ExtractOptions,
    options: BatchOptions,
    ray_options: RayOptions,
    device: str,
    dtype: str = "auto",
    threads: int = 0,
    compile: bool | None = None,
) -> Iterator[RowsOf]:
    """Connect, start the workers (each loads the model), yield their rows-of function."""
    import ray

    from kor_cli.ray_pool import WorkerPool, WorkerSpec

    started = _connect(ray, ray_options.address)
    pool: WorkerPool | None = None
    try:
        nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
        plan = plan_workers(ray_options, nodes)
        where = "here" if ray_options.address == "local" else f"on {len(nodes)} node(s)"
        each = f"{plan.gpus:g} GPU" if plan.gpus else f"{plan.cpus:g} CPU"
        info(f"kor-cli: Ray: {plan.workers} worker(s) {where}, {each} each; loading the model")
        spec = WorkerSpec(schema, model, extract_options, options, device, dtype, threads, compile)
        pool = WorkerPool(ray, spec, plan)
        yield pool.rows_of
    finally:
        if pool is not None:
            pool.close()
        if started:
            ray.shutdown()
