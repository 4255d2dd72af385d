"""Model loading failures are named ModelErrors (exit code 4), never tracebacks."""

from pathlib import Path

import pytest

from kor_cli.errors import EXIT_MODEL, ModelError
from kor_cli.models import collect_stop_ids, demo_model_path, load_model, resolve_model_name


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist") as info:
        load_model(str(tmp_path / "no-such-model"))
    assert info.value.exit_code == EXIT_MODEL


def test_folder_without_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="cannot load model"):
        load_model(str(tmp_path))


def test_file_instead_of_folder(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\0")
    with pytest.raises(ModelError, match="not a folder"):
        load_model(str(path))


def test_model_name_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOR_CLI_MODEL", "some/model")
    assert resolve_model_name(None) == "some/model"
    assert resolve_model_name("other") == "other"
    monkeypatch.delenv("KOR_CLI_MODEL")
    # no model given: the packaged demo model (see tests/test_demo_model.py)
    assert resolve_model_name(None) == demo_model_path()
    assert Path(demo_model_path(), "config.json").is_file()


def test_stop_ids_merge_tokenizer_and_generation_config() -> None:
    class Tok:
        eos_token_id = 2

    class Gen:
        eos_token_id = [7, 2, 9]

    assert collect_stop_ids(Tok(), Gen()) == (2, 7, 9)
    assert collect_stop_ids(Tok(), None) == (2,)
