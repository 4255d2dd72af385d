"""The pushdown matcher of a grammar with checked `uniqueItems` arrays (`unique_check`).

`PushdownMatcher(grammar)` builds a `UniqueMatcher` when the grammar's rules have checked
arrays, so every caller (the surface, `Grammar.accepts`, benchmarks) gets the check. Its
state is a `UConfig` (stacks with their arrays' used values); `config` is the plain
stacks, which the grammar's own (superset) masks and forced bytes read.

Masks (`UniqueMasks.words`, cached per UConfig): per stack, the pushdown grammar's mask,
less the tokens that `UniqueChecks.walk` refuses among the few that may matter:
- outside a checked array: tokens holding both `[` and the separator's first byte (only
  they can read two items of an array they enter);
- in a checked array whose `used` is empty: tokens holding the separator's first byte;
- else every token but those that keep the item open at *rich* states (`safe`: a
  `TokenIndex` over the item DFA cut down to its rich states), whatever the prefix or the
  used values: from a rich state a fresh value always remains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kor_cli.grammar.bitmask import pack_bool_mask
from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.frame_rows import ids_of_words
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.pushdown import FORCED_LIMIT, MAX_STACKS, PushdownGrammar, PushdownMatcher
from kor_cli.grammar.stacks import Config
from kor_cli.grammar.unique_check import ARRAY, ITEM, OUTSIDE, UConfig, UniqueChecks, UStack

if TYPE_CHECKING:
    from kor_cli.grammar.vocab import TokenizerInfo

_MAX_CACHED = 1024


class UniqueMasks:
    """What the matchers of one grammar with checked arrays share: checks and masks."""

    def __init__(self, grammar: PushdownGrammar) -> None:
        self.grammar = grammar
        self.checks = UniqueChecks(grammar.rules, grammar.stacks)
        info = grammar.info
        self.words_count = grammar.frames.words
        self._bytes = info.token_bytes
        self._first, holding, opening = unique_token_sets(info)
        self._holding = self._pack(holding)
        self._opening = self._holding & self._pack(opening)
        self._safe: dict[int, tuple[TokenIndex | None, np.ndarray]] = {}
        self._masks: dict[UConfig, np.ndarray] = {}

    def _pack(self, flags: np.ndarray) -> np.ndarray:
        return pack_bool_mask(flags, self.words_count).view("<u4")

    def _first_in(self, bits: int) -> np.ndarray:
        """Tokens whose first byte is in the 256-bit set `bits`."""
        chosen = np.zeros(257, dtype=bool)
        chosen[[b for b in range(256) if bits >> b & 1]] = True
        return self._pack(chosen[self._first])

    def words(self, config: UConfig) -> np.ndarray:
        """Packed uint32 words of the tokens allowed in `config` (cached: do not modify)."""
        found = self._masks.get(config)
        if found is None:
            found = np.zeros(self.words_count, dtype="<u4")
            for ustack in config:
                found |= self._stack_words(ustack)
            if len(self._masks) >= _MAX_CACHED:
                del self._masks[next(iter(self._masks))]
            self._masks[config] = found
        return found

    def _stack_words(self, ustack: UStack) -> np.ndarray:
        stack, aux = ustack
        part = self.grammar.words(frozenset((stack,)))
        kind, array, state = self.checks.context(stack)
        if kind == OUTSIDE or aux is None:
            candidates = part & self._opening
        elif not aux[0]:
            candidates = part & self._holding
        else:
            candidates = part & ~self._skipped(stack, kind, array, state)
        ids = ids_of_words(candidates, self.grammar.vocab_size)
        if not len(ids):
            return part
        out = part.copy()
        single = frozenset((ustack,))
        for token in ids.tolist():
            if not self.checks.walk(single, self._bytes[token] or b""):
                out[token >> 5] &= np.uint32(~(1 << (token & 31)) & 0xFFFFFFFF)
        return out

    def _skipped(self, stack: int, kind: int, array: int, state: int) -> np.ndarray:
        """Tokens that need no check here: read inside the item at rich states only."""
        stacks = self.grammar.stacks
        nothing = np.zeros(self.words_count, dtype="<u4")
        if kind == ARRAY:
            rule = stacks.table(array)
            if state not in rule.calls:
                return nothing
            item_start = stacks.table(self.checks.checked[array]).start
            return self._safe_words(array, item_start) & ~self._first_in(rule.byte_set(state))
        assert kind == ITEM
        words = self._safe_words(array, state)
        if stacks.table(self.checks.checked[array]).accepting[state]:
            ret = stacks.frame(stacks.frame(stack)[2])[1]
            words = words & ~self._first_in(stacks.table(array).byte_set(ret))
        return words

    def _safe_words(self, array: int, state: int) -> np.ndarray:
        index, rich = self._safe_index(array)
        if index is None or not rich[state]:
            return np.zeros(self.words_count, dtype="<u4")
        return index.packed(state).view("<u4") & ~self.grammar.frames.stop_words

    def _safe_index(self, array: int) -> tuple[TokenIndex | None, np.ndarray]:
        """A `TokenIndex` over the item DFA cut down to its rich states (all accepting)."""
        found = self._safe.get(array)
        if found is None:
            language = self.checks.language(array)
            rich = np.asarray(language.rich, dtype=bool).copy()
            rich[0] = False
            index = None
            if rich.any():
                table = np.asarray(language.dfa.transitions, dtype=np.int32)
                table = np.where(rich[table], table, 0).astype(np.int32)
                table[~rich] = 0
                start = int(np.flatnonzero(rich)[0])
                index = TokenIndex(ByteDFA(table, rich, start), self.grammar.info)
            found = self._safe[array] = (index, rich)
        return found


def unique_token_sets(info: TokenizerInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token: its first byte (-1 if none), whether it holds `,`, whether it holds `[`
    (vectorised over all tokens' bytes joined; cached on `info`, a tokenizer's own facts)."""
    found = getattr(info, "_unique_token_sets", None)
    if found is None:
        tokens = [b or b"" for b in info.token_bytes]
        lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
        ends = np.cumsum(lengths)
        joined = np.frombuffer(b"".join(tokens), np.uint8)
        first = np.full(len(tokens), -1, np.int32)
        some = lengths > 0
        first[some] = joined[(ends - lengths)[some]]

        def holding(byte: str) -> np.ndarray:
            flags = np.zeros(len(tokens), bool)
            flags[np.searchsorted(ends, np.flatnonzero(joined == ord(byte)), side="right")] = True
            return flags

        found = (first, holding(","), holding("["))
        info._unique_token_sets = found  # type: ignore[attr-defined]
    return found


def unique_masks(grammar: PushdownGrammar) -> UniqueMasks:
    """The grammar's shared `UniqueMasks` (made on first use)."""
    found = getattr(grammar, "_unique_masks", None)
    if found is None:
        found = UniqueMasks(grammar)
        grammar._unique_masks = found  # type: ignore[attr-defined]
    return found


class UniqueMatcher(PushdownMatcher):
    """A `PushdownMatcher` whose states carry the used values of checked arrays."""

    def __init__(self, grammar: PushdownGrammar) -> None:
        super().__init__(grammar)
        self.masks = unique_masks(grammar)
        self._history: list[Any] = [self.masks.checks.start(grammar.start)]

    def _next_token(self, state: Any, token_id: int) -> Any:
        if self.grammar.is_stop(token_id):
            return state if self.grammar.stacks.accepting(_plain(state)) else frozenset()
        if not 0 <= token_id < self.grammar.vocab_size:
            return frozenset()
        data = self.grammar.info.token_bytes[token_id]
        return _bounded(self.masks.checks.walk(state, data)) if data else frozenset()

    def _walk(self, state: Any, data: bytes) -> Any:
        return _bounded(self.masks.checks.walk(state, data))

    @property
    def config(self) -> Config:
        """The plain stacks (without the used values)."""
        return _plain(self._history[-1])

    @property
    def uconfig(self) -> UConfig:
        """The stacks with their checked arrays' used values and item prefixes."""
        return self._history[-1]

    def state_key(self) -> tuple[bool, Any]:
        return (self._finished, self._history[-1])

    def _words(self) -> np.ndarray:
        if self._finished:
            return self.grammar.words(frozenset())
        return self.masks.words(self._history[-1])

    def row_words(self) -> np.ndarray:
        return self._words().view(np.int32)

    def forced_bytes(self, limit: int = FORCED_LIMIT) -> bytes:
        """The longest byte string that is the only way on (the used values count: an
        array whose items' values are all used can only close)."""
        if self._finished:
            return b""
        out = bytearray()
        state, stacks, walk = self._history[-1], self.grammar.stacks, self.masks.checks.walk
        while state and len(out) < limit and not stacks.accepting(_plain(state)):
            bits, only = stacks.next_bytes(_plain(state)), None
            while bits:
                byte = bits.bit_length() - 1
                bits ^= 1 << byte
                if walk(state, bytes((byte,))):
                    if only is not None:
                        return bytes(out)
                    only = byte
            if only is None:
                break
            out.append(only)
            state = walk(state, bytes((only,)))
        return bytes(out)


def _plain(config: UConfig) -> Config:
    return frozenset(stack for stack, _ in config)


def _bounded(config: UConfig) -> UConfig:
    """`config`, or its `MAX_STACKS` oldest stacks when it holds more (as
    `PushdownGrammar.bounded`; ties of one stack with several used sets in a fixed order,
    not the hash order of their values)."""
    if len(config) <= MAX_STACKS:
        return config
    return frozenset(sorted(config, key=lambda u: (u[0], _order(u[1])))[:MAX_STACKS])


def _order(value: Any) -> str:
    """A text of `value` (an aux: tuples, frozensets, bytes, value keys) that sorts the
    same in every process (a frozenset's members sorted)."""
    if isinstance(value, frozenset):
        return "{" + ",".join(sorted(map(_order, value))) + "}"
    if isinstance(value, tuple):
        return "(" + ",".join(map(_order, value)) + ")"
    return repr(value)
