"""engines.py's exactness check: our masks against a brute force over the schema's DFA, and
every competitor's masks against ours, with spot checks of who is right.

The brute force walks every token's bytes over the DFA (a padded token × byte array, no
trie, dead states pruned by its own fixpoint; per distinct state); on two states also a
byte-by-byte Python walk. A token only we allow is completed by the shortest path to an
accepting DFA state, a token only a competitor allows by a greedy walk of its own matcher
(closing bytes first); the text is validated with jsonschema (formats checked).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import jsonschema
import numpy as np

from kor_cli.grammar.byte_dfa import ByteDFA
from kor_cli.grammar.json_key_witness import shortest
from kor_cli.grammar.surface import TokenizerInfo

EXAMPLES = 8  # disagreement examples (with a spot check) per engine pair and direction
KINDS = ("text", "text_forced", "special", "stop")


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
        if not state:
            return None
        return shortest(ByteDFA(self.table, self.accepting, state))


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


def unpack(words: np.ndarray, width: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), count=width, bitorder="little").view(bool)


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
