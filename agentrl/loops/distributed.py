"""Rollouts over a Ray cluster (`rollout.workers=N`): `RolloutWorker` actors on any nodes, one global queue.

Jobs are handed out request-level: each worker has `rollout.worker_concurrency` slots, and a free slot takes the
next job from the queue (no static chunks, so a slow trajectory holds only its own slot). Trajectories come back
through the object store in completion order. Seeds are derived exactly as in one process (same seed, same
trajectories, whatever the number of workers).

A worker that dies (node lost, OOM, `ray.kill`) loses nothing silently: its in-flight jobs go back to the queue
and run on a live worker, up to `rollout.max_job_retries` times; after that each becomes a `worker_lost`
trajectory (an infrastructure failure, not trained on). Ray restarts the actor (`rollout.worker_max_restarts`);
the containers of the dead one are removed by the orphan sweep of its node. A worker alive but stuck (a job past
its deadline, `rollout.job_timeout_s`, by default derived from the run's own job times) is killed so that Ray
restarts it, and its jobs go back to the queue the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from agentrl.config.schema import AgentRLConfig, RolloutConfig
from agentrl.deadline import AdaptiveDeadline
from agentrl.errors import InfrastructureError
from agentrl.loops.jobs import Job, JobRunner
from agentrl.loops.worker import RolloutWorker
from agentrl.rollout.router import Router
from agentrl.types import Sample, StopReason, Trajectory

READY_TIMEOUT_S = 900.0
REVIVE_TIMEOUT_S = 300.0


class RolloutWorkerError(InfrastructureError):
    """Rollout workers could not be placed or started."""


@dataclass
class WorkerSlot:
    """The driver's view of one worker actor."""

    name: str
    actor: Any
    alive: bool = True
    jobs: int = 0
    restarts: int = 0
    """Times the driver killed the actor for being stuck (its slots' jobs started before that are lost with it)."""


class DistributedRolloutManager(JobRunner):
    """Spreads trajectory jobs over rollout worker actors through one queue (see the module docstring).

    Args:
        workers: the worker slots (actors already started).
        router: the driver's router (or each policy's, by name, with several policies); the per-replica policy
            versions go along with each job.
        rollout: sampling settings, `n`, per-worker concurrency.
        max_job_retries: times a job whose worker died is sent again.
        show_progress: draw a progress bar.
    """

    def __init__(
        self,
        workers: list[WorkerSlot],
        router: Router | Mapping[str, Router],
        rollout: RolloutConfig,
        concurrency: int,
        max_job_retries: int = 1,
        show_progress: bool = False,
    ) -> None:
        self.workers = workers
        self.last_completed: float | None = None
        """`time.monotonic()` when a job's trajectories last came back (the trainer's watchdog reads it)."""
        self.routers = list(router.values()) if isinstance(router, Mapping) else [router]
        self.rollout = rollout
        self.concurrency = concurrency
        self.max_job_retries = max_job_retries
        self.show_progress = show_progress
        self.job_retries = 0
        """Jobs sent again after their worker died, since the start."""
        self.job_deadline = job_deadline(rollout)
        self._reported_stuck = 0
        self._reported_retries = 0
        self._seen: dict[str, dict[str, Any]] = {}
        """Each worker's stats at the previous `take_metrics` (its counters are totals since it started)."""

    async def stream(
        self, samples: list[Sample], n: int | None = None, seed: int | None = None
    ) -> AsyncIterator[Trajectory]:
        """Yield trajectories in completion order; closing the iterator cancels the unfinished ones. Seeds as in
        `RolloutManager.stream`."""
        versions = {
            url: v
            for router in self.routers
            for url in router.replicas
            if (v := router.policy_version(url)) is not None
        }
        jobs: asyncio.Queue[Job] = asyncio.Queue()
        for job in self.plan(samples, n, seed, versions):
            jobs.put_nowait(job)
        total = jobs.qsize()
        done: asyncio.Queue[list[Trajectory]] = asyncio.Queue()
        slots = [  # slot k of every worker before slot k + 1: the first jobs spread over the workers
            asyncio.create_task(self._slot(worker, jobs, done))
            for _ in range(min(self.concurrency, total))
            for worker in self.workers
            if worker.alive
        ]
        unit = "tree" if self.rollout.tree.enabled else "traj"
        bar = tqdm(total=total, desc="rollout", disable=not self.show_progress, unit=unit)
        try:
            for _ in range(total):
                finished = await self._next(done, jobs, slots)
                bar.update(1)
                for traj in finished:
                    yield traj
        finally:
            bar.close()
            for slot in slots:
                slot.cancel()
            await asyncio.gather(*slots, return_exceptions=True)

    @property
    def stuck_workers(self) -> int:
        """Workers restarted because a job passed its deadline, since the start."""
        return sum(worker.restarts for worker in self.workers)

    async def take_metrics(self, wall_s: float) -> dict[str, float]:
        """Since the previous call: `rollout/job_retries`, `rollout/stuck_workers` (restarted for a job past its
        deadline), the workers' `rollout/worker_server_retries` and
        `rollout/worker_replica_restarts` (the failovers of the workers' own clients; the driver's own are
        `rollout/server_retries` and `rollout/replica_restarts`), and `perf/rollout_worker_busy/<worker>` (the
        share of the worker's slots busy over `wall_s` seconds of rollout); `rollout/live_workers` now."""
        retries, self._reported_retries = self.job_retries - self._reported_retries, self.job_retries
        stuck, self._reported_stuck = self.stuck_workers - self._reported_stuck, self.stuck_workers
        metrics = {
            "rollout/job_retries": float(retries),
            "rollout/stuck_workers": float(stuck),
            "rollout/live_workers": float(sum(w.alive for w in self.workers)),
            "rollout/worker_server_retries": 0.0,
            "rollout/worker_replica_restarts": 0.0,
        }
        for stat in await self.worker_stats():
            seen = self._seen.get(stat["worker"], {})
            if stat.get("life") != seen.get("life"):  # a restarted worker counts from 0 again
                seen = {}
            self._seen[stat["worker"]] = stat
            busy = max(0.0, stat["busy_s"] - seen.get("busy_s", 0.0))
            share = busy / (wall_s * self.concurrency) if wall_s else 0.0
            metrics[f"perf/rollout_worker_busy/{stat['worker']}"] = share
            for key in ("server_retries", "replica_restarts"):
                metrics[f"rollout/worker_{key}"] += float(max(0, stat.get(key, 0) - seen.get(key, 0)))
        return metrics

    async def worker_stats(self) -> list[dict[str, Any]]:
        """Each live worker's stats (`RolloutWorker.stats`)."""
        stats = await asyncio.gather(*(w.actor.stats.remote() for w in self.workers if w.alive), return_exceptions=True)
        return [s for s in stats if isinstance(s, dict)]

    async def _next(
        self, done: asyncio.Queue[list[Trajectory]], jobs: asyncio.Queue[Job], slots: list[Any]
    ) -> list[Trajectory]:
        """The next finished job's trajectories (a tree's leaves, or one). Slots only end when their worker is gone
        (or on an error, raised here); with none left, the next queued job becomes a `worker_lost` trajectory."""
        while done.empty():
            running = [slot for slot in slots if not slot.done()]
            for slot in slots:
                if slot.done() and not slot.cancelled() and slot.exception() is not None:
                    raise slot.exception()  # type: ignore[misc]
            if not running:
                return [lost(jobs.get_nowait(), "no rollout worker is alive")]
            getter = asyncio.ensure_future(done.get())
            await asyncio.wait([getter, *running], return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                self.last_completed = time.monotonic()
                return getter.result()
            getter.cancel()
        self.last_completed = time.monotonic()
        return done.get_nowait()

    async def _slot(self, worker: WorkerSlot, jobs: asyncio.Queue[Job], done: asyncio.Queue[list[Trajectory]]) -> None:
        """One slot of a worker: runs the next job, again and again, while the worker lives."""
        import ray

        while worker.alive:
            job = await jobs.get()
            deadline, started, restarts = self.job_deadline.seconds(), time.monotonic(), worker.restarts
            try:
                async with asyncio.timeout(deadline) as clock:
                    leaves = await worker.actor.run.remote(job)
            except TimeoutError:
                if not clock.expired():
                    raise  # the job's own error, raised again by Ray: not a stuck worker
                why = f"rollout worker {worker.name} did not finish a job within its deadline of {deadline:.0f} s"
                await self._requeue(job, jobs, done, f"{why} (rollout.job_timeout_s)")
                if worker.restarts == restarts:  # the first of its slots to notice kills it, once
                    worker.restarts += 1
                    self._restart(worker)
                if not await self._revived(worker):
                    worker.alive = False
                continue
            except worker_lost_errors(ray) as exc:
                # the actor died, or its result object was lost with the node or process that owned it: either
                # way the job's trajectory never arrived, so it runs again (and is counted once, when it does)
                await self._requeue(job, jobs, done, f"rollout worker {worker.name} died: {type(exc).__name__}: {exc}")
                if not await self._revived(worker):
                    worker.alive = False
                continue
            worker.jobs += 1
            self.job_deadline.observe(time.monotonic() - started)
            await done.put(checked_leaves(leaves, worker.name))

    async def _requeue(
        self, job: Job, jobs: asyncio.Queue[Job], done: asyncio.Queue[list[Trajectory]], why: str
    ) -> None:
        if job.attempt < self.max_job_retries:
            self.job_retries += 1
            jobs.put_nowait(dataclasses.replace(job, attempt=job.attempt + 1))
        else:
            await done.put([lost(job, f"{why} (after {job.attempt} retries, rollout.max_job_retries)")])

    @staticmethod
    def _restart(worker: WorkerSlot) -> None:
        """Kill a stuck worker's actor; Ray restarts it (`rollout.worker_max_restarts`)."""
        import ray

        with contextlib.suppress(Exception):  # already dead: nothing to kill
            ray.kill(worker.actor, no_restart=False)

    @staticmethod
    async def _revived(worker: WorkerSlot) -> bool:
        """Whether Ray restarted the worker's actor (it answers again within the timeout)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(REVIVE_TIMEOUT_S):
                await worker.actor.start.remote()
            return True
        return False


def job_deadline(rollout: RolloutConfig) -> AdaptiveDeadline:
    """A worker job's deadline: `rollout.job_timeout_s`, else 5x the slowest job so far and at least twice a
    trajectory's own limit (a job holds one trajectory, or one tree whose branches run at once)."""
    floor = 2 * rollout.trajectory_timeout_s
    return AdaptiveDeadline(explicit=rollout.job_timeout_s, first=floor, floor=floor, factor=5.0)


def worker_lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors that mean a job's trajectory will never arrive: its actor died (`RayActorError`), or its
    result object was lost (`ObjectLostError`, and `OwnerDiedError`, one of those, when its owner died)."""
    exceptions = ray.exceptions
    return (exceptions.RayActorError, exceptions.ObjectLostError, exceptions.OwnerDiedError)


def lost(job: Job, why: str) -> Trajectory:
    """The trajectory of a job no worker could finish: a `worker_lost` infrastructure failure."""
    traj = Trajectory(group_id=job.group_id, sample_index=job.sample_index, agent_name=job.sample.agent_name or "")
    traj.metadata.update(
        {"sample_id": job.sample.id, "sample_position": job.position, "data_source": job.sample.data_source}
    )
    traj.stop_reason, traj.error = StopReason.WORKER_LOST, why
    return traj


@contextlib.asynccontextmanager
async def distributed_rollout_session(
    cfg: AgentRLConfig,
    router: Router | Mapping[str, Router],
    rollout: RolloutConfig | None = None,
    show_progress: bool = False,
    run_id: str | None = None,
    frozen: frozenset[str] = frozenset(),
) -> AsyncIterator[DistributedRolloutManager]:
    """Start `rollout.workers` worker actors (joining or starting Ray) and yield a manager over them; the actors
    are closed (their sandboxes removed) and killed afterwards, also on Ctrl-C. With several policies, `router`
    maps each policy to its router (`frozen`: the policies that do not learn), and each worker reaches every
    policy's servers."""
    import ray

    from agentrl.ray_cluster import init_ray

    r = cfg.rollout
    owns_ray = init_ray(cfg.ray)
    concurrency = r.worker_concurrency or max(1, -(-r.max_concurrency // r.workers))
    remote = ray.remote(RolloutWorker).options(**worker_options(cfg, concurrency))
    run_id = run_id or uuid.uuid4().hex[:8]
    urls = {name: x.replicas for name, x in router.items()} if isinstance(router, Mapping) else router.replicas
    workers = [WorkerSlot(f"w{i}", remote.remote(cfg, urls, f"w{i}", run_id, sorted(frozen))) for i in range(r.workers)]
    started = time.perf_counter()
    try:
        await _all_started(workers)
        print(f"{r.workers} rollout workers ready in {time.perf_counter() - started:.1f} s", flush=True)
        yield DistributedRolloutManager(
            workers, router, rollout or r, concurrency, r.max_job_retries, show_progress=show_progress
        )
    finally:
        await _close(workers)
        if owns_ray:
            ray.shutdown()


def worker_options(cfg: AgentRLConfig, concurrency: int) -> dict[str, Any]:
    """Ray options of each worker actor; raises `RolloutWorkerError` when the cluster cannot hold them."""
    import ray

    r, total = cfg.rollout, ray.cluster_resources()
    needed = {"CPU": r.num_cpus_per_worker, **r.worker_resources}
    short = [
        f"{name}: {r.workers} x {amount:g} > the cluster's {total.get(name, 0):g}"
        for name, amount in needed.items()
        if amount and total.get(name, 0) < amount  # each worker must fit somewhere; Ray queues the rest
    ]
    if short:
        raise RolloutWorkerError(
            f"cannot place rollout workers ({'; '.join(short)}): lower rollout.num_cpus_per_worker, drop "
            "rollout.worker_resources the cluster lacks, or add nodes that have them (`ray start --resources`)"
        )
    return {
        "num_cpus": r.num_cpus_per_worker,
        "resources": dict(r.worker_resources),
        "max_concurrency": concurrency + 2,  # the job slots, plus stats/close calls
        "max_restarts": r.worker_max_restarts,
    }


async def _all_started(workers: list[WorkerSlot]) -> None:
    # asyncio.timeout, not wait_for, here and below: on Python 3.11 wait_for drops a cancellation (Ctrl-C) that
    # lands as the awaited call completes, and the rollout ran on to the end
    try:
        async with asyncio.timeout(READY_TIMEOUT_S):
            await asyncio.gather(*(w.actor.start.remote() for w in workers))
    except Exception as exc:
        cause = getattr(exc, "cause", None) or exc
        raise RolloutWorkerError(
            f"rollout workers did not start: {type(cause).__name__}: {cause}. "
            "See the Ray logs (/tmp/ray/session_latest/logs)."
        ) from None


async def _close(workers: list[WorkerSlot]) -> None:
    import ray

    closing = [w.actor.close.remote() for w in workers]
    with contextlib.suppress(Exception):
        async with asyncio.timeout(120):
            await asyncio.gather(*closing, return_exceptions=True)
    for worker in workers:
        with contextlib.suppress(Exception):
            ray.kill(worker.actor, no_restart=True)


def checked_leaves(leaves: Any, worker: str) -> list[Trajectory]:
    """A worker's answer to a job, which must be the job's list of trajectories (`RolloutWorker.run`).

    Raises:
        TypeError: the worker answered something else (a worker written for an older contract returns one
            trajectory), naming what it returned.
    """
    if isinstance(leaves, list) and all(isinstance(t, Trajectory) for t in leaves):
        return leaves
    got = (
        type(leaves).__name__
        if not isinstance(leaves, list)
        else f"a list of {sorted({type(t).__name__ for t in leaves})}"
    )
    raise TypeError(
        f"rollout worker {worker} answered a job with {got}: a worker's run(job) returns the job's list of "
        "trajectories (RolloutWorker.run: one, or a tree's leaves)"
    )
