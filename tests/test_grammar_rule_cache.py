"""Grammars with calls on the disk cache: their rules and frame masks are read back by the
next run, which then compiles nothing while it stays inside them; a rule the file lacks
comes from one compile of the source, and a stale file is a named error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import Grammar, serialize
from kor_cli.grammar.frame_masks import save_frame_caches
from kor_cli.grammar.rule_cache import CachedRules, save_cached_rules
from kor_cli.grammar.surface import (
    CompiledGrammar,
    GrammarMatcher,
    TokenizerInfo,
    allocate_token_bitmask,
    cached_grammar,
    compile_grammar,
    compile_json_schema,
)

NODE = {
    "type": "object",
    "properties": {
        "v": {"type": "integer"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    },
    "required": ["v"],
}
# the root calls the recursive node rule, which is built only once "tree" is reached
SCHEMA = {
    "type": "object",
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "$defs": {"node": NODE},
}
OTHER = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/node"}, "x": {"type": "null"}}}
OTHER["$defs"] = {"node": NODE}
TEXT = serialize({"tree": {"v": 1, "kids": [{"v": 22, "kids": []}, {"v": -3}]}}).encode()
# single bytes, and tokens that end a frame and go on in the caller's
EXTRA = [b"}]", b"]}", b"}}", b"},", b'"v', b'": ', b"0}", b"[]"]
INFO = TokenizerInfo([bytes([b]) for b in range(256)] + EXTRA + [None], stop_ids=[264])


class Builds:
    """A grammar builder that counts its compiles."""

    def __init__(self, schema: dict, title: str = "") -> None:
        # a title of its own: the compiler's in-memory cache holds another test's grammar
        self.schema, self.count = {**schema, "title": title}, 0

    def __call__(self) -> Grammar:
        self.count += 1
        return compile_json_schema(self.schema)


def masks_along(compiled: CompiledGrammar, text: bytes = TEXT) -> list[list[int]]:
    """The bitmask before each byte of `text` and after it, walking one byte at a time."""
    matcher = GrammarMatcher(compiled)
    bitmask = allocate_token_bitmask(1, INFO.vocab_size)
    out = []
    for byte in text:
        matcher.fill_next_token_bitmask(bitmask)
        out.append(np.asarray(bitmask)[0].tolist())
        assert matcher.accept_token(byte)
    matcher.fill_next_token_bitmask(bitmask)
    return [*out, np.asarray(bitmask)[0].tolist()]


def fresh_masks() -> list[list[int]]:
    """The masks along TEXT of a grammar compiled without any cache."""
    return masks_along(compile_grammar(compile_json_schema(SCHEMA), INFO, cache_dir=None))


def test_a_second_run_reads_rules_and_frame_masks_and_compiles_nothing(tmp_path: Path) -> None:
    build = Builds(SCHEMA)
    first = cached_grammar(["tree"], build, cache_dir=tmp_path)
    assert build.count == 1 and first.has_calls
    compiled = compile_grammar(first, INFO, cache_dir=tmp_path)
    expected = masks_along(compiled)
    assert expected == fresh_masks()
    save_cached_rules(), save_frame_caches()  # what runs at exit (the run still holds them)
    second = cached_grammar(["tree"], build, cache_dir=tmp_path)
    assert isinstance(second.rules, CachedRules) and second.key == first.key
    assert second.rules.built == first.rules.built >= 2
    again = compile_grammar(second, INFO, cache_dir=tmp_path)
    frames = again.engine.frames
    assert frames.built == compiled.engine.frames.built > 1  # every frame read back
    assert masks_along(again) == expected and build.count == 1  # no compile
    assert frames.built == compiled.engine.frames.built and frames.indexed_rules == 0


def test_a_rule_the_file_lacks_comes_from_one_compile(tmp_path: Path) -> None:
    build = Builds(SCHEMA, "lacks")
    cached_grammar(["tree"], build, cache_dir=tmp_path)  # stores the start rule only
    second = cached_grammar(["tree"], build, cache_dir=tmp_path)
    assert isinstance(second.rules, CachedRules) and build.count == 1
    held = second.rules.built
    assert masks_along(compile_grammar(second, INFO, cache_dir=tmp_path)) == fresh_masks()
    assert build.count == 2 and second.rules.built > held  # one compile for the missing rule
    save_cached_rules()
    third = cached_grammar(["tree"], build, cache_dir=tmp_path)
    assert third.rules.built == second.rules.built  # the rules built later were added
    assert masks_along(compile_grammar(third, INFO, cache_dir=tmp_path)) == fresh_masks()
    assert build.count == 2


def test_a_stale_file_is_a_named_error_and_is_removed(tmp_path: Path) -> None:
    cached_grammar(["tree"], Builds(SCHEMA, "stale"), cache_dir=tmp_path)  # the start rule
    stale = cached_grammar(["tree"], Builds(OTHER, "stale"), cache_dir=tmp_path)  # same key
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("rules-"))
    assert len(files) == 1
    with pytest.raises(GrammarError, match="stale"):
        masks_along(compile_grammar(stale, INFO, cache_dir=None))
    assert not (tmp_path / files[0]).exists()
    assert cached_grammar(["tree"], Builds(OTHER), cache_dir=tmp_path).rules.built >= 1


def test_broken_files_are_ignored(tmp_path: Path) -> None:
    grammar = cached_grammar(["tree"], Builds(SCHEMA), cache_dir=tmp_path)
    compiled = compile_grammar(grammar, INFO, cache_dir=tmp_path)
    assert masks_along(compiled) == fresh_masks()
    save_cached_rules(), save_frame_caches()
    for path in tmp_path.iterdir():
        if path.name.startswith(("rules-", "frames-")):
            path.write_bytes(b"KORARR1\n" + json.dumps([1, 2]).encode())
    build = Builds(SCHEMA)
    again = cached_grammar(["tree"], build, cache_dir=tmp_path)
    assert build.count == 1 and not isinstance(again.rules, CachedRules)
    assert masks_along(compile_grammar(again, INFO, cache_dir=tmp_path)) == fresh_masks()


def test_a_record_grammar_read_back_finds_its_missing_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kor_cli.constrain import record_grammar

    monkeypatch.setenv("KOR_CLI_CACHE", str(tmp_path))
    schema = {**SCHEMA, "title": "record"}
    text = b" <json>" + TEXT.replace(b",", b", ").replace(b":", b": ") + b"</json>"
    fresh = record_grammar(schema)  # stored: the envelope's root rule and the start rule
    expected = masks_along(compile_grammar(fresh, INFO, cache_dir=None), text)
    again = record_grammar(schema)
    assert isinstance(again.rules, CachedRules) and again.rules.built < fresh.rules.built
    assert masks_along(compile_grammar(again, INFO, cache_dir=None), text) == expected


def test_deferred_values_read_back_are_built_through_the_replayed_compile(tmp_path: Path) -> None:
    big = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(30)},
        "required": [f"p{i}" for i in range(30)],
        "additionalProperties": False,
    }  # large enough to become a rule whose AST is built when first reached
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "big": big,
            "more": {"type": "array", "items": big},
        },
        "required": ["a", "big"],
        "additionalProperties": False,
    }
    doc = {
        "a": 1,
        "big": {f"p{i}": "x" for i in range(30)},
        "more": [{"p0": "y"} | {f"p{i}": "z" for i in range(1, 30)}],
    }
    text = serialize(doc).encode()
    build = Builds(schema, "deferred")
    first = cached_grammar(["deferred"], build, cache_dir=tmp_path)  # stores the start rule
    assert first.has_calls and first.rules.built == 1
    again = cached_grammar(["deferred"], build, cache_dir=tmp_path)
    assert isinstance(again.rules, CachedRules) and build.count == 1
    masks = masks_along(compile_grammar(again, INFO, cache_dir=None), text)
    assert build.count == 2 and again.rules.built > 1  # the deferred rules, one compile
    fresh = compile_grammar(compile_json_schema({**schema, "title": "fresh"}), INFO, cache_dir=None)
    assert masks == masks_along(fresh, text)
