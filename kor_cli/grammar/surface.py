"""The one matcher surface: everything the runtime may use of the grammar engine.

The decode loop, the transformers `LogitsProcessor`, jump-forward, `trace` and `compare`
import from here and nothing else of `kor_cli.grammar` (a test checks their imports).
Nothing here exposes a DFA state, an index or a trie, so another engine (the pushdown
matcher, whose state is a stack) plugs in behind the same names.

Contract
--------
`compile_grammar(grammar, info) -> CompiledGrammar`: a grammar compiled against one
tokenizer (`TokenizerInfo`: each token id's bytes, stop ids, logits width). It is shared by
every matcher of every request that uses the grammar; it is read-mostly: its mask caches
grow as states are first visited, which is safe from one thread at a time (the decode
loop's), not from several at once.

`GrammarMatcher(compiled)`: one request's position in the grammar; not shared, not
thread-safe. Every engine's matcher provides these (engines implement `EngineMatcher`):

- `accept_token(id) -> bool`: advance over a token; False, and no change, when the grammar
  forbids it. A stop id is allowed only where the output so far is complete; after it the
  matcher is stopped and allows nothing more.
- `accept_bytes(data) -> bool`: advance over raw bytes (forced text); False, no change.
- `fill_next_token_bitmask(bitmask, row=0)`: write the tokens allowed next into row `row`
  of a caller-owned int32 bitmask `[batch, ceil(V/32)]` (numpy array or torch CPU tensor):
  token i is bit `i % 32` of word `i // 32`, little-endian, as in XGrammar. A stopped
  matcher writes all zeros. Words past the vocabulary are zero.
- `state_key() -> Hashable`: equal keys (of matchers of one CompiledGrammar) mean equal
  masks, so a caller may keep a row's filled bitmask while the key stays the same.
- `is_accepting`: the output so far is complete (a stop token is allowed now).
- `is_terminated()`: a stop token was accepted, or the output is complete and nothing can
  follow (the decode loop ends the row without sampling a stop).
- `rollback(n)`: undo the last n accepted tokens or byte strings (a stop included);
  `steps` counts what can be undone; `reset()` returns to the start.
- `forced_bytes(limit)`: the longest byte string that is the only way on from here
  (b"" at a branch, where the output could end, or once stopped), at most `limit` bytes.

The surface adds, for every engine: `allowed_mask()` (bool [V], unpacked from a fill),
`allows_token_longer_than(n)` (jump-forward's back-off test), and the bitmask helpers
`allocate_token_bitmask` / `apply_token_bitmask_` (one vectorised op for the batch).
Jump-forward tokenization (`ForcedTokenizer`, `jump_forward`) works only through it.

Disk cache (`disk_cache`; `$KOR_CLI_CACHE`, else `~/.cache/kor-cli`): `cached_grammar` /
`compile_json_schema_cached` keep call-free compiled grammars by source and options,
`compile_grammar` the DFA engine's masks, `table_cache` each tokenizer's tables. An engine
caches its own tables the same way: `blob_key(parts...)` (the engine version is in every
key), then `read_arrays` / `write_arrays` (atomic; a broken file reads as None).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from kor_cli.grammar.ast import Automaton, Node, alt, literal
from kor_cli.grammar.bitmask import (
    allocate_token_bitmask,
    apply_token_bitmask_,
    as_numpy_bitmask,
    bitmask_words,
    pack_bool_mask,
    unpack_row,
    write_row,
)
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.compile import (
    Grammar,
    GrammarOptions,
    compile_choice,
    compile_json_schema,
    compile_regex,
)
from kor_cli.grammar.disk_cache import (
    ENGINE_VERSION,
    blob_key,
    blob_path,
    cache_root,
    read_arrays,
    usable_root,
    write_arrays,
)
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.index import FORCED_LIMIT, TokenIndex
from kor_cli.grammar.jump import ForcedTokenizer, complete_utf8_prefix, jump_forward
from kor_cli.grammar.matcher import GrammarMatcher as DfaMatcher
from kor_cli.grammar.pushdown import PushdownGrammar, PushdownMatcher
from kor_cli.grammar.rule_cache import load_grammar, save_cached_rules, store_grammar
from kor_cli.grammar.vocab import TokenizerInfo

__all__ = [
    "ENGINE_VERSION", "FORCED_LIMIT", "CompiledGrammar", "EngineMatcher", "ForcedTokenizer",
    "Grammar", "GrammarMatcher", "GrammarOptions", "TokenizerInfo", "allocate_token_bitmask",
    "apply_token_bitmask_", "bitmask_words", "cached_grammar", "compile_choice",
    "compile_grammar", "compile_json_schema", "compile_json_schema_cached", "compile_regex",
    "complete_utf8_prefix", "envelope_grammar", "jump_forward", "pack_bool_mask", "schema_text",
    "unpack_row",
]  # fmt: skip


class EngineMatcher(Protocol):
    """What an engine's per-request matcher implements (see the module docstring); in
    place of a fill, `row_words()`: the mask of now as one bitmask row's int32 words, all
    `CompiledGrammar.words` of them (cached and shared: the surface copies it)."""

    @property
    def steps(self) -> int: ...
    @property
    def is_accepting(self) -> bool: ...
    def accept_token(self, token_id: int) -> bool: ...
    def accept_bytes(self, data: bytes) -> bool: ...
    def row_words(self) -> np.ndarray: ...
    def state_key(self) -> Hashable: ...
    def is_terminated(self) -> bool: ...
    def rollback(self, n_tokens: int = 1) -> None: ...
    def reset(self) -> None: ...
    def forced_bytes(self, limit: int = FORCED_LIMIT) -> bytes: ...


_INT32 = np.dtype(np.int32)  # native int32's descriptor (numpy keeps one per builtin type)
_LENGTHS: dict[str, np.ndarray] = {}


def _token_lengths(info: TokenizerInfo) -> np.ndarray:
    """Byte length per token id (0: no bytes), one pass over the vocabulary per tokenizer."""
    lengths = _LENGTHS.get(info.fingerprint)
    if lengths is None:
        lengths = np.fromiter((len(b) if b else 0 for b in info.token_bytes), np.int32)
        if len(_LENGTHS) >= 4:
            _LENGTHS.pop(next(iter(_LENGTHS)))
        _LENGTHS[info.fingerprint] = lengths
    return lengths


class CompiledGrammar:
    """A grammar compiled against one tokenizer; shared by the matchers of its requests."""

    def __init__(
        self,
        grammar: Grammar,
        info: TokenizerInfo,
        engine: Any,
        new_matcher: Callable[[], EngineMatcher],
    ) -> None:
        self.grammar = grammar
        self.info = info
        self.engine = engine  # the engine's shared tables (a TokenIndex for a DFA grammar)
        self.new_matcher = new_matcher
        self._longer: dict[int, np.ndarray] = {}

    @property
    def vocab_size(self) -> int:
        """The logits width masks cover."""
        return self.info.vocab_size

    @property
    def words(self) -> int:
        """int32 words per bitmask row: ceil(vocab_size / 32)."""
        return bitmask_words(self.info.vocab_size)

    @property
    def kind(self) -> str:
        """What the grammar came from: "json-schema" | "regex" | "choice"."""
        return self.grammar.kind

    @property
    def warnings(self) -> tuple[str, ...]:
        """Keywords dropped by a lenient compile."""
        return self.grammar.warnings

    @property
    def key(self) -> str:
        """Stable hash of (engine version, grammar language, tokenizer)."""
        text = f"{ENGINE_VERSION} {self.grammar.key} {self.info.fingerprint}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def token_bytes(self) -> list[bytes | None]:
        """Each token id's exact bytes (None: special or padding)."""
        return self.info.token_bytes

    def is_stop(self, token_id: int) -> bool:
        return token_id in self.info.stop_ids

    def longer_than(self, n: int) -> np.ndarray:
        """Packed int32 words of the tokens with more than `n` bytes (cached per n)."""
        words = self._longer.get(n)
        if words is None:
            words = pack_bool_mask(_token_lengths(self.info) > n, self.words)
            self._longer[n] = words
        return words


def compile_grammar(
    grammar: Grammar, info: TokenizerInfo, *, cache_dir: Path | str | None = None
) -> CompiledGrammar:
    """Compile `grammar` against the tokenizer `info` (masks are built lazily, per state,
    on first visit). The one place that picks the engine for a grammar: a grammar with
    calls (recursion, or large values split off into rules) runs on the pushdown matcher
    (its rules' token indexes use the same disk cache); any other on its DFA's TokenIndex
    (faster to first mask than the pushdown matcher on call-free grammars; measured by pda10).

    With the disk cache (`cache_dir`, default `disk_cache.cache_root()`), the masks built
    so far are read from it, the start state's mask is written at once, and masks built
    later are written at exit: a second run starts from them. A folder that cannot exist
    (`usable_root`) means no disk cache: no cache key is computed.
    """
    root = usable_root(cache_dir if cache_dir is not None else cache_root())
    if grammar.has_calls:
        pushdown = PushdownGrammar(grammar.rules, info, root)
        if root is not None and not pushdown.dead:
            pushdown.words(pushdown.start)  # the first mask, so the cache holds its frames
            pushdown.frames.save_if_grown()
            save_cached_rules()  # and the rules that mask needed
        return CompiledGrammar(grammar, info, pushdown, lambda: PushdownMatcher(pushdown))
    index = TokenIndex(grammar.dfa, info, cache_dir=root)
    if root is not None and index.start:
        index.packed(index.start)
        index.save_if_grown()
    return CompiledGrammar(grammar, info, index, lambda: DfaMatcher(index))


_GRAMMAR_FORMAT = "kor-grammar-v1"


def schema_text(schema: Any) -> str | None:
    """A JSON Schema as exact JSON text for a cache key (member order kept), or None when
    it is not JSON (the compile then reports why)."""
    try:
        return json.dumps(schema, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def compile_json_schema_cached(
    schema: dict[str, Any] | bool, options: GrammarOptions = GrammarOptions()
) -> Grammar:
    """`compile_json_schema` through the disk cache (skipped when the options load
    `$ref` files, which the key cannot see)."""
    text = schema_text(schema)
    cacheable = text is not None and not options.ref_dir and not options.ref_map
    source = ["json-schema", text or "", repr(options)] if cacheable else None
    return cached_grammar(source, lambda: compile_json_schema(schema, options))


def cached_grammar(
    source: Sequence[str] | None,
    build: Callable[[], Grammar],
    *,
    cache_dir: Path | str | None = None,
) -> Grammar:
    """`build()`, or the grammar it built before for the same `source` (the parts that
    decide it: grammar text, options, wrapper), read from the disk cache. `source` None,
    or no cache folder skip the cache. A grammar with calls is stored as its rules built
    so far (`rule_cache`)."""
    root = cache_dir if cache_dir is not None else cache_root()
    if source is None or root is None:
        return build()
    path = blob_path(root, "grammar", blob_key(_GRAMMAR_FORMAT, *source), "bin")
    found = read_arrays(path)
    if found is not None:
        try:
            dfa = ByteDFA(found["transitions"], found["accepting"], int(found["start"]))
            kind, *warnings = json.loads(str(found["meta"]))
            return Grammar(dfa, str(kind), tuple(str(w) for w in warnings))
        except (KeyError, ValueError, TypeError):
            pass  # a stale or broken file: rebuild and overwrite it
    stored = load_grammar(root, source, build)
    if stored is not None:
        return stored
    grammar = build()
    if grammar.has_calls:
        store_grammar(root, source, grammar)
    else:
        dfa = grammar.dfa
        meta = json.dumps([grammar.kind, *grammar.warnings])
        write_arrays(
            path,
            {
                "transitions": dfa.transitions,
                "accepting": dfa.accepting,
                "start": np.asarray(dfa.start),
                "meta": np.asarray(meta),
            },
        )
    return grammar


class GrammarMatcher:
    """One request's position in a compiled grammar (the contract: module docstring)."""

    __slots__ = ("_engine", "_ndim", "_row", "compiled")

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self._engine = compiled.new_matcher()
        self._row = self._engine.row_words  # bound once: a step's fill calls it
        # the fill's one assignment takes a bitmask of this ndim: 2, or none (-1) where a
        # row is one word, which numpy would spread over a wider row instead of refusing
        self._ndim = 2 if compiled.words > 1 else -1

    def accept_token(self, token_id: int) -> bool:
        return self._engine.accept_token(token_id)

    def accept_bytes(self, data: bytes) -> bool:
        return self._engine.accept_bytes(data)

    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None:
        words = self._row()
        if bitmask.dtype is _INT32 and bitmask.ndim == self._ndim:
            try:  # the usual case, int32 numpy [B, W]: one assignment, which checks the
                bitmask[row] = words  # width itself (~0.1 us less than reading the shape)
                return
            except ValueError:
                pass  # another width (cut or padded below) or a read-only array (refused)
        write_row(as_numpy_bitmask(bitmask), row, words)

    def state_key(self) -> Hashable:
        return self._engine.state_key()

    @property
    def is_accepting(self) -> bool:
        return self._engine.is_accepting

    def is_terminated(self) -> bool:
        return self._engine.is_terminated()

    @property
    def steps(self) -> int:
        return self._engine.steps

    def rollback(self, n_tokens: int = 1) -> None:
        self._engine.rollback(n_tokens)

    def reset(self) -> None:
        self._engine.reset()

    def forced_bytes(self, limit: int = FORCED_LIMIT) -> bytes:
        return self._engine.forced_bytes(limit)

    def _words(self) -> np.ndarray:
        """This matcher's current mask as one packed int32 row (shared: not to modify)."""
        return self._row()

    def allowed_mask(self) -> np.ndarray:
        """Bool [vocab_size]: the tokens allowed next (a fresh array)."""
        return unpack_row(self._words(), self.compiled.vocab_size)

    def allows_token_longer_than(self, n_bytes: int) -> bool:
        """True when some token allowed next has more than `n_bytes` bytes."""
        return bool(np.bitwise_and(self._words(), self.compiled.longer_than(n_bytes)).any())


def envelope_grammar(
    record: Grammar,
    wrap: Callable[[Node], Node],
    *,
    alternatives: Sequence[Grammar] = (),
    literals: Sequence[str] = (),
    options: GrammarOptions = GrammarOptions(),
) -> Grammar:
    """`record`, or one of `alternatives` / `literals`, inside `wrap` (an output format's
    wrapper around the record's grammar, e.g. `<json>` … `</json>`)."""
    extra = [Automaton(g.dfa) for g in alternatives] + [literal(text) for text in literals]

    def around(body: Node) -> Node:
        return wrap(alt(body, *extra) if extra else body)

    if record.has_calls:  # the record's rules under a new root rule: recursion stays unbounded
        rules = record.rules.rooted(around, "envelope")

        def view() -> ByteDFA:  # the bounded view, for DFA-only consumers
            return compile_ast(around(Automaton(record.dfa)), options.max_states)

        return Grammar(None, record.kind, record.warnings, rules, view)
    dfa = compile_ast(around(Automaton(record.dfa)), options.max_states)
    return Grammar(dfa, record.kind, record.warnings)
