"""`uniqueItems` enforced exactly at run time, on the pushdown matcher.

"No two items equal" is not context-free, so no grammar states it; a matcher can check it
as it goes. The compiler (`json_containers`) makes such an array a *checked* rule
(`RuleSet.checked`: array rule → item rule) whose items are calls to an item rule built
call-free (one DFA, `unique_items.ItemLanguage`). So above a checked array's frame there
is at most the frame of the item being read, and a stack is in one of three contexts:
*outside* any checked array, at the *array* frame (between items), or in an *item*.

Each stack of a configuration carries its checked array's data, `Aux = (used, prefix)`:
the values of the items read so far (value keys, `unique_items.value_key`) and the text of
the item being read (None between items); outside, None. A configuration is a frozenset of
(stack, aux) pairs: hashable and immutable, so the matcher's history keeps one per step,
rollback restores the used set, and masks are cached by it.

A byte step (`step`) moves the stack as `Stacks.step` does and then the aux:
- an item frame that ends (popped before the byte, which the array frame reads; or ending
  on it, a final state) finishes the item: its text is parsed and compared with `used`
  (equal: the stack dies; else its value joins `used`);
- a new item starts with its first byte; an array entered from outside starts empty.
Then the stack must stay *live* (`live`), so no accepted token leads to a dead end:
- between items at array state a: the array still needs `need(a)` items (fewest item calls
  from a to the end) and the item language must have that many values beyond `used`;
- in an item at state q: one more than that, and a completion of the prefix whose value
  is unused (`ItemLanguage.fresh`: always, from a state whose completions take infinitely
  many values; else the finitely many are enumerated).
Since every stack kept is live, from every configuration some continuation reaches the end:
the matcher never dead-ends (tests walk at random to check it).

Masks (`unique_matcher`) start from the pushdown grammar's own masks (context-independent,
cached: they ignore uniqueness, so they allow a superset) and re-read with `step` only the
tokens that could break it: those that may finish an item or leave the item in a state
that is not rich (none while `used` is empty but those holding an item separator).

Checked arrays are made when the schema is compiled, never in a value built when first
reached (`json_defer` keeps any value holding `uniqueItems` eager), so `PushdownMatcher`
knows when it is built whether it must be a `UniqueMatcher`; the disk cache stores them
(`rule_cache`). A large item's rule may be built when the array is first reached
(`json_unique.deferred_unique`); if its language is empty the array's call to it is
dropped and the array is `[]`, which is checked without asking the item rule.

Interactions: under `not`/`oneOf`/`if`/`contains` (a whole-DFA product) a checked array
cannot be a rule; there `uniqueItems` stays exact only for items with few values
(`json_unique`) and is otherwise a named refusal. `--lenient` no longer needs to drop it.
The validator re-checks every record in any case.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from kor_cli.grammar.rules import RuleSet
from kor_cli.grammar.stacks import CONTEXT, Stacks
from kor_cli.grammar.unique_items import ItemLanguage, item_language, text_key

Aux = tuple[frozenset[Any], bytes | None] | None
UStack = tuple[int, Aux]
UConfig = frozenset[UStack]

OUTSIDE, ARRAY, ITEM = 0, 1, 2
_EMPTY_AUX: Aux = (frozenset(), None)
_MAX_STEPS = 1 << 16


class UniqueChecks:
    """The run-time `uniqueItems` check of one grammar's checked arrays (module docstring)."""

    def __init__(self, rules: RuleSet, stacks: Stacks) -> None:
        self.stacks = stacks
        self.checked: dict[int, int] = dict(rules.checked)
        self.array_of = {item: array for array, item in self.checked.items()}
        self._languages: dict[int, ItemLanguage] = {}
        self._need: dict[int, dict[int, int]] = {}
        self._steps: dict[tuple[UStack, int], tuple[UStack, ...]] = {}

    def language(self, array_rule: int) -> ItemLanguage:
        """The item language of a checked array rule (analysed on first use)."""
        found = self._languages.get(array_rule)
        if found is None:
            item = self.checked[array_rule]
            dfa = self.stacks.rules.rule(item).dfa
            found = self._languages[array_rule] = item_language(dfa)
        return found

    def context(self, stack: int) -> tuple[int, int, int]:
        """(OUTSIDE | ARRAY | ITEM, array rule, state): the array's state between items,
        the item's state in an item."""
        if stack <= CONTEXT:
            return OUTSIDE, -1, 0
        rule, state, below = self.stacks.frame(stack)
        if rule in self.checked:
            return ARRAY, rule, state
        array = self.array_of.get(rule)
        if array is not None and below > CONTEXT and self.stacks.frame(below)[0] == array:
            return ITEM, array, state
        return OUTSIDE, -1, 0

    def need(self, array_rule: int, state: int) -> int:
        """The fewest items the array must still read from `state` to end."""
        found = self._need.get(array_rule)
        if found is None:
            found = self._need[array_rule] = _fewest_calls(self.stacks, array_rule)
        return found.get(state, 0)

    def start(self, config: frozenset[int]) -> UConfig:
        """The configuration `config` with no checked array entered."""
        return frozenset((s, self._entered(s)) for s in config)

    def _entered(self, stack: int) -> Aux:
        return _EMPTY_AUX if self.context(stack)[0] != OUTSIDE else None

    def walk(self, config: UConfig, data: bytes) -> UConfig:
        """The configuration after `data` (empty: refused)."""
        for byte in data:
            if not config:
                break
            if len(config) == 1:
                (only,) = config
                config = frozenset(self.step(only, byte))
            else:
                config = frozenset(u for s in config for u in self.step(s, byte))
        return config

    def step(self, ustack: UStack, byte: int) -> tuple[UStack, ...]:
        """The live (stack, aux) pairs after reading `byte` (cached)."""
        key = (ustack, byte)
        found = self._steps.get(key)
        if found is None:
            found = self._steps[key] = tuple(self._step(ustack, byte))
            if len(self._steps) >= _MAX_STEPS:
                del self._steps[next(iter(self._steps))]
        return found

    def _step(self, ustack: UStack, byte: int) -> list[UStack]:
        stack, aux = ustack
        kind, array, state = self.context(stack)
        out = []
        for nxt in self.stacks.step(stack, byte):
            new_kind, new_array, new_state = self.context(nxt)
            new_aux = self._move(ustack, (kind, array, state), nxt, new_kind, byte)
            if new_aux is False:
                continue
            if new_kind != OUTSIDE and not self.live(nxt, new_kind, new_array, new_state, new_aux):
                continue
            out.append((nxt, new_aux))
        return out

    def _move(
        self, ustack: UStack, was: tuple[int, int, int], nxt: int, kind: int, byte: int
    ) -> Aux | bool:
        """The aux after a byte (False: a duplicate item, the stack dies)."""
        stack, aux = ustack
        old_kind, array, state = was
        if old_kind == OUTSIDE or aux is None:
            return False if kind == ITEM else self._entered(nxt)  # `[` comes first
        used, prefix = aux
        if old_kind == ITEM:
            below = self.stacks.frame(stack)[2]
            assert prefix is not None
            if kind == ITEM and self.stacks.frame(nxt)[2] == below:
                return (used, prefix + bytes((byte,)))  # the item goes on
            if kind == ITEM:
                return False  # an item ended and another began within one byte: never in JSON
            # the item ended: on this byte (the array frame is the one below it) or before
            text = prefix + bytes((byte,)) if kind == ARRAY and nxt == below else prefix
            value = text_key(text)
            if value is None or value in used:
                return False
            return (used | {value}, None) if kind == ARRAY else None
        if kind == ITEM:  # a new item begins
            return (used, bytes((byte,)))
        if kind == ARRAY and not self._reads_itself(stack, nxt, byte):
            value = text_key(bytes((byte,)))  # a one-byte item (`0`), begun and ended
            return False if value is None or value in used else (used | {value}, None)
        return aux if kind == ARRAY else None

    def _reads_itself(self, stack: int, nxt: int, byte: int) -> bool:
        """Whether the array frame `stack` read `byte` by its own edge, giving `nxt`."""
        rule, state, below = self.stacks.frame(stack)
        target = self.stacks.table(rule).flat[state << 8 | byte]
        return bool(target) and self.stacks.push(below, rule, target) == nxt

    def live(self, stack: int, kind: int, array: int, state: int, aux: Aux) -> bool:
        """Whether some continuation of a stack in a checked array reaches its end."""
        assert aux is not None
        used, prefix = aux
        if kind == ARRAY:  # no item needed: the item rule (maybe empty) is not asked
            count = len(used) + self.need(array, state)
            return count == 0 or self.language(array).at_least(count)
        language = self.language(array)
        ret = self.stacks.frame(self.stacks.frame(stack)[2])[1]
        if not language.at_least(len(used) + 1 + self.need(array, ret)):
            return False
        return language.fresh(state, prefix or b"", used)


def _fewest_calls(stacks: Stacks, rule_id: int) -> dict[int, int]:
    """Per state of a rule: the fewest calls on a way to acceptance (0-1 BFS backwards)."""
    table = stacks.table(rule_id)
    size = len(table.table)
    back: list[list[tuple[int, int]]] = [[] for _ in range(size)]
    for state in range(1, size):
        for target in set(table.table[state].tolist()) - {0}:
            back[target].append((state, 0))
        for _, ret in table.calls.get(state, ()):
            back[ret].append((state, 1))
    best = {s: 0 for s in range(1, size) if table.accepting[s]}
    todo = deque(best)
    while todo:
        at = todo.popleft()
        for prev, cost in back[at]:
            total = best[at] + cost
            if total < best.get(prev, 1 << 30):
                best[prev] = total
                if cost:
                    todo.append(prev)
                else:
                    todo.appendleft(prev)
    return best
