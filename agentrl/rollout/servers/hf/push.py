"""Client side of `POST /v1/weights`: send new weights to a running `hf` server.

Prefer `path=` when the server can read the file (same machine, e.g. under /dev/shm): the server memory-maps
it. Raw bytes are streamed in chunks: httpcore's synchronous writer copies the rest of a single large buffer
on every partial send, which turns one 500 MB body into minutes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal

import httpx
import torch

from agentrl.weights_io import state_dict_bytes

CHUNK = 1 << 20


def _chunks(data: bytes, size: int = CHUNK) -> Iterator[bytes]:
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def push_weights(
    url: str,
    version: int,
    *,
    path: str | None = None,
    state: Mapping[str, torch.Tensor] | bytes | None = None,
    in_flight: Literal["finish", "abort"] = "finish",
    timeout: float = 300.0,
    adapter: str | None = None,
    lora_alpha: float = 16.0,
) -> int:
    """Load weights `version` into the server at `url` from a safetensors `path` or a `state` dict / bytes; with
    `adapter`, they are that LoRA adapter's tensors (`agentrl.rollout.servers.hf.adapters`).

    Returns the version the server (or the adapter) now serves; raises `httpx.HTTPStatusError` when it refuses.
    """
    if (path is None) == (state is None):
        raise ValueError("push_weights needs exactly one of `path` or `state`")
    lora = {"adapter": adapter, "lora_alpha": lora_alpha} if adapter else {}
    if path is not None:
        body = {"path": path, "version": version, "in_flight": in_flight, **lora}
        response = httpx.post(f"{url}/v1/weights", json=body, timeout=timeout)
    else:
        data = state if isinstance(state, bytes) else state_dict_bytes(state)  # type: ignore[arg-type]
        headers = {
            "content-type": "application/octet-stream",
            "content-length": str(len(data)),
            "x-in-flight": in_flight,
            "x-policy-version": str(version),
            **({"x-adapter": adapter, "x-lora-alpha": str(lora_alpha)} if adapter else {}),
        }
        response = httpx.post(f"{url}/v1/weights", content=_chunks(data), headers=headers, timeout=timeout)
    response.raise_for_status()
    return int(response.json()["policy_version"])
