"""Token index masks on the disk cache: the packed masks a run built and the live states.

One file per (DFA fingerprint, tokenizer fingerprint, cache format). `TokenIndex` reads it
when it is created with a cache directory and writes it when more masks were built (on
`save`, after a request, and at exit: `save_cached_indexes`).
"""

from __future__ import annotations

import atexit
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.grammar.disk_cache import blob_key, blob_path, read_arrays, write_arrays
from kor_cli.grammar.vocab import TokenizerInfo

_FORMAT = "kor-index-v2"


def index_path(cache_dir: Path | str, dfa: Any, info: TokenizerInfo) -> Path:
    """The cache file of `dfa`'s masks over `info`."""
    key = blob_key(_FORMAT, dfa.fingerprint(), info.fingerprint)
    return blob_path(cache_dir, "index", key, "bin")


def write_index(path: Path, live: np.ndarray, packed: dict[int, np.ndarray], words: int) -> None:
    """Write the live states and the packed masks by state to `path` (atomically; a failed
    write is skipped)."""
    states = np.asarray(sorted(packed), dtype=np.int32)
    masks = [packed[s] for s in states.tolist()]
    write_arrays(
        path,
        {
            "format": np.asarray(_FORMAT),
            "live": live,
            "states": states,
            "masks": np.stack(masks) if masks else np.zeros((0, words), "<u4"),
        },
    )


def read_index(
    path: Path, num_states: int, words: int
) -> tuple[np.ndarray, dict[int, np.ndarray]] | None:
    """The live states and the packed masks by state stored at `path`; None when the file
    is missing, unreadable or does not match the DFA's size or the mask width."""
    data = read_arrays(path)
    if data is None or not {"format", "live", "states", "masks"} <= data.keys():
        return None
    live, states, masks = data["live"], data["states"], data["masks"]
    if (
        str(data["format"]) != _FORMAT
        or live.shape != (num_states,)
        or live.dtype != bool
        or masks.ndim != 2
        or masks.shape != (len(states), words)
    ):
        return None
    packed = {}
    for state, row in zip(states.tolist(), masks.astype("<u4"), strict=True):
        if 0 <= state < num_states:
            packed[state] = row
    return live, packed


_UNSAVED: weakref.WeakSet[Any] = weakref.WeakSet()


def save_at_exit(index: Any) -> None:
    """Have `save_cached_indexes` save `index` (anything with `save_if_grown`)."""
    _UNSAVED.add(index)


def save_cached_indexes() -> None:
    """Save every disk-cached index that built masks since it was loaded or saved (run at
    exit, so the next process finds the masks this one built)."""
    for index in list(_UNSAVED):
        index.save_if_grown()


atexit.register(save_cached_indexes)
