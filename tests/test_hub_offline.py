"""A hub id without network fails at once with one line, instead of a minute of retries."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from kor_cli import models
from kor_cli.errors import EXIT_MODEL, ModelError


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Online mode, but every connection fails; records the probes."""
    probes: list[Any] = []

    def refuse(address: Any, *args: Any, **kwargs: Any) -> Any:
        probes.append(address)
        raise OSError("Name or service not known")

    for var in (*models.OFFLINE_VARS, *models.PROXY_VARS, "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return probes


@pytest.fixture
def from_pretrained_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replaces the transformers loaders: record their options and fail like a cache miss."""
    import transformers

    calls: list[dict[str, Any]] = []

    def record(source: str, **options: Any) -> Any:
        calls.append(options)
        raise OSError("not found in the cache")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", record)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", record)
    return calls


def test_uncached_hub_id_without_network_fails_before_loading(
    no_network: list[Any], from_pretrained_calls: list[dict[str, Any]], monkeypatch
) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **k: None)
    with pytest.raises(ModelError) as info:
        models.load_model("some-org/some-model")
    assert no_network == [("huggingface.co", 443)]
    assert from_pretrained_calls == []  # transformers never got to retry the network
    assert info.value.exit_code == EXIT_MODEL
    assert "cannot load model 'some-org/some-model'" in info.value.message
    assert "not in the local Hugging Face cache" in info.value.message
    assert "\n" not in info.value.message


def test_offline_mode_skips_the_probe_and_says_the_same(
    no_network: list[Any], from_pretrained_calls: list[dict[str, Any]], monkeypatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="not in the local Hugging Face cache"):
        models.load_model("some-org/not-cached-anywhere")
    assert no_network == [] and from_pretrained_calls == []


def test_cached_hub_id_without_network_loads_from_the_cache_only(
    no_network: list[Any], from_pretrained_calls: list[dict[str, Any]], monkeypatch
) -> None:
    import huggingface_hub

    monkeypatch.setattr(
        huggingface_hub, "try_to_load_from_cache", lambda *a, **k: "/cache/config.json"
    )
    with pytest.raises(ModelError, match="not found in the cache"):
        models.load_model("some-org/cached-model")
    assert from_pretrained_calls == [{"local_files_only": True}]


def test_endpoint_and_proxy_settings(no_network: list[Any], monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080")
    assert models.hub_reachable() is False
    assert no_network == [("mirror.example", 8080)]
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")  # the probe cannot see through it
    assert models.hub_reachable() is True
