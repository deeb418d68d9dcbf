"""Rollout server handles: what the trainer, `agentrl rollout` and `agentrl eval` hold for each server.

A handle is the same whether the server was started here or is reached by URL (`rollout.urls`, with
`rollout.backend` saying what it is): its `url`, `backend`, the `policy_version` it serves, `update_weights` through
the backend's own route, and `stop` (a no-op for a server this process did not start). Weight sync dispatches on
the handle, never on a URL string:

| backend | weights go in through                                                  | started by            |
|---------|-------------------------------------------------------------------------|-----------------------|
| hf      | `POST /v1/weights`: the file's path, or its bytes when no shared files  | `launch_hf_server`    |
| vllm    | `/pause`, `/collective_rpc reload_weights`, `/reset_prefix_cache`, `/resume` | `VLLMServer.launch` |
| sglang  | `/update_weights_from_disk`                                             | `SGLangServer.launch` |
| any, as a Ray actor | the object store, then the node's `/dev/shm` and the route above | `ray_rollout_servers` |

The `hf` handle asks its server once whether it reads a file this process wrote (`POST /v1/weights/probe`); a
server in another container or on another host gets the weights uploaded. vLLM and SGLang take a path only.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.rollout.servers.process import ManagedServer

InFlight = Literal["finish", "abort"]


class RolloutServer(Protocol):
    """One rollout server, however it was started."""

    url: str
    backend: str
    policy_version: int
    weights_via: str
    """`file`: `update_weights` takes a safetensors file; `object_store`: a Ray object ref of one (server actors)."""

    def update_weights(
        self, weights: Any, version: int, in_flight: InFlight = "finish", timeout: float = 600.0
    ) -> None:
        """Load the weights at `weights` (a safetensors file the server can read) and serve them as `version`."""

    def stop(self) -> None:
        """Stop the server if this process started it."""

    def healthy(self, timeout: float = 2.0) -> bool:
        """Whether the server answers its health route now."""

    def served_version(self) -> int | None:
        """The policy version the server itself reports, None when the backend cannot say."""

    def abort(self, timeout: float = 30.0) -> int:
        """Abort every request in flight; returns how many, when the backend says."""


class HFServer(ManagedServer):
    """The built-in `hf` server, started here (`process` set, see `launch_hf_server`) or reached by URL."""

    backend = "hf"

    def __init__(self, base_url: str, *, model_path: str | None = None, process: Any = None, token: str | None = None):
        super().__init__(base_url, model_path=model_path, process=process)
        self.shares_files: bool | None = None
        """Whether the server reads files this process writes (None: not asked yet)."""
        self.token = token or getattr(process, "weights_token", None)
        """The server's weights token (None: AGENTRL_WEIGHTS_TOKEN from the environment, if set)."""

    def update_weights(
        self,
        weights: Any,
        version: int,
        in_flight: InFlight = "finish",
        timeout: float = 600.0,
        *,
        adapter: str | None = None,
        lora_alpha: float = 16.0,
    ) -> None:
        """Load the safetensors file `weights` (or a delta, `agentrl.weight_delta`) into the server, by path when it
        can read it, else uploaded; with `adapter`, the file holds that LoRA adapter's tensors (`AdapterServer`).

        Raises:
            DeltaBaseMismatchError: a delta, and the server holds other weights than its base (push in full).
            httpx.HTTPError: the server could not be reached, refused the update, or serves another version.
        """
        from agentrl.rollout.servers.hf.push import push_weights
        from agentrl.weight_delta import DeltaBaseMismatchError

        path = Path(weights)
        if self.shares_files is None:
            self.shares_files = self._reads_our_files(path.parent, timeout)
        source: dict[str, Any] = {"path": str(path)} if self.shares_files else {"state": path.read_bytes()}
        options = {"adapter": adapter, "lora_alpha": lora_alpha, "in_flight": in_flight, "token": self.token}
        try:
            answer = push_weights(self.base_url, version, timeout=timeout, **source, **options)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 409:
                raise DeltaBaseMismatchError(exc.response.json()["error"]["message"]) from exc
            raise
        served = int(answer["policy_version"])
        if served != version:
            raise httpx.HTTPError(f"{self.base_url} serves version {served} after an update to {version}")
        if adapter is None:
            self.policy_version = version

    def weights_dtype(self) -> str:
        """The dtype the server holds its weights in (`GET /v1/weights/version`): deltas are computed in it."""
        answer = httpx.get(f"{self.base_url}/v1/weights/version", timeout=10.0)
        answer.raise_for_status()
        return str(answer.json()["dtype"])

    def weights_digest(self) -> str:
        """A hash of the server's weights (`agentrl.weight_delta.weights_digest`), to compare with the trainer's."""
        answer = httpx.get(f"{self.base_url}/v1/weights/digest", timeout=120.0)
        answer.raise_for_status()
        return str(answer.json()["digest"])

    def served_version(self, adapter: str | None = None) -> int | None:
        """The version the server (or its LoRA `adapter`: None when not loaded) reports (`GET /v1/weights/version`)."""
        params = {"adapter": adapter} if adapter else {}
        answer = httpx.get(f"{self.base_url}/v1/weights/version", params=params, timeout=10.0)
        if adapter and answer.status_code == 404:
            return None
        answer.raise_for_status()
        return int(answer.json()["policy_version"])

    def _reads_our_files(self, folder: Path, timeout: float) -> bool:
        token = uuid.uuid4().hex
        probe = folder / f"agentrl-probe-{token}"
        probe.write_text(token)
        try:
            from agentrl.rollout.servers.hf.push import weights_headers

            answer = httpx.post(
                f"{self.base_url}/v1/weights/probe",
                json={"path": str(probe), "token": token},
                headers=weights_headers(self.token),
                timeout=timeout,
            )
            answer.raise_for_status()
            return bool(answer.json().get("readable"))
        finally:
            probe.unlink(missing_ok=True)


class AdapterServer:
    """A LoRA adapter's view of an `hf` server that serves it over its base model (`policies.X.lora_of`): weights
    pushed through it are the adapter's, its version is the adapter's. The server belongs to the base's policy,
    which stops it."""

    backend = "hf"
    weights_via = "file"

    def __init__(self, server: HFServer, adapter: str, lora_alpha: float):
        self.server, self.adapter, self.lora_alpha = server, adapter, lora_alpha
        self.policy_version = 0

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def model_path(self) -> str | None:
        return self.server.model_path

    def update_weights(
        self, weights: Any, version: int, in_flight: InFlight = "finish", timeout: float = 600.0
    ) -> None:
        """Load the adapter's tensors (a safetensors file) and serve them as the adapter's `version`."""
        options = {"adapter": self.adapter, "lora_alpha": self.lora_alpha}
        self.server.update_weights(weights, version, in_flight, timeout, **options)
        self.policy_version = version

    def served_version(self) -> int | None:
        return self.server.served_version(self.adapter)

    def healthy(self, timeout: float = 2.0) -> bool:
        return self.server.healthy(timeout)

    def stop(self) -> None:
        """Nothing: the base policy's server is stopped with it."""

    def abort(self, timeout: float = 30.0) -> int:
        return self.server.abort(timeout)


def server_dtype(cfg: AgentRLConfig, has_gpu: bool | None = None) -> str:
    """The dtype a server started for `cfg` runs in: `rollout.dtype`, else `trainer.dtype`, else bfloat16 where
    this machine has a GPU (`has_gpu`; default: whether torch sees CUDA) and float32 where it has none."""
    for name in (cfg.rollout.dtype, cfg.trainer.dtype):
        if name != "auto":
            return name
    if has_gpu is None:
        import torch

        has_gpu = torch.cuda.is_available()
    return "bfloat16" if has_gpu else "float32"


def launch_server(
    cfg: AgentRLConfig, model_path: str, port: int | None = None, host: str = "127.0.0.1", token: str | None = None
) -> Any:
    """Start one server of `cfg.rollout.backend` on this machine, in `server_dtype`; returns its handle.

    On a `host` other machines reach, its weight and control routes need a weights token: `token`, else
    AGENTRL_WEIGHTS_TOKEN (`hf` makes one up when neither is set; vLLM and SGLang refuse to start without one:
    `agentrl.weights_token.MissingTokenError`). The handle holds the token and sends it."""
    backend = cfg.rollout.backend
    dtype = server_dtype(cfg)
    if backend == "hf":
        from agentrl.rollout.servers.hf.launch import launch_hf_server

        env = {"AGENTRL_WEIGHTS_TOKEN": token} if token else None
        process = launch_hf_server(
            model_path, port, host=host, max_model_len=cfg.rollout.max_model_len, dtype=dtype, env=env
        )
        return HFServer(process.url, model_path=model_path, process=process, token=process.weights_token)
    if backend == "vllm":
        from agentrl.rollout.servers.vllm import VLLMServer

        transfer = "nccl" if cfg.rollout.weight_transfer == "nccl" else "reload"
        return VLLMServer.launch(
            model_path,
            port=port,
            host=host,
            max_model_len=cfg.rollout.max_model_len,
            weight_transfer=transfer,
            dtype=dtype,
            token=token,
        )
    if backend == "sglang":
        from agentrl.rollout.servers.sglang import SGLangServer

        return SGLangServer.launch(model_path, port=port, host=host, dtype=dtype, token=token)
    raise UserError(f"unknown rollout.backend {backend!r}; use hf, vllm or sglang")


def connect_server(url: str, backend: str, model_path: str | None = None) -> Any:
    """A handle on a running server of `backend` at `url` (`model_path`: its model folder, for weight checks)."""
    if backend == "hf":
        return HFServer(url, model_path=model_path)
    if backend == "vllm":
        from agentrl.rollout.servers.vllm import VLLMServer

        return VLLMServer(url, model_path=model_path)
    if backend == "sglang":
        from agentrl.rollout.servers.sglang import SGLangServer

        return SGLangServer(url, model_path=model_path)
    raise UserError(f"unknown rollout.backend {backend!r}; use hf, vllm or sglang")
