"""Client side of `POST /v1/weights`: send new weights to a running `hf` server.

Prefer `path=` when the server can read the file (same machine, e.g. under /dev/shm): the server memory-maps
it. Raw bytes are streamed in chunks: httpcore's synchronous writer copies the rest of a single large buffer
on every partial send, which turns one 500 MB body into minutes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import httpx
import torch

from agentrl.weights_io import state_dict_bytes
from agentrl.weights_token import WEIGHTS_TOKEN_ENV, bearer_headers, is_loopback

__all__ = ["WEIGHTS_TOKEN_ENV", "is_loopback", "push_weights", "weights_headers"]

CHUNK = 1 << 20


def weights_headers(token: str | None) -> dict[str, str]:
    """The `Authorization` header for a server's weight routes (`token`, else AGENTRL_WEIGHTS_TOKEN), if any."""
    return bearer_headers(token)


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
    weights_id: str | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Load weights `version` into the server at `url` from a safetensors `path` or a `state` dict / bytes (or a
    delta, `agentrl.weight_delta`, which carries its own version and id); with `adapter`, they are that LoRA
    adapter's tensors (`agentrl.rollout.servers.hf.adapters`). `weights_id` names a full state's weights; `token`
    is the server's weights token (default: AGENTRL_WEIGHTS_TOKEN).

    Returns the server's answer (`policy_version`: what the server or the adapter now serves, `weights_id`);
    raises `httpx.HTTPStatusError` when it refuses (409: a delta on top of weights the server does not hold).
    """
    if (path is None) == (state is None):
        raise ValueError("push_weights needs exactly one of `path` or `state`")
    lora = {"adapter": adapter, "lora_alpha": lora_alpha} if adapter else {}
    named = {"weights_id": weights_id} if weights_id else {}
    auth = weights_headers(token)
    if path is not None:
        body = {"path": path, "version": version, "in_flight": in_flight, **lora, **named}
        response = httpx.post(f"{url}/v1/weights", json=body, headers=auth, timeout=timeout)
    else:
        data = state if isinstance(state, bytes) else state_dict_bytes(state)  # type: ignore[arg-type]
        headers = {
            **auth,
            "content-type": "application/octet-stream",
            "content-length": str(len(data)),
            "x-in-flight": in_flight,
            "x-policy-version": str(version),
            **({"x-adapter": adapter, "x-lora-alpha": str(lora_alpha)} if adapter else {}),
            **({"x-weights-id": weights_id} if weights_id else {}),
        }
        response = httpx.post(f"{url}/v1/weights", content=_chunks(data), headers=headers, timeout=timeout)
    response.raise_for_status()
    return response.json()
