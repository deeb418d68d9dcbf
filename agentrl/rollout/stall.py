"""Replicas that stopped answering without failing (a paused process, a cut network, a wedged engine).

A replica with requests open and none completed for longer than the run's own requests take (an
`AdaptiveDeadline` fed by every request's duration) is cut off: it is marked dead, its open requests end at once
with a timeout (the client retries them on another replica), and the router's health loop takes it back, caught
up to the current weights, once it answers again. A slow replica that still completes requests is never cut: the
clock runs from its last completion.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from agentrl.deadline import AdaptiveDeadline

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _OpenRequest:
    started: float
    scope: asyncio.Timeout


class StallGuard:
    """Watches each replica's open requests; `check` cuts off the replicas that stalled (see the module doc).

    Args:
        deadline: seconds a replica may go with requests open and none completed.
        on_stall: called with a stalled replica's URL before its requests are ended (the client marks it dead).
    """

    def __init__(self, deadline: AdaptiveDeadline, on_stall: Callable[[str], None]) -> None:
        self.deadline = deadline
        self.on_stall = on_stall
        self.stalls = 0
        """Replicas cut off since the start."""
        self._open: dict[str, set[_OpenRequest]] = defaultdict(set)
        self._last_done: dict[str, float] = {}
        self._cut: set[str] = set()

    @asynccontextmanager
    async def request(self, url: str) -> AsyncIterator[None]:
        """Around one request to `url`: raises `TimeoutError` out of it if the replica is cut off meanwhile."""
        started = time.monotonic()
        async with asyncio.timeout(None) as scope:
            entry = _OpenRequest(started, scope)
            self._open[url].add(entry)
            try:
                yield
            finally:
                self._open[url].discard(entry)
        done = time.monotonic()
        self.deadline.observe(done - started)
        self._last_done[url] = done
        self._cut.discard(url)

    @property
    def last_completion(self) -> float | None:
        """`time.monotonic()` of the latest request completed by any replica (None: none yet)."""
        return max(self._last_done.values(), default=None)

    def was_cut(self, url: str) -> bool:
        """Whether `url` was cut off as stalled (and has not completed a request since)."""
        return url in self._cut

    def check(self, now: float | None = None) -> list[str]:
        """Cut off every replica stalled at `now`; returns them."""
        now = time.monotonic() if now is None else now
        limit = self.deadline.seconds()
        stalled = []
        for url, open_requests in self._open.items():
            if not open_requests:
                continue
            since = max(self._last_done.get(url, 0.0), min(r.started for r in open_requests))
            if now - since > limit:
                stalled.append(url)
                self._cut_off(url, now - since)
        return stalled

    def _cut_off(self, url: str, quiet_s: float) -> None:
        logger.warning(
            "rollout replica %s: %d requests open and none completed for %.0f s (deadline %.0f s); routing around it",
            url,
            len(self._open[url]),
            quiet_s,
            self.deadline.seconds(),
        )
        self.stalls += 1
        self._cut.add(url)
        self.on_stall(url)
        when = asyncio.get_running_loop().time()
        for request in list(self._open[url]):
            request.scope.reschedule(when)

    async def watch(self, interval: float = 1.0) -> None:
        """Run `check` every `interval` seconds (a background task)."""
        while True:
            await asyncio.sleep(interval)
            self.check()
