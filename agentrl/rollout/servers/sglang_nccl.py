"""Send a trainer's weights to SGLang servers over NCCL (`/init_weights_update_group`,
`/update_weights_from_distributed`); needs a CUDA GPU in the trainer process.

The group: the trainer is rank 0, each server's workers follow (see `agentrl.rollout.servers.nccl.rank_layout`).
Every HTTP call blocks until its NCCL side is done, so each runs on a thread while this process does its part:
- `init`: every server's `/init_weights_update_group` while the trainer opens its side of the group;
- `push`: every server's `/update_weights_from_distributed` while the trainer broadcasts each tensor from rank 0,
  in the order of the `names` sent.

The trainer's side is made the way SGLang's own test (`test/srt/test_update_weights_from_distributed.py`) makes it,
without `init_process_group`: a TCP rendezvous at `master_address:master_port`, a store prefixed with the group
name, and a process group over it; SGLang's servers build theirs the same way (`init_custom_process_group`), and
the two must meet on the same store keys. That test also runs the trainer with `NCCL_CUMEM_ENABLE=0` and
`NCCL_NVLS_ENABLE=0`; set them in the environment when the broadcast hangs or fails.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from agentrl.rollout.servers.nccl import rank_layout, require_cuda
from agentrl.rollout.servers.sglang import DEFAULT_GROUP, SGLangServer

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist

_ON_CPU = "on a CPU machine use SGLangServer.update_weights (from disk) instead"
T = TypeVar("T")


def tensor_specs(state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[str], list[list[int]]]:
    """Names, dtype names (`bfloat16`, as SGLang reads them with `getattr(torch, name)`) and shapes of `state`,
    in its order: the order the tensors are broadcast in."""
    names = list(state)
    dtypes = [str(t.dtype).removeprefix("torch.") for t in state.values()]
    shapes = [list(t.shape) for t in state.values()]
    return names, dtypes, shapes


def open_trainer_group(
    master_address: str,
    master_port: int,
    world_size: int,
    group_name: str,
    backend: str = "nccl",
    timeout_s: float = 1800.0,
    rank: int = 0,
) -> dist.ProcessGroup:
    """The trainer's side (rank 0) of the group the servers join with `/init_weights_update_group`.

    Blocks until every rank has joined (at most `timeout_s`, which also bounds each collective). No default
    process group is needed or made, so this works beside the trainer's own (FSDP) group. `rank` is for tests
    that stand in for a server.
    """
    from torch.distributed import distributed_c10d as c10d

    host = f"[{master_address}]" if ":" in master_address else master_address
    timeout = timedelta(seconds=timeout_s)
    store, _, _ = next(c10d.rendezvous(f"tcp://{host}:{master_port}", rank, world_size, timeout=timeout))
    store.set_timeout(timeout)
    # SGLang's servers prefix the store with the group name: the NCCL id is exchanged under these keys.
    store = c10d.PrefixStore(group_name, store)
    group, _ = c10d._new_process_group_helper(
        world_size, rank, [], c10d.Backend(backend), store, group_name=c10d.GroupName(group_name), timeout=timeout
    )
    c10d._world.pg_group_ranks[group] = {r: r for r in range(world_size)}  # for broadcast(src=0, group=group)
    return group


def broadcast_all(tensors: Sequence[torch.Tensor], group: dist.ProcessGroup) -> None:
    """Broadcast each tensor from rank 0 over `group`, in order, and wait until all are sent."""
    import torch
    import torch.distributed as dist

    for tensor in tensors:
        dist.broadcast(tensor, src=0, group=group)
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class SGLangNcclSender:
    """Pushes state dicts from this (trainer) process to SGLang servers over one NCCL group.

    Args:
        servers: The SGLang handles; each must be able to reach `master_address:master_port` of `init`.
        workers_per_server: GPUs of each server (its `--tp-size`), or one count for all.
        group_name: Name of the group on the servers (one sender per name).
        backend: torch.distributed backend of the group.

    Raises:
        NcclUnavailableError: torch sees no CUDA GPU here.
    """

    def __init__(
        self,
        servers: Sequence[SGLangServer],
        *,
        workers_per_server: int | Sequence[int] = 1,
        group_name: str = DEFAULT_GROUP,
        backend: str = "nccl",
    ) -> None:
        require_cuda("SGLangNcclSender", _ON_CPU)
        self.servers = list(servers)
        self.world_size, self.rank_offsets = rank_layout(workers_per_server, len(self.servers))
        self.group_name = group_name
        self.backend = backend
        self._group: dist.ProcessGroup | None = None

    def init(self, master_address: str, master_port: int, timeout: float = 600.0) -> None:
        """Make the group: every server joins (over HTTP, on threads) while this process opens rank 0.

        `timeout` bounds the HTTP calls, the rendezvous and each later broadcast.
        """

        def join(server: SGLangServer, offset: int) -> None:
            server.init_weights_update_group(
                master_address, master_port, offset, self.world_size, self.group_name, self.backend, timeout
            )

        calls = list(zip(self.servers, self.rank_offsets, strict=True))
        self._group = _alongside(
            join,
            calls,
            lambda: open_trainer_group(
                master_address, master_port, self.world_size, self.group_name, self.backend, timeout
            ),
        )

    def push(
        self,
        state: Mapping[str, torch.Tensor],
        version: int,
        in_flight: Literal["finish", "abort"] = "finish",
        timeout: float = 600.0,
    ) -> None:
        """Send `state` to every server and have them serve it as `version`.

        Raises:
            RuntimeError: `init` was not called.
            httpx.HTTPError: a server refused the update or serves another version after it (the group is then
                unusable: make a new sender).
        """
        if self._group is None:
            raise RuntimeError("SGLangNcclSender.push before init: call init(master_address, master_port) first")
        group = self._group
        tensors = _on_gpu(state)
        names, dtypes, shapes = tensor_specs(tensors)

        def update(server: SGLangServer) -> None:
            server.update_weights_from_distributed(names, dtypes, shapes, version, in_flight, self.group_name, timeout)

        _alongside(update, [(server,) for server in self.servers], lambda: broadcast_all(list(tensors.values()), group))


def _alongside(call: Callable[..., None], arguments: list[tuple[Any, ...]], local: Callable[[], T]) -> T:
    """Run `call(*args)` for each of `arguments` on threads while `local()` runs here; raise the first failure.

    A call that failed before `local` starts (a refused request) is raised at once, rather than leaving `local`
    waiting in NCCL for a peer that will never come. The threads are not joined on an error: a server may be
    stuck in NCCL, and waiting for it would turn the error into a hang.
    """
    pool = ThreadPoolExecutor(max_workers=len(arguments), thread_name_prefix="agentrl-nccl")
    try:
        futures: list[Future[None]] = [pool.submit(call, *args) for args in arguments]
        for future in futures:
            if future.done():
                future.result()
        result = local()
        for future in futures:
            future.result()
        return result
    finally:
        pool.shutdown(wait=False)


def _on_gpu(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` as contiguous tensors on this process's GPU (NCCL sends a tensor's memory as it lies)."""
    import torch

    device = torch.device("cuda", torch.cuda.current_device())
    return {name: t.detach().to(device).contiguous() for name, t in state.items()}
