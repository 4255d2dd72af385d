"""What a `uniqueItems` array's item language leaves free: the run-time check's liveness.

The run-time check (`unique_check`) refuses a byte that would finish an item equal to an
earlier one. It must also never let the output into a dead end: a prefix of an item all of
whose completions are values already used, or an array that still needs more items than
there are unused values. This module decides that per state of the item's DFA (items are
built call-free, so the item is one DFA), once per item language:

- *rich* states: from here the completions take infinitely many values, so whatever
  finite set was used a fresh value remains. A state is rich when it reaches a cycle that
  *pumps values*: with u the shortest text to the cycle's state, c the cycle and v the
  shortest completion after it, u v, u c v and u c c v are three different values. In the
  JSON texts these grammars generate a cycle lies in a string body (each turn adds a code
  point), integer or exponent digits, fraction digits, array items or object members, and
  whether turning it changes the value depends only on which of these it is and on the
  digits it and v read (a fraction or exponent cycle of zeros followed by no other digit
  keeps the value; an object member repeating one key keeps it): never on the text before
  u, so three samples tell it for every prefix.
- other states read no cycle (a state reaching a cycle that does not pump is neither: the
  compiler refuses such items by name); their completions are finite, enumerated lazily
  (lowest bytes first) until one has an unused value.

`values`: the distinct values of the whole language when the start state is not rich
(an array may only take a new item while one is unused).

Values are compared under JSON Schema equality (`value_key`: numbers by exact value, so
1 == 1.0 and 1e-400 != 0 though Python floats read it 0.0: with float equality a prefix
such as `1e-99999` could only finish as a value equal to 0, a dead end once 0 is used).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from kor_cli.grammar.byte_dfa import ByteDFA

_NUMBER = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")
_PUMP_TRIES = 64  # cycles tried per strongly connected component
_PUMP_BYTES = b"a1 "  # bytes tried first on a cycle (then the others, ascending)


def value_key(text: bytes) -> Any:
    """A hashable key equal for equal JSON values under JSON Schema equality: numbers by
    exact value (1 == 1.0 == 10e-1; 1e400 != 1e401, though Python reads both as inf),
    true != 1, objects regardless of member order (a repeated name: the last one, as the
    validator reads it)."""
    return _key(json.loads(text, parse_float=_number, parse_int=_number))


def _number(text: str) -> tuple[str, int, str, int | str]:
    """An exact number key: ("n", sign, significant digits, exponent)."""
    found = _NUMBER.fullmatch(text)
    if found is None:
        raise ValueError(f"not a JSON number: {text!r}")
    sign, whole, fraction, exponent = found.groups()
    digits = (whole + (fraction or "")).lstrip("0")
    if not digits:
        return ("n", 0, "", 0)
    stripped = digits.rstrip("0")
    try:
        power: int | str = int(exponent or "0") - len(fraction or "") + len(digits) - len(stripped)
    except ValueError:  # an exponent past Python's digit limit: compared as written
        power = f"{exponent}-{len(fraction or '')}+{len(digits) - len(stripped)}"
    return ("n", -1 if sign else 1, stripped, power)


def _key(value: Any) -> Any:
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, tuple):  # a number (`_number`)
        return value
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, _key(v)) for k, v in value.items()))
    return ("z",)


def text_key(text: bytes) -> Any:
    try:
        return value_key(text)
    except (ValueError, RecursionError):
        return None


class ItemLanguage:
    """The liveness facts of one item DFA (see the module docstring)."""

    def __init__(self, dfa: ByteDFA, rich: np.ndarray) -> None:
        self.dfa = dfa
        self.rich = rich
        self.accepting = np.asarray(dfa.accepting, dtype=bool).tolist()
        self._edges = dfa.edges()
        self._values: set[Any] = set()  # distinct values found so far (start not rich)
        self._more: Iterator[bytes] | None = (
            None if rich[dfa.start] else self.completions(dfa.start)
        )

    def at_least(self, count: int) -> bool:
        """True when the language has at least `count` distinct values (enumerated lazily,
        only as far as asked, when the start state is not rich)."""
        if self.rich[self.dfa.start]:
            return True
        while len(self._values) < count and self._more is not None:
            text = next(self._more, None)
            if text is None:
                self._more = None
            elif (key := text_key(text)) is not None:
                self._values.add(key)
        return len(self._values) >= count

    def completions(self, state: int) -> Iterator[bytes]:
        """The texts that finish an item from `state` along paths that visit no state twice
        (finitely many; a cycle that does not pump keeps the value), lowest bytes first."""
        stack: list[tuple[int, bytes, frozenset[int]]] = [(state, b"", frozenset((state,)))]
        while stack:
            at, text, path = stack.pop()
            if self.accepting[at]:
                yield text
            for mask, target in sorted(self._edges[at], key=lambda e: -(e[0] & -e[0])):
                if target in path:
                    continue
                inner = path | {target}
                for byte in reversed([b for b in range(256) if mask >> b & 1]):
                    stack.append((target, text + bytes((byte,)), inner))

    def fresh(self, state: int, prefix: bytes, used: frozenset[Any]) -> bool:
        """True when the item `prefix` (at `state`) can finish with a value not in `used`."""
        if not used or self.rich[state]:
            return True
        return any(text_key(prefix + rest) not in used for rest in self.completions(state))


def item_language(dfa: ByteDFA) -> ItemLanguage:
    """The liveness facts of an item DFA."""
    table = np.asarray(dfa.transitions)
    size = len(table)
    succ = [sorted(set(np.unique(table[s]).tolist()) - {0}) for s in range(size)]
    comp = _components(succ)
    members: dict[int, list[int]] = {}
    for state in range(1, size):
        members.setdefault(comp[state], []).append(state)
    cyclic = {
        c for c, states in members.items()
        if len(states) > 1 or states[0] in succ[states[0]]
    }  # fmt: skip
    accepting = np.asarray(dfa.accepting, dtype=bool)
    to, onward = _shortest_in(table, dfa.start), _shortest_out(table, accepting)
    pumping = {c for c in cyclic if _pumps(table, members[c], comp, to, onward)}
    return ItemLanguage(dfa, _reaching(succ, [s for c in pumping for s in members[c]], size))


def _components(succ: list[list[int]]) -> list[int]:
    """Strongly connected component of each state (iterative Tarjan)."""
    size = len(succ)
    index = [-1] * size
    low = [0] * size
    comp = [-1] * size
    on: list[bool] = [False] * size
    stack: list[int] = []
    counter = 0
    for root in range(size):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on[node] = True
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if index[nxt] < 0:
                    work.append((nxt, 0))
                elif on[nxt]:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                while True:
                    top = stack.pop()
                    on[top] = False
                    comp[top] = node
                    if top == node:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return comp


def _shortest_in(
    table: np.ndarray, start: int, part: int | None = None, comp: list[int] | None = None
) -> dict[int, bytes]:
    """The shortest (then lowest) text from `start` to each state it reaches (only through
    component `part` of `comp` when given)."""
    found = {start: b""}
    todo = deque([start])
    while todo:
        state = todo.popleft()
        row = table[state]
        for byte in np.flatnonzero(row).tolist():
            nxt = int(row[byte])
            if nxt not in found and (comp is None or comp[nxt] == part):
                found[nxt] = found[state] + bytes((byte,))
                todo.append(nxt)
    return found


def _shortest_out(table: np.ndarray, accepting: np.ndarray) -> dict[int, bytes]:
    """The shortest text from each state that can finish to acceptance."""
    preds: dict[int, list[tuple[int, int]]] = {}
    for state, byte in zip(*np.nonzero(table), strict=True):
        preds.setdefault(int(table[state, byte]), []).append((int(state), int(byte)))
    found = {int(s): b"" for s in np.flatnonzero(accepting)}
    todo = deque(found)
    while todo:
        state = todo.popleft()
        for prev, byte in sorted(preds.get(state, ())):
            if prev not in found:
                found[prev] = bytes((byte,)) + found[state]
                todo.append(prev)
    return found


def _pumps(
    table: np.ndarray,
    states: list[int],
    comp: list[int],
    to: dict[int, bytes],
    onward: dict[int, bytes],
) -> bool:
    """Whether some cycle of this component changes the value each turn (three samples)."""
    tries = 0
    for state in states:
        if state not in to or state not in onward:
            continue
        row = table[state]
        inside = [b for b in np.flatnonzero(row).tolist() if comp[int(row[b])] == comp[state]]
        inside.sort(key=lambda b: (_PUMP_BYTES.find(bytes((b,))) % 256, b))
        for byte in inside[:4]:
            back = _shortest_in(table, int(row[byte]), comp[state], comp).get(state)
            if back is None:
                continue
            cycle = bytes((byte,)) + back
            u, v = to[state], onward[state]
            keys = {text_key(u + cycle * n + v) for n in range(3)}
            if None not in keys and len(keys) == 3:
                return True
            tries += 1
            if tries >= _PUMP_TRIES:
                return False
    return False


def _reaching(succ: list[list[int]], targets: list[int], size: int) -> np.ndarray:
    """Bool per state: some of `targets` is reachable from it."""
    preds: list[list[int]] = [[] for _ in range(size)]
    for state, nexts in enumerate(succ):
        for nxt in nexts:
            preds[nxt].append(state)
    out = np.zeros(size, dtype=bool)
    out[targets] = True
    todo = list(targets)
    while todo:
        for prev in preds[todo.pop()]:
            if not out[prev]:
                out[prev] = True
                todo.append(prev)
    return out
