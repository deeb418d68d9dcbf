"""Small asyncio helpers for rewards: per-event-loop semaphores and running a coroutine from sync code."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopSemaphore:
    """An `asyncio.Semaphore` of `limit` per event loop.

    asyncio primitives belong to one loop; a component that may be used from several (a sync `score()` runs
    its own loop) keeps one of these instead of a bare semaphore.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a concurrency limit must be >= 1, got {limit}")
        self.limit = limit
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self) -> asyncio.Semaphore:
        """The semaphore of the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._by_loop.get(loop)
            if sem is None:
                sem = self._by_loop[loop] = asyncio.Semaphore(self.limit)
            return sem


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from sync code.

    Outside an event loop this is `asyncio.run`. Inside one (sync code called from a coroutine) the coroutine
    runs on a fresh loop in a helper thread while the caller waits; prefer awaiting the async API there.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="agentrl-reward", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
