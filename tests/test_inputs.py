"""Input texts: strict UTF-8, named errors for missing, empty and binary files."""

from pathlib import Path

import pytest

from kor_cli.errors import InputError
from kor_cli.inputs import read_text


def test_reads_utf8_and_strips_bom(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffAnn lives in Zürich. 你好".encode())
    assert read_text(str(path)) == "Ann lives in Zürich. 你好"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfeoops", "text is UTF-16"),
        (b"ok\xffno", "not valid UTF-8 \\(bad byte 0xff at offset 2\\)"),
        (b"  \n\t", "empty"),
    ],
)
def test_bad_text_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_text(str(path))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_text(str(tmp_path / "nope.txt"))
    with pytest.raises(InputError, match="is a directory"):
        read_text(str(tmp_path))
