"""Shared plumbing of the local transformers scorers: device and dtype choice, lazy thread-safe loading.

torch and transformers are imported only when a model is first used, so configs that do not use model-based
rewards never pay for them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def resolve_device(device: str = "auto") -> str:
    """`auto` is `cuda` when a GPU is visible, else `cpu`; anything else is returned as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str) -> Any:
    """`auto` is bfloat16 on GPU and float32 on CPU; else a torch dtype name (`float16`, `bfloat16`, ...)."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    value = getattr(torch, dtype, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown torch dtype {dtype!r}")
    return value


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class LazyModel:
    """Loads a model once, on first use, and runs all calls on it one at a time in a worker thread.

    Args:
        load: builds the model state (called once, in a worker thread).
    """

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load
        self._state: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        """The loaded state (loading it now if needed); thread-safe."""
        with self._lock:
            if self._state is None:
                self._state = self._load()
            return self._state

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(state, *args)` while holding the model (sync)."""
        state = self.get()
        with self._lock:
            return fn(state, *args)

    async def acall(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(state, *args)` in a worker thread, so the event loop keeps serving other trajectories."""
        return await asyncio.to_thread(self.call, fn, *args)
