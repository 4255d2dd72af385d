"""`kor-cli batch --ray`: Ray actors extract, the driver keeps every batch guarantee.

Tests marked `ray` run on a small Ray cluster started in this process (2 CPUs, no
dashboard) and the tiny random-weight test model; they run when selected with `-m ray`
and skip when Ray is not installed (`pip install -e '.[ray]'`). Random weights never
give a valid record, so runs exit 3; what is compared is the rows themselves: the Ray
path must write exactly the rows of the single-process run (all fields but the
per-record `seconds`), once each, in input order.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kor_cli import distributed
from kor_cli.cli import app
from kor_cli.distributed import RayOptions, plan_workers
from kor_cli.errors import UsageError
from kor_cli.ray_pool import ACTOR_PREFIX, HOLD_ENV
from kor_cli.sink import OutputSink
from kor_cli.testing import build_tiny_model, load_offline_tokenizer

runner = CliRunner()
needs_ray = pytest.mark.skipif(not distributed.ray_available(), reason="ray is not installed")

PERSON = """\
id: person
attributes:
  - id: name
  - id: age
    type: integer
    required: false
examples:
  - text: Bob is 42.
    output: {name: Bob, age: 42}
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ray-batch")
    build_tiny_model(load_offline_tokenizer("mistral-sp"), folder / "model")
    (folder / "person.yaml").write_text(PERSON)
    lines = [
        json.dumps({"id": f"r{i:02d}", "text": f"Ann is {20 + i}.", "gold": i}) for i in range(12)
    ]
    lines[5] = "{broken"  # an input error row, made by a worker like any other
    (folder / "in.jsonl").write_text("\n".join(lines) + "\n")
    return {
        "model": folder / "model",
        "person": folder / "person.yaml",
        "data": folder / "in.jsonl",
    }


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[str]:
    """A 2-CPU Ray cluster in this process (no dashboard); yields its address.

    Opt-in like a separate suite (`python -m pytest -q -m ray`, ~4 min), so the plain run
    stays short where the extra is installed.
    """
    if not distributed.ray_available():
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    if "ray" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("Ray cluster tests run with: python -m pytest -q -m ray")
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=80 * 1024**2,
        log_to_driver=False,
    )
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def batch_args(env: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "batch", str(env["person"]), str(env["data"]), "-o", str(out), "-m", str(env["model"]),
        "--mode", "prompt", "--max-tokens", "6", "--keep", "gold", *extra,
    ]  # fmt: skip


def said(result: Any) -> str:
    return " ".join(result.stderr.split())


def rows_of(path: Path) -> list[dict[str, Any]]:
    """The rows of a result file, without the per-record timing."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row.pop("seconds")
    return rows


@pytest.fixture(scope="module")
def reference(env: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The rows of the single-process run (batches of 2)."""
    out = tmp_path_factory.mktemp("reference") / "out.jsonl"
    result = runner.invoke(app, batch_args(env, out, "--batch-size", "2"))
    assert result.exit_code == 3, result.output
    rows = rows_of(out)
    assert [r["id"] for r in rows] == [f"r{i:02d}" if i != 5 else 6 for i in range(12)]
    return rows


def kill_worker_1_when(path: Path, rows: int, record: list[int]) -> threading.Thread:
    """In the background: once `path` holds `rows` rows, kill worker 1 of the run (the one
    the test hook holds); `record` gets the rows written then."""
    import ray

    def kill() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            written = path.read_bytes().count(b"\n") if path.exists() else 0
            names = [
                n
                for n in ray.util.list_named_actors()
                if n.startswith(ACTOR_PREFIX) and n.endswith("-1")
            ]
            if written >= rows and names:
                ray.kill(ray.get_actor(names[0]))
                record.append(written)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


# --- without a cluster ------------------------------------------------------------------


def test_without_ray_the_flag_is_a_one_line_error(
    env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distributed, "ray_available", lambda: False)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, batch_args(env, out, "--ray", "local"))
    assert result.exit_code == 2
    assert said(result) == "kor-cli: usage error: " + distributed.RAY_MISSING
    assert "kor-cli[ray]" in said(result) and not out.exists()


def test_ray_options_need_ray(env: dict[str, Path], tmp_path: Path) -> None:
    result = runner.invoke(app, batch_args(env, tmp_path / "o.jsonl", "--workers", "2"))
    assert result.exit_code == 2 and "--workers and --gpus-per-worker need --ray" in said(result)


@pytest.mark.ray
@needs_ray
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ray", "nowhere"], "expected local, auto or HOST:PORT"),
        (["--ray", "local", "--device", "cuda:1"], "each worker sees only its own GPU"),
    ],
)
def test_bad_ray_options(
    env: dict[str, Path], tmp_path: Path, extra: list[str], message: str
) -> None:
    result = runner.invoke(app, batch_args(env, tmp_path / "o.jsonl", *extra))
    assert result.exit_code == 2, result.output
    assert message in said(result) and "Traceback" not in result.output


@pytest.mark.ray
@needs_ray
def test_an_address_where_nothing_listens_fails_fast(env: dict[str, Path], tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = runner.invoke(app, batch_args(env, tmp_path / "o.jsonl", "--ray", f"127.0.0.1:{port}"))
    assert result.exit_code == 2, result.output
    assert f"--ray 127.0.0.1:{port}: nothing answers there" in said(result)
    assert time.monotonic() - started < 60  # not Ray's minutes of retries


def test_the_default_path_never_imports_ray(env: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = (
        "import sys\n"
        "from kor_cli.cli import app\n"
        "from typer.testing import CliRunner\n"
        f"result = CliRunner().invoke(app, {batch_args(env, out, '--limit', '1')!r})\n"
        "assert result.exit_code == 3, result.output\n"
        "print('ray' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_plan_workers_one_per_gpu_or_an_even_cpu_share() -> None:
    gpu_nodes = [{"CPU": 32.0, "GPU": 8.0}, {"CPU": 32.0, "GPU": 8.0}]
    assert plan_workers(RayOptions(), gpu_nodes) == distributed.WorkerPlan(16, 1.0, 1.0)
    half = plan_workers(RayOptions(gpus_per_worker=0.5), gpu_nodes)
    assert half == distributed.WorkerPlan(32, 0.5, 1.0)
    assert plan_workers(RayOptions(workers=3), gpu_nodes).workers == 3
    with pytest.raises(UsageError, match="needs 17 GPUs; the Ray cluster has 16"):
        plan_workers(RayOptions(workers=17), gpu_nodes)
    assert plan_workers(RayOptions(), [{"CPU": 2.0}]) == distributed.WorkerPlan(1, 0.0, 2.0)
    # 3 workers on nodes of 8 and 4 CPUs: a share of 4 places two on the first, one on the other
    cpu_nodes = [{"CPU": 8.0}, {"CPU": 4.0}]
    assert plan_workers(RayOptions(workers=3), cpu_nodes) == distributed.WorkerPlan(3, 0.0, 4.0)
    assert plan_workers(RayOptions(workers=2, gpus_per_worker=0), gpu_nodes).cpus == 32.0
    with pytest.raises(UsageError, match="needs a CPU each; the Ray cluster has 12"):
        plan_workers(RayOptions(workers=13), cpu_nodes)


# --- on a local cluster -------------------------------------------------------------------


@pytest.mark.ray
def test_two_workers_write_the_single_process_rows_in_order(
    env: dict[str, Path], tmp_path: Path, cluster: str, reference: list[dict]
) -> None:
    out = tmp_path / "out.jsonl"
    args = batch_args(env, out, "--batch-size", "2", "--ray", "auto", "--workers", "2")
    result = runner.invoke(app, args)
    assert result.exit_code == 3, result.output
    assert "Ray: 2 worker(s)" in said(result) and "12 rows" in said(result)
    assert rows_of(out) == reference
    again = runner.invoke(app, args)  # resume: nothing left, no worker started
    assert again.exit_code == 3 and "skipped 12" in said(again) and "Ray:" not in said(again)
    assert rows_of(out) == reference


@pytest.mark.ray
def test_a_killed_worker_loses_and_duplicates_nothing(
    env: dict[str, Path],
    tmp_path: Path,
    cluster: str,
    reference: list[dict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Worker 1 answers only the batch of input line 1 and holds the others (the test hook,
    # kor_cli/ray_pool.py): the kill after row 1 always finds batches on it (every one it
    # was sent but line 1's), which go to worker 2 and the replacement; nothing may be lost
    # or written twice.
    monkeypatch.setenv(HOLD_ENV, "1")
    out = tmp_path / "out.jsonl"
    killed_at: list[int] = []
    thread = kill_worker_1_when(out, 1, killed_at)
    args = batch_args(env, out, "--batch-size", "1", "--ray", "auto", "--workers", "2")
    result = runner.invoke(app, args)
    thread.join(timeout=5)
    assert result.exit_code == 3, result.output  # random weights: some records failed
    assert killed_at and killed_at[0] < len(reference), "the kill came after the run"
    assert "Ray worker 1 died" in said(result) and "go to the other workers" in said(result)
    assert rows_of(out) == reference


@pytest.mark.ray
def test_resume_after_the_driver_is_killed(
    env: dict[str, Path], tmp_path: Path, cluster: str, reference: list[dict]
) -> None:
    out = tmp_path / "out.jsonl"
    args = batch_args(env, out, "--batch-size", "1", "--ray", cluster, "--workers", "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kor_cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    written = out.read_bytes().count(b"\n")
    assert 2 <= written < len(reference)
    with out.open("ab") as handle:  # a write torn by the kill
        handle.write(b'{"id": "r11", "inp')
    resumed = runner.invoke(app, [*args[:-4], "--ray", "auto", "--workers", "2"])
    assert resumed.exit_code == 3, resumed.output
    assert "dropped a torn last line" in said(resumed) and f"skipped {written}" in said(resumed)
    assert rows_of(out) == reference


@pytest.mark.ray
def test_ctrl_c_writes_what_is_in_flight_then_exits_130(
    env: dict[str, Path], tmp_path: Path, cluster: str, reference: list[dict]
) -> None:
    out = tmp_path / "out.jsonl"

    def interrupt() -> None:
        while not (out.exists() and out.read_bytes().count(b"\n") >= 1):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    args = batch_args(env, out, "--batch-size", "1", "--ray", "auto", "--workers", "2")
    result = runner.invoke(app, args)
    assert result.exit_code == 130, result.output
    assert "stopping after the records in flight" in said(result)
    rows = rows_of(out)
    assert 1 <= len(rows) < len(reference) and rows == reference[: len(rows)]
    assert runner.invoke(app, args).exit_code == 3
    assert rows_of(out) == reference


@pytest.mark.ray
def test_the_lock_still_refuses_a_second_run(
    env: dict[str, Path], tmp_path: Path, cluster: str
) -> None:
    out = tmp_path / "out.jsonl"
    with OutputSink(out) as other_run:
        other_run.open()
        result = runner.invoke(app, batch_args(env, out, "--ray", "auto"))
    assert result.exit_code == 2 and "another kor-cli batch run" in said(result)
    assert "Ray:" not in said(result)


@pytest.mark.ray
def test_a_model_that_fails_to_load_on_the_workers_is_exit_4(
    env: dict[str, Path], tmp_path: Path, cluster: str
) -> None:
    args = batch_args(env, tmp_path / "out.jsonl", "--ray", "auto", "--workers", "2")
    args[args.index("-m") + 1] = str(tmp_path / "no-model")
    result = runner.invoke(app, args)
    assert result.exit_code == 4, result.output
    assert "does not exist" in said(result) and "Traceback" not in result.output


@pytest.mark.ray
def test_inputs_stream_with_a_bounded_read_ahead(env: dict[str, Path], cluster: str) -> None:
    from kor_cli.batch import BatchOptions
    from kor_cli.decode import SamplingOptions
    from kor_cli.extract import ExtractOptions
    from kor_cli.ray_pool import WINDOW
    from kor_cli.records import Record
    from kor_cli.schema import load_schema

    pulled = 0

    def batches() -> Iterator[list[Record]]:
        nonlocal pulled
        for i in range(40):
            pulled += 1
            yield [Record(id=i, source="<test>", line=i + 1, text=f"Ann is {i}.")]

    extract = ExtractOptions(mode="prompt", sampling=SamplingOptions(max_new_tokens=2))
    options = BatchOptions(inputs=(), output="", batch_size=1)
    schema = load_schema(str(env["person"]))
    ahead, ids = [], []
    with distributed.ray_engine(
        schema, str(env["model"]), extract, options, RayOptions("auto", workers=2), "auto"
    ) as rows_of:
        for rows in rows_of(batches(), threading.Event()):
            ids += [row.id for row in rows]
            ahead.append(pulled - len(ids))  # read from the input but not yet written
    assert ids == list(range(40))
    assert 2 <= max(ahead) <= WINDOW * 2 and min(ahead) >= 0
