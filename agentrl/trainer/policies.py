"""The run's policies as the training loop drives them: one, or several (`policies:`) trained together.

Each policy has its own config (`agentrl.config.policies.policy_config`), rollout servers and client, and, when it
learns, its own backend (optimizer, scheduler, reference model) and weight sync to its own servers. A step trains
every learning policy on its share of the batch (`agentrl.trainer.policy_batches`) and pushes each one's weights;
a checkpoint holds every policy. With one policy nothing is split and the metrics keep their names (`train/loss`);
with several, each policy's are `train/<name>/...`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.config.policies import policy_config, policy_names
from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.loops.player_views import player_rows
from agentrl.trainer.backend import TrainBackend
from agentrl.trainer.exactness import VERSION_KNOWN, check_batch, exactness_metrics, version_known
from agentrl.trainer.policy_batches import policy_batches, policy_reward_metrics
from agentrl.trainer.tree_advantages import record_node_advantages
from agentrl.types import Trajectory


@dataclass
class PolicyRuntime:
    """One policy of the run: its config, model, backend (None when frozen), servers, client and weight sync."""

    name: str
    cfg: AgentRLConfig
    model_path: str
    trainable: bool
    backend: TrainBackend | None = None
    servers: list[Any] = field(default_factory=list)
    llm: Any = None
    sync: Any = None


class Policies:
    """Every policy of a run, started, trained, synced and saved together."""

    def __init__(self, cfg: AgentRLConfig):
        from agentrl.models import resolve_model

        self.cfg = cfg
        self.several = bool(cfg.policies)
        self.runtimes: list[PolicyRuntime] = []
        for name in policy_names(cfg):
            own = policy_config(cfg, name)
            trainable = cfg.policies[name].trainable if self.several else True
            self.runtimes.append(PolicyRuntime(name, own, resolve_model(own.model), trainable))

    @property
    def default(self) -> PolicyRuntime:
        return self.runtimes[0]

    @property
    def learning(self) -> list[PolicyRuntime]:
        return [r for r in self.runtimes if r.trainable]

    def load_tokenizer(self) -> Any:
        """The run's tokenizer (the first policy's); several policies must share one, since an episode's tokens
        are rendered once and every role reads them."""
        from agentrl.models import load_tokenizer

        tokenizer = load_tokenizer(self.default.model_path)
        for runtime in self.runtimes[1:]:
            other = load_tokenizer(runtime.model_path)
            if other.get_vocab() != tokenizer.get_vocab() or other.chat_template != tokenizer.chat_template:
                raise UserError(
                    f"policies {self.default.name} and {runtime.name} have different tokenizers or chat templates "
                    f"({self.default.model_path} vs {runtime.model_path}); policies of one episode share one "
                    "tokenizer: pick models of one family"
                )
        return tokenizer

    def start_backends(self, pad_token_id: int) -> None:
        from agentrl.trainer.backend import make_backend

        for runtime in self.learning:
            runtime.backend = make_backend(runtime.cfg, runtime.model_path, pad_token_id)

    def close(self) -> None:
        for runtime in self.learning:
            if runtime.backend is not None:
                runtime.backend.close()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Any]:
        """Start (or connect to) every policy's servers (`serve_policies`) and yield the loops' generator: the one
        policy's client, or a `PolicyClients` of all of them."""
        from agentrl.loops.policy_clients import serve_policies

        async with serve_policies(self.cfg, trains=True) as (llm, served):
            for runtime, policy in zip(self.runtimes, served, strict=True):
                runtime.servers, runtime.llm = policy.servers, policy.client
            yield llm

    def start_sync(self) -> None:
        """Check each learning policy's servers take weights, and set up its weight sync; a frozen policy's servers
        that the run connects to by URL get its model's weights once (they may hold other weights)."""
        from agentrl.rollout.routes import check_weight_routes
        from agentrl.trainer.sync import WeightSync

        for runtime in self.runtimes:
            if not runtime.trainable and runtime.cfg.rollout.urls:
                _serve_initial_weights(runtime)

        for runtime in self.learning:
            check_weight_routes(runtime.servers, runtime.cfg)
            r = runtime.cfg.rollout
            runtime.sync = WeightSync(
                runtime.servers,
                router=runtime.llm.router,
                in_flight=r.weight_update,
                scratch_dir=r.shared_weights_dir,
                broadcast=_nccl_broadcast(runtime),
                delta=r.weight_delta,
                timeout=r.weight_push_timeout_s,
            )

    def close_sync(self) -> None:
        for runtime in self.learning:
            if runtime.sync is not None:
                runtime.sync.close()

    def push(self, version: int) -> float:
        """Push every learning policy's weights to its servers as `version`; the seconds it took."""
        assert all(r.backend is not None and r.sync is not None for r in self.learning)
        return sum(r.sync.push(r.backend.state_dict(), version=version) for r in self.learning)

    def last_completions(self) -> list[float | None]:
        """When each policy's rollout client last had a request completed (`time.monotonic()`; the watchdog)."""
        guards = [getattr(r.llm, "stall_guard", None) for r in self.runtimes]
        return [g.last_completion for g in guards if g is not None]

    def describe_rollout(self) -> list[str]:
        """A line per rollout replica: its policy, whether it is live, its requests in flight, its version."""
        lines = []
        for runtime in self.runtimes:
            router = getattr(runtime.llm, "router", None)
            if router is None:
                continue
            in_flight, dead = router.in_flight, set(router.dead)
            for url in router.replicas:
                state = "DEAD (routed around)" if url in dead else "live"
                version = router.policy_version(url)
                lines.append(
                    f"{runtime.name} {url}: {state}, {in_flight.get(url, 0)} requests in flight, version {version}"
                )
        return lines

    def push_metrics(self) -> dict[str, float]:
        """What the last push moved: `perf/weight_sync_bytes` (the payloads staged, full and delta) and how many
        servers got a delta or the full weights."""
        last = [r.sync.last for r in self.learning if r.sync is not None]
        return {
            "perf/weight_sync_bytes": float(sum(x.full_bytes + x.delta_bytes for x in last)),
            "perf/weight_sync_delta_servers": float(sum(x.delta_servers for x in last)),
            "perf/weight_sync_full_servers": float(sum(x.full_servers for x in last)),
        }

    def known_versions(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """`rollout/version_known` of each learning policy's share of `trajectories` (`rollout/<name>/...` with
        several), before any update: what the exactness check needs to stop a step before it trains. (Each role's
        view keeps the same tokens trainable, so the roles' split is not needed here.)"""
        if not self.several:
            return {VERSION_KNOWN: version_known(trajectories)}
        batches = policy_batches(trajectories, [r.name for r in self.runtimes])
        return {_for_policy(VERSION_KNOWN, r.name): version_known(batches[r.name]) for r in self.learning}

    def step(self, trajectories: list[Trajectory], version: int) -> dict[str, Any]:
        """One update of every learning policy on its share of `trajectories`: the train/* and exactness metrics
        (each policy's under `train/<name>/` when there are several). An episode of several roles trains as one
        view per role, each on its own reward (`agentrl.loops.player_views`)."""
        trajectories = player_rows(trajectories)
        if not self.several:
            return _step(self.default, trajectories, version)
        batches = policy_batches(trajectories, [r.name for r in self.runtimes])
        metrics: dict[str, Any] = {}
        for runtime in self.learning:
            own = _step(runtime, batches[runtime.name], version)
            metrics.update({_for_policy(k, runtime.name): v for k, v in own.items()})
        return metrics

    def reward_metrics(self, trajectories: list[Trajectory], section: str) -> dict[str, float]:
        """Each policy's own reward and success (`<section>/<name>/...`) when there are several; else none."""
        if not self.several:
            return {}
        return policy_reward_metrics(trajectories, [r.name for r in self.runtimes], section)

    def failover_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for runtime in self.runtimes:
            for key, value in runtime.llm.router.failover_metrics().items():
                name = key if not self.several else _for_policy(key, runtime.name)
                out[name] = value
        return out

    def save(self, folder: Path) -> None:
        """Every learning policy's engine: in `folder` (one policy), or in `folder/<name>`."""
        for runtime in self.learning:
            assert runtime.backend is not None
            runtime.backend.save(folder / runtime.name if self.several else folder)

    def load(self, folder: Path) -> None:
        for runtime in self.learning:
            assert runtime.backend is not None
            runtime.backend.load(folder / runtime.name if self.several else folder)


def _serve_initial_weights(runtime: PolicyRuntime) -> None:
    from agentrl.models import load_model
    from agentrl.rollout.routes import check_weight_routes
    from agentrl.trainer.sync import WeightSync

    check_weight_routes(runtime.servers, runtime.cfg)
    sync = WeightSync(runtime.servers, router=runtime.llm.router, scratch_dir=runtime.cfg.rollout.shared_weights_dir)
    try:
        sync.push(load_model(runtime.model_path).state_dict(), version=0)
    finally:
        sync.close()


def _step(runtime: PolicyRuntime, trajectories: list[Trajectory], version: int) -> dict[str, Any]:
    assert runtime.backend is not None
    if runtime.cfg.trainer.objective == "sft":  # demonstrations: no logprobs, versions or advantages to check
        return runtime.backend.step(trajectories) if trajectories else {"train/skipped": 1.0}
    check_batch(trajectories, runtime.cfg.rollout.backend)
    metrics = runtime.backend.step(trajectories) if trajectories else {"train/skipped": 1.0}
    record_node_advantages(runtime.cfg.trainer, trajectories)  # here, not on the ranks: the step saves these
    return {**exactness_metrics(trajectories, version, metrics), **metrics}


def _for_policy(key: str, name: str) -> str:
    """`train/loss` of policy `name` as `train/<name>/loss` (any `section/...` key likewise)."""
    section, _, rest = key.partition("/")
    return f"{section}/{name}/{rest}" if rest else f"{name}/{key}"


def _nccl_broadcast(runtime: PolicyRuntime) -> Any:
    """`rollout.weight_transfer=nccl`: the broadcast to the policy's servers' NCCL group (None: by file)."""
    r = runtime.cfg.rollout
    if r.weight_transfer != "nccl":
        return None
    from agentrl.trainer.nccl_sync import NcclPush, nccl_sender

    in_flight = "abort" if r.weight_update == "resume" else r.weight_update
    return NcclPush(lambda members: nccl_sender(members, runtime.cfg), runtime.servers, in_flight)


__all__ = ["Policies", "PolicyRuntime"]
