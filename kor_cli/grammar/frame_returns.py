"""Frame masks at a call state: the callees' escaping tokens decided from the return states.

At a state that calls rules, a token that ends a callee's start frame after k bytes (an
escape row of that frame) goes on at the call's return state in this rule. Where the rest
of the token is read there by bytes alone, how the token reads from this frame follows
without the stack simulation (`Stacks.classify`): `]` after a nested value, `},` after an
object member, and so on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kor_cli.grammar.stacks import RuleTable

if TYPE_CHECKING:
    from kor_cli.grammar.frame_masks import FrameMasks


def decide_returns(
    frames: FrameMasks,
    table: RuleTable,
    state: int,
    ids: np.ndarray,
    through: np.ndarray,
    settled: np.ndarray,
    where: np.ndarray,
    stays: np.ndarray,
) -> np.ndarray:
    """Decide the candidates `ids[through]` (escapes of the callees' start frames at a
    call `state`) from the return states, without the stack simulation. Such a token
    is read by bytes from `state` (`settled`/`where`: `escape_offsets`), or by a callee
    that ends after k bytes (its escape row (token, k)), the rest read from the return
    state by this rule's bytes: it stays if some way reads it to its end, else it
    escapes wherever some way stood at an accepting state before a byte. A way that
    meets a call state with bytes left (the return state's own calls too) is left to
    the simulation, as is a token whose byte path from `state` is not settled.
    Updates `settled` and `where` in place and sets the tokens that stay in `stays`;
    returns which of `ids` the simulation must read."""
    token_bytes = frames.info.token_bytes
    flat, accepting, calls = table.flat, table.accepting, table.calls
    open_ = {t: i for i, t in enumerate(ids.tolist()) if through[i] and settled[i]}
    settled[through] = False  # decided below, or left to the simulation
    slow = ~settled
    if not open_:
        return slow
    bits: dict[int, int] = {}
    undecided: set[int] = set()
    staying: set[int] = set()
    for callee, ret in calls[state]:
        inner = frames.get(callee, frames.stacks.table(callee).start)
        for token, k in zip(inner.tokens.tolist(), inner.offsets.tolist(), strict=True):
            if token not in open_ or token in undecided or token in staying:
                continue
            data = token_bytes[token] or b""
            q, found, n = ret, 0, len(data)
            while k < n:
                if q in calls:  # a call with bytes left: the simulation decides
                    undecided.add(token)
                    break
                if accepting[q]:
                    found |= 1 << k
                q = flat[q << 8 | data[k]]
                k += 1
                if not q:
                    break
            else:
                staying.add(token)
                continue
            bits[token] = bits.get(token, 0) | found
    for token, i in open_.items():
        if token in undecided:
            continue
        slow[i] = False
        if token in staying:
            stays[token >> 5] |= np.uint32(1 << (token & 31))
            continue
        settled[i] = True
        where[i] |= bits.get(token, 0)
    return slow
