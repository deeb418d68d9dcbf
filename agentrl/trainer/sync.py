"""WeightSync: push the trainer's new weights to every rollout server, versioned.

The state dict is written once as a safetensors file in shared memory (`/dev/shm` when available) and each
server loads it from there through its handle's `update_weights` (`agentrl.rollout.handles`): the `hf` server's
`POST /v1/weights`, vLLM's `reload_weights` RPC, SGLang's `update_weights_from_disk`. Dead replicas are skipped
and caught up when they answer again (failover).

A server that takes deltas (the `hf` server: its handle answers `weights_dtype`) gets the weights cast to its dtype,
and after its first push only what changed since the weights it holds (`agentrl.weight_delta`), through the same
routes; one that refuses a delta (restarted, missed a push, holds another trainer's weights) gets the full push.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import torch

from agentrl.deadline import AdaptiveDeadline
from agentrl.errors import InfrastructureError
from agentrl.rollout.handles import InFlight, RolloutServer
from agentrl.rollout.ray_servers import WeightsLostError
from agentrl.rollout.router import normalize_url
from agentrl.rollout.servers.process import shm_dir
from agentrl.weight_delta import WEIGHTS_ID_KEY, DeltaBaseMismatchError, cast_state, encode_delta
from agentrl.weights_io import save_state_dict, state_dict_bytes, unique_tensors

logger = logging.getLogger(__name__)


class WeightSyncError(InfrastructureError):
    """A rollout server refused or failed a weight update."""


def write_safetensors(state: Mapping[str, torch.Tensor], folder: Path, metadata: dict[str, str] | None = None) -> Path:
    """Save a state dict as `folder/model.safetensors` (tied aliases left out: `agentrl.weights_io`)."""
    return save_state_dict(state, folder / "model.safetensors", metadata=metadata)


class StagedWeights:
    """One push's weights, staged once for each route the servers need: a safetensors file in shared memory
    (servers that read files or take uploads) and a safetensors blob in Ray's object store (server actors).
    Kept until the next push, for replicas that come back. `state` is a state dict (written with `metadata`) or
    a payload's bytes (a delta)."""

    def __init__(
        self,
        state: Mapping[str, torch.Tensor] | bytes,
        *,
        file: bool,
        object_store: bool,
        folder: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="agentrl-weights-", dir=folder or shm_dir()) if file else None
        self.path = None
        if self._dir is not None:
            folder = Path(self._dir.name)
            if isinstance(state, bytes):
                self.path = folder / "model.safetensors"
                self.path.write_bytes(state)
            else:
                self.path = write_safetensors(state, folder, metadata)
        self.ref = None
        if object_store:
            import ray

            self.ref = ray.put(state if isinstance(state, bytes) else state_dict_bytes(state, metadata))
        self.nbytes = len(state) if isinstance(state, bytes) else sum(t.nbytes for t in unique_tensors(state).values())

    def for_server(self, server: RolloutServer) -> Any:
        """What `server.update_weights` takes: the object ref for server actors, else the file's path."""
        if _weights_via(server) == "object_store":
            return self.ref if self.ref is not None else str(self.path)
        return str(self.path)

    def cleanup(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()
        self.ref = None


@dataclass
class HeldWeights:
    """The weights the delta-taking servers of one dtype were last sent: the base of the next delta."""

    dtype: str
    weights_id: str
    version: int
    state: dict[str, torch.Tensor]


@dataclass
class PushStats:
    """What the last push moved: bytes staged per kind of payload (a file or blob each route reads once)."""

    full_bytes: int = 0
    delta_bytes: int = 0
    full_servers: int = 0
    delta_servers: int = 0


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
        delta: `auto`: a 16-bit server that takes deltas gets only what changed since the weights it holds where
            the weights travel (an upload, the object store, a shared folder that is not this machine's shared
            memory), else the full weights cast to its dtype; `always`: deltas to every server that takes them; `never`:
            the trainer's full weights to every server (`rollout.weight_delta`).
        timeout: the deadline of one server's push in seconds; None: derived from this run's own pushes
            (`AdaptiveDeadline`: 5× the slowest so far, at least 30 s; 600 s for the first). A server past it is
            dropped like one that cannot be reached (routed around, caught up when it answers again).
    """

    def __init__(
        self,
        servers: list[RolloutServer],
        router: Any = None,
        in_flight: str = "finish",
        timeout: float | None = None,
        scratch_dir: str | None = None,
        broadcast: Any = None,
        delta: str = "auto",
    ):
        if delta not in ("auto", "always", "never"):
            raise ValueError(f"delta must be auto, always or never (rollout.weight_delta), not {delta!r}")
        self.local_files = scratch_dir is None
        """Whether the weights files are written to this machine's shared memory (not a shared folder)."""
        self.scratch_dir = scratch_dir or shm_dir()
        self.broadcast = broadcast
        self.servers = servers
        self.router = router
        self.in_flight: InFlight = "abort" if in_flight == "resume" else in_flight  # the client resumes them
        self.deadline = AdaptiveDeadline(explicit=timeout)
        self.delta = delta
        self.version = 0
        self.last = PushStats()
        self._staged: dict[str, StagedWeights] = {}
        """This version's payloads by kind (`raw`, `full:<dtype>`, `delta:<dtype>`), kept for catch-ups."""
        self._state: Mapping[str, torch.Tensor] | None = None
        self._held: dict[str, HeldWeights] = {}
        """This version cast to each dtype of the servers that take deltas (made on first use)."""
        self._base_held: dict[str, HeldWeights] = {}
        """The last version's: the bases of this version's deltas."""
        self._server_ids: dict[str, str] = {}
        """The weights id each delta-taking server acknowledged last (by normalized URL)."""
        self._dtypes: dict[str, str | None] = {}
        self._rejoining: set[str] = set()
        """Replicas back from the dead that the next broadcast takes back into its group."""
        self._lock = threading.Lock()
        if router is not None:
            router.on_revive = self.revive

    def push(self, state: Mapping[str, torch.Tensor], version: int | None = None, *, full: bool = False) -> float:
        """Send `state` to every live server as `version` (default: the next one), `full` weights even where a
        delta would do; returns the seconds it took."""
        started = time.perf_counter()
        with self._lock:
            self.version = self.version + 1 if version is None else version
            if self.broadcast is not None:
                self._broadcast(state)
                return time.perf_counter() - started
            self._new_version(state)
            if full:
                self._server_ids.clear()
            reached = [server for server in self.servers if self._push_live(server)]
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
            if self._state is None or _served_version(server) == self.version:
                self._record(server)
                return True
            logger.info("bringing the %s server at %s to policy version %d", server.backend, url, self.version)
            self._server_ids.pop(normalize_url(server.url), None)  # whatever it holds now, it gets the full push
            self._push_one(server)
            return True

    async def revive(self, url: str) -> bool:
        """`Router.on_revive`: `catch_up` in a worker thread."""
        return await asyncio.to_thread(self.catch_up, url)

    def close(self) -> None:
        """Delete the kept weights (and leave the NCCL group)."""
        with self._lock:
            self._replace_staged()
            self._state = None
            self._held, self._base_held = {}, {}
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

    def _new_version(self, state: Mapping[str, torch.Tensor]) -> None:
        """Drop the last version's payloads and keep `state`; the last version's casts become the deltas' bases."""
        self._replace_staged()
        self._state = state
        self.last = PushStats()
        self._base_held, self._held = self._held, {}

    def _replace_staged(self) -> None:
        for staged in self._staged.values():
            staged.cleanup()
        self._staged = {}

    def _payload(self, server: RolloutServer, kind: str) -> Any:
        """What `server.update_weights` takes for this version's `kind` of payload (`raw`, `full`, `delta`: asked
        only where the last version's cast is the delta's base), staged on first use."""
        dtype = self._delta_dtype(server)
        key = "raw" if dtype is None else f"{kind}:{dtype}"
        if key not in self._staged:
            staged = self._stage("raw" if dtype is None else kind, dtype)
            if kind == "delta":
                self.last.delta_bytes += staged.nbytes
            else:
                self.last.full_bytes += staged.nbytes
            self._staged[key] = staged
        return self._staged[key].for_server(server)

    def _stage(self, kind: str, dtype: str | None) -> StagedWeights:
        assert self._state is not None
        routes = {_weights_via(server) for server in self.servers}
        where = {"file": "file" in routes, "object_store": "object_store" in routes, "folder": self.scratch_dir}
        if kind == "raw":
            return StagedWeights(self._state, **where)
        held = self._cast(dtype)  # type: ignore[arg-type]
        if kind == "full":
            return StagedWeights(held.state, **where, metadata={WEIGHTS_ID_KEY: held.weights_id})
        base = self._base_held[dtype]  # type: ignore[index]
        versions = {"base_id": base.weights_id, "base_version": base.version, "version": self.version}
        return StagedWeights(encode_delta(held.state, base.state, new_id=held.weights_id, **versions), **where)

    def _cast(self, dtype: str) -> HeldWeights:
        """This version cast to `dtype` (once), under a new weights id: what the servers of that dtype get."""
        if dtype not in self._held:
            assert self._state is not None
            cast = cast_state(self._state, getattr(torch, dtype))
            self._held[dtype] = HeldWeights(dtype, uuid.uuid4().hex, self.version, cast)
        return self._held[dtype]

    def _delta_dtype(self, server: RolloutServer) -> str | None:
        """The dtype a server takes deltas in (asked once); None when it takes none, deltas are off, or with `auto`
        it holds 32-bit weights (it gets the trainer's state as it is, as a server that takes no deltas does)."""
        key = normalize_url(server.url)
        if key not in self._dtypes:
            ask = getattr(server, "weights_dtype", None) if self.delta != "never" else None
            dtype = ask() if ask is not None else None
            wide = dtype is not None and getattr(torch, dtype).itemsize > 2
            self._dtypes[key] = None if wide and self.delta == "auto" else dtype
        return self._dtypes[key]

    def _push_live(self, server: RolloutServer) -> bool:
        """Push to one server unless the router knows it is dead; a server that cannot be reached is marked so."""
        if self.router is not None and normalize_url(server.url) in self.router.dead:
            return False
        try:
            self._push_one(server)
        except WeightSyncError as exc:
            if self.router is None or not isinstance(exc.__cause__, _UNREACHABLE):
                raise
            logger.warning("%s; routing around it until it answers again", exc)
            self.router.mark_dead(server.url)
            return False
        return True

    def _push_one(self, server: RolloutServer) -> None:
        """A delta where the server holds its base, else (or when it refuses the delta) the full weights."""
        dtype = self._delta_dtype(server)
        base = self._base_held.get(dtype) if dtype is not None else None
        key = normalize_url(server.url)
        if base is not None and self._server_ids.get(key) == base.weights_id and self._delta_pays(server):
            try:
                self._send(server, "delta")
                self.last.delta_servers += 1
                return
            except WeightSyncError as exc:
                if not isinstance(exc.__cause__, DeltaBaseMismatchError):
                    raise
                logger.info("%s; pushing the full weights", exc.__cause__)
        self._send(server, "full")
        self.last.full_servers += 1

    def _delta_pays(self, server: RolloutServer) -> bool:
        """Whether a delta beats the full cast for `server` (`delta="auto"`, a 16-bit server: `_delta_dtype`): where
        its weights travel (not a file in this machine's memory). (In fp32 every element moves each step under Adam:
        a delta is ~60 % of the full weights, slower to make than to send whole.)"""
        if self.delta == "always":
            return True
        reads_our_files = getattr(server, "shares_files", None) and _weights_via(server) == "file"
        return not (reads_our_files and self.local_files)

    def _send(self, server: RolloutServer, kind: str) -> None:
        """Push this version's `kind` of payload; staged again and sent once more if the object store lost it."""
        try:
            self._update(server, self._payload(server, kind))
        except WeightSyncError as exc:
            if not isinstance(exc.__cause__, WeightsLostError):
                raise
            logger.warning("%s; staging them again", exc.__cause__)
            dtype = self._delta_dtype(server)
            self._staged.pop("raw" if dtype is None else f"{kind}:{dtype}").cleanup()
            self._update(server, self._payload(server, kind))

    def _update(self, server: RolloutServer, weights: Any) -> None:
        deadline = self.deadline.seconds()
        started = time.perf_counter()
        try:
            server.update_weights(weights, self.version, in_flight=self.in_flight, timeout=deadline)
        except Exception as exc:  # each backend fails its own way (HTTP, OS, Ray); all are this server's failure
            late = f" (past its deadline of {deadline:.0f} s)" if isinstance(exc, _TIMEOUTS) else ""
            raise WeightSyncError(
                f"weight update of the {server.backend} server at {server.url} failed{late}: {str(exc) or repr(exc)}"
            ) from exc
        self.deadline.observe(time.perf_counter() - started)
        dtype = self._delta_dtype(server)
        if dtype is not None:
            self._server_ids[normalize_url(server.url)] = self._held[dtype].weights_id
        self._record(server)

    def _record(self, server: RolloutServer) -> None:
        server.policy_version = self.version
        if self.router is not None:
            self.router.set_policy_version(server.url, self.version)


_TIMEOUTS = (httpx.TimeoutException, TimeoutError)
_UNREACHABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, ConnectionError, *_TIMEOUTS)
"""Errors of a server that is gone or stuck past its deadline (as opposed to one that answered and refused)."""


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
