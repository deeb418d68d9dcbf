"""Handing freed host memory back to the OS on CPU training, where glibc would otherwise keep it.

A CPU training step allocates and frees gigabytes of activations and logits. glibc serves allocations under its
dynamic mmap threshold from heaps it rarely shrinks, and that threshold rises to the size of the largest freed
block, so after a few steps of varying sequence lengths those heaps hold the peak of every step before: the gym
recipe's trainer grew from 3 GB to 21 GB in 7 steps and the OOM killer ended it. Large blocks from `mmap` go back
to the OS when freed; `malloc_trim` returns what the heaps still hold.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter numbers (malloc.h)
LARGE_ALLOCATION_BYTES = 1 << 20


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None  # not glibc (macOS, musl): nothing to tune
    return libc


def map_large_allocations(threshold: int = LARGE_ALLOCATION_BYTES) -> bool:
    """Serve allocations of `threshold` bytes or more with `mmap`, so freeing them returns them to the OS.

    Returns whether the setting took (False off glibc)."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, threshold))


def release_freed_memory() -> bool:
    """Collect garbage and return the heaps' free pages to the OS (`malloc_trim`); whether any were returned."""
    gc.collect()
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
