"""Shared fixtures. The real tokenizers take seconds to load: load each once per session."""

from __future__ import annotations

import os
import shutil
import tempfile

# Tests never touch a model hub: fail fast instead of retrying the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Nor the user's grammar cache: one temporary disk cache per session (subprocesses too).
_CACHE = os.environ["KOR_CLI_CACHE"] = tempfile.mkdtemp(prefix="kor-cli-test-cache-")

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer, tokenizer_available


@pytest.fixture(scope="session", autouse=True)
def _grammar_cache() -> Iterator[None]:
    """Remove the session's disk cache at the end (after saving what is pending into it)."""
    yield
    from kor_cli.grammar.index_cache import save_cached_indexes

    save_cached_indexes()
    shutil.rmtree(_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def tokenizer_factory() -> Callable[[str], Any]:
    """name → offline tokenizer (see kor_cli.testing.TOKENIZER_NAMES); skips if not installed."""

    def load(name: str) -> Any:
        if not tokenizer_available(name):
            pytest.skip(f"the package shipping tokenizer {name!r} is not installed")
        return load_offline_tokenizer(name)

    return load


@pytest.fixture(scope="session")
def mistral_sp_tokenizer(tokenizer_factory: Callable[[str], Any]) -> Any:
    return tokenizer_factory("mistral-sp")


@pytest.fixture(scope="session")
def tekken_tokenizer(tokenizer_factory: Callable[[str], Any]) -> Any:
    return tokenizer_factory("tekken")


@pytest.fixture(scope="session")
def qwen_tokenizer(tokenizer_factory: Callable[[str], Any]) -> Any:
    return tokenizer_factory("qwen")


@pytest.fixture(scope="session")
def tokenizer_info_factory(tokenizer_factory: Callable[[str], Any]) -> Callable[[str], Any]:
    """name → its grammar.vocab.TokenizerInfo (Qwen at its models' 151,936 logits), cached."""
    from kor_cli.grammar.vocab import TokenizerInfo

    cache: dict[str, TokenizerInfo] = {}

    def info(name: str) -> TokenizerInfo:
        if name not in cache:
            width = QWEN_LOGITS_WIDTH if name == "qwen" else None
            cache[name] = TokenizerInfo.from_hf(tokenizer_factory(name), vocab_size=width)
        return cache[name]

    return info


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random-weight Llama on the real Mistral SentencePiece tokenizer, saved to disk."""
    from kor_cli.testing import build_tiny_model

    folder = tmp_path_factory.mktemp("tiny-model")
    build_tiny_model(load_offline_tokenizer("mistral-sp"), folder)
    return str(folder)
