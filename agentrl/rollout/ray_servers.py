"""Rollout servers on a Ray cluster (`rollout.placement=ray`): one actor per replica, each starting its server
(`hf`, `vllm` or `sglang`) on its own node, bound to that node's address, and placed by
`rollout.num_cpus_per_replica` / `num_gpus_per_replica` / `replica_resources`.

Weights need no shared filesystem: the trainer puts them into Ray's object store once per push (one safetensors
blob), every server actor pulls the blob to its node, writes it to the node's `/dev/shm` and loads it through its
server's own route (`RayServer.weights_via == "object_store"`, see `agentrl.trainer.sync`).
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import InfrastructureError
from agentrl.rollout.handles import InFlight
from agentrl.weight_delta import DeltaBaseMismatchError
from agentrl.weights_token import env_token

STARTUP_TIMEOUT_S = 900.0


class RayServerError(InfrastructureError):
    """A rollout server actor could not be placed, started, or reached."""


class WeightsLostError(InfrastructureError):
    """The object store lost a push's weights before the server actor read them: stage them again."""


class ServerActor:
    """The body of one replica's Ray actor: starts the server on this node and loads weights into it."""

    def __init__(self, cfg: AgentRLConfig) -> None:
        import ray

        from agentrl.models import resolve_model
        from agentrl.rollout.handles import launch_server

        self.node_id = ray.get_runtime_context().get_node_id()
        # bound to the node's address, so its control routes take a token; the actor holds it and makes every
        # control call itself (generation, the only route the trainer reaches directly, needs none)
        token = env_token() or secrets.token_hex(16)
        self.server = launch_server(cfg, resolve_model(cfg.model), host=ray.util.get_node_ip_address(), token=token)

    def describe(self) -> tuple[str, str]:
        """The server's URL and the id of the node it runs on."""
        return self.server.url, self.node_id

    def update_weights(self, blob: bytes, version: int, in_flight: InFlight, timeout: float) -> int:
        """Write the safetensors `blob` to this node's shared memory and load it; returns the version served."""
        from agentrl.rollout.servers.process import shm_dir

        with tempfile.TemporaryDirectory(prefix="agentrl-weights-", dir=shm_dir()) as tmp:
            path = Path(tmp) / "model.safetensors"
            path.write_bytes(blob)
            self.server.update_weights(str(path), version, in_flight=in_flight, timeout=timeout)
        return self.server.policy_version

    def served_version(self) -> int | None:
        return self.server.served_version()

    def weights_dtype(self) -> str | None:
        """The dtype the server holds its weights in, when it takes deltas (`hf`); None otherwise."""
        dtype = getattr(self.server, "weights_dtype", None)
        return dtype() if dtype is not None else None

    def weights_digest(self) -> str:
        return self.server.weights_digest()

    def abort(self) -> int:
        return self.server.abort()

    def stop(self) -> None:
        self.server.stop()


class RayServer:
    """The trainer's handle on a server actor (`RolloutServer`): HTTP traffic goes to `url` directly, weights
    through the actor."""

    weights_via = "object_store"

    def __init__(self, actor: Any, backend: str, url: str, node_id: str) -> None:
        self.actor, self.backend, self.url, self.node_id = actor, backend, url, node_id
        self.policy_version = 0

    def update_weights(
        self, weights: Any, version: int, in_flight: InFlight = "finish", timeout: float = 600.0
    ) -> None:
        """Load `weights` (an object ref of a safetensors blob, or a safetensors file) as `version`.

        Raises:
            DeltaBaseMismatchError: a delta, and the server holds other weights than its base.
            ConnectionError: the actor is gone.
            RayServerError: the update failed on the actor (its error inside), or it serves another version.
        """
        import ray

        if not isinstance(weights, ray.ObjectRef):
            weights = ray.put(Path(weights).read_bytes())
        served = self._call("update_weights", weights, version, in_flight, timeout, timeout=timeout)
        if served != version:
            raise RayServerError(f"the server actor at {self.url} serves version {served} after an update to {version}")
        self.policy_version = version

    def served_version(self) -> int | None:
        return self._call("served_version")

    def weights_dtype(self) -> str | None:
        """The server's weights dtype when it takes deltas (`hf`), else None (`agentrl.weight_delta`)."""
        return self._call("weights_dtype")

    def weights_digest(self) -> str:
        return self._call("weights_digest", timeout=120.0)

    def healthy(self, timeout: float = 2.0) -> bool:
        from agentrl.rollout.servers.process import is_healthy

        return is_healthy(self.url, timeout=timeout)

    def abort(self, timeout: float = 30.0) -> int:
        return self._call("abort", timeout=timeout)

    def stop(self) -> None:
        """Stop the server and end the actor."""
        import ray

        with contextlib.suppress(Exception):  # an actor that is already gone has nothing to stop
            ray.get(self.actor.stop.remote(), timeout=60)
        ray.kill(self.actor)

    def _call(self, method: str, *args: Any, timeout: float = 60.0) -> Any:
        import ray

        try:
            return ray.get(getattr(self.actor, method).remote(*args), timeout=timeout)
        except ray.exceptions.RayActorError as exc:
            raise ConnectionError(f"the server actor at {self.url} is gone: {exc}") from exc
        except ray.exceptions.ObjectLostError as exc:
            raise WeightsLostError(f"the weights sent to the server actor at {self.url} were lost: {exc}") from exc
        except ray.exceptions.GetTimeoutError as exc:
            raise TimeoutError(f"the server actor at {self.url} did not finish {method} in {timeout:g} s") from exc
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, DeltaBaseMismatchError):  # the caller pushes in full
                raise DeltaBaseMismatchError(str(exc.cause)) from exc
            if isinstance(exc.cause, ray.exceptions.ObjectLostError):  # the caller stages them again
                raise WeightsLostError(f"the weights sent to {self.url} were lost: {exc.cause}") from exc
            raise RayServerError(f"the server actor at {self.url} failed {method}: {exc.cause!r}") from exc


def actor_options(cfg: AgentRLConfig) -> dict[str, Any]:
    """Ray resources of each server actor; raises `RayServerError` when the cluster cannot hold the replicas."""
    import ray

    r, total = cfg.rollout, ray.cluster_resources()
    gpus = r.num_gpus_per_replica if r.num_gpus_per_replica is not None else float(total.get("GPU", 0) > 0)
    needed = {"CPU": r.num_cpus_per_replica, "GPU": gpus, **r.replica_resources}
    short = [
        f"{r.num_replicas} x {amount:g} {name} > the cluster's {total.get(name, 0):g}"
        for name, amount in needed.items()
        if amount and total.get(name, 0) < r.num_replicas * amount
    ]
    if short:
        raise RayServerError(
            f"cannot place {r.num_replicas} rollout server actors: {'; '.join(short)}. Lower rollout.num_replicas "
            "or rollout.num_cpus_per_replica / num_gpus_per_replica, or add nodes with those resources."
        )
    custom = dict(r.replica_resources)
    return {"num_cpus": r.num_cpus_per_replica, "num_gpus": gpus, "resources": custom, "max_concurrency": 4}


@contextlib.contextmanager
def ray_rollout_servers(cfg: AgentRLConfig) -> Iterator[list[RayServer]]:
    """Start `rollout.num_replicas` server actors on the Ray cluster (`ray.address`, or a local one) and yield
    their handles; the servers and actors are stopped afterwards."""
    import ray

    from agentrl.ray_cluster import init_ray

    owns_ray = init_ray(cfg.ray)
    handles: list[RayServer] = []
    try:
        remote = ray.remote(ServerActor).options(**actor_options(cfg))
        actors = [remote.remote(cfg) for _ in range(cfg.rollout.num_replicas)]
        described = _describe(actors)
        handles = [
            RayServer(a, cfg.rollout.backend, url, node) for a, (url, node) in zip(actors, described, strict=True)
        ]
        yield handles
    finally:
        for handle in handles:
            handle.stop()
        if owns_ray:
            ray.shutdown()


def _describe(actors: list[Any]) -> list[tuple[str, str]]:
    import ray

    try:
        return ray.get([a.describe.remote() for a in actors], timeout=STARTUP_TIMEOUT_S)
    except (ray.exceptions.RayError, TimeoutError) as exc:
        for actor in actors:
            ray.kill(actor)
        cause = getattr(exc, "cause", None) or exc
        raise RayServerError(
            f"a rollout server actor did not start: {cause}. See the Ray logs (/tmp/ray/session_latest/logs)."
        ) from None
