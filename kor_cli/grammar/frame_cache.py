"""Frame masks on the disk cache: every (rule, state) mask a run built, for the next run.

One file per (grammar key, tokenizer fingerprint, engine): the frames' (rule, state) keys,
`ends`, their `stays` words (equal rows stored once) and their escapes flattened (per
escape: its frame, its suffix's bytes, its tokens). `FrameMasks` reads it when it is
created and writes it when more frames were built (after the first mask, and at exit).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kor_cli.grammar.disk_cache import (
    blob_key,
    blob_path,
    engine_stamp,
    read_arrays,
    write_arrays,
)

_FORMAT = "kor-frames-v1"


# a frame as stored: (rule, state), stays words, ends, its escapes as (suffix, tokens)
Stored = tuple[tuple[int, int], np.ndarray, bool, list[tuple[bytes, tuple[int, ...]]]]


def frames_path(root: Path | str, grammar_key: str, tokenizer: str) -> Path:
    """The cache file of one grammar's frame masks over one tokenizer."""
    return blob_path(root, "frames", blob_key(_FORMAT, engine_stamp(), grammar_key, tokenizer))


def write_frames(path: Path, frames: list[Stored], words: int) -> bool:
    """Write frames to `path` (atomically); False when that fails."""
    rows: dict[bytes, int] = {}
    keys, which, unique, ends = [], [], [], []
    owners, suffixes, tokens, suffix_ends, token_ends = [], [], [], [], []
    for at, (key, stays, end, escapes) in enumerate(frames):
        row = rows.setdefault(stays.tobytes(), len(unique))
        if row == len(unique):
            unique.append(stays)
        keys.append(key)
        which.append(row)
        ends.append(end)
        for suffix, group in escapes:
            owners.append(at)
            suffixes.append(suffix)
            tokens.extend(group)
            suffix_ends.append((suffix_ends[-1] if suffix_ends else 0) + len(suffix))
            token_ends.append(len(tokens))
    return write_arrays(
        path,
        {
            "format": np.asarray(_FORMAT),
            "keys": np.asarray(keys, dtype=np.int64).reshape(-1, 2),
            "which": np.asarray(which, dtype=np.int64),
            "stays": np.stack(unique).astype("<u4") if unique else np.zeros((0, words), "<u4"),
            "ends": np.asarray(ends, dtype=bool),
            "owners": np.asarray(owners, dtype=np.int64),
            "suffixes": np.frombuffer(b"".join(suffixes), dtype=np.uint8),
            "suffix_ends": np.asarray(suffix_ends, dtype=np.int64),
            "tokens": np.asarray(tokens, dtype=np.int64),
            "token_ends": np.asarray(token_ends, dtype=np.int64),
        },
    )


def read_frames(path: Path, words: int) -> list[Stored] | None:
    """The frames stored at `path`, or None (missing, unreadable, another layout)."""
    data = read_arrays(path)
    try:
        if data is None or str(data["format"]) != _FORMAT or data["stays"].shape[1:] != (words,):
            return None
        keys, which, stays = data["keys"].tolist(), data["which"].tolist(), data["stays"]
        ends = data["ends"].tolist()
        escapes: list[list[tuple[bytes, tuple[int, ...]]]] = [[] for _ in keys]
        raw, tokens = data["suffixes"].tobytes(), data["tokens"].tolist()
        suffix_at = token_at = 0
        for owner, suffix_end, token_end in zip(
            data["owners"].tolist(),
            data["suffix_ends"].tolist(),
            data["token_ends"].tolist(),
            strict=True,
        ):
            escapes[owner].append((raw[suffix_at:suffix_end], tuple(tokens[token_at:token_end])))
            suffix_at, token_at = suffix_end, token_end
        return [
            ((int(r), int(s)), stays[w], bool(e), esc)
            for (r, s), w, e, esc in zip(keys, which, ends, escapes, strict=True)
        ]
    except (KeyError, ValueError, TypeError, IndexError):
        return None
