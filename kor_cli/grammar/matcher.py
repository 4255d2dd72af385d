"""GrammarMatcher: one request's position in a DFA grammar, advanced token by token.

This is the DFA engine behind `kor_cli.grammar.surface.GrammarMatcher` (whose docstring is
the contract every engine's matcher meets); code outside `kor_cli.grammar` uses the surface.
The matcher keeps a history of states (one entry per accepted token or byte string) so the
decode loop can roll back speculative or backed-off tokens. After a stop token, accepted in
an accepting state, the matcher is finished and allows nothing more.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import numpy as np

from kor_cli.grammar.index import FORCED_LIMIT, TokenIndex

State = TypeVar("State")


class HistoryMatcher(Generic[State]):
    """A request's history of engine states (one per accepted token or byte string), with
    rollback, reset and the stop flag; an engine says how a state advances. A falsy state
    is dead: the step is refused and nothing changes."""

    def __init__(self, start: State, stop_ids: frozenset[int]) -> None:
        self._history: list[State] = [start]
        self._finished = False
        self._stop_ids = stop_ids  # accepting one finishes the matcher (a set read a step)

    def _next_token(self, state: State, token_id: int) -> State:
        raise NotImplementedError

    def _walk(self, state: State, data: bytes) -> State:
        raise NotImplementedError

    @property
    def is_finished(self) -> bool:
        """True after a stop token was accepted."""
        return self._finished

    @property
    def steps(self) -> int:
        """How many accepted tokens/byte strings the history holds (what rollback undoes)."""
        return len(self._history) - 1

    def accept_token(self, token_id: int) -> bool:
        """Advance over `token_id`; False (and no change) if the grammar forbids it."""
        if self._finished:
            return False
        nxt = self._next_token(self._history[-1], token_id)
        if not nxt:
            return False
        self._history.append(nxt)
        if token_id in self._stop_ids:
            self._finished = True
        return True

    def accept_bytes(self, data: bytes) -> bool:
        """Advance over raw bytes (jump-forward text); False (and no change) if forbidden."""
        if self._finished:
            return False
        nxt = self._walk(self._history[-1], data)
        if not nxt:
            return False
        self._history.append(nxt)
        return True

    def rollback(self, n_tokens: int = 1) -> None:
        """Undo the last `n_tokens` accepted tokens or byte strings (a stop included)."""
        if not 0 <= n_tokens <= self.steps:
            raise ValueError(f"cannot roll back {n_tokens} steps; the history holds {self.steps}")
        if n_tokens:
            del self._history[-n_tokens:]
            self._finished = False  # a stop token is always the last step

    def reset(self) -> None:
        """Back to the start with an empty history."""
        del self._history[1:]
        self._finished = False


class GrammarMatcher(HistoryMatcher[int]):
    """Per-request state over a shared `TokenIndex`."""

    def __init__(self, index: TokenIndex) -> None:
        if not index.start:
            raise ValueError("the grammar's start state is dead: it accepts nothing")
        super().__init__(index.start, index._stop_set)
        self.index = index

    def _next_token(self, state: int, token_id: int) -> int:
        return self.index.next_state(state, token_id)

    def _walk(self, state: int, data: bytes) -> int:
        return self.index.walk_bytes(state, data)

    @property
    def state(self) -> int:
        """The current DFA state."""
        return self._history[-1]

    @property
    def is_accepting(self) -> bool:
        """True when the output so far is a complete match (a stop token is allowed)."""
        return self.index.is_accepting(self.state)

    def is_terminated(self) -> bool:
        """After a stop token, or in an accepting state from which nothing leads on."""
        if self._finished:
            return True
        state = self.state
        return self.index.is_accepting(state) and not self.index.can_continue(state)

    def state_key(self) -> int:
        """The DFA state whose mask applies now (0 once finished: nothing allowed)."""
        return self._mask_state()

    def fill_next_token_bitmask(self, bitmask: np.ndarray, row: int = 0) -> None:
        """Write the allowed tokens of now into row `row` of an int32 [B, W] numpy bitmask."""
        self.index.fill_row(0 if self._finished else self._history[-1], bitmask, row)

    def row_words(self) -> np.ndarray:
        """The allowed tokens of now as one bitmask row's int32 words (cached and shared: do
        not modify). The surface's per-step fill."""
        state = 0 if self._finished else self._history[-1]
        found = self.index._rows.get(state)  # the index's `row` inlined: one dict read
        return self.index.row(state) if found is None else found

    def _mask_state(self) -> int:
        return 0 if self._finished else self.state  # the dead state allows nothing

    def allowed_mask(self) -> np.ndarray:
        """Bool [vocab_size]: the tokens allowed next (read-only, shared)."""
        return self.index.allowed(self._mask_state())

    def packed_mask(self) -> np.ndarray:
        """The allowed tokens as packed uint32 words (token i: bit i % 32 of word i // 32)."""
        return self.index.packed(self._mask_state())

    def mask_tensor(self, device: Any = "cpu") -> Any:
        """The allowed tokens as a torch bool tensor on `device` (shared: do not modify)."""
        return self.index.tensor(self._mask_state(), device)

    def forced_bytes(self, limit: int = FORCED_LIMIT) -> bytes:
        """The longest byte string that is the only way forward (b"" at a branch/accept)."""
        return b"" if self._finished else self.index.forced_bytes(self.state, limit)
