"""`--ray` with no address: the console script writes `local` in (Ray itself not needed)."""

from __future__ import annotations

import sys

import pytest

from kor_cli import cli
from kor_cli.distributed import bare_ray_flag


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["batch", "s.yaml", "in.jsonl", "--ray"],
            ["batch", "s.yaml", "in.jsonl", "--ray", "local"],
        ),
        (
            ["batch", "--ray", "in.jsonl", "-o", "o"],
            ["batch", "--ray", "local", "in.jsonl", "-o", "o"],
        ),
        (["batch", "--ray", "--workers", "2"], ["batch", "--ray", "local", "--workers", "2"]),
        (["batch", "--ray", "auto"], ["batch", "--ray", "auto"]),
        (["batch", "--ray", "local"], ["batch", "--ray", "local"]),
        (["batch", "--ray", "10.0.0.5:6379"], ["batch", "--ray", "10.0.0.5:6379"]),
        (["batch", "--ray", "ray://head:10001"], ["batch", "--ray", "ray://head:10001"]),
        (["batch", "in.jsonl"], ["batch", "in.jsonl"]),
    ],
)
def test_bare_ray_flag(argv: list[str], expected: list[str]) -> None:
    assert bare_ray_flag(argv) == expected


def test_console_script_rewrites_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(sys, "argv", ["kor-cli", "batch", "s.yaml", "in.jsonl", "--ray"])
    monkeypatch.setattr(cli, "app", lambda: seen.append(list(sys.argv[1:])))
    cli.run()
    assert seen == [["batch", "s.yaml", "in.jsonl", "--ray", "local"]]
