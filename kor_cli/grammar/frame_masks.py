"""Frame masks: what a token may do from one rule position, whatever the stack below.

For a top frame (rule, state) the tokens split three ways:

- `stays`: some way of reading the whole token never pops that frame (it may call rules
  and return from them). Allowed whatever lies below: context-independent, computed once
  per (rule, state) and kept as packed words.
- `escapes`: tokens that can only be read by ending the frame after at least one byte and
  letting the caller read the rest (`},`, `}]`, `"}`...). The matcher checks those whose
  rest starts with a byte the real caller reads against the real stack (`pushdown`); they
  are kept as rows and grouped by that byte on first use (`frame_escapes`).
- the frame ending before the first byte (`ends`: the state can reach acceptance without a
  byte) is the caller's business: the matcher ORs in the mask of the stack below.

Computing `stays` reuses `TokenIndex` and its fast paths (forced keys, string bodies,
trie walks) on two tables per rule:

- *bytes*: the rule's DFA with call states counted as live. Its mask of a state is the set
  of tokens read by bytes alone (all of them stay).
- *crossing*: the same, except that after at least one byte every state with a call or an
  accepting state sends any byte to an absorbing state X. A token it allows but *bytes*
  does not must call or pop on the way: a candidate. A candidate whose byte path meets no
  call cannot stay (staying without a call is reading by bytes), so one table walk tells
  where it escapes (at accepting states on its path) or that it is dead; the others are
  read from the callees' start frames where the rest of the token is itself a token, else
  by the callees' tables (`frame_returns.read_calls`), and the few left (deep chains of
  calls) exactly by the stack simulation (`Stacks.classify`),
  to tell stays / escapes / neither. A copy of each state reads its first byte by its
  byte edges only (calls at the start are handled below, pops there by `ends`).

States that read few bytes (keys, punctuation, digits: most of a JSON grammar) skip both
tables: a pruned walk of the sorted token list (`frame_walk`) splits their tokens the same
way (tokens read by bytes; candidates) at a fraction of a trie walk's cost. The walk also
tells apart the tokens whose byte path reaches a final state (accepting, no byte, no call)
with no crossing state before it: they escape there and only there, unsimulated.

Rules with equal tables, accepting states and calls (one subschema reached from several
places, as JSON-RPC's `value` is) share their frame masks (`same_rule`); rules with equal
tables and crossing states share their two indexes.

Calls before the first byte compose: from (rule, state), every token that stays in a
callee's start frame stays here too, and the callee's `escapes` become candidates here (the
return state is known here). States reached without a byte (through rules that generate the
empty string) count as the state itself. A rule set without calls needs no candidates: the
masks are exactly `TokenIndex`'s.
"""

from __future__ import annotations

import atexit
import weakref
import zlib
from functools import partial
from pathlib import Path

import numpy as np

from kor_cli.grammar.bitmask import bits_set, set_bits
from kor_cli.grammar.frame_cache import frames_path, read_frames, write_frames
from kor_cli.grammar.frame_chain import closed_frame, going_rows, literal_frame
from kor_cli.grammar.frame_escapes import FrameMask, frame_mask, stored_rows
from kor_cli.grammar.frame_indexes import RuleIndexCache, RuleIndexes, split_beside
from kor_cli.grammar.frame_next import next_frame
from kor_cli.grammar.frame_offsets import byte_offsets
from kor_cli.grammar.frame_returns import called_rows, decide_returns, read_calls, twin_frame
from kor_cli.grammar.frame_rows import (
    NO_IDS,
    Rows,
    escape_rows,
    ids_not_in,
    ids_of_words,
    less_rows,
    offset_rows,
    split_words,
)
from kor_cli.grammar.frame_walk import RuleWalker, walk_state
from kor_cli.grammar.shared_rules import shared_frame
from kor_cli.grammar.stacks import CONTEXT, ESCAPES, STAYS, RuleTable, Stacks
from kor_cli.grammar.string_body import crossing_table, split_body
from kor_cli.grammar.token_arrays import (
    SortedTokens,
    crossing_candidates,
    sorted_tokens,
)
from kor_cli.grammar.vocab import TokenizerInfo


class FrameMasks:
    """Frame masks of every (rule, state) over one tokenizer, built on first request."""

    def __init__(
        self, stacks: Stacks, info: TokenizerInfo, cache_dir: Path | str | None = None
    ) -> None:
        """`cache_dir`: where the rules' `TokenIndex`es keep their masks on disk (None:
        nowhere), so a second run of a grammar starts from the masks the first one built."""
        self.stacks = stacks
        self.info = info
        self.cache_dir = cache_dir
        self.words = (info.vocab_size + 31) // 32
        self._masks: dict[tuple[int, int], FrameMask] = {}
        stops = np.zeros(self.words, dtype="<u4")
        for stop in info.stop_ids:
            stops[stop >> 5] |= np.uint32(1 << (stop & 31))
        self.stop_words = stops
        self._keep = ~stops  # clears the stop bits TokenIndex sets in accepting states
        self._calls = stacks.rules.has_calls
        self._indexes = RuleIndexCache(info, cache_dir, self._calls)
        self._walkers: dict[int, RuleWalker] = {}
        self._kinds_of: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._same: dict[int, int] = {}
        self._by_structure: dict[tuple[int, int], list[int]] = {}  # `same_rule`
        self._crcs: dict[int, int] = {}
        self.building: set[tuple[int, int]] = set()  # frames being built (`get` below)
        self.spelled: dict[bytes, int] = {}  # token ids by bytes (`frame_returns.CallReader`)
        self.returns: dict[tuple[int, int, int], tuple[RuleTable, dict[int, int]]] = {}
        self.twins: dict[int, tuple[RuleTable, dict[tuple, int]]] = {}  # `twin_frame`
        self.candidates = 0  # tokens read by the stack simulation (a measure of the work)
        self.cache_path: Path | None = None
        if cache_dir is not None and stacks.rules.keyed:
            self.cache_path = frames_path(cache_dir, stacks.rules.key(), info.fingerprint)
            token_bytes = info.token_bytes
            for key, stays, ends, escapes in read_frames(self.cache_path, self.words) or ():
                rows = stored_rows(escapes, token_bytes)
                self._masks[key] = frame_mask(stays, ends, token_bytes, rows)
            _UNSAVED.add(self)
        self._saved = len(self._masks)

    @property
    def _sorted(self) -> SortedTokens:
        """The tokenizer's sorted tokens, fetched when a mask is built (a matcher whose
        masks all come from the disk cache never loads the byte trie they are made of)."""
        return sorted_tokens(self.info)

    def save_if_grown(self) -> None:
        """Write the frame masks to the disk cache when some were built since the last
        read or write (and a cache is set)."""
        if self.cache_path is None or len(self._masks) <= self._saved:
            return
        stored = [
            (key, m.stays, m.ends, [(e.suffix, e.tokens) for g in m.escapes().values() for e in g])
            for key, m in self._masks.items()
        ]
        write_frames(self.cache_path, stored, self.words)
        self._saved = len(self._masks)

    def get(self, rule_id: int, state: int) -> FrameMask:
        """The frame mask of (rule, state)."""
        masks, key = self._masks, (rule_id, state)
        found = masks.get(key)
        if found is not None:
            return found
        same = self._same.get(rule_id)
        if same is None:
            same = self.same_rule(rule_id)
        built = key if same == rule_id else (same, state)  # under the first of its kind
        found = None if built is key else masks.get(built)
        if found is None:
            building = self.building
            building.add(built)
            try:
                found = masks[built] = self._shared(same, state)
            finally:
                building.discard(built)
        masks[key] = found
        return found

    def _shared(self, rule_id: int, state: int) -> FrameMask:
        """A schema-independent rule's frames (`RuleSet.shared`: its callees are such rules
        too) are built once per process and tokenizer (`shared_rules.shared_frame`)."""
        key = self.stacks.rules.shared.get(rule_id)
        if key is None:
            return self._build(rule_id, state)
        return shared_frame((key, state), self.info, lambda: self._build(rule_id, state))

    def same_rule(self, rule_id: int) -> int:
        """The first rule met with the same pruned table, accepting states and calls as
        `rule_id` (one subschema reached from several places): their frame masks are equal
        state by state, so they are built once. Rules are grouped by their size and
        accepting states; a table's checksum is taken only when its group has others
        (rpc's two rules: none, ~28 us of `crc32` less per cold compile)."""
        found = self._same.get(rule_id)
        if found is None:
            table = self.stacks.table(rule_id)
            key = (len(table.table), hash(tuple(table.accepting)))
            group = self._by_structure.setdefault(key, [])
            found = rule_id
            if group:
                crc = self._crc(rule_id, table)
                for other in group:
                    known = self.stacks.table(other)
                    if (
                        self._crc(other, known) == crc
                        and known.accepting == table.accepting
                        and known.calls == table.calls
                        and np.array_equal(known.table, table.table)
                    ):
                        found = other
                        break
            if found == rule_id:
                group.append(rule_id)
            self._same[rule_id] = found
        return found

    def _crc(self, rule_id: int, table: RuleTable) -> int:
        """A rule's table checksum (`same_rule`), taken once."""
        found = self._crcs.get(rule_id)
        if found is None:
            found = self._crcs[rule_id] = zlib.crc32(table.table)
        return found

    def _build(self, rule_id: int, state: int) -> FrameMask:
        table = self.stacks.table(rule_id)
        token_bytes = self.info.token_bytes
        if not state or table.final[state]:
            return frame_mask(np.zeros(self.words, dtype="<u4"), bool(state), token_bytes)
        walker = self._walker(rule_id, table)  # a literal's byte: compile's fast path
        literal = literal_frame(walker, table, state, self.info, self.words, self._calls)
        if literal is None and self._calls:  # a string value's body: the tokenizer's
            literal = closed_frame(walker, table, state, self.info)
        if literal is not None:
            return literal
        if self._calls:  # an array's `[`: from the state after its `,`
            twin = twin_frame(self, rule_id, table, state)
            if twin is None:  # `,` or `]` after an item: from the frames after the byte
                twin = next_frame(self, rule_id, table, state)
            if twin is not None:
                return twin
        rules = self.stacks.rules
        here = rules.epsilon_states(rule_id, state) if self._calls else [state]
        stays: np.ndarray | None = None
        candidates: np.ndarray | None = None
        walked: list[tuple[np.ndarray, np.ndarray]] = []  # escapes the walks told apart
        for at in here:
            by_bytes, crossing, escapes = self._split(rule_id, table, at)
            if stays is None:
                stays = by_bytes
            else:
                stays |= by_bytes
            if crossing is not None and crossing.any():  # string bodies' often hold none
                if candidates is None:
                    candidates = crossing
                else:
                    candidates |= crossing
            walked += escapes
        extra: list[np.ndarray] = []
        for at in here:
            for callee, _ in table.calls.get(at, ()):
                inner = self.get(callee, self.stacks.table(callee).start)
                stays |= inner.stays
                extra.append(inner.escape_tokens)
        assert stays is not None  # `here` holds `state`
        called: np.ndarray | None = None  # the callees' escaping tokens, as words
        through: np.ndarray | None = None  # which candidates those are (None: none)
        few_called = False  # a call state that reads no byte, its candidates read as lists
        if candidates is None and len(extra) == 1:  # a call state that reads no byte: the
            ids_array = ids_not_in(extra[0], stays)  # callee's escapes (no word scan)
            few_called = len(ids_array) < FEW_CALLED and not table.reads[state]
            if not few_called:
                through = np.ones(len(ids_array), dtype=bool)
            if walked:
                candidates = _words(ids_array, self.words)
        else:
            if extra:
                called = np.zeros(self.words, dtype="<u4")
                for tokens in extra:
                    set_bits(called, tokens)
                candidates = called.copy() if candidates is None else candidates | called
            if candidates is not None:
                candidates &= ~stays
                ids_array = ids_of_words(candidates, self.info.vocab_size)
            else:
                ids_array = NO_IDS
        rows: Rows = []
        going = None  # the walked rows as the tokenizer's (`}` at an object's start)
        if walked:
            known = candidates if len(ids_array) else None
            going = going_rows(self.info, walked, stays, known)
            rows.append(going[:2] if going is not None else less_rows(walked, stays, known))
        if len(ids_array):
            self.candidates += len(ids_array)
            slow = ids_array
            if len(here) == 1 and few_called:
                found, slow = called_rows(self, table, state, ids_array, stays)
                rows += found
                if len(slow):
                    decided, slow = read_calls(self, table, state, slow, stays)
                    rows.append(decided)
            elif len(here) == 1:  # most candidates only end the frame: no simulation needed
                if table.reads[state]:
                    kinds, staying = partial(self._kinds, rule_id, table), []  # (on use)
                    settled, where = byte_offsets(
                        self._sorted, ids_array, state, table, kinds, self.stacks.table, staying
                    )
                    if staying:  # stay by a callee's bytes: no rows, not read by returns
                        set_bits(stays, ids_array[staying])
                        if through is None and called is not None:
                            through = bits_set(called, ids_array)
                        if through is not None:
                            through[staying] = False
                else:  # every byte path dies at once (all candidates come from calls here)
                    settled = np.ones(len(ids_array), dtype=bool)
                    where = np.zeros(len(ids_array), dtype=np.int64)
                slow_rows = ~settled
                if through is None and called is not None:
                    through = bits_set(called, ids_array)
                if through is not None:
                    if through.any():
                        slow_rows = decide_returns(
                            self, table, state, ids_array, through, settled, where, stays
                        )
                rows += offset_rows(ids_array[settled], where[settled])
                slow = ids_array[slow_rows]
                if len(slow):  # through calls after a byte: the callees' frames tell most
                    decided, slow = read_calls(self, table, state, slow, stays)
                    rows.append(decided)
            if len(slow):
                rows.append(self._simulate(rule_id, state, slow.tolist(), stays))
        ends = any(table.accepting[at] for at in here)
        if going is not None and not any(len(tokens) for tokens, _ in rows[1:]):
            return FrameMask(stays, ends, *going[:3], token_bytes, going[3])  # (bytes known)
        return frame_mask(stays, ends, token_bytes, rows, self._sorted)

    def _simulate(
        self, rule_id: int, state: int, ids: list[int], stays: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Classify candidate tokens by the stack simulation from a base frame at (rule,
        state): set those that stay in `stays`; return the escape rows of the others."""
        token_bytes = self.info.token_bytes
        base = self.stacks.push(CONTEXT, rule_id, state)
        found = self.stacks.classify(base, [token_bytes[t] or b"" for t in ids])
        staying = [t for t, (kind, _) in zip(ids, found, strict=True) if kind == STAYS]
        set_bits(stays, np.asarray(staying, dtype=np.int64))
        escaping: list[int] = []
        offsets: list[int] = []
        for token, (kind, where) in zip(ids, found, strict=True):
            while kind == ESCAPES and where:
                at = where.bit_length() - 1
                escaping.append(token)
                offsets.append(at)
                where ^= 1 << at
        return np.asarray(escaping, np.int64), np.asarray(offsets, np.int64)

    def _kinds(self, rule_id: int, table: RuleTable) -> tuple[np.ndarray, np.ndarray]:
        """A rule's accepting and call states as bool arrays (made once per rule)."""
        found = self._kinds_of.get(rule_id)
        if found is None:
            calls = np.zeros(len(table.table), dtype=bool)
            calls[list(table.calls)] = True
            found = np.asarray(table.accepting, dtype=bool), calls
            self._kinds_of[rule_id] = found
        return found

    def _split(
        self, rule_id: int, table: RuleTable, at: int
    ) -> tuple[np.ndarray, np.ndarray | None, Rows]:
        """The tokens read by bytes alone from state `at` of a rule, and (with calls; None
        when none) the candidates: those that meet a crossing state after a byte and die by
        bytes later, less the `escapes` (rows: token ids and where they escape) the walk
        or the free-string tables tell apart; words are fresh arrays, stop ids clear. A
        pruned walk of the sorted tokens (`frame_walk`) where the state reads few bytes,
        else the rule's two token indexes."""
        walker = self._walker(rule_id, table)
        if not walker.reads[at]:  # a call state that reads no byte: no token to split
            return np.zeros(self.words, dtype="<u4"), None, []
        if self._calls:  # next to a string body: its tables (dfamask's hook)
            indexes = partial(self._rule_indexes, rule_id, table)
            beside = split_beside(self._sorted, walker, table, at, indexes, self.words)
            if beside is not None:
                return beside
        split = walk_state(
            self._sorted,
            table.flat,
            walker.reads,
            walker.follow,
            at,
            walker.resolve,
            walker.walk_arrays,
            final=table.final,
        )
        if split is not None:
            by_bytes, crossing = split_words(self._sorted, split, self.words)
            if not self._calls:
                return by_bytes, None, []
            return by_bytes, crossing, escape_rows(self._sorted, split.escapes)
        indexes = self._rule_indexes(rule_id, table)
        ahead = indexes.by_bytes._chains.ahead(at) if self._calls else None
        if ahead is not None:  # a string body: both masks from one walk of its rest trie
            if indexes.both is None:
                table_now = indexes.by_bytes._flat.reshape(-1, 256)  # dead ends pruned
                indexes.both = crossing_table(table_now, indexes.crossing_states).ravel()
            body = indexes.by_bytes._shared().body
            split_both = split_body(body, ahead, indexes.crossing_states, indexes.both)
            if split_both is not None:
                return split_both[0], split_both[1], []
        by_bytes = indexes.by_bytes.packed(at) & self._keep
        if not self._calls:
            return by_bytes, None, []
        if ahead is not None:
            ids = None  # the crossing index's body tables are fastest
        else:
            ids = crossing_candidates(
                self._sorted, table.table, walker.crossing_table(), at, walker.entries(at)
            )
        if ids is not None:
            return by_bytes, _words(ids, self.words) & ~by_bytes, []
        index = indexes.crossing
        assert index is not None  # a rule set with calls
        crossing = index.packed(indexes.size + at) & self._keep
        return by_bytes, crossing & ~by_bytes, []

    def _walker(self, rule_id: int, table: RuleTable) -> RuleWalker:
        walker = self._walkers.get(rule_id)
        if walker is None:
            walker = self._walkers[rule_id] = RuleWalker(self.stacks, rule_id, table)
        return walker

    def _rule_indexes(self, rule_id: int, table: RuleTable) -> RuleIndexes:
        return self._indexes.get(rule_id, table)

    @property
    def indexed_rules(self) -> int:
        """How many rules' token indexes were made (to build frame masks not cached; rules
        with equal tables share theirs)."""
        return self._indexes.made

    @property
    def nbytes(self) -> int:
        """Memory held by the frame masks and the rules' token indexes."""
        frames = sum(m.stays.nbytes for m in {id(m): m for m in self._masks.values()}.values())
        return frames + self._indexes.nbytes

    def arrays(self) -> set[int]:
        """The ids of the arrays `nbytes` counts as frames' (stacks may share them)."""
        return {id(m.stays) for m in self._masks.values()} | {id(self.stop_words)}

    @property
    def built(self) -> int:
        """How many frame masks are built."""
        return len(self._masks)


_UNSAVED: weakref.WeakSet[FrameMasks] = weakref.WeakSet()


def save_frame_caches() -> None:
    """Write every disk-cached grammar's frame masks built since it was read or written
    (run at exit, so the next process finds them)."""
    for frames in list(_UNSAVED):
        frames.save_if_grown()


atexit.register(save_frame_caches)


def _words(ids: np.ndarray, words: int) -> np.ndarray:
    """Packed words with the bits of token `ids` set."""
    out = np.zeros(words, dtype="<u4")
    set_bits(out, ids)
    return out


FEW_CALLED = 192  # a call state that reads no byte reads fewer candidates as lists (~256: even)
