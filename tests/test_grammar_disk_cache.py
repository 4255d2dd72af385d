"""The disk cache of compiled grammars and masks: keys, atomic writes, broken files
ignored, and a second process that finds the grammar and its first mask without
compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kor_cli.grammar import disk_cache
from kor_cli.grammar.index_cache import save_cached_indexes
from kor_cli.grammar.surface import (
    GrammarMatcher,
    GrammarOptions,
    TokenizerInfo,
    allocate_token_bitmask,
    cached_grammar,
    compile_grammar,
    compile_json_schema,
    compile_json_schema_cached,
    compile_regex,
)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def toy_info() -> TokenizerInfo:
    return TokenizerInfo([b"a", b"b", b"c", b"ab", b"bc", None], stop_ids=[5])


def test_cache_root_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path / "c"))
    assert disk_cache.cache_root() == tmp_path / "c"
    for off in ("", "0", "off", "OFF"):
        monkeypatch.setenv("KOR_CLI_CACHE", off)
        assert disk_cache.cache_root() is None
    monkeypatch.delenv("KOR_CLI_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert disk_cache.cache_root() == tmp_path / "xdg" / "kor-cli"


def test_usable_root_makes_folders_and_refuses_what_cannot_be_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert disk_cache.usable_root(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    assert disk_cache.usable_root(tmp_path / "file" / "c") is None
    assert disk_cache.usable_root("") is None  # not the current folder
    assert disk_cache.usable_root(None) is None


def test_keys_separate_their_parts() -> None:
    assert disk_cache.blob_key("ab", "c") != disk_cache.blob_key("a", "bc")
    assert disk_cache.blob_key("a") == disk_cache.blob_key("a") != disk_cache.blob_key("b")


def test_writes_are_atomic_and_broken_files_read_as_missing(tmp_path: Path) -> None:
    path = disk_cache.blob_path(tmp_path / "new", "x", "k")
    arrays = {"a": np.arange(6).reshape(2, 3), "s": np.asarray("text"), "b": np.ones(0, bool)}
    assert disk_cache.write_arrays(path, arrays)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left
    found = disk_cache.read_arrays(path)
    assert found is not None and found.keys() == arrays.keys()
    for name, array in arrays.items():
        assert found[name].dtype == array.dtype and np.array_equal(found[name], array)
    whole = path.read_bytes()
    for broken in (whole[: len(whole) - 5], whole[:20], b"garbage", whole.replace(b'"a"', b'"a')):
        path.write_bytes(broken)
        assert disk_cache.read_arrays(path) is None, broken
    assert disk_cache.read_arrays(tmp_path / "missing.bin") is None
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    assert not disk_cache.write_blob(blocked / "x.bin", b"data")


def test_arrays_read_back_aligned(tmp_path: Path) -> None:
    """numpy walks misaligned arrays several times slower (the tokenizer's trie tables
    are read from here): each array is written at an aligned offset, and a file written
    without (an older one) is read into aligned copies."""
    arrays = {"odd": np.arange(3, dtype=np.int8), "ints": np.arange(5, dtype=np.int32)}
    arrays["longs"] = np.arange(7, dtype=np.int64)
    path = disk_cache.blob_path(tmp_path, "x", "aligned")
    assert disk_cache.write_arrays(path, arrays)
    found = disk_cache.read_arrays(path)
    assert found is not None and all(found[k].flags.aligned for k in arrays)
    header, chunks, offset = [], [], 0
    for name, array in arrays.items():  # the layout before: packed back to back
        header.append([name, array.dtype.str, list(array.shape), offset, array.nbytes])
        chunks.append(array.tobytes())
        offset += array.nbytes
    head = json.dumps(header).encode() + b" "  # an odd header length
    path.write_bytes(b"".join([b"KORARR1\n", len(head).to_bytes(8, "little"), head, *chunks]))
    found = disk_cache.read_arrays(path)
    assert found is not None
    for name, array in arrays.items():
        assert found[name].flags.aligned and np.array_equal(found[name], array)


def test_a_cached_grammar_is_built_once_and_read_back(tmp_path: Path) -> None:
    calls = []

    def build():
        calls.append(1)
        options = GrammarOptions(lenient=True)
        return compile_json_schema({"type": "string", "pattern": "b(?=a)"}, options)

    first = cached_grammar(["s", "1"], build, cache_dir=tmp_path)
    second = cached_grammar(["s", "1"], build, cache_dir=tmp_path)
    assert len(calls) == 1 and first.warnings and second.warnings == first.warnings
    assert second.dfa.fingerprint() == first.dfa.fingerprint() and second.kind == first.kind
    cached_grammar(["s", "2"], build, cache_dir=tmp_path)  # another source: built again
    assert len(calls) == 2
    for path in tmp_path.iterdir():
        path.write_bytes(b"garbage")
    again = cached_grammar(["s", "1"], build, cache_dir=tmp_path)
    assert len(calls) == 3 and again.dfa.fingerprint() == first.dfa.fingerprint()
    assert cached_grammar(None, build, cache_dir=tmp_path) is not None and len(calls) == 4


def test_json_schema_cache_skips_ref_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path))
    compile_json_schema_cached(SCHEMA)
    assert len(list(tmp_path.iterdir())) == 1
    compile_json_schema_cached(SCHEMA, GrammarOptions(ref_dir=str(tmp_path)))
    assert len(list(tmp_path.iterdir())) == 1


def test_compiled_masks_persist_for_the_next_index(tmp_path: Path) -> None:
    grammar = compile_regex("[ab]+c")
    first = compile_grammar(grammar, toy_info(), cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 1  # the start mask is written at once
    matcher = GrammarMatcher(first)
    assert matcher.accept_bytes(b"ab")
    built = matcher.allowed_mask()
    save_cached_indexes()  # what runs at exit
    second = compile_grammar(grammar, toy_info(), cache_dir=tmp_path)
    assert second.engine.built_states == first.engine.built_states >= 2
    again = GrammarMatcher(second)
    assert again.accept_bytes(b"ab") and np.array_equal(again.allowed_mask(), built)


def test_a_second_process_reaches_the_first_mask_without_compiling(tmp_path: Path) -> None:
    code = """
import json, sys
from kor_cli.constrain import record_grammar
from kor_cli.grammar import compile as compile_module
from kor_cli.grammar.surface import GrammarMatcher, TokenizerInfo, allocate_token_bitmask
from kor_cli.grammar.surface import compile_grammar
info = TokenizerInfo([bytes([b]) for b in range(256)] + [None], stop_ids=[256])
compiled = compile_grammar(record_grammar(json.loads(sys.argv[1])), info)
bitmask = allocate_token_bitmask(1, info.vocab_size)
GrammarMatcher(compiled).fill_next_token_bitmask(bitmask)
print(json.dumps([len(compile_module._cache), compiled.engine.built_states, bitmask.tolist()]))
"""
    env = {**os.environ, "KOR_CLI_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", code, json.dumps(SCHEMA)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            ).stdout
        )  # fmt: skip
        for _ in range(2)
    ]
    assert runs[0][0] > 0 and runs[1][0] == 0  # the second run compiled nothing
    assert runs[1][1] >= 1 and runs[1][2] == runs[0][2]
    expected = allocate_token_bitmask(1, 257)
    expected[:] = 0
    expected[0, ord(" ") // 32] = 1 << (ord(" ") % 32)  # the envelope starts with " <json>"
    assert runs[0][2] == expected.tolist()


def attributes(obj: object) -> dict[str, object]:
    """Every attribute of a table object, nested ones flattened, arrays as (dtype, list)."""
    out: dict[str, object] = {}
    for name, value in vars(obj).items():
        if isinstance(value, np.ndarray):
            out[name] = (value.dtype.str, value.shape, value.tolist())
        elif isinstance(value, Sequence) and value and isinstance(value[0], bytes):
            out[name] = list(value)
        elif hasattr(value, "__dict__"):
            out |= {f"{name}.{k}": v for k, v in attributes(value).items()}
        else:
            out[name] = value
    return out


def test_tokenizer_tables_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kor_cli.grammar import table_cache
    from kor_cli.grammar.string_body import BodyTokens
    from kor_cli.grammar.trie import TokenTrie

    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path))
    tokens = [b'"', b'"a', b"ab", b"\xc3\xa9", b"\\n", b"a\\", b"{", None, b'"}', b"\xc3"]
    built: list[int] = []

    def build() -> tuple[object, ...]:
        built.append(1)
        return TokenTrie(tokens, exclude=[7]), BodyTokens(tokens, exclude=[7])

    classes = (TokenTrie, BodyTokens)
    first = table_cache.load_or_build("fp", build, classes)
    second = table_cache.load_or_build("fp", build, classes)
    assert len(built) == 1 and len(list(tmp_path.iterdir())) == 1
    for fresh, loaded in zip(first, second, strict=True):
        assert type(loaded) is type(fresh) and attributes(loaded) == attributes(fresh)
    table_cache.load_or_build("other", build, classes)
    assert len(built) == 2
    for path in tmp_path.iterdir():
        path.write_bytes(path.read_bytes()[:-3])  # truncated: rebuilt, not trusted
    table_cache.load_or_build("fp", build, classes)
    assert len(built) == 3


def test_masks_from_cached_tables_equal_fresh_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grammar_helpers import brute_allowed, person_dfa, reachable

    from kor_cli.grammar import token_tables
    from kor_cli.grammar.index import TokenIndex

    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path))
    vocab = [bytes([b]) for b in range(32, 127)] + [b'{"', b'": "', b"na", b"me", b"\xc3\xa9"]
    info = TokenizerInfo([*vocab, None], stop_ids=[len(vocab)])
    dfa = person_dfa()
    for _ in range(2):  # built and written, then read back (the in-memory copy dropped)
        monkeypatch.setattr(token_tables, "_SHARED", {})
        index = TokenIndex(dfa, info)
        for state in reachable(dfa):
            expected = brute_allowed(dfa, info.token_bytes, info.stop_ids, state)
            assert np.array_equal(index.allowed(state), expected), state
    assert any(p.name.startswith("tables-") for p in tmp_path.iterdir())
