"""Replica router: least in-flight load balancing, sticky sessions, dead-replica tracking.

The router only picks base URLs and keeps counts; it does no HTTP itself. Health checks call a `probe`
coroutine (`url -> bool`) that the owner supplies; `LLMClient` plugs in its own `GET /health` probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable

from agentrl.rollout.errors import NoHealthyReplicaError

logger = logging.getLogger(__name__)

Probe = Callable[[str], Awaitable[bool]]
Revive = Callable[[str], Awaitable[bool]]


def normalize_url(url: str) -> str:
    """A replica base URL without trailing slash or `/v1` suffix (`http://h:8000/v1/` -> `http://h:8000`)."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    if "://" not in url:
        url = f"http://{url}"
    return url


class Router:
    """Spreads requests over rollout server replicas.

    A request goes to the live replica with the fewest in-flight requests (ties rotate). A request with a
    `session_id` goes to the replica that session used before while that replica is live, for prefix-cache
    hits; a session whose replica died moves to a new one and stays there. Dead replicas are skipped until the
    background health loop (`start()`) or `check_health()` sees them answer again; a replica that answers again
    is first handed to `on_revive` (which brings it to the current policy version) and takes traffic only once
    that succeeded.

    Args:
        urls: Base URLs of the replicas (`http://host:port`; a trailing `/v1` is dropped).
        health_interval: Seconds between health checks of dead replicas in the background loop.
        probe: Coroutine `url -> bool` telling whether a replica is healthy; needed by the health loop.
        max_sessions: Sticky session entries kept (least recently used ones are forgotten first).
        on_revive: Coroutine `url -> bool` run on a dead replica that answers again, before it takes traffic
            (the trainer's weight sync pushes the current weights there); False keeps it dead for now.
    """

    def __init__(
        self,
        urls: Iterable[str] = (),
        *,
        health_interval: float = 5.0,
        probe: Probe | None = None,
        max_sessions: int = 100_000,
        on_revive: Revive | None = None,
    ) -> None:
        self.health_interval = health_interval
        self.probe = probe
        self.on_revive = on_revive
        self.retries = 0
        """Requests sent again after a failed attempt (on this or another replica), since the start."""
        self.revivals = 0
        """Dead replicas taken back after answering again (restarted, or back from a blip), since the start."""
        self.stalls = 0
        """Replicas cut off for holding requests without completing any (`agentrl.rollout.stall`), since the start."""
        self._reported = (0, 0, 0)
        self.max_sessions = max_sessions
        self._replicas: list[str] = []
        self._dead: set[str] = set()
        self._in_flight: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        self._served: dict[str, int] = {}
        self._versions: dict[str, int] = {}
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._cursor = 0
        self._task: asyncio.Task[None] | None = None
        for url in urls:
            self.add_replica(url)

    # ---- membership -------------------------------------------------------------------------------------

    @property
    def replicas(self) -> list[str]:
        """All replica URLs, live or dead."""
        return list(self._replicas)

    @property
    def healthy(self) -> list[str]:
        """Replica URLs currently considered live."""
        return [u for u in self._replicas if u not in self._dead]

    @property
    def dead(self) -> list[str]:
        """Replica URLs currently considered dead."""
        return [u for u in self._replicas if u in self._dead]

    def add_replica(self, url: str) -> str:
        """Adds a replica (live until proven otherwise) and returns its normalized URL."""
        url = normalize_url(url)
        if url not in self._replicas:
            self._replicas.append(url)
            for counts in (self._in_flight, self._peak, self._served):
                counts.setdefault(url, 0)
        self._dead.discard(url)
        return url

    def remove_replica(self, url: str) -> None:
        """Removes a replica; its sessions move on their next request. In-flight requests may finish."""
        url = normalize_url(url)
        if url in self._replicas:
            self._replicas.remove(url)
        self._dead.discard(url)
        for counts in (self._in_flight, self._peak, self._served, self._versions):
            counts.pop(url, None)

    def mark_dead(self, url: str) -> None:
        """Marks a replica dead: no request goes to it until a health check sees it answer."""
        url = normalize_url(url)
        if url in self._replicas and url not in self._dead:
            logger.warning("rollout replica %s is unreachable; routing around it", url)
            self._dead.add(url)

    def mark_stalled(self, url: str) -> None:
        """Marks a replica dead because it holds requests without completing any (`agentrl.rollout.stall`)."""
        self.stalls += 1
        self.mark_dead(url)

    def mark_alive(self, url: str) -> None:
        """Takes a dead replica back."""
        url = normalize_url(url)
        if url in self._dead:
            logger.info("rollout replica %s is healthy again", url)
            self._dead.discard(url)

    # ---- picking ----------------------------------------------------------------------------------------

    def acquire(self, session_id: str | None = None, avoid: Collection[str] = ()) -> str:
        """Picks a replica for one request and counts the request in flight there.

        Args:
            session_id: Sticky key; requests with the same key go to the same live replica.
            avoid: Replicas to skip for this request if any other is live (e.g. one that just failed).
                Avoiding does not move the session.

        Returns:
            The replica base URL. Call `release(url)` when the request ends.

        Raises:
            NoHealthyReplicaError: No replica is live.
        """
        live = self.healthy
        if not live:
            raise NoHealthyReplicaError(f"no live rollout replica among {self._replicas}")
        candidates = [u for u in live if u not in avoid] or live
        url = self._sticky(session_id, candidates) or self._least_loaded(candidates)
        if session_id is not None and self._sessions.get(session_id) not in live:
            self._remember(session_id, url)
        self._in_flight[url] += 1
        self._served[url] += 1
        self._peak[url] = max(self._peak[url], self._in_flight[url])
        return url

    def release(self, url: str) -> None:
        """Ends one in-flight request on `url` (a no-op for a replica removed meanwhile)."""
        if self._in_flight.get(url, 0) > 0:
            self._in_flight[url] -= 1

    def session_replica(self, session_id: str) -> str | None:
        """The replica a session is pinned to, if any."""
        return self._sessions.get(session_id)

    def end_session(self, session_id: str) -> None:
        """Forgets a session's pinning (call when its trajectory ends)."""
        self._sessions.pop(session_id, None)

    def _sticky(self, session_id: str | None, candidates: list[str]) -> str | None:
        if session_id is None:
            return None
        url = self._sessions.get(session_id)
        if url is None or url not in candidates:
            return None
        self._sessions.move_to_end(session_id)
        return url

    def _least_loaded(self, candidates: list[str]) -> str:
        n = len(candidates)
        start = self._cursor % n
        self._cursor += 1
        order = candidates[start:] + candidates[:start]
        return min(order, key=lambda u: self._in_flight[u])

    def _remember(self, session_id: str, url: str) -> None:
        self._sessions[session_id] = url
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    # ---- metrics ----------------------------------------------------------------------------------------

    @property
    def in_flight(self) -> dict[str, int]:
        """Requests in flight per replica."""
        return dict(self._in_flight)

    @property
    def peak_in_flight(self) -> dict[str, int]:
        """Most requests ever in flight at once per replica (since `reset_stats()`)."""
        return dict(self._peak)

    @property
    def served(self) -> dict[str, int]:
        """Requests sent per replica, retries included (since `reset_stats()`)."""
        return dict(self._served)

    def note_retry(self) -> None:
        """Counts one request sent again after a failed attempt (called by the client)."""
        self.retries += 1

    def failover_metrics(self) -> dict[str, float]:
        """Retries, revivals and stalls since the previous call, and the replicas live now (`rollout/...` metrics)."""
        retries, revivals = self.retries - self._reported[0], self.revivals - self._reported[1]
        stalls = self.stalls - self._reported[2]
        self._reported = (self.retries, self.revivals, self.stalls)
        return {
            "rollout/server_retries": float(retries),
            "rollout/replica_restarts": float(revivals),
            "rollout/replica_stalls": float(stalls),
            "rollout/live_replicas": float(len(self.healthy)),
        }

    def reset_stats(self) -> None:
        """Zeroes the peak and served counters."""
        for url in self._replicas:
            self._peak[url] = self._in_flight[url]
            self._served[url] = 0

    # ---- policy versions --------------------------------------------------------------------------------

    def set_policy_version(self, url: str, version: int) -> None:
        """Records the policy version a replica serves (called by weight sync)."""
        self._versions[normalize_url(url)] = version

    def policy_version(self, url: str) -> int | None:
        """The policy version last recorded for a replica, or None."""
        return self._versions.get(normalize_url(url))

    # ---- health -----------------------------------------------------------------------------------------

    async def check_health(self) -> list[str]:
        """Probes every dead replica once and takes back those that answer (and that `on_revive` brought up to
        date, when set).

        Returns:
            The replicas taken back.
        """
        dead = self.dead
        if self.probe is None or not dead:
            return []
        results = await asyncio.gather(*(self._revive_one(u) for u in dead))
        revived = [u for u, ok in zip(dead, results, strict=True) if ok]
        for url in revived:
            if url in self._dead:
                self.revivals += 1
            self.mark_alive(url)
        return revived

    async def _revive_one(self, url: str) -> bool:
        if not await self._call(self.probe, url, "health probe"):
            return False
        return self.on_revive is None or await self._call(self.on_revive, url, "catch-up")

    @staticmethod
    async def _call(check: Probe | None, url: str, what: str) -> bool:
        assert check is not None
        try:
            return bool(await check(url))
        except Exception as exc:  # a check that raises means "not ready"
            logger.warning("rollout replica %s: %s failed: %s: %s", url, what, type(exc).__name__, exc)
            return False

    def start(self) -> None:
        """Starts the background health loop (needs a running event loop and a `probe`); idempotent."""
        if self.probe is None or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._health_loop(), name="agentrl-router-health")

    async def stop(self) -> None:
        """Stops the background health loop."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval)
            try:
                await self.check_health()
            except Exception:
                logger.exception("router health check failed")
