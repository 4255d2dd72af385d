"""kor-cli's grammar engine side by side with XGrammar, llguidance and outlines-core.

One run, same inputs: the five schemas of docs/design.md §7 (tests/data/grammar_schemas.json,
shared with grammar_masks.py) × the three offline tokenizers (mistral-sp, tekken, qwen with
151,936 logits). Every engine is set to compact JSON (`,` and `:`, no whitespace, members in
schema order), so all four should accept the same texts and masks can be compared bit by
bit. OpenAI's recursive UI schema keeps its recursion in kor-cli (the pushdown matcher),
XGrammar and llguidance; outlines-core unrolls it (a DFA). Our masks are checked against a
brute force over the DFA with the recursion unrolled ORACLE_DEPTH deep, deeper than the
walked sequences nest.

Per tokenizer, once: each engine's tokenizer setup (ours: TokenizerInfo, byte trie,
string-body tables and the sorted tokens' padded matrix; XGrammar: TokenizerInfo +
GrammarCompiler; llguidance: LLTokenizer; outlines-core: a Vocabulary built from our byte
table, since it cannot read a local HF tokenizer).
Per engine × schema × tokenizer:

- compile: schema → ready matcher (ours: compile_json_schema + compile_grammar, the matcher
  surface: the DFA engine for person and weather, the pushdown matcher for the schemas with
  calls; grammar cache cleared, disk cache off; XGrammar: compile_json_schema with its cache
  off; llguidance: grammar_from_json_schema + LLMatcher; outlines-core:
  build_regex_from_schema + Index); time to first mask
  adds a matcher and the start state's mask.
- per-token mask time: along the token sequences (the instances serialised compactly and
  tokenized mid-text, then the stop token; plus seeded random walks over our allowed
  tokens), each step fills a caller-owned int32 bitmask [ceil(V/32)] (ours: copy of the
  packed mask) and is timed alone, then the token is accepted (timed apart). "cold": the
  walk right after a compile (our lazily built states are first visits in it); "warm": the
  same walk again. Compile, first mask and the cold statistics are medians over --repeats
  fresh compiles (a compile over 2 s runs once and its grammar is walked again).
- memory: ours after the walks (DFA engine: TokenIndex.nbytes, also with all states built;
  pushdown: frame, stack and configuration masks);
  XGrammar's CompiledGrammar.memory_size_bytes.
- correctness: at every step our mask is compared with a brute-force walk of every token
  over the DFA (a padded token × byte array, no trie, dead states pruned by its own
  fixpoint; per distinct state); on two states also a byte-by-byte Python walk.
  Competitors' masks are compared with ours at every step: tokens only they allow, tokens
  only we allow, grouped by kind (text, forced text, special, stop) and telling byte.
  Spot check of who is right: a token only we allow is completed by the shortest path to
  an accepting DFA state, a token only they allow by a greedy walk of their own matcher
  (closing bytes first); the text is validated with jsonschema (formats checked). Valid:
  the engine that forbade the token was wrong (or stricter by design); invalid or stuck:
  the engine that allowed it had no valid completion we could find.

    python benchmarks/engines.py [--tokenizers qwen ...] [--walks 6] [--repeats 5]

Recursive schemas (a tree, JSON-RPC-like nested params) on our pushdown matcher, with these
same engine adapters in one run: `benchmarks/engines_recursive.py`.

Writes `--out` (default benchmarks/out/engines.json, untracked) and a .png next to it, prints
markdown tables. Without the `bench` extra (pip install -e '.[bench]') it runs kor-cli alone,
with a note saying which engines are missing.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import time
from collections import deque
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
from _common import add_out_argument, out_path
from grammar_masks import INSTANCES, SCHEMAS, continuation, random_walk

from kor_cli.grammar import compile as kor_compile
from kor_cli.grammar import dfa_cache, disk_cache
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.index import TokenIndex, token_trie
from kor_cli.grammar.surface import CompiledGrammar, GrammarMatcher, TokenizerInfo, compile_grammar
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.testing import QWEN_LOGITS_WIDTH, TOKENIZER_NAMES, load_offline_tokenizer

ENGINES = ("kor", "xgrammar", "llguidance", "outlines")
ORACLE_DEPTH = 6
COMPETITORS = ENGINES[1:]
SLOW_COMPILE_S = 2.0  # above this, compile once instead of --repeats times
EXAMPLES = 8  # disagreement examples (with a spot check) per engine pair and direction
KINDS = ("text", "text_forced", "special", "stop")
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


# -- engines: compile → matcher with fill(buf) / accept(token) -------------------------
class Kor:
    """kor-cli through its one matcher surface: `compile_grammar` over `compile_json_schema`
    (a call-free grammar on its DFA's TokenIndex, one with calls on the pushdown matcher),
    `GrammarMatcher.fill_next_token_bitmask`. The disk cache is off (cold compiles)."""

    name = "kor"

    def __init__(self, tokenizer: Any, info: TokenizerInfo) -> None:
        self.info = info
        token_trie(info)  # shared trie and string-body tables: per-tokenizer setup,
        sorted_tokens(info).matrix()  # and the sorted tokens' padded matrix (frame masks)
        os.environ[disk_cache.ENV] = "off"  # compiles and masks are timed cold, not read back

    def compile(self, schema: Any) -> CompiledGrammar:
        kor_compile._cache.clear()  # time the real compile, not the LRU cache,
        dfa_cache.clear()  # nor DFAs an earlier compile (a repeat) left in the DFA cache
        return compile_grammar(compile_json_schema(schema), self.info)

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


# -- brute force over our DFA ------------------------------------------------------------
class BruteForce:
    """Allowed tokens of a DFA state, by walking every token's bytes (no trie)."""

    def __init__(self, info: TokenizerInfo) -> None:
        self.info = info
        stops = set(info.stop_ids)
        ids = [i for i, b in enumerate(info.token_bytes) if b and i not in stops]
        ids.sort(key=lambda i: -len(info.token_bytes[i] or b""))
        self.ids = np.asarray(ids, dtype=np.int64)
        lens = np.asarray([len(info.token_bytes[i] or b"") for i in ids], dtype=np.int64)
        self.depth = int(lens[0])
        pad = np.zeros((len(ids), self.depth), dtype=np.int64)
        for row, i in enumerate(ids):
            data = info.token_bytes[i] or b""
            pad[row, : len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.pad = pad
        # tokens longer than `pos` are the first counts[pos] rows (sorted by length)
        self.counts = [int((lens > pos).sum()) for pos in range(self.depth)]

    def for_dfa(self, dfa: Any) -> DFAOracle:
        return DFAOracle(self, dfa)


class DFAOracle:
    def __init__(self, brute: BruteForce, dfa: Any) -> None:
        self.brute = brute
        table = np.asarray(dfa.transitions, dtype=np.int64)
        accepting = np.asarray(dfa.accepting, dtype=bool)
        live = _coreachable(table, accepting)
        self.table = np.where(live[table], table, 0)
        self.flat = self.table.ravel()
        self.accepting = accepting & live
        self.start = int(dfa.start) if live[int(dfa.start)] else 0
        self.forced = ((self.table != 0).sum(axis=1) == 1) & ~self.accepting
        self.width = brute.info.vocab_size
        self.cache: dict[int, np.ndarray] = {}

    def step(self, state: int, token: int) -> int:
        if token in self.brute.info.stop_ids:
            return state if self.accepting[state] else 0
        data = self.brute.info.token_bytes[token] if token < self.width else None
        if not data:
            return 0
        for byte in data:
            state = int(self.table[state, byte])
            if not state:
                return 0
        return state

    def dies_at(self, state: int, data: bytes) -> int | None:
        """Index of the byte of `data` where the walk from `state` dies (None: it lives)."""
        for i, byte in enumerate(data):
            state = int(self.table[state, byte])
            if not state:
                return i
        return None

    def allowed(self, state: int) -> np.ndarray:
        """Bool [vocab_size] (vectorised over all tokens)."""
        found = self.cache.get(state)
        if found is not None:
            return found
        b = self.brute
        states = np.full(len(b.ids), state, dtype=np.int64)
        for pos, n in enumerate(b.counts):
            states[:n] = self.flat[states[:n] * 256 + b.pad[:n, pos]]
        mask = np.zeros(self.width, dtype=bool)
        mask[b.ids[states != 0]] = True
        if state and self.accepting[state]:
            mask[list(b.info.stop_ids)] = True
        self.cache[state] = mask
        return mask

    def allowed_slow(self, state: int) -> np.ndarray:
        """The same, one token and one byte at a time in plain Python."""
        mask = np.zeros(self.width, dtype=bool)
        if not state:
            return mask
        for token in range(self.width):
            mask[token] = self.step(state, token) != 0
        return mask

    def shortest_completion(self, state: int) -> bytes | None:
        """The shortest bytes from `state` to an accepting state (BFS)."""
        parent: dict[int, tuple[int, int]] = {state: (-1, -1)}
        queue = deque([state])
        while queue:
            s = queue.popleft()
            if self.accepting[s]:
                out = bytearray()
                while parent[s][0] >= 0:
                    s, byte = parent[s]
                    out.append(byte)
                return bytes(reversed(out))
            for byte in range(256):
                t = int(self.table[s, byte])
                if t and t not in parent:
                    parent[t] = (s, byte)
                    queue.append(t)
        return None


def _coreachable(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """States that can reach an accepting state (plain fixpoint, not index.live_states)."""
    live = accepting.copy()
    live[0] = False
    while True:
        grown = live | live[table].any(axis=1)
        grown[0] = False
        if (grown == live).all():
            return live
        live = grown


# -- helpers -------------------------------------------------------------------------------
def unpack(words: np.ndarray, width: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), count=width, bitorder="little").view(bool)


def stats_us(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    arr = np.asarray(values) * 1e6
    return {
        "median": round(float(np.median(arr)), 2),
        "mean": round(float(arr.mean()), 2),
        "p99": round(float(np.percentile(arr, 99)), 2),
        "max": round(float(arr.max()), 1),
        "n": len(values),
    }


def validates(schema: Any, data: bytes) -> bool:
    try:
        instance = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return validator.is_valid(instance)


def greedy_completion(matcher: Any, info: TokenizerInfo, words: int, cap: int = 200) -> Any:
    """Bytes a competitor's matcher leads to: stop when allowed, else prefer closing bytes,
    then the lowest printable single byte not used in the last 4 steps (None: stuck)."""
    buf = np.zeros(words, dtype=np.int32)
    out = bytearray()
    recent: deque[int] = deque(maxlen=4)
    preferred = [b'"', b"}", b"]", b"0", b"a", b"A", b"1", b"@", b".", b"-"]
    by_bytes: dict[bytes, int] = {}
    for i, data in enumerate(info.token_bytes):
        if data and len(data) == 1 and data not in by_bytes and i not in info.stop_ids:
            by_bytes[data] = i
    for _ in range(cap):
        matcher.fill(buf)
        allowed = unpack(buf, info.vocab_size)
        if allowed[list(info.stop_ids)].any():
            return bytes(out)
        choice = None
        for data in preferred:
            token = by_bytes.get(data)
            if token is not None and allowed[token] and data[0] not in recent:
                choice = token
                break
        if choice is None:
            singles = [
                by_bytes[bytes([c])]
                for c in range(0x20, 0x7F)
                if bytes([c]) in by_bytes and allowed[by_bytes[bytes([c])]]
            ]
            fresh = [t for t in singles if (info.token_bytes[t] or b"\0")[0] not in recent]
            pool = fresh or singles or np.flatnonzero(allowed).tolist()
            if not pool:
                return None
            choice = pool[0]
        data = info.token_bytes[choice] or b""
        if not matcher.accept(choice):
            return None
        out += data
        recent.extend(data)
    return None


# -- one schema × tokenizer ----------------------------------------------------------------
def timed_compile(engine: Any, schema: Any, words: int) -> tuple:
    """Seconds to compile and to the first mask, the compiled grammar and the matcher that
    made the first mask."""
    gc.collect()
    t0 = time.perf_counter()
    compiled = engine.compile(schema)
    t1 = time.perf_counter()
    matcher = engine.matcher(compiled)
    matcher.fill(np.zeros(words, dtype=np.int32))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0, compiled, matcher


def median_stats(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each statistic's median over the repeated runs."""
    if not runs or not runs[0]:
        return {}
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def walk(engine_matcher: Any, sequence: list[int], words: int, keep: np.ndarray | None) -> tuple:
    """Mask then accept along `sequence`; per-step seconds; stops at the first rejection."""
    buf = np.zeros(words, dtype=np.int32)
    fills, accepts = [], []
    rejected = None
    clock = time.perf_counter
    for step, token in enumerate(sequence):
        start = clock()
        engine_matcher.fill(buf)
        mid = clock()
        ok = engine_matcher.accept(token)
        end = clock()
        fills.append(mid - start)
        accepts.append(end - mid)
        if keep is not None:
            keep[step] = buf
        if not ok:
            rejected = step
            break
    return fills, accepts, rejected


def bench_schema(
    name: str,
    engines: dict[str, Any],
    info: TokenizerInfo,
    tokenizer: Any,
    brute: BruteForce,
    walks: int,
    repeats: int,
) -> dict[str, Any]:
    schema = SCHEMAS[name]
    words = (info.vocab_size + 31) // 32
    # the brute force's DFA: recursion unrolled deeper than any walked sequence nests (the
    # default view stops at max_recursion_depth 3, where the pushdown matcher goes on)
    dfa = compile_json_schema(schema, GrammarOptions(max_recursion_depth=ORACLE_DEPTH)).dfa
    oracle = brute.for_dfa(dfa)
    rng = np.random.default_rng(0)
    sequences = [
        continuation(tokenizer, info, serialize(inst)) + [info.stop_ids[0]]
        for inst in INSTANCES[name]
    ]
    walk_index = TokenIndex(dfa, info)
    n_instances = len(sequences)
    sequences += [random_walk(walk_index, rng) for _ in range(walks)]
    del walk_index

    row: dict[str, Any] = {
        "schema": name,
        "dfa_states": dfa.num_states,
        "steps": sum(map(len, sequences)),
        "instance_steps": sum(map(len, sequences[:n_instances])),
        "engines": {},
    }
    masks: dict[str, list[np.ndarray]] = {}
    compiled_by: dict[str, Any] = {}
    for ename, engine in engines.items():
        compile_s: list[float] = []
        first_s: list[float] = []
        cold: list[dict[str, float]] = []
        instances: list[dict[str, float]] = []
        accepts: list[float] = []
        kept: list[np.ndarray] = []
        rejected: list[list[int]] = []
        try:
            for rep in range(repeats):
                if rep == 0 or compile_s[-1] <= SLOW_COMPILE_S:  # else: reuse, walk again
                    c, f, compiled, first_matcher = timed_compile(engine, schema, words)
                    compile_s.append(c)
                    first_s.append(f)
                else:
                    first_matcher = engine.matcher(compiled)
                fills: list[float] = []
                for seq_no, seq in enumerate(sequences):
                    keep = np.zeros((len(seq), words), dtype=np.int32) if rep == 0 else None
                    matcher = first_matcher if seq_no == 0 else engine.matcher(compiled)
                    f, a, rej = walk(matcher, seq, words, keep)
                    fills += f
                    accepts += a
                    if seq_no + 1 == n_instances:
                        instances.append(stats_us(fills))
                    if keep is not None:
                        kept.append(keep[: len(f)])
                        if rej is not None:
                            rejected.append([seq_no, rej, seq[rej]])
                cold.append(stats_us(fills))
        except Exception as error:  # an engine refusing a schema is a result, not a crash
            row["engines"][ename] = {"error": f"{type(error).__name__}: {error}"[:300]}
            continue
        result: dict[str, Any] = {
            "compile_ms": round(statistics.median(compile_s) * 1e3, 3),
            "first_mask_ms": round(statistics.median(first_s) * 1e3, 3),
            "compile_runs": len(compile_s),
            "cold_walks": len(cold),
        }
        compiled_by[ename] = compiled
        warm_f: list[float] = []
        for seq in sequences:
            warm_f += walk(engine.matcher(compiled), seq, words, None)[0]
        result["mask_us_cold"] = median_stats(cold)
        result["mask_us_cold_instances_only"] = median_stats(instances)
        result["mask_us_warm"] = stats_us(warm_f)
        result["accept_us"] = stats_us(accepts)
        result["rejected"] = rejected  # [sequence, step, token] where its matcher said no
        if ename == "kor":
            result |= kor_memory(compiled)
        elif ename == "xgrammar":
            result["compiled_mb"] = round(compiled.memory_size_bytes / 1e6, 3)
        masks[ename] = kept
        row["engines"][ename] = result

    row["correctness"] = check(name, schema, sequences, masks, oracle, info, engines, compiled_by)
    return row


def category(info: TokenizerInfo, token: int, forced: bool) -> str:
    """stop | special (no bytes: control token, padding) | text | text_forced (at a state
    where our grammar allows exactly one next byte)."""
    if token in info.stop_ids:
        return "stop"
    if not info.token_bytes[token]:
        return "special"
    return "text_forced" if forced else "text"


def label(
    info: TokenizerInfo, token: int, kind: str, oracle: DFAOracle, state: int, prefix: bytes
) -> str:
    """What a differing token is about, for grouping: "special", "stop", "forced text", or
    the telling byte of a text token: where our DFA rejects it if we do, else its first
    control/DEL/C1/escape/quote byte ("text" if none). Escapes may start in the prefix."""
    if kind in ("special", "stop"):
        return kind
    if kind == "text_forced":
        return "forced text"
    data = info.token_bytes[token] or b""
    spot = oracle.dies_at(state, data)
    tail = prefix[-6:]
    full = tail + data
    positions = [spot] if spot is not None else range(len(data))
    for i in positions:
        j = len(tail) + i
        byte = full[j]
        if b"\\u" in full[max(0, j - 5) : j] and spot is not None:
            return "escape \\u (non-control)"
        escaped = full[j + 1] if byte == 0x5C and j + 1 < len(full) else None
        if full[j - 1 : j] == b"\\":
            escaped = byte
        if escaped is not None:
            return "escape \\" + (chr(escaped) if escaped < 0x80 else "<non-ASCII>")
        if byte < 0x20:
            return "control char"
        if byte == 0x7F:
            return "DEL"
        if byte == 0xC2 and j + 1 < len(full) and 0x80 <= full[j + 1] <= 0x9F:
            return "C1 control"
        if byte in b'"\\' or spot is not None:
            if byte >= 0x80:
                return "non-ASCII"
            char = chr(byte)
            return "digit" if char.isdigit() else "letter" if char.isalpha() else char
    return "text"


def check(
    name: str,
    schema: Any,
    sequences: list[list[int]],
    masks: dict[str, list[np.ndarray]],
    oracle: DFAOracle,
    info: TokenizerInfo,
    engines: dict[str, Any],
    compiled_by: dict[str, Any],
) -> dict[str, Any]:
    """Our masks against the brute force; every competitor's masks against ours.

    Disagreements are counted per step (a token allowed at 10 steps counts 10 times), split
    by `category`. Examples: one per (kind, first byte, context of the text so far), up to
    EXAMPLES per engine and direction; text and stop examples get a spot check.
    """
    width = info.vocab_size
    wrong_steps, wrong_tokens = 0, 0
    pairs: dict[str, dict[str, Any]] = {
        e: {
            "steps_compared": 0,
            "steps_differing": 0,
            "only_them": dict.fromkeys(KINDS, 0),
            "only_ours": dict.fromkeys(KINDS, 0),
            "labels_only_them": {},
            "labels_only_ours": {},
            "examples": [],
        }
        for e in masks
        if e != "kor"
    }
    seen: set[tuple[Any, ...]] = set()
    shown: dict[tuple[str, str], int] = {}
    slow_states: set[int] = set()
    for seq_no, seq in enumerate(sequences):
        state, prefix = oracle.start, b""
        ours_seq = masks["kor"][seq_no]
        for step, token in enumerate(seq):
            if step >= len(ours_seq):
                break
            truth = oracle.allowed(state)
            bad = int((unpack(ours_seq[step], width) != truth).sum())
            wrong_steps += bad > 0
            wrong_tokens += bad
            if len(slow_states) < 2 and state not in slow_states and step == len(seq) // 2:
                slow_states.add(state)
                if not np.array_equal(oracle.allowed_slow(state), truth):
                    raise AssertionError(f"{name}: the two brute forces disagree")
            for ename, pair in pairs.items():
                theirs_seq = masks[ename][seq_no]
                if step >= len(theirs_seq):
                    continue
                pair["steps_compared"] += 1
                if not (theirs_seq[step] != ours_seq[step]).any():
                    continue
                pair["steps_differing"] += 1
                theirs = unpack(theirs_seq[step], width)
                for direction, tokens in (
                    ("them", np.flatnonzero(theirs & ~truth)),
                    ("ours", np.flatnonzero(truth & ~theirs)),
                ):
                    for t in tokens.tolist():
                        kind = category(info, t, bool(oracle.forced[state]))
                        pair[f"only_{direction}"][kind] += 1
                        tag = label(info, t, kind, oracle, state, prefix)
                        groups = pair[f"labels_only_{direction}"]
                        groups[tag] = groups.get(tag, 0) + 1
                        key = (ename, direction, kind, tag)
                        if key in seen or shown.get((ename, direction), 0) >= EXAMPLES:
                            continue
                        seen.add(key)
                        shown[(ename, direction)] = shown.get((ename, direction), 0) + 1
                        pair["examples"].append(
                            example(
                                direction,
                                kind,
                                schema,
                                seq[:step],
                                t,
                                prefix,
                                oracle,
                                info,
                                engines[ename],
                                compiled_by[ename],
                            )
                        )
            prefix += info.token_bytes[token] or b""
            state = oracle.step(state, token)
    return {
        "steps_checked": sum(len(s) for s in masks["kor"]),
        "distinct_states_brute_forced": len(oracle.cache),
        "states_checked_byte_by_byte": len(slow_states),
        "wrong_steps": int(wrong_steps),
        "wrong_tokens": wrong_tokens,
        "vs_ours": pairs,
    }


def example(
    direction: str,
    kind: str,
    schema: Any,
    history: list[int],
    token: int,
    prefix: bytes,
    oracle: DFAOracle,
    info: TokenizerInfo,
    engine: Any,
    compiled: Any,
) -> dict[str, Any]:
    """One disagreement; for text and stop tokens, complete prefix + token with the engine
    that allows it and validate the text with jsonschema (formats checked)."""
    data = info.token_bytes[token] or b""
    allowed_by = "kor" if direction == "ours" else engine.name
    forbidden_by = engine.name if direction == "ours" else "kor"
    out: dict[str, Any] = {
        "allowed_by": allowed_by,
        "kind": kind,
        "id": token,
        "prefix": prefix[-40:].decode("utf-8", "replace"),
        "token": data.decode("utf-8", "replace") if data else f"<id {token}>",
    }
    if kind == "special":
        out["verdict"] = f"{allowed_by} allows a token without text (special/padding)"
        return out
    text: bytes | None
    if kind == "stop":
        text = prefix
    elif direction == "ours":
        state = oracle.start
        for t in [*history, token]:
            state = oracle.step(state, t)
        rest = oracle.shortest_completion(state)
        text = None if rest is None else prefix + data + rest
    else:
        matcher = engine.matcher(compiled)
        ok = all(matcher.accept(t) for t in [*history, token])
        words = (info.vocab_size + 31) // 32
        rest = greedy_completion(matcher, info, words) if ok else None
        text = None if rest is None else prefix + data + rest
    out["completed"] = None if text is None else text[-80:].decode("utf-8", "replace")
    out["valid"] = bool(text is not None and validates(schema, text))
    out["verdict"] = (
        f"{forbidden_by} forbids a token of a valid instance"
        if out["valid"]
        else f"{allowed_by} allows a token with no valid completion found"
    )
    return out


# -- report --------------------------------------------------------------------------------
def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "–"
    return f"{a / b:.2g}×"


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:.3g}{unit}"


def goals(report: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, checked on this run's numbers."""
    out: dict[str, Any] = {}
    rows = [(t, r) for t, rep in report["tokenizers"].items() for r in rep["schemas"]]

    def ours(r: dict[str, Any]) -> dict[str, Any]:
        return r["engines"].get("kor", {})

    qwen = [(t, r) for t, r in rows if t == "qwen" and "xgrammar" in r["engines"]]
    misses = [
        f"{r['schema']} {ours(r).get('first_mask_ms')} vs "
        f"{r['engines']['xgrammar']['compile_ms']} ms"
        for _, r in qwen
        if not ours(r).get("first_mask_ms", 1e9) <= r["engines"]["xgrammar"].get("compile_ms", 0)
    ]
    out["time to first mask <= XGrammar compile (qwen)"] = {
        "met": bool(qwen) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(qwen)} schemas",
    }
    llg = [(t, r) for t, r in rows if "mask_us_cold" in r["engines"].get("llguidance", {})]
    misses = [
        f"{t}/{r['schema']} {ours(r)['mask_us_cold']['mean']} vs "
        f"{r['engines']['llguidance']['mask_us_cold']['mean']} µs"
        for t, r in llg
        if ours(r)["mask_us_cold"]["mean"] > r["engines"]["llguidance"]["mask_us_cold"]["mean"]
    ]
    out["mean mask time <= llguidance (cold walk, first visits included)"] = {
        "met": bool(llg) and not misses,
        "detail": f"misses: {', '.join(misses)}" if misses else f"{len(llg)} pairs",
    }
    worst = max((ours(r)["mask_us_warm"]["p99"], t, r["schema"]) for t, r in rows)
    out["p99 mask < 20 µs once states are built (warm walk)"] = {
        "met": worst[0] < 20,
        "detail": f"worst {worst[0]} µs ({worst[1]}/{worst[2]})",
    }
    wrong = sum(r["correctness"]["wrong_steps"] for _, r in rows)
    steps = sum(r["correctness"]["steps_checked"] for _, r in rows)
    out["zero wrong masks (brute force over our DFA)"] = {
        "met": wrong == 0,
        "detail": f"{wrong} wrong of {steps} steps checked",
    }
    return out


def groups(counts: dict[str, int]) -> str:
    """ "label ×n, ..." by decreasing count ("–" if none)."""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} ×{n}" for k, n in ranked) or "–"


def markdown(report: dict[str, Any], tokenizer: str) -> str:
    rows = report["tokenizers"][tokenizer]["schemas"]
    head = (
        "| schema | engine | compile ms | first mask ms | mask µs median | mean | p99 | "
        "p99 warm | ours ÷ them: first mask | median | mean | p99 |"
    )
    lines = [head, "|" + "---|" * 12]
    for row in rows:
        ours = row["engines"].get("kor", {})
        for ename in [e for e in ENGINES if e in row["engines"]]:
            r = row["engines"][ename]
            if "error" in r:
                lines.append(
                    f"| {row['schema']} | {ename} | refused: {r['error'][:60]} |" + " |" * 10
                )
                continue
            c, w = r.get("mask_us_cold", {}), r.get("mask_us_warm", {})
            oc = ours.get("mask_us_cold", {})
            ratios = (
                ["", "", "", ""]
                if ename == "kor"
                else [
                    ratio(ours.get("first_mask_ms"), r.get("first_mask_ms")),
                    ratio(oc.get("median"), c.get("median")),
                    ratio(oc.get("mean"), c.get("mean")),
                    ratio(oc.get("p99"), c.get("p99")),
                ]
            )
            lines.append(
                f"| {row['schema']} | {ename} | {fmt(r.get('compile_ms'))} | "
                f"{fmt(r.get('first_mask_ms'))} | {fmt(c.get('median'))} | {fmt(c.get('mean'))}"
                f" | {fmt(c.get('p99'))} | {fmt(w.get('p99'))} | " + " | ".join(ratios) + " |"
            )
    return "\n".join(lines)


def plot(report: dict[str, Any], tokenizer: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["tokenizers"][tokenizer]["schemas"]
    names = [r["schema"] for r in rows]
    panels = [
        ("time to first mask (ms)", lambda r: r.get("first_mask_ms")),
        ("mask median (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("median")),
        ("mask mean (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("mean")),
        ("mask p99 (µs), cold walk", lambda r: r.get("mask_us_cold", {}).get("p99")),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    x = np.arange(len(names))
    bar = 0.2
    for ax, (title, get) in zip(axes, panels, strict=True):
        for k, ename in enumerate(ENGINES):
            values = [get(r["engines"].get(ename, {})) or np.nan for r in rows]
            ax.bar(x + (k - 1.5) * bar, values, bar, label=ename)
        ax.set_yscale("log")
        ax.set_xticks(x, names)
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(
        f"Constrained-decoding engines, {tokenizer} tokenizer "
        f"({report['tokenizers'][tokenizer]['vocab_size']:,} logits), compact JSON"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokenizers", nargs="+", choices=TOKENIZER_NAMES, default=list(TOKENIZER_NAMES)
    )
    parser.add_argument("--schemas", nargs="+", choices=list(SCHEMAS), default=list(SCHEMAS))
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES, help="default: every installed engine"
    )
    parser.add_argument("--walks", type=int, default=6, help="random walks per schema")
    parser.add_argument("--repeats", type=int, default=5, help="compiles per engine × schema")
    add_out_argument(parser, "engines.json")
    args = parser.parse_args()
    args.out = out_path(args)
    missing = [e for e in args.engines or ENGINES if not installed(e)]
    if args.engines is None:
        args.engines = [e for e in ENGINES if installed(e)]
        if missing:
            print(
                f"note: {', '.join(missing)} not installed (pip install -e '.[bench]'): "
                "running without them, so there are no ratios to them",
                flush=True,
            )
    elif missing:
        parser.error(f"not installed: {', '.join(missing)} (pip install -e '.[bench]')")
    if "kor" not in args.engines:
        parser.error("kor is the reference for every comparison")

    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}, numpy {np.__version__}",
        "versions": {PACKAGES[e]: version(PACKAGES[e]) for e in args.engines},
        "whitespace": "compact everywhere: ',' and ':' with no spaces",
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "tokenizers": {},
    }
    for tname in args.tokenizers:
        tokenizer = load_offline_tokenizer(tname)
        width = QWEN_LOGITS_WIDTH if tname == "qwen" else None
        setup: dict[str, float] = {}
        t0 = time.perf_counter()
        info = TokenizerInfo.from_hf(tokenizer, vocab_size=width)
        setup["kor_tokenizer_info"] = time.perf_counter() - t0
        engines = {}
        for ename in args.engines:
            t0 = time.perf_counter()
            engines[ename] = ENGINE_CLASSES[ename](tokenizer, info)
            setup[ename] = time.perf_counter() - t0
        setup["kor"] += setup.pop("kor_tokenizer_info")  # ours: TokenizerInfo + trie
        agreement = vocab_agreement(engines, info)
        brute = BruteForce(info)
        rows = []
        for sname in args.schemas:
            t0 = time.perf_counter()
            rows.append(
                bench_schema(sname, engines, info, tokenizer, brute, args.walks, args.repeats)
            )
            print(f"[{tname} {sname}: {time.perf_counter() - t0:.1f} s]", flush=True)
        report["tokenizers"][tname] = {
            "vocab_size": info.vocab_size,
            "tokenizer_setup_ms": {k: round(v * 1e3, 1) for k, v in setup.items()},
            "vocab_agreement": agreement,
            "schemas": rows,
        }
        del engines, brute
        gc.collect()
    report["goals"] = goals(report)
    report["total_s"] = round(time.perf_counter() - started, 1)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    for tname in args.tokenizers:
        setup_ms = report["tokenizers"][tname]["tokenizer_setup_ms"]
        print(
            f"\n### {tname} (tokenizer setup ms: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in setup_ms.items())
            + ")\n"
        )
        print(markdown(report, tname))
        for row in report["tokenizers"][tname]["schemas"]:
            c = row["correctness"]
            print(
                f"  {row['schema']}: ours wrong at {c['wrong_steps']}/{c['steps_checked']} "
                "steps (brute force)"
            )
            for e, p in c["vs_ours"].items():
                print(
                    f"    vs {e}: {p['steps_differing']}/{p['steps_compared']} steps differ;"
                    f" only {e} allows: {groups(p['labels_only_them'])};"
                    f" only kor allows: {groups(p['labels_only_ours'])}"
                )
    print("\nGoals:")
    for goal, result in report["goals"].items():
        print(f"  {goal}: {'met' if result['met'] else 'NOT met'}; {result['detail']}")
    plot_tok = "qwen" if "qwen" in args.tokenizers else args.tokenizers[0]
    if importlib.util.find_spec("matplotlib") is None:
        print(f"\nnote: matplotlib not installed, no chart; wrote {args.out}")
        return
    plot(report, plot_tok, args.out.with_suffix(".png"))
    print(f"\n{report['total_s']} s in all; wrote {args.out} and {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
