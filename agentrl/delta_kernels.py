"""The sparse weight-delta codec's loops, compiled (numba): each a single pass over a tensor's bits.

A delta's sparse entries (`agentrl.weight_delta`) are a byte per changed element, its code: the gap from the one
before in the high six bits (0: the gap is the next of the long gaps) and in the low two bits its difference, -1,
+1 or "the next of the values" (half width; what does not fit: escapes). At the recipes' learning rates most
changed bf16 elements moved by one rounding step, so most need their code byte alone, which zstandard compresses in
a fifth of the time the differences took as bytes of their own. Made and applied with torch, this would be eight
passes over the whole tensor (difference, nonzero, gather, gaps, narrowing, ...) with an int64 position per changed
element; these loops make, check and apply it in one pass each. Compiled on first use and cached on disk
(`NUMBA_CACHE_DIR`, by default under `~/.cache/agentrl/numba`); they release the GIL, so several tensors are coded
at once in threads.

Integers are the values' raw bits (`int16` for 16-bit floats, `int32` for 32-bit), the differences modular in their
width: `width` is that width in bits, and every sum wraps to it, so applying a difference is exact whatever it
wrapped to.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "agentrl" / "numba"))

import numba  # after its cache folder is set
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

MINUS, PLUS, VALUE = 0, 1, 2
"""A code's low two bits: the difference is -1, +1, or the next of the values (3 is malformed)."""
SHORTEST_LONG_GAP = 64
"""Gaps from here on do not fit a code's six bits: its gap bits are 0 and the gap is the next long gap."""


@numba.njit(cache=True, nogil=True, inline="always")
def _wrap(value: int, width: int) -> int:
    """`value` as a signed integer of `width` bits (two's complement, modular)."""
    half = 1 << (width - 1)
    return ((value + half) & ((half << 1) - 1)) - half


def encode_sparse(new, old, width, limit, codes, values, long_gaps, escape_at, escape_value):
    """Write the changed elements of `new` against `old` (raw bits, flat): a code byte each into `codes`, the
    differences that are not ±1 at half width into `values` (escapes: position in `values`, full-width remainder,
    into `escape_at` / `escape_value`), the long gaps into `long_gaps`. Returns the counts written of each,
    `(codes, values, long gaps, escapes)`, or `(-1, 0, 0, 0)` when more than `limit` elements changed (the caller
    sends the tensor dense). Each buffer holds `limit` entries (`long_gaps`: one more than the fewer of `limit`
    and `len(new) // 64`)."""
    masks = np.empty((new.shape[0] + 63) // 64, np.uint64)
    _changed_masks(new, old, masks)
    return _encode_changed(new, old, masks, width, limit, codes, values, long_gaps, escape_at, escape_value)


@numba.njit(cache=True, nogil=True)
def _changed_masks(new, old, masks) -> None:
    """Per block of 64 elements, a bit per element that differs. (A loop of its own: the compiler vectorizes it
    only here, and then it runs at the speed of memory; inside the loop over the changed elements it does not.)"""
    whole = new.shape[0] // 64
    for block in range(whole):
        start = block * 64
        mask = np.uint64(0)
        for j in range(64):
            mask |= np.uint64(new[start + j] != old[start + j]) << np.uint64(j)
        masks[block] = mask
    if whole < masks.shape[0]:
        mask = np.uint64(0)
        for i in range(whole * 64, new.shape[0]):
            mask |= np.uint64(new[i] != old[i]) << np.uint64(i - whole * 64)
        masks[whole] = mask


@numba.njit(cache=True, nogil=True)
def _encode_changed(new, old, masks, width, limit, codes, values, long_gaps, escape_at, escape_value):
    changed, valued, long, escapes, last = 0, 0, 0, 0, -1
    narrow = width // 2
    for block in range(masks.shape[0]):
        mask = masks[block]
        while mask:
            i = block * 64 + np.int64(trailing_zeros(mask))
            mask &= mask - np.uint64(1)
            if changed == limit:
                return -1, 0, 0, 0
            gap = i - last
            last = i
            if gap >= SHORTEST_LONG_GAP:
                long_gaps[long] = gap
                long += 1
                gap = 0
            diff = _wrap(np.int64(new[i]) - np.int64(old[i]), width)
            if diff == 1 or diff == -1:
                code = (diff + 1) >> 1  # MINUS or PLUS, with no branch on the sign (it is a coin toss)
            else:
                code = VALUE
                value = _wrap(diff, narrow)
                values[valued] = value
                if value != diff:
                    escape_at[escapes] = valued
                    escape_value[escapes] = _wrap(diff - value, width)
                    escapes += 1
                valued += 1
            codes[changed] = (gap << 2) | code
            changed += 1
    return changed, valued, long, escapes


@numba.njit(cache=True, nogil=True)
def sparse_extent(codes, values, long_gaps, escape_at) -> int:
    """The last position the codes name, checked: -1 for none; -2 when malformed (a code 3, a long gap under 64,
    long gaps or values left over or missing, escapes not increasing inside the values)."""
    position, long, valued = -1, 0, 0
    for k in range(codes.shape[0]):
        code = codes[k]
        gap = np.int64(code >> 2)
        if gap == 0:
            if long == long_gaps.shape[0] or long_gaps[long] < SHORTEST_LONG_GAP:
                return -2
            gap = long_gaps[long]
            long += 1
        position += gap
        kind = code & 3
        if kind == VALUE:
            valued += 1
        elif kind != PLUS and kind != MINUS:
            return -2
    if long != long_gaps.shape[0] or valued != values.shape[0]:
        return -2
    previous = -1
    for e in range(escape_at.shape[0]):
        if escape_at[e] <= previous or escape_at[e] >= values.shape[0]:
            return -2
        previous = escape_at[e]
    return position


@numba.njit(cache=True, nogil=True)
def apply_sparse(bits, width, codes, values, long_gaps, escape_at, escape_value) -> None:
    """Add each difference to the bits at its position (`sparse_extent` checked them: call it first)."""
    position, long, valued, escape = -1, 0, 0, 0
    for k in range(codes.shape[0]):
        code = codes[k]
        gap = np.int64(code >> 2)
        if gap == 0:
            gap = long_gaps[long]
            long += 1
        position += gap
        kind = np.int64(code & 3)
        if kind != VALUE:
            diff = 2 * kind - 1  # MINUS or PLUS, with no branch on the sign (it is a coin toss)
        else:
            diff = np.int64(values[valued])
            if escape < escape_at.shape[0] and escape_at[escape] == valued:
                diff += escape_value[escape]
                escape += 1
            valued += 1
        bits[position] = _wrap(np.int64(bits[position]) + diff, width)
