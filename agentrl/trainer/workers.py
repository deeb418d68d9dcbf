"""RayBackend: N trainer ranks as Ray actors, one `RankTrainer` each, FSDP2 over a torch.distributed group.

Each actor joins the group (gloo on CPU, nccl on GPU) at rank 0's host and a port free there, builds its
rank's policy, and trains on rows `rank::world` of every step's trajectories. Ray runs locally with this
machine's CPUs unless `ray.address` names a cluster. With several hosts, the model folder and checkpoint
folders must be reachable from every host at the same path.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from agentrl.config.schema import AgentRLConfig, RayConfig
from agentrl.errors import InfrastructureError
from agentrl.types import Trajectory

SETUP_TIMEOUT_S = 900.0
PROCESS_GROUP_TIMEOUT = timedelta(minutes=30)


class TrainBackendError(InfrastructureError):
    """A trainer rank (Ray actor) failed or could not be placed; the backend is unusable afterwards."""


class RankActor:
    """The body of one rank's Ray actor: joins the process group, then runs `RankTrainer` methods."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def address(self) -> tuple[str, int]:
        """This host's address and a TCP port free on it (rank 0 hosts the rendezvous)."""
        import ray

        from agentrl.rollout.servers.process import free_port

        ip = ray.util.get_node_ip_address()
        return ip, free_port(ip)

    def setup(
        self, cfg: AgentRLConfig, model_path: str, pad_token_id: int, rank: int, world: int, master: tuple[str, int]
    ) -> None:
        """Join the group of `world` ranks at `master` and build this rank's policy."""
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        from agentrl.trainer.rank import RankTrainer

        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(0)  # Ray shows each actor only its own GPU(s)
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://{master[0]}:{master[1]}",
            rank=rank,
            world_size=world,
            timeout=PROCESS_GROUP_TIMEOUT,
        )
        mesh = init_device_mesh("cuda" if cuda else "cpu", (world,))
        self.trainer = RankTrainer(cfg, model_path, pad_token_id, rank, world, mesh)

    def call(self, method: str, *args: Any) -> Any:
        """`RankTrainer.<method>(*args)`."""
        return getattr(self.trainer, method)(*args)

    def shutdown(self) -> None:
        """Leave the process group."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


class RayBackend:
    """`trainer.num_ranks` ranks as Ray actors; every call runs on all of them and returns rank 0's answer.

    Ray is started here unless this process already runs it (then it is joined and left running); `close`
    kills the actors and shuts down a Ray started here. A failing rank stops all of them and raises
    `TrainBackendError` with the rank's own error.
    """

    def __init__(self, cfg: AgentRLConfig, model_path: str, pad_token_id: int):
        import ray

        self.world = cfg.trainer.num_ranks
        self.actors: list[Any] = []
        self._owns_ray = _init_ray(cfg.ray)
        try:
            options = _actor_options(cfg.ray, self.world)
            self.actors = [ray.remote(RankActor).options(**options).remote() for _ in range(self.world)]
            master = self._gather([self.actors[0].address.remote()], "placing rank 0", SETUP_TIMEOUT_S)[0]
            refs = [
                actor.setup.remote(cfg, model_path, pad_token_id, rank, self.world, master)
                for rank, actor in enumerate(self.actors)
            ]
            self._gather(refs, "building the ranks", SETUP_TIMEOUT_S)
        except BaseException:
            self._stop(graceful=False)
            raise

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        import ray

        return self._all("step", ray.put(trajectories))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._all("state_dict")

    def save(self, folder: Path) -> None:
        self._all("save", Path(folder).absolute())

    def load(self, folder: Path) -> None:
        self._all("load", Path(folder).absolute())

    def gradients(self) -> dict[str, torch.Tensor]:
        """The last step's full gradients (tests and debugging)."""
        return self._all("gradients")

    def close(self) -> None:
        self._stop(graceful=True)

    def _stop(self, graceful: bool) -> None:
        """Kill the rank actors (after leaving the process group when `graceful`) and a Ray started here."""
        import ray

        actors, self.actors = self.actors, []
        if actors and graceful:
            with contextlib.suppress(Exception):  # a dead or stuck rank is killed below either way
                ray.get([a.shutdown.remote() for a in actors], timeout=60)
        for actor in actors:
            ray.kill(actor)
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False

    def _all(self, method: str, *args: Any) -> Any:
        if not self.actors:
            raise TrainBackendError("the trainer backend is closed (or a rank failed); build a new one")
        refs = [actor.call.remote(method, *args) for actor in self.actors]
        return self._gather(refs, method)[0]

    def _gather(self, refs: list[Any], what: str, timeout: float | None = None) -> list[Any]:
        """Results of every rank; the first failure stops all ranks (the others would wait in a collective)."""
        import ray

        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
                if not ready:
                    raise TimeoutError(f"no answer within {timeout:.0f} s")
                ray.get(ready[0])  # raises the rank's error as soon as it is known
            return ray.get(refs)
        except (ray.exceptions.RayError, TimeoutError) as error:
            self._stop(graceful=False)  # the other ranks may be stuck in a collective: no goodbyes
            raise TrainBackendError(
                f"a trainer rank failed while {what} ({type(error).__name__}): {_cause(error)}\n"
                "All ranks were stopped. See the rank's traceback above and the Ray logs "
                "(/tmp/ray/session_latest/logs); build a new backend to go on."
            ) from None


def _init_ray(cfg: RayConfig) -> bool:
    """Start or join Ray unless it is running in this process; returns whether this call started it."""
    from agentrl.ray_cluster import RayClusterError, init_ray

    try:
        return init_ray(cfg)
    except RayClusterError as error:
        raise TrainBackendError(f"{error} Or use trainer.num_ranks=1, which needs no Ray.") from None


def _actor_options(cfg: RayConfig, world: int) -> dict[str, Any]:
    """Resources of each rank actor; raises when the cluster cannot hold `world` of them."""
    import ray

    total = ray.cluster_resources()
    gpus = cfg.num_gpus_per_rank
    if gpus is None:
        gpus = 1.0 if total.get("GPU", 0) > 0 else 0.0
    problems = []
    if total.get("CPU", 0) < world * cfg.num_cpus_per_rank:
        problems.append(
            f"{world} ranks x ray.num_cpus_per_rank={cfg.num_cpus_per_rank} CPUs > the cluster's "
            f"{total.get('CPU', 0):g}; lower ray.num_cpus_per_rank (fractions are fine) or trainer.num_ranks"
        )
    if total.get("GPU", 0) < world * gpus:
        problems.append(
            f"{world} ranks x {gpus:g} GPUs > the cluster's {total.get('GPU', 0):g}; lower trainer.num_ranks"
        )
    if problems:
        raise TrainBackendError("cannot place the trainer ranks: " + "; ".join(problems))
    return {"num_cpus": cfg.num_cpus_per_rank, "num_gpus": gpus, "max_concurrency": 1}


def _cause(error: BaseException) -> str:
    cause = getattr(error, "cause", None)  # RayTaskError wraps the rank's own exception
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(error).strip().splitlines()[-1]


__all__ = ["RankActor", "RayBackend", "TrainBackendError"]
