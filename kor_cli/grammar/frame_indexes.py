"""A rule's two token indexes, as `frame_masks` reads them (see its docstring):

- *bytes*: the rule's pruned DFA with call states counted as live (tokens read by bytes);
- *crossing*: the same, except that after at least one byte every call or accepting state
  sends any byte to an absorbing state X (`crossing_dfa`). Made on first use: most frames
  are split by `frame_walk` or `string_body`, which never read it (its table is about
  twice the rule's, ~50-130 us to make on Qwen).

Rules with equal tables and crossing states share their indexes (`RuleIndexCache`).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kor_cli.grammar.bitmask import set_bits
from kor_cli.grammar.frame_rows import Rows, escape_rows, split_words
from kor_cli.grammar.frame_walk import RuleWalker, walk_state
from kor_cli.grammar.free_string import FreeTokens, _keyed, free_body_states
from kor_cli.grammar.free_string import Split as FreeSplit
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.stacks import RuleTable
from kor_cli.grammar.string_body import BodyChains, beside_body, crossing_table, split_body
from kor_cli.grammar.token_arrays import SortedTokens
from kor_cli.grammar.vocab import TokenizerInfo


class TableDFA:
    """A `ByteDFA`-shaped view of a table (what `TokenIndex` reads); its fingerprint hashes
    the table itself (it keys `TokenIndex`'s disk cache)."""

    def __init__(self, transitions: np.ndarray, accepting: np.ndarray, start: int, kind: str):
        self.transitions = transitions
        self.accepting = accepting
        self.start = start
        self._kind = kind

    def fingerprint(self) -> str:
        digest = hashlib.sha256(f"kor-rule-table-v1 {self._kind} {self.start}".encode())
        digest.update(np.ascontiguousarray(self.accepting, dtype=np.uint8).tobytes())
        digest.update(np.ascontiguousarray(self.transitions, dtype="<i4").tobytes())
        return digest.hexdigest()


class RuleIndexes:
    """One rule's indexes: `by_bytes`, and `crossing` (None in a rule set without calls)."""

    def __init__(
        self,
        table: RuleTable,
        crossing_states: np.ndarray,
        info: TokenizerInfo,
        cache_dir: Path | str | None,
        calls: bool,
    ) -> None:
        self.size = len(table.table)  # state s's first-byte copy is size + s (crossing)
        self.table = table.table  # the pruned table and crossing states: rules with equal
        self.crossing_states = crossing_states  # ones share these indexes
        self.both: np.ndarray | None = None  # `string_body.crossing_table`, flat, on use
        # the table is pruned: a state is live iff it reads a byte, accepts or calls
        live = crossing_states | table.table.any(axis=1)
        live[0] = False
        self._live, self._info, self._cache_dir, self._calls = live, info, cache_dir, calls
        dfa = TableDFA(table.table, crossing_states, max(table.start, 1), "bytes")
        self.by_bytes = TokenIndex(dfa, info, cache_dir, live)
        self._crossing: TokenIndex | None = None

    def crossing_flat(self) -> np.ndarray:
        """`string_body.crossing_table` of the pruned table, flat (made on first use)."""
        if self.both is None:
            table_now = self.by_bytes._flat.reshape(-1, 256)  # dead ends pruned
            self.both = crossing_table(table_now, self.crossing_states).ravel()
        return self.both

    @property
    def crossing(self) -> TokenIndex | None:
        """The crossing index (made on first use; None without calls)."""
        if self._crossing is None and self._calls:
            live = self._live
            both = np.concatenate((live, live, [True]))  # a copy reads as its state; X lives
            dfa = crossing_dfa(self.table, self.crossing_states)
            self._crossing = TokenIndex(dfa, self._info, self._cache_dir, both)
        return self._crossing

    @property
    def nbytes(self) -> int:
        """Memory held by the indexes made so far."""
        return self.by_bytes.nbytes + (self._crossing.nbytes if self._crossing else 0)


class RuleIndexCache:
    """The `RuleIndexes` of a rule set's rules over one tokenizer, made on first request."""

    def __init__(self, info: TokenizerInfo, cache_dir: Path | str | None, calls: bool) -> None:
        self._info, self._cache_dir, self._calls = info, cache_dir, calls
        self._indexes: dict[int, RuleIndexes] = {}
        self._by_table: dict[tuple[int, int, int], list[RuleIndexes]] = {}

    def get(self, rule_id: int, table: RuleTable) -> RuleIndexes:
        """The indexes of rule `rule_id` (pruned tables `table`)."""
        found = self._indexes.get(rule_id)
        if found is not None:
            return found
        size = len(table.table)
        has_call = np.zeros(size, dtype=bool)
        has_call[list(table.calls)] = True
        crossing_states = np.asarray(table.accepting, dtype=bool) | has_call
        key = (size, zlib.crc32(table.table), zlib.crc32(crossing_states))
        for same in self._by_table.get(key, ()):  # a rule built from the same subschema
            if np.array_equal(same.table, table.table) and np.array_equal(
                same.crossing_states, crossing_states
            ):
                found = self._indexes[rule_id] = same
                return found
        found = RuleIndexes(table, crossing_states, self._info, self._cache_dir, self._calls)
        self._indexes[rule_id] = found
        self._by_table.setdefault(key, []).append(found)
        return found

    @property
    def made(self) -> int:
        """How many rules' indexes were made (rules with equal tables share theirs)."""
        return sum(map(len, self._by_table.values()))

    @property
    def nbytes(self) -> int:
        """Memory held by the indexes made."""
        return sum(i.nbytes for group in self._by_table.values() for i in group)


def crossing_dfa(table: np.ndarray, crossing: np.ndarray) -> TableDFA:
    """States 0..n-1: the rule's, except that the `crossing` ones (a call, accepting) send
    every byte to X = 2n; states n..2n-1: copies reading their first byte by byte edges only.
    Crossing states and X count as accepting (live)."""
    size = len(table)
    cross = 2 * size
    out = np.zeros((2 * size + 1, 256), dtype=np.int32)
    out[:size] = table
    out[:size][crossing] = cross
    out[size : 2 * size] = table
    out[cross] = cross
    accepting = np.zeros(2 * size + 1, dtype=bool)
    accepting[:size] = crossing
    accepting[size : 2 * size] = crossing
    accepting[cross] = True
    accepting[0] = accepting[size] = False
    return TableDFA(out, accepting, size + 1 if size > 1 else cross, "crossing")


BODY_READS = 94  # a string body's state reads at least its ASCII characters
_BODY_ASCII = frozenset(b for b in range(0x20, 0x80) if b not in b'"\\')
_LEADS = range(0xC2, 0xF5)  # a UTF-8 character's lead byte
_QUOTE = ord('"')
_CONTINUATIONS = range(0x80, 0xC0)
# a byte into a free string's body → `SortedTokens.free_strings`' table of the tokens that
# start with it (less it); 0 (an ASCII body character): the body's, of every token
_PREFIXES = {_QUOTE: 1, **dict.fromkeys(_CONTINUATIONS, 2), ord("\\"): 3}
_WHOLE = (256, 1, len(_CONTINUATIONS), 1)  # bytes a table's tokens start with
_CONTINUED_MIN = 256  # tekken: 344 tokens start with one, 1-15 bytes (Qwen: 180)


def _runs(data: list[int]) -> list[tuple[int, int]]:
    """Ascending bytes as runs of consecutive ones, each (first, last + 1)."""
    runs: list[tuple[int, int]] = []
    for byte in data:
        if runs and runs[-1][1] == byte:
            runs[-1] = (runs[-1][0], byte + 1)
        else:
            runs.append((byte, byte + 1))
    return runs


def _prefixed(
    reads: list[int],
    flat: Sequence[int],
    at: int,
    chains: BodyChains,
    crossing: np.ndarray,
    starts: Sequence[int],
) -> tuple[bool, list[int], tuple[int, np.ndarray]] | None:
    """The bytes of `at` that one-byte-off body tables split (`token_tables.SharedTables`):
    a quote, or UTF-8 continuation bytes that all lead to one string-body chain state (not
    crossing) and start at least _CONTINUED_MIN tokens (`starts`: the sorted tokens' first-byte
    ranges): (continuation bytes?, those bytes, that state's `ahead`); None when neither."""
    if _QUOTE in reads:
        into = flat[at << 8 | _QUOTE]
        if not crossing[into] and (ahead := chains.ahead(into)) is not None:
            return False, [_QUOTE], ahead
    covered = [byte for byte in reads if byte in _CONTINUATIONS]
    if not covered or starts[covered[-1] + 1] - starts[covered[0]] < _CONTINUED_MIN:
        return None  # few tokens: the pruned walk walks them one by one faster
    into = flat[at << 8 | covered[0]]
    if crossing[into] or any(flat[at << 8 | byte] != into for byte in covered):
        return None
    ahead = chains.ahead(into)
    return None if ahead is None else (True, covered, ahead)


def split_beside(
    sorted_: SortedTokens,
    walker: RuleWalker,
    table: RuleTable,
    at: int,
    indexes: Callable[[], RuleIndexes],
    words: int,
) -> tuple[np.ndarray, np.ndarray, Rows] | None:
    """`frame_masks`' split of a state one byte before a string body (an escape after its
    backslash, an opening quote, a UTF-8 continuation), which a pruned walk reads as an
    array walk (or one by one) of every token under those bytes into the body: by the body
    tables instead, and a pruned walk of the tokens that start with the other bytes it
    reads (`\\u`'s `u`, a value's digits). Where ASCII body characters lead into the body,
    one walk of the body's rest trie (`string_body.beside_body`) splits them and every
    token that starts with no body character; else where a quote or UTF-8 continuation
    bytes do, the tokens that start with one are split by the tables of those tokens less
    it (`token_tables.SharedTables`). None where neither, where `at` is a string body or a
    crossing state, or where the body tables do not tell: the usual paths split it. Words:
    stays, candidates; and the walk's escapes."""
    reads, flat = walker.reads, table.flat
    if walker.follow[at]:
        return None
    if len(reads[at]) >= BODY_READS:  # a free string's body: the tokenizer's tables
        if not _free(walker, at):
            return None
        body = sorted_.free_strings()[0]
        return free_split(walker, body, at)
    base = at << 8
    if len(reads[at]) == 1:  # a literal's byte (most states of a key): the usual walk
        if len(reads[flat[base | reads[at][0]]]) < BODY_READS:
            return None
    elif not any(len(reads[to]) >= BODY_READS for to in {flat[base | b] for b in reads[at]}):
        return None
    prefixed = _free_prefix(sorted_, walker, table, at, words)
    if prefixed is not None:
        return prefixed
    found = indexes()
    chains = found.by_bytes._chains
    chain, ahead = 0, None
    shifted: list[int] = []
    others: list[int] = []
    for byte in reads[at]:
        if byte in _BODY_ASCII:
            to = flat[at << 8 | byte]
            if not chain and len(reads[to]) >= BODY_READS:
                ahead = chains.ahead(to)
                chain = to if ahead is not None else -1
            (shifted if to == chain else others).append(byte)
        elif byte in _LEADS:
            others.append(byte)
    shared = found.by_bytes._shared()
    if shifted:
        ahead_now, keep = beside_body(
            shared.body, at, ahead, shifted, sorted_.starts(), sorted_.ids
        )
        split = split_body(
            shared.body, ahead_now, found.crossing_states, found.crossing_flat(), keep
        )
    else:
        prefixed = _prefixed(reads[at], flat, at, chains, found.crossing_states, sorted_.starts())
        if prefixed is None:
            return None
        continued, covered, ahead = prefixed
        tables = shared.continued if continued else shared.quoted
        skip = set(covered)
        others = [byte for byte in reads[at] if byte not in skip]
        keep = None
        starts, ids = sorted_.starts(), sorted_.ids
        if continued and len(covered) < len(_CONTINUATIONS):
            keep = np.zeros(len(tables.counts), dtype=bool)
            for byte in covered:
                keep[ids[starts[byte] : starts[byte + 1]]] = True
        split = split_body(tables, ahead, found.crossing_states, found.crossing_flat(), keep)
        if split is not None:  # the byte alone: into the body by bytes
            _set_alone(sorted_, covered, split[0])
    if split is None:
        return None
    return _with_others(sorted_, walker, table, at, words, *split, others)


def _free_prefix(
    sorted_: SortedTokens, walker: RuleWalker, table: RuleTable, at: int, words: int
) -> tuple[np.ndarray, np.ndarray, Rows] | None:
    """`split_beside` of a state one byte before a free string's body (`free_string`): a
    quote that opens it, UTF-8 continuation bytes that end a character in it, an escape's
    last byte, ASCII body characters, all into one body state: the tokens that start with
    those bytes by the tokenizer's tables (of every token for a body character, which the
    body reads back to itself; else of the tokens that start with such a byte, less it),
    the others, which lead into no string body (a value's digits, `[`, `{`, `\\u`'s `u`...),
    by a pruned walk. None where it is not such a state."""
    reads, flat = walker.reads, table.flat
    into = 0
    covered: list[int] = []
    others: list[int] = []
    for byte in reads[at]:
        to = flat[at << 8 | byte]
        if len(reads[to]) < BODY_READS:
            others.append(byte)
        elif into and to != into:
            return None
        else:
            into = to
            covered.append(byte)
    arrays = walker.arrays()
    if not covered or arrays[1][into] or not _free(walker, into):
        return None
    groups: dict[int, list[int]] = {}  # which table (`free_strings`) → its bytes here
    for byte in covered:
        kind = _PREFIXES.get(byte, 0 if byte in _BODY_ASCII else -1)
        if kind < 0:
            return None
        groups.setdefault(kind, []).append(byte)
    tables = sorted_.free_strings()
    starts, ids = sorted_.starts(), sorted_.ids
    parts = []
    for kind, chosen in groups.items():  # (a table's stays hold the byte alone)
        stays, crossing, rows = free_split(walker, tables[kind], into)
        if len(chosen) < _WHOLE[kind]:  # those bytes' tokens only
            keep = np.zeros(len(stays) * 32, dtype=bool)
            for lo, hi in _runs(chosen):
                keep[ids[starts[lo] : starts[hi]]] = True
            kept = np.packbits(keep, bitorder="little").view("<u4")
            stays &= kept
            crossing &= kept
            rows = [(tokens[keep[tokens]], where[keep[tokens]]) for tokens, where in rows]
        parts.append((stays, crossing, rows))
    stays, crossing, rows = parts[0]
    for more in parts[1:]:
        stays |= more[0]
        crossing |= more[1]
        rows = rows + more[2]
    return _with_others(sorted_, walker, table, at, words, stays, crossing, others, rows)


def free_split(walker: RuleWalker, tables: FreeTokens, state: int) -> FreeSplit:
    """`tables.split` from free string state `state` of the walker's rule, kept per rule,
    tables and state: a string body's split is asked again by the states one byte before
    it (an escape's last byte, the opening quote: rpc's rule 0 asks two of its three
    twice, ~40-55 us cold each). Fresh words each time (callers change them); the rows'
    arrays are kept read-only. Not where the quote leads to a final state or a key's `:`
    (`FreeTokens.split` copies its own split made once there)."""
    flat, crossing = walker.arrays()
    finals, quote = walker.finals(), int(flat[state << 8 | _QUOTE])
    if finals[quote] or _keyed(flat, crossing, finals, quote, walker.reads):
        return tables.split(flat, crossing, state, finals, walker.reads)
    key = (id(tables), state)
    found = walker.splits.get(key)
    if found is None or found[0] is not tables:
        made = tables.split(flat, crossing, state, finals, walker.reads)
        for tokens, offsets in made[2]:
            tokens.flags.writeable = offsets.flags.writeable = False
        found = walker.splits[key] = (tables, made)
    stays, crossing, rows = found[1]
    return stays.copy(), crossing.copy(), list(rows)


def _set_alone(sorted_: SortedTokens, covered: list[int], stays: np.ndarray) -> None:
    """Set in `stays` the one-byte tokens of the `covered` bytes (sorted, each read into a
    string body by bytes)."""
    ids, starts = sorted_.alone()
    for lo, hi in _runs(covered):
        set_bits(stays, ids[starts[lo] : starts[hi]])


def _free(walker: RuleWalker, state: int) -> bool:
    """`free_string.free_states` of a rule's state (the rule's, found once per rule)."""
    found = walker.free
    if found is None:
        found = walker.free = free_body_states(*walker.arrays())
    return state in found


def _with_others(
    sorted_: SortedTokens,
    walker: RuleWalker,
    table: RuleTable,
    at: int,
    words: int,
    stays: np.ndarray,
    crossing: np.ndarray,
    others: list[int],
    rows: Rows | None = None,
) -> tuple[np.ndarray, np.ndarray, Rows] | None:
    """A split of the tokens under some of `at`'s bytes (and its escape `rows`),
    completed by a pruned walk of those that start with its `others` (None where that
    walk gives up)."""
    rows = rows or []
    if not others:
        return stays, crossing, rows
    reads, flat = walker.reads, table.flat
    rest = walk_state(
        sorted_,
        flat,
        reads,
        walker.follow,
        at,
        walker.resolve,
        walker.walk_arrays,
        final=table.final,
        first=others,
    )
    if rest is None:
        return None
    more_stays, more_crossing = split_words(sorted_, rest, words)
    stays |= more_stays
    if more_crossing is not None:
        crossing |= more_crossing
    return stays, crossing, rows + escape_rows(sorted_, rest.escapes)
