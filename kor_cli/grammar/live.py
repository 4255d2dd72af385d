"""Which states of a DFA can still reach an accepting state."""

from __future__ import annotations

import numpy as np


def live_states(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """States from which an accepting state is reachable (never the dead state 0)."""
    rows = np.sort(table, axis=1)  # each state's distinct successors, via sorted rows
    distinct = np.ones(rows.shape, dtype=bool)
    distinct[:, 1:] = rows[:, 1:] != rows[:, :-1]
    distinct &= rows != 0
    sources, targets = np.nonzero(distinct)[0], rows[distinct]
    order = np.argsort(targets, kind="stable")
    sources = sources[order]
    bounds = np.searchsorted(targets[order], np.arange(len(table) + 1))
    live = accepting.copy()
    live[0] = False
    todo = np.flatnonzero(live).tolist()
    while todo:
        state = todo.pop()
        for prev in sources[bounds[state] : bounds[state + 1]].tolist():
            if not live[prev]:
                live[prev] = True
                todo.append(prev)
    return live
