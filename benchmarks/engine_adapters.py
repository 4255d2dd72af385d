"""The engines the benchmarks compare, behind one small interface.

Each adapter is built once per tokenizer (`Engine(tokenizer, info)`, its tokenizer setup) and
has `compile(schema)` (schema → compiled grammar, caches cleared) and `matcher(compiled)` →
an object with `fill(buf)` (a caller-owned int32 bitmask [ceil(V/32)]) and `accept(token)`.
`Kor` is kor-cli through its matcher surface (`compile_grammar` over `compile_json_schema`,
disk cache off); XGrammar, llguidance and outlines-core are the competitors (the `bench`
extra). How they are timed is `engine_timing.py`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from typing import Any

import numpy as np

from kor_cli.grammar import compile as kor_compile
from kor_cli.grammar import dfa_cache, disk_cache, shared_rules
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.surface import CompiledGrammar, GrammarMatcher, TokenizerInfo, compile_grammar
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.grammar.token_tables import token_trie
from kor_cli.grammar.unique_matcher import unique_token_sets

ENGINES = ("kor", "xgrammar", "llguidance", "outlines")
COMPETITORS = ENGINES[1:]
MODULES = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines": "outlines_core"}
PACKAGES = {
    "kor": "kor-cli",
    "xgrammar": "xgrammar",
    "llguidance": "llguidance",
    "outlines": "outlines_core",
}


def installed(engine: str) -> bool:
    """True for kor, and for a competitor whose package is installed (the bench extra)."""
    return engine == "kor" or importlib.util.find_spec(MODULES[engine]) is not None


def add_engines_argument(parser: argparse.ArgumentParser) -> None:
    """`--engines`: which engines a benchmark runs (read back by `chosen_engines`)."""
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES, help="default: every installed engine"
    )


def chosen_engines(parser: argparse.ArgumentParser, engines: list[str] | None) -> list[str]:
    """The engines to run: those named (kor among them: it is the reference of every ratio;
    each installed), else every installed one, with a note on stdout naming those missing."""
    if engines is not None and "kor" not in engines:
        parser.error("kor is the reference for every comparison")
    missing = [e for e in engines or ENGINES if not installed(e)]
    if engines is None:
        engines = [e for e in ENGINES if installed(e)]
        if missing:
            print(
                f"note: {', '.join(missing)} not installed (pip install -e '.[bench]'): "
                "running without them, so there are no ratios to them",
                flush=True,
            )
    elif missing:
        parser.error(f"not installed: {', '.join(missing)} (pip install -e '.[bench]')")
    return engines


class Kor:
    """kor-cli through its one matcher surface: `compile_grammar` over `compile_json_schema`
    (a call-free grammar on its DFA's TokenIndex, one with calls on the pushdown matcher),
    `GrammarMatcher.fill_next_token_bitmask`. The disk cache is off (cold compiles)."""

    name = "kor"

    def __init__(
        self, tokenizer: Any, info: TokenizerInfo, options: GrammarOptions | None = None
    ) -> None:
        self.info = info
        self.options = options or GrammarOptions()
        token_trie(info)  # shared trie and string-body tables: per-tokenizer setup,
        sorted_tokens(info).prepare()  # the sorted tokens' padded matrix (frame masks),
        unique_token_sets(info)  # and which tokens hold `,`/`[` (uniqueItems arrays)
        os.environ[disk_cache.ENV] = "off"  # compiles and masks are timed cold, not read back

    @staticmethod
    def clear_caches() -> None:
        """Forget earlier compiles: the compile LRU, the structural DFA cache and the
        schema-independent rules with their frame masks (`shared_rules`: the "any value"
        and free types' rules), so a repeat reuses no DFA or mask an earlier compile left.
        The fixed automata (any string, any number) and parsed formats stay, as the
        tokenizer's tables do: a one-off per process."""
        kor_compile._cache.clear()
        dfa_cache.clear()
        shared_rules.clear()

    def compile(self, schema: Any) -> CompiledGrammar:
        self.clear_caches()
        return compile_grammar(compile_json_schema(schema, self.options), self.info)

    def matcher(self, compiled: CompiledGrammar) -> Any:
        return KorMatcher(GrammarMatcher(compiled))


class KorMatcher:
    def __init__(self, m: GrammarMatcher) -> None:
        self.m = m

    def fill(self, buf: np.ndarray) -> None:
        self.m.fill_next_token_bitmask(buf[None])  # a one-row view of the caller's buffer

    def accept(self, token: int) -> bool:
        return self.m.accept_token(token)


def kor_memory(compiled: CompiledGrammar) -> dict[str, Any]:
    """Memory of our compiled grammar after the walks (and, on the DFA engine, with every
    state built)."""
    engine = compiled.engine
    if not isinstance(engine, TokenIndex):  # the pushdown matcher: frames, stacks, masks
        return {
            "engine": "pushdown",
            "mb_visited": round(engine.nbytes / 1e6, 3),
            "frames_built": engine.frames.built,
            "rules_built": engine.rules.built,
        }
    out = {
        "engine": "dfa",
        "index_mb_visited": round(engine.nbytes / 1e6, 3),
        "states_built": engine.built_states,
    }
    engine.precompute_all()
    out["index_mb_all_states"] = round(engine.nbytes / 1e6, 3)
    out["states_reachable"] = len(engine.reachable_states())
    return out


class XGrammar:
    name = "xgrammar"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.tinfo = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=info.vocab_size, stop_token_ids=list(info.stop_ids)
        )
        self.compiler = xgr.GrammarCompiler(self.tinfo, cache_enabled=False)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(",", ":")
        )

    def matcher(self, compiled: Any) -> Any:
        return XGrammarMatcher(self.xgr.GrammarMatcher(compiled))


class XGrammarMatcher:
    def __init__(self, m: Any) -> None:
        self.m = m
        self._tensor: Any = None
        self._buf: Any = None

    def fill(self, buf: np.ndarray) -> None:
        if self._buf is not buf:  # a torch view of the same memory (DLPack)
            import torch

            self._buf, self._tensor = buf, torch.from_numpy(buf.reshape(1, -1))
        self.m.fill_next_token_bitmask(self._tensor)

    def accept(self, token: int) -> bool:
        return self.m.accept_token(token)


class LLGuidance:
    name = "llguidance"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(
            tokenizer, n_vocab=info.vocab_size, eos_token=list(info.stop_ids)
        )

    def compile(self, schema: Any) -> Any:
        options = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, overrides=options)
        matcher = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if matcher.is_error():
            raise RuntimeError(matcher.get_error())
        return matcher  # pristine: each request gets a deep copy

    def matcher(self, pristine: Any) -> Any:
        return LLGuidanceMatcher(pristine.deep_copy())


class LLGuidanceMatcher:
    def __init__(self, m: Any) -> None:
        self.m = m

    def fill(self, buf: np.ndarray) -> None:
        self.m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)

    def accept(self, token: int) -> bool:
        return self.m.consume_token(token) and not self.m.is_error()


class Outlines:
    name = "outlines"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        import outlines_core

        self.oc = outlines_core
        by_bytes: dict[bytes, list[int]] = {}
        for i, data in enumerate(info.token_bytes):
            if data and i not in info.stop_ids:
                by_bytes.setdefault(data, []).append(i)
        self.eos = info.stop_ids[0]
        self.vocab = outlines_core.Vocabulary(self.eos, by_bytes)

    def compile(self, schema: Any) -> Any:
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), "")
        return self.oc.Index(regex, self.vocab)

    def matcher(self, index: Any) -> Any:
        return OutlinesMatcher(self.oc.Guide(index), self.eos)


class OutlinesMatcher:
    def __init__(self, m: Any, eos: int) -> None:
        self.m = m
        self.eos = eos

    def fill(self, buf: np.ndarray) -> None:
        self.m.write_mask_into(buf.ctypes.data, buf.size, 4)

    def accept(self, token: int) -> bool:
        if token == self.eos:  # in its mask in final states, but advance() refuses it
            return self.m.is_finished()
        try:
            self.m.advance(token, return_tokens=False)
        except ValueError:
            return False
        return True


ENGINE_CLASSES = {"kor": Kor, "xgrammar": XGrammar, "llguidance": LLGuidance, "outlines": Outlines}


def vocab_agreement(engines: dict[str, Any], info: TokenizerInfo) -> dict[str, Any]:
    """Token ids whose bytes an engine reads differently from our TokenizerInfo."""
    tables: dict[str, list[bytes | None]] = {}
    if "xgrammar" in engines:  # its decoded vocabulary: specials it knows of are empty
        xinfo = engines["xgrammar"].tinfo
        special = set(xinfo.special_token_ids)
        decoded = xinfo.decoded_vocab
        tables["xgrammar"] = [
            None if i in special or i >= len(decoded) else decoded[i]
            for i in range(info.vocab_size)
        ]
    if "llguidance" in engines:
        tok = engines["llguidance"].tok
        tables["llguidance"] = [
            None if i >= tok.vocab_size or tok.is_special_token(i) else tok.decode_bytes([i])
            for i in range(info.vocab_size)
        ]
    out: dict[str, Any] = {}
    for ename, table in tables.items():
        as_text = [i for i, b in enumerate(table) if b and not info.token_bytes[i]]
        as_special = [i for i, b in enumerate(table) if not b and info.token_bytes[i]]
        differ = [
            i for i, b in enumerate(table) if b and info.token_bytes[i] and b != info.token_bytes[i]
        ]
        out[ename] = {
            "our_specials_read_as_text": len(as_text),
            "examples_as_text": [
                (i, (table[i] or b"").decode("utf-8", "replace")) for i in as_text[:5]
            ],
            "our_text_read_as_special": len(as_special),
            "examples_as_special": [
                (i, (info.token_bytes[i] or b"").hex()) for i in as_special[:5]
            ],
            "different_bytes": len(differ),
        }
    return out
