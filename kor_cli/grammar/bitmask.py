"""Packed token bitmasks: allocation, application to logits, conversions.

Layout (the same as XGrammar's): a bitmask is int32 `[batch, ceil(vocab/32)]`; token `i`
of a row is allowed iff bit `i % 32` of word `i // 32` is set (little-endian bit order, so
the words read as bytes are `np.packbits(mask, bitorder="little")`). A bitmask is a numpy
array or a torch CPU tensor owned by the caller; matchers write rows into it
(`surface.GrammarMatcher.fill_next_token_bitmask`) and `apply_token_bitmask_` applies it
to a `[batch, vocab]` logits tensor in one vectorised op. Importing this module does not
import torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ALL_ALLOWED = -1  # an int32 word with every bit set
_INT32 = np.dtype(np.int32)  # native int32's descriptor (numpy keeps one per builtin type)

_SHIFTS: dict[str, Any] = {}
_FEW_BITS = 16  # `set_bits` sets at most this many ids one by one (~0.1 us each)


def bitmask_words(vocab_size: int) -> int:
    """Words per row for `vocab_size` tokens: ceil(vocab_size / 32)."""
    return -(-int(vocab_size) // 32)


def allocate_token_bitmask(batch: int, vocab_size: int, *, torch: bool = False) -> Any:
    """An all-allowed int32 bitmask `[batch, ceil(vocab_size/32)]` (numpy, or a torch CPU
    tensor sharing nothing with numpy when `torch`)."""
    array = np.full((batch, bitmask_words(vocab_size)), ALL_ALLOWED, dtype=np.int32)
    if not torch:
        return array
    import torch as torch_module

    return torch_module.from_numpy(array)


def as_numpy_bitmask(bitmask: Any) -> np.ndarray:
    """The int32 numpy view of a caller's bitmask (a numpy array or a torch CPU tensor;
    writes through the view reach the tensor)."""
    if type(bitmask) is np.ndarray and bitmask.dtype is _INT32 and bitmask.ndim == 2:
        return bitmask  # the usual case, in a few identity tests (a step's fill calls this)
    array = bitmask if isinstance(bitmask, np.ndarray) else bitmask.numpy()
    if array.dtype != np.int32 or array.ndim != 2:
        shape = f"{array.dtype} {array.shape}"
        raise ValueError(f"a token bitmask is int32 [batch, words], got {shape}")
    return array


def write_row(bitmask: np.ndarray, row: int, words: np.ndarray | None) -> None:
    """Copy packed `words` (uint32 or int32) into `bitmask[row]`; words past their end are
    zero; None: nothing allowed."""
    if words is None:
        bitmask[row] = 0
        return
    if len(words) == bitmask.shape[1]:  # the usual case: one item assignment, no views
        bitmask[row] = words  # (uint32 words wrap to int32; np.copyto of a row view cost
        return  # ~0.8 us more a step: its argument parsing and the two views)
    out = bitmask[row]
    n = min(len(words), len(out))
    out[:n] = words[:n].view(np.int32)
    out[n:] = 0


def set_bits(words: np.ndarray, ids: np.ndarray | list[int]) -> None:
    """Set the bits of token `ids` (int64 or a list; repeats allowed) in packed uint32
    `words` (a few one by one, through a memoryview: Python ints, no numpy scalars; ufunc.at
    costs ~2.5 us however few, ~4 us on a cold frame build)."""
    if len(ids) <= _FEW_BITS:
        view = memoryview(words)
        for token in ids if type(ids) is list else ids.tolist():
            view[token >> 5] |= 1 << (token & 31)
        return
    ids = np.asarray(ids, dtype=np.int64)
    np.bitwise_or.at(words, ids >> 5, np.left_shift(1, ids & 31).astype("<u4"))


def bits_set(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Bool per token of `ids`: its bit is set in packed `words`."""
    return (words[ids >> 5] >> (ids & 31).astype("<u4")) & 1 == 1


def unpack_row(words: np.ndarray, vocab_size: int) -> np.ndarray:
    """Bool [vocab_size] from one row of packed words."""
    raw = np.ascontiguousarray(words).view(np.uint8)
    return np.unpackbits(raw, count=vocab_size, bitorder="little").view(bool)


def pack_bool_mask(mask: Any, words: int) -> np.ndarray:
    """A bool [V] tensor or array as `words` packed int32 words."""
    flat = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask, dtype=bool)
    packed = np.packbits(flat, bitorder="little")
    out = np.zeros(words * 4, dtype=np.uint8)
    out[: packed.size] = packed[: words * 4]
    return out.view(np.int32)


def apply_token_bitmask_(logits: Any, bitmask: Any) -> Any:
    """Set `logits[b, i]` to -inf where bit i of row b is 0, in place; returns `logits`.

    `logits` is a torch float tensor `[B, V]` (or `[V]` with a one-row bitmask), `bitmask`
    int32 `[B, W]` (numpy or torch, any device) with `W * 32 >= V`. On CPU the bits are
    unpacked by numpy (measured faster there than torch shifts); elsewhere the packed words
    are copied once (1/8 of a bool mask) and unpacked on the device with shifts. One
    masked_fill_ for the whole batch, never a per-row mask.
    """
    import torch

    flat = logits.dim() == 1
    target = logits.unsqueeze(0) if flat else logits
    width = target.shape[-1]
    if bitmask.shape[-1] * 32 < width:
        raise ValueError(f"a bitmask of {bitmask.shape[-1]} words cannot cover {width} logits")
    if target.device.type == "cpu":
        words = bitmask if isinstance(bitmask, np.ndarray) else bitmask.cpu().numpy()
        raw = np.ascontiguousarray(words).view(np.uint8)  # int32 or uint32 words
        bits = np.unpackbits(raw, axis=-1, count=width, bitorder="little")
        target.masked_fill_(~torch.from_numpy(bits.view(bool)), float("-inf"))
    else:
        target.masked_fill_(~unpack_on_device(bitmask, width, target.device), float("-inf"))
    return logits


def unpack_on_device(bitmask: Any, width: int, device: Any) -> Any:
    """Bool [B, width] from packed words, copied once to `device` and unpacked there."""
    import torch

    shifts = _SHIFTS.get(str(device))
    if shifts is None:
        shifts = _SHIFTS[str(device)] = torch.arange(32, dtype=torch.int32, device=device)
    if isinstance(bitmask, np.ndarray):  # int32 or uint32 words
        bitmask = torch.from_numpy(np.ascontiguousarray(bitmask).view(np.int32))
    packed = bitmask.to(device, non_blocking=True)
    bits = (packed[:, :, None] >> shifts) & 1
    return bits.view(packed.shape[0], -1)[:, :width].bool()
