"""Send a trainer's weights to vLLM servers over NCCL, through vLLM's own trainer-side classes; needs a CUDA GPU
and vLLM in the trainer process (`pip install 'agentrl[vllm]'`). On CPU, `VLLMServer.update_weights` reloads from
disk instead.

Checked against vLLM 0.32.0 (`vllm/distributed/weight_transfer/`):
- the servers run with `--weight-transfer-config '{"backend":"nccl"}'` (`vllm.weight_transfer_args`) and
  `VLLM_SERVER_DEV_MODE=1` (`build_env` sets it), which mounts the RL routes `/init_weight_transfer_engine`,
  `/start_weight_update`, `/update_weights`, `/finish_weight_update {"weight_version"}`;
- `HTTPVLLMWeightSyncClient(base_url, timeout)` (`clients.py`) calls those routes for one server; `FanOutClient`
  here calls every server's at once, each with its own `rank_offset`;
- `NCCLTrainerWeightTransferEngine.trainer_init(NCCLTrainerInitInfo(master_address=, master_port=, world_size=,
  rank=0, packed=), client=, source=)` (`nccl_engine.py`) opens rank 0 while the servers join, and
  `send_weights()` runs start, update (its broadcast alongside) and finish. It reads the weights from a
  `WeightSource` (`base.py`: `metadata()` then iteration in the same order), here over a state dict
  (`StateDictSource`), and calls `finish_weight_update()` without a version, so `FanOutClient` adds it.
- a server with a weights token (`agentrl.vllm_gate`) refuses those routes without it, and vLLM's client sends no
  header: `sync_client` gives it one, through the client's one HTTP call, `_post(path, json)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx

from agentrl.rollout.servers.nccl import rank_layout, require_cuda, require_package
from agentrl.rollout.servers.vllm_weights import EMBED, HEAD

if TYPE_CHECKING:
    import torch

    from agentrl.rollout.servers.vllm import VLLMServer

_ON_CPU = "on a CPU machine keep VLLMConfig(weight_transfer='reload') and VLLMServer.update_weights"


def dtype_name(dtype: torch.dtype) -> str:
    """`dtype` as vLLM names it on the wire (`bfloat16`); its workers read it back with `getattr(torch, name)`."""
    return str(dtype).split(".")[-1]


@dataclass(frozen=True)
class TensorMeta:
    """Name, wire dtype and full shape of one tensor (the fields of vLLM's `ParamMeta`)."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]


class StateDictSource:
    """A state dict as vLLM's `WeightSource`: `metadata()` describes every tensor, iteration yields them in the
    same order. Iterable again and again.

    A tied output head missing from `state` is sent as a copy of the embeddings (`lm_head.weight`): vLLM keeps
    its own head and updates it only from that name (see `agentrl.rollout.servers.vllm`).

    Args:
        state: Tensors by name.
        dtype: Floating tensors are sent in this dtype (e.g. the server's `bfloat16`); None sends them as they are.
        device: Where tensors are moved for sending (NCCL sends GPU memory); None leaves them where they are.
    """

    def __init__(
        self,
        state: Mapping[str, torch.Tensor],
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        self._state = dict(state)
        if HEAD not in self._state and EMBED in self._state:
            self._state[HEAD] = self._state[EMBED]
        self.dtype = dtype
        self.device = device

    def metadata(self) -> list[TensorMeta]:
        """What iteration yields, without moving or casting anything."""
        return [TensorMeta(name, self._wire_dtype(t), tuple(t.shape)) for name, t in self._state.items()]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, tensor in self._state.items():
            yield name, tensor.detach().to(device=self.device, dtype=self._wire_dtype(tensor)).contiguous()

    def update_info(self) -> dict[str, list[Any]]:
        """The per-update metadata vLLM's NCCL engine sends the servers (`NCCLWeightTransferUpdateInfo`)."""
        meta = self.metadata()
        return {
            "names": [m.name for m in meta],
            "dtype_names": [dtype_name(m.dtype) for m in meta],
            "shapes": [list(m.shape) for m in meta],
        }

    def _wire_dtype(self, tensor: torch.Tensor) -> torch.dtype:
        return self.dtype if self.dtype is not None and tensor.is_floating_point() else tensor.dtype


class FanOutClient:
    """vLLM's `VLLMWeightSyncClient` over several servers: each call goes to all of them at once (they block in
    the same NCCL collectives), and each server joins the group at its own `rank_offset`.

    Args:
        clients: One client per server (vLLM's `HTTPVLLMWeightSyncClient`).
        rank_offsets: Each server's first rank in the group (see `rank_layout`).

    Attributes:
        weight_version: Sent with `finish_weight_update` when the caller sends none.
    """

    def __init__(self, clients: Sequence[Any], rank_offsets: Sequence[int]) -> None:
        if len(clients) != len(rank_offsets):
            raise ValueError(f"{len(clients)} clients but {len(rank_offsets)} rank offsets")
        self.clients = list(clients)
        self.rank_offsets = list(rank_offsets)
        self.weight_version: str | None = None

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._each(lambda client, offset: client.init_weight_transfer_engine({**init_info, "rank_offset": offset}))

    def start_weight_update(self) -> None:
        self._each(lambda client, _: client.start_weight_update())

    def update_weights(self, update_info: Any) -> None:
        self._each(lambda client, _: client.update_weights(update_info))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        version = weight_version if weight_version is not None else self.weight_version
        self._each(lambda client, _: client.finish_weight_update(version))

    def shutdown_weight_transfer_engine(self) -> None:
        self._each(lambda client, _: client.shutdown_weight_transfer_engine())

    def _each(self, call: Callable[[Any, int], None]) -> None:
        """`call(client, rank_offset)` for every server on its own thread; raise the first failure."""
        with ThreadPoolExecutor(max_workers=len(self.clients), thread_name_prefix="agentrl-vllm") as pool:
            futures = [pool.submit(call, c, o) for c, o in zip(self.clients, self.rank_offsets, strict=True)]
        for future in futures:
            future.result()


def sync_client(server: VLLMServer, timeout: float) -> Any:
    """vLLM's `HTTPVLLMWeightSyncClient` on `server`, sending the server's weights token when it has one."""
    from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient

    headers = server.auth_headers()
    if not headers:
        return HTTPVLLMWeightSyncClient(server.base_url, timeout=timeout)

    class WithToken(HTTPVLLMWeightSyncClient):  # type: ignore[misc, valid-type]
        def _post(self, path: str, json: dict[str, Any] | None = None) -> None:
            url = f"{self.base_url}/{path.lstrip('/')}"
            httpx.post(url, json=json, headers=headers, timeout=self.timeout).raise_for_status()

    return WithToken(server.base_url, timeout=timeout)


class VLLMNcclSender:
    """Pushes state dicts from this (trainer) process to vLLM servers over one NCCL group (vLLM's own engine).

    Args:
        servers: The vLLM handles, started with `VLLMConfig(weight_transfer="nccl")`; each must be able to reach
            `master_address:master_port` of `init`.
        workers_per_server: GPUs of each server (tensor x pipeline x data parallel), or one count for all.
        dtype: Floating tensors are sent in this dtype (the servers' own, to halve the bytes from fp32); None: as
            they are.
        packed: vLLM's packed broadcast (tensors batched into buffers), its default.
        timeout: Seconds each HTTP call may take.

    Raises:
        NcclUnavailableError: vLLM is not importable here, or torch sees no CUDA GPU.
    """

    def __init__(
        self,
        servers: Sequence[VLLMServer],
        *,
        workers_per_server: int | Sequence[int] = 1,
        dtype: torch.dtype | None = None,
        packed: bool = True,
        timeout: float = 600.0,
    ) -> None:
        require_package("vllm", "VLLMNcclSender", "pip install 'agentrl[vllm]' on the GPU machine; " + _ON_CPU)
        require_cuda("VLLMNcclSender", _ON_CPU)
        self.servers = list(servers)
        self.world_size, offsets = rank_layout(workers_per_server, len(self.servers))
        clients = [sync_client(server, timeout) for server in self.servers]
        self.client = FanOutClient(clients, offsets)
        self.dtype = dtype
        self.packed = packed
        self._source = StateDictSource({})
        self._engine: Any = None

    def init(self, master_address: str, master_port: int) -> None:
        """Make the group: the servers join (vLLM runs their calls on a thread) while this process opens rank 0."""
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        info = NCCLTrainerInitInfo(
            master_address=master_address,
            master_port=master_port,
            world_size=self.world_size,
            rank=0,
            packed=self.packed,
        )
        source = _vllm_source(lambda: self._source)
        self._engine = NCCLTrainerWeightTransferEngine.trainer_init(info, client=self.client, source=source)

    def push(
        self, state: Mapping[str, torch.Tensor], version: int, in_flight: Literal["finish", "abort"] = "finish"
    ) -> None:
        """Send `state` to every server and have them serve it as `version`.

        The servers pause first (`finish`: running requests complete on the old weights; `abort`: they end), and
        resume with an empty prefix cache, whose KV came from the old weights.

        Raises:
            RuntimeError: `init` was not called.
            httpx.HTTPError: a server refused a step or serves another version after the update.
        """
        if self._engine is None:
            raise RuntimeError("VLLMNcclSender.push before init: call init(master_address, master_port) first")
        import torch

        self._source = StateDictSource(
            state, dtype=self.dtype, device=torch.device("cuda", torch.cuda.current_device())
        )
        self.client.weight_version = str(version)
        mode: Literal["wait", "abort"] = "wait" if in_flight == "finish" else "abort"
        for server in self.servers:
            server.pause(mode)
        try:
            self._engine.send_weights()
            for server in self.servers:
                server.reset_prefix_cache()
        finally:
            for server in self.servers:
                server.resume()
        for server in self.servers:
            served = server.served_version()
            if served != version:
                raise httpx.HTTPError(f"vLLM at {server.base_url} serves version {served} after an update to {version}")
            server.policy_version = version

    def close(self) -> None:
        """Leave the group on both sides (the servers keep serving)."""
        if self._engine is not None:
            self._engine.shutdown()
            self.client.shutdown_weight_transfer_engine()
            self._engine = None


def _vllm_source(current: Callable[[], StateDictSource]) -> Any:
    """A vLLM `WeightSource` that reads whichever `StateDictSource` `current()` returns when vLLM asks."""
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

    class _Current(WeightSource):
        def metadata(self) -> list[ParamMeta]:
            return [ParamMeta(m.name, m.dtype, m.shape) for m in current().metadata()]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            return iter(current())

    return _Current()
