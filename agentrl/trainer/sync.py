"""WeightSync: push the trainer's new weights to every rollout server, versioned.

The state dict is written once as a safetensors file in shared memory (`/dev/shm` when available) and each
server loads it from there through its handle's `update_weights` (`agentrl.rollout.handles`): the `hf` server's
`POST /v1/weights`, vLLM's `reload_weights` RPC, SGLang's `update_weights_from_disk`.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import torch
from safetensors.torch import save_file

from agentrl.errors import InfrastructureError
from agentrl.rollout.handles import InFlight, RolloutServer


class WeightSyncError(InfrastructureError):
    """A rollout server refused or failed a weight update."""


def _scratch_dir() -> str | None:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def write_safetensors(state: Mapping[str, torch.Tensor], folder: Path) -> Path:
    """Save a state dict as one contiguous safetensors file (shared tensors de-duplicated by name)."""
    path = folder / "model.safetensors"
    tensors = {k: v.detach().contiguous().cpu() for k, v in state.items()}
    seen: dict[int, str] = {}
    for name in list(tensors):  # tied weights (embed/lm_head) share storage; safetensors refuses aliases
        ptr = tensors[name].data_ptr()
        if ptr in seen:
            tensors[name] = tensors[name].clone()
        seen[ptr] = name
    save_file(tensors, str(path))
    return path


class WeightSync:
    """Pushes weights to rollout servers and records the version each one serves.

    Args:
        servers: rollout server handles (`agentrl.rollout.handles.RolloutServer`).
        router: optional `Router` whose per-replica policy versions are updated after each push.
        in_flight: `finish` lets running requests complete on the old weights; `abort` stops them.
    """

    def __init__(
        self, servers: list[RolloutServer], router: Any = None, in_flight: InFlight = "finish", timeout: float = 600.0
    ):
        self.servers = servers
        self.router = router
        self.in_flight = in_flight
        self.timeout = timeout
        self.version = 0

    def push(self, state: Mapping[str, torch.Tensor], version: int | None = None) -> float:
        """Send `state` to every server as `version` (default: the next one); returns the seconds it took."""
        started = time.perf_counter()
        self.version = self.version + 1 if version is None else version
        with tempfile.TemporaryDirectory(prefix="agentrl-weights-", dir=_scratch_dir()) as tmp:
            path = write_safetensors(state, Path(tmp))
            for server in self.servers:
                self._push_one(server, path)
        return time.perf_counter() - started

    def _push_one(self, server: RolloutServer, path: Path) -> None:
        try:
            server.update_weights(str(path), self.version, in_flight=self.in_flight, timeout=self.timeout)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            raise WeightSyncError(
                f"weight update of the {server.backend} server at {server.url} failed: {exc}"
            ) from exc
        if self.router is not None:
            self.router.set_policy_version(server.url, self.version)
