"""WeightSync: push the trainer's new weights to every rollout server, versioned.

The state dict is written once as a safetensors file in shared memory (`/dev/shm` when available) and each
server loads it from there through its handle's `update_weights` (`agentrl.rollout.handles`): the `hf` server's
`POST /v1/weights`, vLLM's `reload_weights` RPC, SGLang's `update_weights_from_disk`. Dead replicas are skipped
and caught up when they answer again (failover).
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import torch

from agentrl.errors import InfrastructureError
from agentrl.rollout.handles import InFlight, RolloutServer
from agentrl.rollout.router import normalize_url
from agentrl.rollout.servers.process import shm_dir
from agentrl.weights_io import save_state_dict, state_dict_bytes

logger = logging.getLogger(__name__)


class WeightSyncError(InfrastructureError):
    """A rollout server refused or failed a weight update."""


def write_safetensors(state: Mapping[str, torch.Tensor], folder: Path) -> Path:
    """Save a state dict as `folder/model.safetensors` (tied aliases left out: `agentrl.weights_io`)."""
    return save_state_dict(state, folder / "model.safetensors")


class StagedWeights:
    """One push's weights, staged once for each route the servers need: a safetensors file in shared memory
    (servers that read files or take uploads) and a safetensors blob in Ray's object store (server actors).
    Kept until the next push, for replicas that come back."""

    def __init__(
        self, state: Mapping[str, torch.Tensor], *, file: bool, object_store: bool, folder: str | None = None
    ) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="agentrl-weights-", dir=folder or shm_dir()) if file else None
        self.path = write_safetensors(state, Path(self._dir.name)) if self._dir is not None else None
        self.ref = None
        if object_store:
            import ray

            self.ref = ray.put(state_dict_bytes(state))

    def for_server(self, server: RolloutServer) -> Any:
        """What `server.update_weights` takes: the object ref for server actors, else the file's path."""
        if _weights_via(server) == "object_store":
            return self.ref if self.ref is not None else str(self.path)
        return str(self.path)

    def cleanup(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
        self.ref = None


class WeightSync:
    """Pushes weights to rollout servers and records the version each one serves.

    A server that cannot be reached during a push (it died) is marked dead in the router and skipped; the push
    fails only when no server took the weights. The last pushed weights are kept until the next push, so that a
    replica that comes back (restarted, or answering again) is brought to the current version by `catch_up`
    before the router gives it traffic (`router.on_revive`).

    Args:
        servers: rollout server handles (`agentrl.rollout.handles.RolloutServer`).
        router: optional `Router` whose per-replica policy versions are updated after each push.
        in_flight: `finish` lets running requests complete on the old weights; `abort` stops them; `resume`
            stops them too, and the rollout client continues them from their prefix (partial rollouts).
        scratch_dir: where the weights file is written (default: `/dev/shm`, else the temp folder); a folder
            shared with servers on other hosts (`rollout.shared_weights_dir`).
        broadcast: `(state, version, servers) -> None` sending each push to `servers` at once (NCCL, see
            `agentrl.trainer.nccl_sync`) instead of a file per server. Each push goes to the live servers only (a
            dead replica is left out of the group); one that answers again rejoins at the next push, and takes
            traffic once that push gave it the current weights.
    """

    def __init__(
        self,
        servers: list[RolloutServer],
        router: Any = None,
        in_flight: str = "finish",
        timeout: float = 600.0,
        scratch_dir: str | None = None,
        broadcast: Any = None,
    ):
        self.scratch_dir = scratch_dir or shm_dir()
        self.broadcast = broadcast
        self.servers = servers
        self.router = router
        self.in_flight: InFlight = "abort" if in_flight == "resume" else in_flight  # the client resumes them
        self.timeout = timeout
        self.version = 0
        self._staged: StagedWeights | None = None
        self._rejoining: set[str] = set()
        """Replicas back from the dead that the next broadcast takes back into its group."""
        self._lock = threading.Lock()
        if router is not None:
            router.on_revive = self.revive

    def push(self, state: Mapping[str, torch.Tensor], version: int | None = None) -> float:
        """Send `state` to every live server as `version` (default: the next one); returns the seconds it took."""
        started = time.perf_counter()
        with self._lock:
            self.version = self.version + 1 if version is None else version
            if self.broadcast is not None:
                self._broadcast(state)
                return time.perf_counter() - started
            routes = {_weights_via(server) for server in self.servers}
            staged = StagedWeights(
                state, file="file" in routes, object_store="object_store" in routes, folder=self.scratch_dir
            )
            self._replace_staged(staged)
            reached = [server for server in self.servers if self._push_live(server, staged)]
            if not reached:
                raise WeightSyncError(
                    f"no rollout server took the weights of version {self.version}: all of "
                    f"{[s.url for s in self.servers]} are unreachable. Are the servers up?"
                )
        return time.perf_counter() - started

    def catch_up(self, url: str) -> bool:
        """Bring the server at `url` to the current version (with the last pushed weights) unless it serves it.

        Returns:
            Whether the server now serves the current version.
        """
        server = next((s for s in self.servers if _same_url(s.url, url)), None)
        if server is None:
            return False
        with self._lock:
            if self.broadcast is not None:  # it rejoins the group at the next push, and is current after it
                if _served_version(server) == self.version:
                    return True
                self._rejoining.add(normalize_url(server.url))
                return False
            if self._staged is None or _served_version(server) == self.version:
                self._record(server)
                return True
            logger.info("bringing the %s server at %s to policy version %d", server.backend, url, self.version)
            self._push_one(server, self._staged)
            return True

    async def revive(self, url: str) -> bool:
        """`Router.on_revive`: `catch_up` in a worker thread."""
        return await asyncio.to_thread(self.catch_up, url)

    def close(self) -> None:
        """Delete the kept weights (and leave the NCCL group)."""
        with self._lock:
            self._replace_staged(None)
            if self.broadcast is not None and hasattr(self.broadcast, "close"):
                self.broadcast.close()

    def _broadcast(self, state: Mapping[str, torch.Tensor]) -> None:
        dead = set(self.router.dead) if self.router is not None else set()
        members = [s for s in self.servers if normalize_url(s.url) not in dead - self._rejoining]
        if not members:
            raise WeightSyncError(f"no live rollout server to take the weights of version {self.version}")
        try:
            self.broadcast(state, self.version, members)
        except Exception as exc:
            raise WeightSyncError(f"NCCL weight broadcast of version {self.version} failed: {exc}") from exc
        self._rejoining.clear()
        for server in members:
            self._record(server)

    def _replace_staged(self, staged: StagedWeights | None) -> None:
        old, self._staged = self._staged, staged
        if old is not None:
            old.cleanup()

    def _push_live(self, server: RolloutServer, staged: StagedWeights) -> bool:
        """Push to one server unless the router knows it is dead; a server that cannot be reached is marked so."""
        if self.router is not None and normalize_url(server.url) in self.router.dead:
            return False
        try:
            self._push_one(server, staged)
        except WeightSyncError as exc:
            if self.router is None or not isinstance(exc.__cause__, _UNREACHABLE):
                raise
            logger.warning("%s; routing around it until it answers again", exc)
            self.router.mark_dead(server.url)
            return False
        return True

    def _push_one(self, server: RolloutServer, staged: StagedWeights) -> None:
        weights = staged.for_server(server)
        try:
            server.update_weights(weights, self.version, in_flight=self.in_flight, timeout=self.timeout)
        except Exception as exc:  # each backend fails its own way (HTTP, OS, Ray); all are this server's failure
            raise WeightSyncError(
                f"weight update of the {server.backend} server at {server.url} failed: {exc}"
            ) from exc
        self._record(server)

    def _record(self, server: RolloutServer) -> None:
        server.policy_version = self.version
        if self.router is not None:
            self.router.set_policy_version(server.url, self.version)


_UNREACHABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError, ConnectionError)
"""Errors of a server that is gone (as opposed to one that answered and refused)."""


def _weights_via(server: RolloutServer) -> str:
    return getattr(server, "weights_via", "file")


def _same_url(a: str, b: str) -> bool:
    return normalize_url(a) == normalize_url(b)


def _served_version(server: RolloutServer) -> int | None:
    """The version the server says it serves (the `hf` server's, vLLM's and SGLang's own labels), None when it
    cannot say or does not answer."""
    served = getattr(server, "served_version", None)
    try:
        return served() if served is not None else None
    except Exception:  # cannot say: the catch-up pushes anyway
        return None
