"""The pushdown matcher: a `RuleSet` (rules = byte DFAs with calls) over one tokenizer.

Why a pushdown automaton over the rules' own DFAs (and not Earley or GLR): the rules
already are minimal byte DFAs, so the matcher only adds a stack of (rule, state) frames;
recursion depth is unbounded, and every rule position has context-independent token masks
that can be computed once and cached, as XGrammar does (`frame_masks`).

- `PushdownGrammar`: what every request over one (grammar, tokenizer) shares: interned
  stacks and their byte steps (`stacks`), the frame masks (`frame_masks`), and the final
  masks of the configurations met so far.
- `PushdownMatcher`: one request: a history of configurations (sets of stacks), so tokens
  can be rolled back.

The mask of a configuration is the OR of its stacks' masks. The mask of a stack whose top
frame is (rule, state): that frame's `stays` tokens; its few `escapes` tokens that the real
stack reads (each walked byte by byte); and, when the frame can end before a byte, the mask
of the stack below (the stop ids below the root frame). Masks are cached by configuration
(interned stacks make that a set of ints), so a warm mask is one dict lookup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.grammar.bitmask import set_bits, write_row
from kor_cli.grammar.frame_chain import shared_groups
from kor_cli.grammar.frame_escapes import FrameMask
from kor_cli.grammar.frame_masks import FrameMasks
from kor_cli.grammar.matcher import HistoryMatcher
from kor_cli.grammar.rules import RuleSet
from kor_cli.grammar.stacks import CONTEXT, EMPTY, REACHES_CONTEXT, Config, Stacks
from kor_cli.grammar.vocab import TokenizerInfo

FORCED_LIMIT = 256
MAX_STACKS = 64  # stacks kept per configuration between tokens (`PushdownGrammar.bounded`)
_MAX_CACHED = 2048  # masks kept per cache (first in, first out): ~40 MB each at 151k tokens

# `PushdownGrammar._seconds`: one frame's escapes after one byte: the tokens whose suffix is
# that byte alone; every second byte of the longer suffixes (a 256-bit int); and by second
# byte, the tokens whose suffix ends there and the longer suffixes with their tokens
_BySecond = tuple[list[int], int, dict[int, tuple[list[int], dict[bytes, list[int]]]]]


class PushdownGrammar:
    """A `RuleSet` over one tokenizer: shared stacks, frame masks and mask caches."""

    def __init__(
        self, rules: RuleSet, info: TokenizerInfo, cache_dir: Path | str | None = None
    ) -> None:
        """`cache_dir`: the disk cache of the rules' token indexes (None: none)."""
        self.rules = rules
        self.info = info
        self.vocab_size = info.vocab_size
        self.stacks = Stacks(rules)
        self.frames = FrameMasks(self.stacks, info, cache_dir)
        root = self.stacks.start(EMPTY, rules.start)
        self.start: Config = frozenset((root,))
        self.dead = root != EMPTY and not self.stacks.frame(root)[1]
        self._stops = frozenset(info.stop_ids)
        self._stack_masks: dict[int, np.ndarray] = {}
        self._seconds: dict[tuple[int, int], _BySecond] = {}  # (state << 8 | byte, rule)
        self._escaped: dict[tuple[int, int, frozenset[int]], np.ndarray] = {}
        self._by_rows: dict[tuple[bytes, bytes, int], _BySecond] = {}  # `_own_groups`
        self._locals: dict[tuple[int, int], tuple[int, bool]] = {}  # `_local`
        self._masks: dict[Config, np.ndarray] = {}
        self._rows: dict[Config, np.ndarray] = {}  # the same masks as int32 views
        self._nothing = np.zeros(self.frames.words, dtype="<u4")

    def is_stop(self, token_id: int) -> bool:
        return token_id in self._stops

    @property
    def nbytes(self) -> int:
        """Memory held by the masks: frames (and the rules' token indexes), stacks and
        configurations."""
        shared = self.frames.arrays()  # a one-frame stack's mask is its frame's array
        cached = {id(w): w for w in (*self._stack_masks.values(), *self._masks.values())}
        return self.frames.nbytes + sum(w.nbytes for k, w in cached.items() if k not in shared)

    def mask(self, config: Config) -> np.ndarray:
        """Packed uint32 words of the tokens allowed in `config` (read-only, shared)."""
        view = self.words(config).view()
        view.flags.writeable = False
        return view

    def rows(self, config: Config) -> np.ndarray:
        """`words` as int32 (a bitmask row's type), the view kept beside the mask."""
        found = self._rows.get(config)
        if found is None:
            found = self._rows[config] = self.words(config).view(np.int32)
        return found

    def words(self, config: Config) -> np.ndarray:
        """Like `mask`, but the cached array itself: callers must not modify it."""
        found = self._masks.get(config)
        if found is None:
            if not config:
                return self._nothing
            stacks = iter(config)
            words = self._stack_mask(next(stacks))  # one stack: its mask, shared as is
            for stack in stacks:
                words = words | self._stack_mask(stack)
            if len(self._masks) >= _MAX_CACHED:
                oldest = next(iter(self._masks))
                del self._masks[oldest]
                self._rows.pop(oldest, None)  # its view goes with it
            found = self._masks[config] = words
        return found

    def _stack_mask(self, stack: int) -> np.ndarray:
        found = self._stack_masks.get(stack)
        if found is not None:
            return found
        stacks, frames = self.stacks, self.frames
        words: np.ndarray | None = None  # a frame's own `stays` until something is added
        at = stack
        while True:
            if at == EMPTY:
                words = frames.stop_words if words is None else words | frames.stop_words
                break
            rule_id, state, below = stacks.frame(at)
            frame = frames.get(rule_id, state)
            words = frame.stays if words is None else words | frame.stays
            follow = self._next_bytes(below) & frame.escape_bytes if frame.escape_bytes else 0
            seconds = self._seconds
            read: list[int] = []
            while follow:  # the escapes whose first byte after the frame the caller reads
                byte = follow.bit_length() - 1
                follow ^= 1 << byte
                key = state << 8 | byte, rule_id
                found = seconds.get(key)
                if found is None:
                    if len(seconds) >= 16 * _MAX_CACHED:
                        seconds.clear()
                    found = seconds[key] = self._grouped(frame, byte)
                read += found[0]
                if found[1]:
                    self._read_longer(below, byte, found, read)
            if read:
                if words is frame.stays:  # never into a frame's own array: a copy, or an
                    words = self._with_escapes(rule_id, state, words, read)  # equal one
                else:
                    set_bits(words, read)
            if not frame.ends:
                break
            at = below
        if len(self._stack_masks) >= _MAX_CACHED:
            del self._stack_masks[next(iter(self._stack_masks))]
        self._stack_masks[stack] = words
        return words

    def _grouped(self, frame: FrameMask, byte: int) -> _BySecond:
        """`_by_second` of a frame, kept per tokenizer where the frame's escape rows are
        the tokenizer's (`frame_chain.shared_groups`: a string value's, ~1,100 rows on
        Qwen, ~50 us cold to group after `,`; the tokens that go on past `}`)."""
        memo = shared_groups(frame)
        if memo is None:
            return self._own_groups(frame, byte)
        found = memo.get(byte)
        if found is None:
            found = memo[byte] = _by_second(frame, byte)
        return found

    def _own_groups(self, frame: FrameMask, byte: int) -> _BySecond:
        """`_by_second` of a frame whose escape rows are its own, shared by the frames
        whose rows starting with `byte` are the same (states of one value that end it
        alike, as a number's after `0` and after `1`: ~15-30 us each to group cold on
        Qwen's 10-20 rows after `,`, `]` or `}`)."""
        rows = (frame.firsts == byte).nonzero()[0]
        key = frame.tokens[rows].tobytes(), frame.offsets[rows].tobytes(), id(frame.token_bytes)
        found = self._by_rows.get(key)
        if found is None:
            if len(self._by_rows) >= _MAX_CACHED:
                del self._by_rows[next(iter(self._by_rows))]
            found = self._by_rows[key] = _by_second(frame, byte, rows)
        return found

    def _with_escapes(
        self, rule_id: int, state: int, stays: np.ndarray, read: list[int]
    ) -> np.ndarray:
        """A frame's `stays` with the escaping tokens `read` set: one array per frame and
        set of tokens (stacks that differ deep below the frame mostly read the same
        escapes: their masks are equal, and shared rather than copied and set again)."""
        key = rule_id, state, frozenset(read)
        found = self._escaped.get(key)
        if found is None:
            if len(self._escaped) >= _MAX_CACHED:
                del self._escaped[next(iter(self._escaped))]
            found = self._escaped[key] = stays.copy()
            set_bits(found, read)
        return found

    def _read_longer(self, stack: int, byte: int, escapes: _BySecond, read: list[int]) -> None:
        """Add to `read` the tokens of the suffixes of two bytes or more in `escapes` (each
        starting with `byte`, which `stack` reads) that `stack` reads whole. Most fail at
        their second byte (`,\\n` where a value must follow) and many end there: both told
        by the bytes after `byte` (`_bytes_of` the position after it) without a walk; the
        rest read on from the position after their first two bytes (`_after`)."""
        after = self._after
        first = after(self.stacks.frame(stack) if stack > CONTEXT else None, byte)
        if first is None:
            return
        _, seconds, groups = escapes
        then = self._bytes_of(first) & seconds
        while then:
            second = then.bit_length() - 1
            then ^= 1 << second
            ends, longer = groups[second]
            read += ends
            if not longer:
                continue
            at_second = after(first, second)
            for suffix, tokens in longer.items():
                at = at_second
                for next_byte in suffix[2:]:
                    at = after(at, next_byte)
                    if at is None:
                        break
                else:
                    read += tokens

    def _bytes_of(self, at: Any) -> int:
        """The bytes that can come next from a position of `_after` (not None): a frame
        tuple's by `_bytes_at`, a configuration's by the stacks."""
        if type(at) is not tuple:
            return self.stacks.next_bytes(at)
        return self._bytes_at(*at)

    def _next_bytes(self, stack: int) -> int:
        """`stacks.next_bytes` of one stack, by its top frame (`_bytes_at`)."""
        if stack <= CONTEXT:
            return 0
        return self._bytes_at(*self.stacks.frame(stack))

    def _bytes_at(self, rule_id: int, state: int, below: int) -> int:
        """The bytes that can come next from frame (rule, state) over the stack `below`:
        its state's where it neither calls a rule nor can end, else its closure's
        (`_local`: no stack interned for a stack met first here) and, where that closure
        pops, those of the stack below."""
        table = self.stacks.tables[rule_id]
        if not (table.accepting[state] or state in table.calls):
            return table.byte_set(state)
        bits, pops = self._local(rule_id, state)
        return bits | self._next_bytes(below) if pops else bits

    def _local(self, rule_id: int, state: int) -> tuple[int, bool]:
        """Frame (rule, state)'s closure without its caller (over CONTEXT): the bytes its
        tops read and whether it pops (reaches CONTEXT). The same under any caller, so made
        once per frame: a stack's closure is its top frame's tops over the stack below
        (their top frames, so their bytes, are the same) and, where the frame pops, the
        closure of the stack below."""
        key = rule_id, state
        found = self._locals.get(key)
        if found is None:
            stacks = self.stacks
            tops, flags = stacks.closure(stacks.push(CONTEXT, rule_id, state))
            bits = 0
            for top in tops:
                top_rule, top_state, _ = stacks.frame(top)
                bits |= stacks.tables[top_rule].byte_set(top_state)
            found = self._locals[key] = bits, bool(flags & REACHES_CONTEXT)
        return found

    def _after(self, at: Any, byte: int) -> Any:
        """Where reading `byte` from `at` leads (None: nowhere). A position is a frame
        tuple (rule, state, stack below), read by its rule's table alone while its state
        neither calls a rule nor can end (a final state is popped: the frame below reads
        on), or else a configuration, read by the stacks. None reads nothing."""
        if at is None:
            return None
        stacks = self.stacks
        if type(at) is not tuple:
            return stacks.step_config(at, byte) or None
        rule_id, state, below = at
        tables = stacks.tables
        table = tables[rule_id]
        while table.accepting[state] or state in table.calls:
            if not table.final[state]:
                return stacks.step(stacks.push(below, rule_id, state), byte) or None
            if below <= CONTEXT:  # nothing reads on past the grammar's or context's end
                return None
            rule_id, state, below = stacks.frame(below)
            table = tables[rule_id]
        state = table.flat[state << 8 | byte]
        return (rule_id, state, below) if state else None

    def next_config(self, config: Config, token_id: int) -> Config:
        """The configuration after `token_id` (empty: not allowed). A stop id keeps an
        accepting configuration."""
        if token_id in self._stops:
            return config if self.stacks.accepting(config) else frozenset()
        if not 0 <= token_id < self.vocab_size:
            return frozenset()
        data = self.info.token_bytes[token_id]
        if not data:
            return frozenset()
        found = self.stacks.walk(config, data)
        return found if len(found) <= MAX_STACKS else self.bounded(found)  # (a call less)

    def walk(self, config: Config, data: bytes) -> Config:
        """The configuration after the bytes `data` (empty: not allowed), bounded."""
        return self.bounded(self.stacks.walk(config, data))

    @staticmethod
    def bounded(config: Config) -> Config:
        """`config`, or its `MAX_STACKS` oldest stacks when it holds more.

        An ambiguous grammar (two `anyOf` branches that call rules spelling the same
        text, recursively) can double a configuration's stacks at every level of nesting,
        and every step and mask grows with them. Each stack is a parse of the output so
        far that can still be completed, so keeping some of them keeps every output valid:
        only some continuations are lost (of an ambiguous grammar, past 64 parses). The
        bound applies between tokens, so a mask and the step over one of its tokens agree.
        """
        if len(config) <= MAX_STACKS:
            return config
        return frozenset(sorted(config)[:MAX_STACKS])

    def forced_bytes(self, config: Config, limit: int = FORCED_LIMIT) -> bytes:
        """The longest byte string that is the only way on from `config` (stops where the
        grammar could end, at a branch, or after `limit` bytes)."""
        out = bytearray()
        stacks = self.stacks
        while config and len(out) < limit and not stacks.accepting(config):
            bits = stacks.next_bytes(config)
            if not bits or bits & (bits - 1):
                break
            byte = bits.bit_length() - 1
            out.append(byte)
            config = stacks.walk(config, bytes((byte,)))
        return bytes(out)


class PushdownMatcher(HistoryMatcher[Config]):
    """One request's position in a `PushdownGrammar`, advanced token by token. Over rules
    with checked `uniqueItems` arrays it is a `unique_matcher.UniqueMatcher`."""

    def __new__(cls, grammar: PushdownGrammar) -> PushdownMatcher:
        if cls is PushdownMatcher and grammar.rules.checked:
            from kor_cli.grammar.unique_matcher import UniqueMatcher

            return super().__new__(UniqueMatcher)
        return super().__new__(cls)

    def __init__(self, grammar: PushdownGrammar) -> None:
        if grammar.dead:
            raise ValueError("the grammar's start state is dead: it accepts nothing")
        super().__init__(grammar.start, grammar._stops)
        self.grammar = grammar

    def _next_token(self, state: Config, token_id: int) -> Config:
        return self.grammar.next_config(state, token_id)

    def _walk(self, state: Config, data: bytes) -> Config:
        return self.grammar.walk(state, data)

    @property
    def config(self) -> Config:
        """The current configuration (a frozenset of interned stacks)."""
        return self._history[-1]

    @property
    def is_accepting(self) -> bool:
        """True when the output so far is a complete match (a stop token is allowed)."""
        return not self._finished and self.grammar.stacks.accepting(self.config)

    def is_terminated(self) -> bool:
        """True after a stop token, or where the output is complete and nothing can follow."""
        if self._finished:
            return True
        stacks = self.grammar.stacks
        return stacks.accepting(self.config) and not stacks.next_bytes(self.config)

    def state_key(self) -> tuple[bool, Config]:
        """Hashable; equal keys have equal masks."""
        return (self._finished, self.config)

    def _words(self) -> np.ndarray:
        """The allowed tokens' packed words (cached and shared: do not modify)."""
        return self.grammar.words(frozenset() if self._finished else self.config)

    def row_words(self) -> np.ndarray:
        """`_words` as int32 (a bitmask row's type; cached and shared: do not modify): the
        surface's per-step fill, one dict read when warm (the grammar's `rows` inlined)."""
        config = frozenset() if self._finished else self._history[-1]
        found = self.grammar._rows.get(config)
        return self.grammar.rows(config) if found is None else found

    def packed_mask(self) -> np.ndarray:
        """The allowed tokens as packed uint32 words (token i: bit i % 32 of word i // 32)."""
        view = self._words().view()
        view.flags.writeable = False
        return view

    def allowed_mask(self) -> np.ndarray:
        """Bool [vocab_size]: the tokens allowed next."""
        bits = np.unpackbits(
            self.packed_mask().view(np.uint8), count=self.grammar.vocab_size, bitorder="little"
        )
        return bits.view(bool)

    def fill_next_token_bitmask(self, bitmask: Any, row: int = 0) -> None:
        """Write the allowed tokens into row `row` of a packed int32 [batch, ceil(V/32)]
        array or torch CPU tensor (a single row [ceil(V/32)] is fine too; token i: bit
        i % 32 of word i // 32)."""
        array = bitmask if isinstance(bitmask, np.ndarray) else bitmask.numpy()
        if array.ndim == 1:
            array, row = array[None], 0
        write_row(array, row, self.row_words())

    def forced_bytes(self, limit: int = FORCED_LIMIT) -> bytes:
        """The longest byte string that is the only way forward (b"" at a branch/accept)."""
        return b"" if self._finished else self.grammar.forced_bytes(self.config, limit)


def pushdown_grammar(rules: RuleSet | Any, info: TokenizerInfo) -> PushdownGrammar:
    """A `PushdownGrammar` of a `RuleSet`, or of a plain DFA (one rule, no calls)."""
    return PushdownGrammar(rules if isinstance(rules, RuleSet) else RuleSet.from_dfa(rules), info)


def _by_second(frame: FrameMask, byte: int, rows: np.ndarray | None = None) -> _BySecond:
    """A frame's escapes whose suffix starts with `byte` (its `rows` of them, when found
    already), read in one pass over its rows: the tokens whose suffix is that byte alone,
    and the longer suffixes grouped by their second byte (most fail there: `_read_longer`
    never walks them)."""
    if rows is None:
        rows = (frame.firsts == byte).nonzero()[0]
    alone: list[int] = []
    seconds = 0
    groups: dict[int, tuple[list[int], dict[bytes, list[int]]]] = {}
    token_bytes = frame.token_bytes
    for token, at in zip(frame.tokens[rows].tolist(), frame.offsets[rows].tolist(), strict=True):
        data = token_bytes[token] or b""
        size = len(data) - at
        if size == 1:
            alone.append(token)
            continue
        second = data[at + 1]
        group = groups.get(second)
        if group is None:
            group = groups[second] = ([], {})
            seconds |= 1 << second
        if size == 2:
            group[0].append(token)
        else:
            group[1].setdefault(data[at:], []).append(token)
    return alone, seconds, groups
