"""WeightSync: push the trainer's new weights to every rollout server, versioned.

The state dict is written once as a safetensors file in shared memory (`/dev/shm` when available) and each
server loads it from there: the `hf` server through `POST /v1/weights {"path", "version"}`, vLLM through its
`reload_weights` RPC (see `agentrl.rollout.servers.vllm`). Servers on other hosts get the raw bytes over HTTP.
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
        servers: `hf` server base URLs, or server handles with an `update_weights(weights, version)` method
            (vLLM, SGLang).
        router: optional `Router` whose per-replica policy versions are updated after each push.
        in_flight: `finish` lets running requests complete on the old weights; `abort` stops them.
    """

    def __init__(self, servers: list[Any], router: Any = None, in_flight: str = "finish", timeout: float = 600.0):
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

    def _push_one(self, server: Any, path: Path) -> None:
        if hasattr(server, "update_weights"):
            server.update_weights(str(path), self.version)
            url = getattr(server, "url", None)
        else:
            url = str(server).rstrip("/")
            body = {"path": str(path), "version": self.version, "in_flight": self.in_flight}
            try:
                response = httpx.post(f"{url}/v1/weights", json=body, timeout=self.timeout)
            except httpx.HTTPError as exc:
                raise WeightSyncError(f"weight update to {url} failed: {exc}") from None
            if response.status_code != 200:
                raise WeightSyncError(f"{url} refused the weight update ({response.status_code}): {response.text}")
        if self.router is not None and url:
            self.router.set_policy_version(url, self.version)
