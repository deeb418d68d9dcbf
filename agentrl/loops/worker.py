"""RolloutWorker: the unit that runs agent loops with everything they need on one host (its own rollout client,
the sandbox pool of its Docker engine, browsers, Gym envs), one trajectory job at a time per slot.

It works in this process (`await worker.start()`, `await worker.run(job)`) and as a Ray actor on any node
(`rollout.workers=N`, see `agentrl.loops.distributed`): Ray runs its async methods on the actor's event loop,
so one actor serves `rollout.worker_concurrency` jobs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from agentrl.config.policies import policy_config
from agentrl.config.schema import AgentRLConfig, RolloutConfig
from agentrl.loops.jobs import Job
from agentrl.types import Trajectory

CATCH_UP_WAIT_S = 10.0
"""Seconds a health check waits for a revived replica to reach the expected version before asking again later."""
CATCH_UP_POLL_S = 0.5
"""Seconds between two questions to a revived replica about the version it serves."""
_ANY = object()
"""`_caught_up` without a policy: the one whose replicas include the URL."""


class RolloutWorker:
    """Runs trajectory jobs against the rollout servers at `urls`.

    Args:
        cfg: the run's config (agent, tools, sandbox, env, rollout).
        urls: base URLs of the rollout servers; with several policies, each policy's by name.
        worker_id: name recorded on every trajectory it runs (`metadata["worker"]`).
        run_id: labels the worker's sandbox containers (for the orphan sweep).
        frozen: with several policies, those that do not learn (their replies are not trained on).
        session: what runs the jobs instead of the run's own servers and tools: called with `cfg`, an async context
            manager yielding a `RolloutManager` (benchmarks and tests drive the real worker against a simulated
            server this way).
    """

    def __init__(
        self,
        cfg: AgentRLConfig,
        urls: list[str] | dict[str, list[str]],
        worker_id: str = "local",
        run_id: str | None = None,
        frozen: list[str] | None = None,
        session: Callable[[AgentRLConfig], AbstractAsyncContextManager[Any]] | None = None,
    ):
        self.cfg, self.worker_id, self.run_id, self.session = cfg, worker_id, run_id, session
        self.urls = {name: list(u) for name, u in urls.items()} if isinstance(urls, dict) else {None: list(urls)}
        self.frozen = set(frozen or ())
        self.node = _node_id()
        self._stack: contextlib.AsyncExitStack | None = None
        self._manager: Any = None
        self._client: Any = None
        self._clients: list[Any] = []
        """One rollout client per policy (their routers count the failovers)."""
        self.busy_s = 0.0
        """Seconds of trajectory time run so far (summed over concurrent jobs)."""
        self.life = uuid.uuid4().hex
        """This start of the worker: a restarted actor counts from 0 again under a new one."""
        self._running: set[asyncio.Task[Any]] = set()
        self._versions: dict[str, int] = {}
        """The newest policy version of each replica at any of this worker's jobs (see `_caught_up`)."""

    async def start(self) -> str:
        """Build the client, tokenizer, sandbox pool and tools; returns the worker's id (idempotent)."""
        if self._manager is not None:
            return self.worker_id
        from agentrl.loops.local_session import local_rollout_session
        from agentrl.loops.policy_clients import PolicyClients
        from agentrl.models import load_tokenizer, resolve_model
        from agentrl.rollout.client import rollout_client

        await asyncio.to_thread(sweep_orphans)
        stack = contextlib.AsyncExitStack()
        if self.session is not None:
            self._manager = await stack.enter_async_context(self.session(self.cfg))
            self._stack = stack
            return self.worker_id
        clients = {}
        for policy, urls in self.urls.items():
            client = rollout_client(urls, self._rollout(policy))
            client.router.on_revive = functools.partial(self._caught_up, policy=policy)
            clients[policy] = await stack.enter_async_context(client)
        self._clients = list(clients.values())
        self._client = clients[None] if None in clients else PolicyClients(clients, self.frozen)
        tokenizer = load_tokenizer(resolve_model(self.cfg.model))
        run_id = f"{self.run_id}-{self.worker_id}" if self.run_id else None
        self._manager = await stack.enter_async_context(
            local_rollout_session(self.cfg, self._client, tokenizer, run_id=run_id)
        )
        self._stack = stack
        return self.worker_id

    async def run(self, job: Job) -> list[Trajectory]:
        """Run one job: its trajectory, or with `rollout.tree` its tree's leaves; loop failures are recorded on the
        trajectories, as in `RolloutManager`."""
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        await self.start()
        self.note_versions(job.versions)
        started = time.perf_counter()
        leaves = await self._manager.with_rollout(job.rollout).run_job_leaves(job)
        self.busy_s += time.perf_counter() - started
        for traj in leaves:
            traj.metadata.update({"worker": self.worker_id, "worker_node": self.node, "attempt": job.attempt})
        return leaves

    def note_versions(self, versions: dict[str, int]) -> None:
        """Remember the newest version of each replica (a job's `versions`), for `_caught_up`."""
        for url, version in versions.items():
            self._versions[url] = max(self._versions.get(url, 0), version)

    def _expected_version(self, url: str, policy: str | None) -> int:
        """The newest version the driver had pushed to the replicas of `policy` (0 for a frozen one: several
        policies may share a replica, LoRA adapters over a frozen base)."""
        if policy in self.frozen:
            return 0
        group = self.urls.get(policy, [url])
        return max([self._versions.get(u, 0) for u in group], default=0)

    def _policy_of(self, url: str) -> str | None:
        return next((policy for policy, urls in self.urls.items() if url in urls), None)

    def _rollout(self, policy: str | None) -> RolloutConfig:
        return self.cfg.rollout if policy is None else policy_config(self.cfg, policy).rollout

    async def _caught_up(self, url: str, policy: Any = _ANY) -> bool:
        """Whether a replica that answers again serves `policy`'s weights (default: the policy of `url`) at least
        as new as the driver's at this worker's latest job (the driver's own router pushes them there when it sees
        the replica back): until then it takes none of this worker's traffic, so a restarted replica's first
        weights never generate a worker's tokens."""
        policy = self._policy_of(url) if policy is _ANY else policy
        deadline = time.monotonic() + CATCH_UP_WAIT_S
        while True:
            version = await asyncio.to_thread(self._served_version, url, policy)
            if version is not None and version >= self._expected_version(url, policy):
                return True
            if time.monotonic() >= deadline:
                return False  # still behind: the next health check asks again
            await asyncio.sleep(CATCH_UP_POLL_S)

    def _served_version(self, url: str, policy: str | None = None) -> int | None:
        """The version the replica at `url` says it serves for `policy` (its LoRA adapter's, when the policy is
        one: `rollout.lora_adapter`); None if it cannot say."""
        from agentrl.rollout.handles import HFServer, connect_server

        rollout = self._rollout(policy)
        try:
            server = connect_server(url, rollout.backend)
            if rollout.lora_adapter and isinstance(server, HFServer):
                return server.served_version(rollout.lora_adapter)
            return server.served_version()
        except Exception:  # not answering yet, or cannot say: not taken back on this check
            return None

    def stats(self) -> dict[str, Any]:
        """The worker's id, node and busy seconds so far, and its clients' requests sent again after a failed
        attempt (`server_retries`) and replicas taken back (`replica_restarts`, counted by each worker that sees it),
        since this start of it (`life`)."""
        routers = [client.router for client in self._clients]
        return {
            "worker": self.worker_id,
            "life": self.life,
            "node": self.node,
            "busy_s": self.busy_s,
            "server_retries": sum(router.retries for router in routers),
            "replica_restarts": sum(router.revivals for router in routers),
        }

    async def close(self) -> None:
        """Cancel the trajectories still running (each removes its own containers), then stop the sandbox pool,
        browsers and client: no container is left."""
        running = [task for task in self._running if task is not asyncio.current_task()]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        stack, self._stack, self._manager = self._stack, None, None
        if stack is not None:
            await stack.aclose()


def sweep_orphans() -> int:
    """Remove the sandbox containers of dead processes on this host (a worker that died here before this one
    was restarted); 0 when this host has no Docker engine."""
    try:
        from agentrl.sandbox.containers import docker_client, remove_orphans

        return remove_orphans(docker_client())
    except Exception:  # no Docker here (a worker for Gym or browser tasks): nothing to sweep
        return 0


def _node_id() -> str:
    """The Ray node this runs on, or "local" outside Ray."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except Exception:  # no Ray, or not in a Ray process: this machine
        pass
    return "local"
