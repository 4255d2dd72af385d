"""TokenIndex: for each DFA state, the set of tokens the grammar allows (a bitmask).

A token is allowed in a state iff walking all its bytes from there never reaches the dead
state (it may end in a non-accepting state). Stop ids are allowed only in accepting states;
tokens without bytes (special, padding) or with empty bytes never are. States that cannot
reach an accepting state count as dead, so every allowed token can still be completed.

Masks are built lazily on a state's first visit, then kept as packed bitsets (uint32 words,
little-endian bit order: token i is bit i % 32 of word i // 32), as bool arrays, and as
torch bool tensors per device. A first visit takes one of four ways, fastest first:

- a state with one way on (keys, punctuation): the tokens that are a prefix of its forced
  bytes, plus the few that run past them, walked one by one (no vectorised walk);
- a state that reads few bytes (digits, a value's first bytes, separators): a depth-first
  walk of the trie in plain Python (`TokenTrie.walk_few`), given up once it has read a
  budget of nodes (the live part is large: one of the ways below);
- a string body (`string_body`): body tokens by their character count, and a walk of the
  small trie of the other tokens; likewise, less their quote, the tokens that open a string
  (a forced `"` followed by too many tokens to walk one by one);
- otherwise one vectorised walk of the vocabulary's byte trie (`trie.TokenTrie`).

The trie and the string-body tables are built once per tokenizer, on the first mask an
index has to build, and shared by every index over it (`token_tables`). An optional disk
cache (`index_cache`, keyed by engine version, DFA fingerprint and tokenizer fingerprint)
stores the packed masks built so far and the live states, so a later process starts from
them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.grammar.bitmask import write_row
from kor_cli.grammar.index_cache import index_path, read_index, save_at_exit, write_index
from kor_cli.grammar.live import live_states
from kor_cli.grammar.string_body import BodyChains, BodyTokens
from kor_cli.grammar.table_cache import tables_path
from kor_cli.grammar.token_tables import SharedTables, shared_tables
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.trie_loops import LoopPrune
from kor_cli.grammar.vocab import TokenizerInfo

FORCED_LIMIT = 256
_MAX_STATES = 1 << 23  # state << 8 | byte must fit an int32 index
_MAX_RUN_ON = 64  # tokens past a forced string walked one by one; more: a trie walk
_QUOTE = ord('"')
# a state that reads at most _FEW_READS bytes is walked first in plain Python
# (`TokenTrie.walk_few`: no numpy call), given up after FEW_WORK nodes and children read
FEW_WORK, _FEW_READS = 192, 24
_SINGLE_ALL = 1024  # a DFA of at most this many states finds every state's one byte at once


class TokenIndex:
    """Allowed-token masks of every DFA state over one tokenizer, built lazily and cached.

    `dfa` follows the `ByteDFA` contract (see `kor_cli.grammar`): `transitions` int32
    [num_states, 256] with dead state 0, `accepting` bool [num_states], `start`, and
    `fingerprint()`. Masks have `info.vocab_size` entries (the logits width). Arrays
    returned here are shared caches: read-only numpy views; do not modify the tensors.
    """

    def __init__(
        self,
        dfa: Any,
        info: TokenizerInfo,
        cache_dir: Path | str | None = None,
        live: np.ndarray | None = None,
    ) -> None:
        """`live` (optional): the states that can reach an accepting state, when the caller
        knows them (else they are computed)."""
        # aligned and contiguous (a table read from the disk cache may be neither), so
        # memoryviews of it read plain ints
        table = np.require(dfa.transitions, np.int32, ("C", "A"))
        if table.ndim != 2 or table.shape[1] != 256 or not 0 < len(table) < _MAX_STATES:
            raise ValueError(
                f"DFA transitions must be [num_states, 256] with fewer than {_MAX_STATES}"
                f" states, got {table.shape}"
            )
        self.dfa = dfa
        self.info = info
        self.num_states = len(table)
        self.vocab_size = info.vocab_size
        self._words = (self.vocab_size + 31) // 32
        self._packed: dict[int, np.ndarray] = {}
        self._rows: dict[int, np.ndarray] = {}  # state → its packed words as int32 (fills)
        self._bool: dict[int, np.ndarray] = {}
        self._tensors: dict[tuple[int, str], Any] = {}
        self.cache_path = index_path(cache_dir, dfa, info) if cache_dir is not None else None
        cached = self._load(self.cache_path) if self.cache_path is not None else None
        self._saved = len(self._packed)
        live = cached if cached is not None else live
        if live is None and getattr(dfa, "trimmed", False):
            live = np.ones(self.num_states, dtype=bool)
            live[0] = False
        elif live is None:
            live = live_states(table, np.asarray(dfa.accepting, dtype=bool))
        self._live = live
        if not live[1:].all():  # redirect into the dead state (minimal DFAs need not)
            table = np.where(live[table], table, 0).astype(np.int32)
        self.start = int(dfa.start) if live[int(dfa.start)] else 0
        self._flat = np.ascontiguousarray(table).ravel()
        self._walker = memoryview(self._flat)  # plain-int reads for short byte walks
        self._accepting = np.asarray(dfa.accepting, dtype=bool) & live
        self._single: dict[int, int] = {}  # state → its one way on (-1: none or several)
        self._continues: dict[int, bool] = {}  # state → some byte leads on
        self._ways: dict[int, list[int]] = {}  # state → the bytes it reads (trie walks)
        self._stops = np.asarray(info.stop_ids, dtype=np.int64)
        self._stop_set = frozenset(info.stop_ids)
        self._tables: SharedTables | None = None  # the tokenizer's trie and body tables, on use
        self._chain_table: BodyChains | None = None
        self._prune: LoopPrune | None = None  # skips of self-looping states, on first use
        if self.cache_path is not None:
            save_at_exit(self)

    @property
    def _trie(self) -> TokenTrie:
        return self._shared().trie

    def _shared(self) -> SharedTables:
        if self._tables is None:
            self._tables = shared_tables(self.info)
        return self._tables

    @property
    def _chains(self) -> BodyChains:
        if self._chain_table is None:
            shared = self._shared()
            longest = max(shared.body.longest, shared.quoted.longest, shared.continued.longest)
            table = self._flat.reshape(self.num_states, 256)
            self._chain_table = BodyChains(table, longest)
        return self._chain_table

    # -- masks ------------------------------------------------------------------------
    def allowed(self, state: int) -> np.ndarray:
        """Bool mask [vocab_size] of the tokens allowed in `state` (read-only view)."""
        mask = self._bool.get(state)
        if mask is None:
            if state not in self._packed:
                mask = self._build(state)
            if mask is None:
                bits = np.unpackbits(
                    self._packed[state].view(np.uint8), count=self.vocab_size, bitorder="little"
                )
                mask = bits.view(bool)
            self._bool[state] = mask
        view = mask.view()
        view.flags.writeable = False
        return view

    def packed(self, state: int) -> np.ndarray:
        """The mask of `state` as packed uint32 words (read-only view)."""
        words = self._packed.get(state)
        if words is None:
            self._build(state)
            words = self._packed[state]
        view = words.view()
        view.flags.writeable = False
        return view

    def fill_row(self, state: int, bitmask: np.ndarray, row: int) -> None:
        """Write the mask of `state` into row `row` of an int32 [B, W] bitmask (words past
        the mask zero)."""
        write_row(bitmask, row, self.row(state))

    def row(self, state: int) -> np.ndarray:
        """The packed mask of `state` as int32 words (a bitmask row's type; cached and
        shared: do not modify)."""
        words = self._rows.get(state)
        if words is None:
            words = self._rows[state] = self.packed(state).view(np.int32)
        return words

    def tensor(self, state: int, device: Any = "cpu") -> Any:
        """The mask of `state` as a torch bool tensor on `device` (cached per device)."""
        key = (state, str(device))
        cached = self._tensors.get(key)
        if cached is None:
            import torch

            self.allowed(state)
            cached = torch.from_numpy(self._bool[state]).to(device)
            self._tensors[key] = cached
        return cached

    def _build(self, state: int) -> np.ndarray | None:
        """Make and keep the packed mask of `state`; returns the bool mask it was packed
        from (None when the words were written directly)."""
        if not 0 < state < self.num_states:
            self._packed[state] = np.zeros(self._words, dtype="<u4")
            return None
        mask = None
        single = self._single_byte(state)
        if single >= 0 and not self._accepting[state]:
            words = self._forced_words(state)
            if words is not None:
                self._packed[state] = words
                return None
            if single == _QUOTE:  # a string opens: its tokens less the quote, from inside
                mask = self._chain_mask(self._shared().quoted, self._walker[(state << 8) | _QUOTE])
                if mask is not None:
                    mask[self._trie.token_ids[self._trie.along(b'"')[0]]] = True
        if mask is None and FEW_WORK and self._reads(state) <= _FEW_READS:
            found = self._trie.walk_few(self._flat, state, self._ways, FEW_WORK)
            if found is not None:
                if self._accepting[state]:
                    found += self.info.stop_ids
                self._packed[state] = self._words_of(found)
                return None
        if mask is None:
            mask = self._chain_mask(self._shared().body, state)
        if mask is None:
            mask = np.zeros(self._words * 32, dtype=bool)  # whole words: packs without a copy
            row = self._flat[state << 8 : (state + 1) << 8]
            self._trie.walk(self._flat, row, mask[: self.vocab_size], self._pruner(), self._ways)
        if self._accepting[state]:
            mask[self._stops] = True
        self._packed[state] = np.packbits(mask, bitorder="little").view("<u4")
        return mask[: self.vocab_size]

    def _pruner(self) -> LoopPrune:
        if self._prune is None:
            shared = self._shared()
            table = self._flat.reshape(self.num_states, 256)
            self._prune = LoopPrune(shared.skips, shared.trie, table)
            self._prune.runs.store_at(tables_path(self.info.fingerprint))
        return self._prune

    def _chain_mask(self, tables: BodyTokens, state: int) -> np.ndarray | None:
        """Bool [whole words]: the tokens of `tables` that survive from `state`, a state on
        a chain of body steps (None when it is on none)."""
        found = self._chains.ahead(state)
        if found is None:
            return None
        remaining, after = found
        mask = tables.mask(remaining)
        tables.rest.walk(self._flat, after, mask[: self.vocab_size], ways=self._ways)
        return mask

    def _forced_words(self, state: int) -> np.ndarray | None:
        """The packed mask of a state with one way on: the tokens that are a prefix of its
        forced bytes and those running past them that survive from there (None when more
        than _MAX_RUN_ON tokens run past)."""
        forced = self.forced_bytes(state)
        trie = self._trie
        allowed, lo, hi = self._shared().skips.along(trie, forced)
        if hi - lo > _MAX_RUN_ON:
            return None
        end, size = self.walk_bytes(state, forced), len(forced)
        allowed += [at for at in range(lo, hi) if self.walk_bytes(end, trie.tokens[at][size:])]
        return self._words_of(trie.token_ids[allowed].tolist())

    def _words_of(self, tokens: list[int]) -> np.ndarray:
        """The packed mask of the token ids `tokens` (few: set bit by bit)."""
        bits: dict[int, int] = {}
        for token in tokens:
            bits[token >> 5] = bits.get(token >> 5, 0) | 1 << (token & 31)
        words = np.zeros(self._words, dtype="<u4")
        words[list(bits)] = list(bits.values())
        return words

    def _reads(self, state: int) -> int:
        """How many bytes lead on from `state` (kept in `_ways`)."""
        live = self._ways.get(state)
        if live is None:
            live = self._ways[state] = (
                self._flat[state << 8 : (state + 1) << 8].nonzero()[0].tolist()
            )
        return len(live)

    def precompute_all(self) -> None:
        """Build the packed mask of every state reachable from the start; save if caching.

        Bool arrays and tensors are still made only for the states a request visits.
        """
        for state in self.reachable_states():
            if state not in self._packed:
                self._build(state)
        if self.cache_path is not None:
            self.save()

    def reachable_states(self) -> list[int]:
        """Live states reachable from the start state, in breadth-first order."""
        seen = {self.start} if self.start else set()
        order = list(seen)
        table = self._flat.reshape(self.num_states, 256)
        for state in order:
            for nxt in np.unique(table[state]).tolist():
                if nxt and nxt not in seen:
                    seen.add(nxt)
                    order.append(nxt)
        return order

    @property
    def built_states(self) -> int:
        """How many states have a mask so far."""
        return len(self._packed)

    @property
    def nbytes(self) -> int:
        """Bytes held by the mask caches and the transition table (not the shared trie)."""
        total = sum(a.nbytes for a in self._packed.values())
        total += sum(a.nbytes for a in self._bool.values())
        devices = (t for t in self._tensors.values() if t.device.type != "cpu")  # cpu: shared
        total += sum(t.element_size() * t.nelement() for t in devices)
        return total + self._flat.nbytes

    # -- walking ---------------------------------------------------------------------
    def is_accepting(self, state: int) -> bool:
        return bool(self._accepting[state])

    def can_continue(self, state: int) -> bool:
        """True when some byte leads on from `state` to a live state."""
        found = self._continues.get(state)
        if found is None:
            self._single_byte(state)
            found = self._continues[state]
        return found

    def _single_byte(self, state: int) -> int:
        """The one byte that leads on from `state` (-1: none or several): for every state
        at once on the first call when the DFA is small (one pass over the table costs
        what ~30 single rows do), else found on the state's first visit."""
        found = self._single.get(state)
        if found is None:
            if not self._single and self.num_states <= _SINGLE_ALL:
                live = self._flat.reshape(self.num_states, 256) != 0
                counts = np.count_nonzero(live, axis=1)
                first = np.where(counts == 1, live.argmax(axis=1), -1)
                self._single = dict(enumerate(first.tolist()))
                self._continues = dict(enumerate((counts > 0).tolist()))
                return self._single[state]
            ways = self._flat[state << 8 : (state + 1) << 8].nonzero()[0].tolist()
            found = ways[0] if len(ways) == 1 else -1
            self._single[state] = found
            self._continues[state] = bool(ways)
        return found

    def is_stop(self, token_id: int) -> bool:
        return token_id in self._stop_set

    def walk_bytes(self, state: int, data: bytes) -> int:
        """The state after `data` from `state` (0: dead)."""
        table = self._walker
        for byte in data:
            state = table[(state << 8) | byte]
            if not state:
                return 0
        return state

    def next_state(self, state: int, token_id: int) -> int:
        """The state after `token_id` from `state` (0: not allowed).

        A stop id leaves an accepting state unchanged. Costs one table read per byte.
        """
        if token_id in self._stop_set:
            return state if self._accepting[state] else 0
        if not 0 <= token_id < self.vocab_size:
            return 0
        data = self.info.token_bytes[token_id]
        return self.walk_bytes(state, data) if data else 0

    def forced_bytes(self, state: int, limit: int = FORCED_LIMIT) -> bytes:
        """The longest byte string that is the only way on from `state`.

        Follows states with exactly one live outgoing byte, stopping at an accepting state
        (the grammar could stop there), at a branch, or after `limit` bytes.
        """
        out = bytearray()
        while state and len(out) < limit and not self._accepting[state]:
            byte = self._single.get(state)
            if byte is None:
                byte = self._single_byte(state)
            if byte < 0:
                break
            out.append(byte)
            state = self._walker[(state << 8) | byte]
        return bytes(out)

    # -- disk cache ------------------------------------------------------------------
    def save(self) -> Path:
        """Write the packed masks built so far and the live states to the cache file
        (atomically; a failed write is skipped)."""
        if self.cache_path is None:
            raise ValueError("this TokenIndex has no cache_dir")
        write_index(self.cache_path, self._live, self._packed, self._words)
        self._saved = len(self._packed)
        return self.cache_path

    def save_if_grown(self) -> None:
        """Save when masks were built since the last load or save (and a cache is set)."""
        if self.cache_path is not None and len(self._packed) > self._saved:
            self.save()

    def _load(self, path: Path) -> np.ndarray | None:
        """Read cached packed masks; returns the cached live states. An unreadable or
        mismatched file is ignored (None)."""
        found = read_index(path, self.num_states, self._words)
        if found is None:
            return None
        live, packed = found
        self._packed.update(packed)
        return live
