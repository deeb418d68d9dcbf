"""The global job queue over rollout workers, with FAKE worker actors (no Ray cluster): request-level hand-out,
every trajectory exactly once, per-trajectory seeds as in one process, jobs of a dead worker retried elsewhere,
and `worker_lost` trajectories once retries are spent or no worker lives."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from agentrl.config.schema import RolloutConfig
from agentrl.loops.distributed import DistributedRolloutManager, WorkerSlot
from agentrl.loops.manager import trajectory_seed
from agentrl.rollout.router import Router
from agentrl.types import Sample, StopReason, Trajectory

ray_exceptions = pytest.importorskip("ray.exceptions")


class Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return self.fn(*args)


class FakeWorker:
    """Runs a job after `delay` seconds; dies (RayActorError on its in-flight and later calls) when told to."""

    def __init__(self, name: str, delay: float = 0.01, restarts: bool = False) -> None:
        self.name, self.delay, self.restarts = name, delay, restarts
        self.dead = False
        self.ran: list[tuple[int, int, int | None]] = []
        self.run, self.start, self.stats = Method(self._run), Method(self._start), Method(self._stats)

    async def _run(self, job) -> list[Trajectory]:
        await asyncio.sleep(self.delay)
        if self.dead:
            raise ray_exceptions.RayActorError()
        self.ran.append((job.position, job.sample_index, job.seed))
        traj = Trajectory(group_id=job.group_id, sample_index=job.sample_index, agent_name="x")
        traj.metadata.update({"sample_position": job.position, "worker": self.name, "attempt": job.attempt})
        traj.stop_reason = StopReason.DONE
        return [traj]

    async def _start(self) -> str:
        if self.dead and not self.restarts:
            raise ray_exceptions.RayActorError()
        self.dead = False
        return self.name

    async def _stats(self) -> dict:
        return {"worker": self.name, "node": "n", "busy_s": self.delay * len(self.ran)}


def manager(workers, concurrency=2, retries=1, seed=5) -> DistributedRolloutManager:
    slots = [WorkerSlot(w.name, w) for w in workers]
    return DistributedRolloutManager(slots, Router(["http://a:1"]), RolloutConfig(n=2, seed=seed), concurrency, retries)


SAMPLES = [Sample(id=f"s{i}", prompt=[{"role": "user", "content": str(i)}]) for i in range(6)]


async def test_every_job_runs_once_with_the_seeds_one_process_would_use() -> None:
    fast, slow = FakeWorker("w0", 0.005), FakeWorker("w1", 0.05)
    out = await manager([fast, slow]).run(SAMPLES)
    keys = [(t.metadata["sample_position"], t.sample_index) for t in out]
    assert keys == [(p, k) for p in range(6) for k in range(2)]
    ran = fast.ran + slow.ran
    assert sorted(ran) == sorted((p, k, trajectory_seed(5, p, k)) for p in range(6) for k in range(2))
    assert len(fast.ran) > len(slow.ran)  # request-level: the fast worker took more jobs


async def test_a_dead_workers_jobs_are_retried_on_a_live_one() -> None:
    healthy, victim = FakeWorker("w0", 0.02), FakeWorker("w1", 0.05)
    m = manager([healthy, victim])
    stream = m.stream(SAMPLES)
    first = await anext(stream)
    victim.dead = True  # its in-flight jobs fail, and Ray does not bring it back
    rest = [t async for t in stream]
    out = [first, *rest]
    assert Counter((t.metadata["sample_position"], t.sample_index) for t in out) == Counter(
        (p, k) for p in range(6) for k in range(2)
    )
    assert all(t.stop_reason is StopReason.DONE for t in out)
    retried = [t for t in out if t.metadata["attempt"] == 1]
    assert retried and all(t.metadata["worker"] == "w0" for t in retried)
    metrics = await m.take_metrics(1.0)
    assert metrics["rollout/job_retries"] == len(retried) and metrics["rollout/live_workers"] == 1.0


class HangingWorker(FakeWorker):
    """Alive but stuck: its jobs never return until the driver kills it (Ray then restarts it, healthy)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, 0.01, restarts=True)
        self.hanging = True

    async def _run(self, job) -> list[Trajectory]:
        if self.hanging:
            await asyncio.sleep(3600)  # cancelled when the driver gives up on it
        return await super()._run(job)


async def test_a_stuck_worker_is_restarted_and_its_job_runs_again(monkeypatch) -> None:
    stuck, healthy = HangingWorker("w1"), FakeWorker("w0", 0.01)
    killed: list[str] = []

    def kill(worker: WorkerSlot) -> None:
        killed.append(worker.name)
        worker.actor.hanging = False  # as ray.kill, then Ray's restart: a healthy actor

    monkeypatch.setattr(DistributedRolloutManager, "_restart", staticmethod(kill))
    slots = [WorkerSlot(w.name, w) for w in (healthy, stuck)]
    rollout = RolloutConfig(n=2, trajectory_timeout_s=0.3, job_timeout_s=0.3)
    m = DistributedRolloutManager(slots, Router(["http://a:1"]), rollout, 2, 1)  # two slots on each worker
    out = [t async for t in m.stream(SAMPLES[:3])]
    assert sorted((t.metadata["sample_position"], t.sample_index) for t in out) == [
        (p, k) for p in range(3) for k in range(2)
    ]
    assert all(t.stop_reason is StopReason.DONE for t in out)
    assert killed == ["w1"]  # once, though both its slots' jobs passed their deadline
    assert [t.metadata["attempt"] for t in out].count(1) == 2  # the stuck jobs, run again
    assert (await m.take_metrics(1.0))["rollout/stuck_workers"] == 1.0
    assert stuck.ran  # restarted, it took jobs again


def test_a_jobs_deadline_is_derived_from_the_runs_own_job_times() -> None:
    from agentrl.loops.distributed import job_deadline

    deadline = job_deadline(RolloutConfig(trajectory_timeout_s=100))
    assert deadline.seconds() == 200  # before any job: twice a trajectory's limit
    deadline.observe(50.0)
    assert deadline.seconds() == 250  # 5x the slowest job
    assert job_deadline(RolloutConfig(trajectory_timeout_s=5, job_timeout_s=7)).seconds() == 7
    with pytest.raises(ValueError, match="below rollout.trajectory_timeout_s"):
        RolloutConfig(trajectory_timeout_s=100, job_timeout_s=7)


async def test_a_jobs_own_timeout_error_is_not_a_stuck_worker() -> None:
    class Failing(FakeWorker):
        async def _run(self, job) -> list[Trajectory]:
            raise TimeoutError("the job's own")  # as Ray re-raises a remote TimeoutError

    slots = [WorkerSlot("w0", Failing("w0"))]
    m = DistributedRolloutManager(slots, Router(["http://a:1"]), RolloutConfig(n=1), 1, 1)
    with pytest.raises(TimeoutError, match="the job's own"):
        [t async for t in m.stream(SAMPLES[:1])]
    assert m.stuck_workers == 0


async def test_a_restarted_worker_keeps_taking_jobs() -> None:
    worker = FakeWorker("w0", 0.01, restarts=True)
    m = manager([worker], concurrency=1)
    stream = m.stream(SAMPLES[:2])
    await anext(stream)
    worker.dead = True  # the next job dies with it; Ray restarts it (start answers again)
    rest = [t async for t in stream]
    assert len(rest) == 3 and all(t.stop_reason is StopReason.DONE for t in rest)
    assert (await m.take_metrics(1.0))["rollout/live_workers"] == 1.0


async def test_jobs_are_lost_when_retries_are_spent_or_no_worker_lives() -> None:
    only = FakeWorker("w0", 0.01)
    only.dead = True
    out = await manager([only], retries=0).run(SAMPLES[:2])
    assert len(out) == 4 and all(t.stop_reason is StopReason.WORKER_LOST and t.failed for t in out)
    assert "rollout.max_job_retries" in out[0].error or "no rollout worker is alive" in out[0].error


@pytest.mark.parametrize("error", ["ObjectLostError", "OwnerDiedError"])
async def test_a_lost_result_object_is_a_lost_worker_the_job_runs_again_once(error: str) -> None:
    class LosesOneResult(FakeWorker):
        """The first job's result object is lost (its owner died); the actor itself lives on."""

        async def _run(self, job) -> list[Trajectory]:
            traj = await super()._run(job)
            if len(self.ran) == 1:
                raise getattr(ray_exceptions, error)("ff" * 14, None, "run")
            return traj

    worker = LosesOneResult("w0", 0.005)
    m = manager([worker], concurrency=1)
    out = await m.run(SAMPLES[:2])
    keys = [(t.metadata["sample_position"], t.sample_index) for t in out]
    assert sorted(keys) == [(p, k) for p in range(2) for k in range(2)]  # none lost, none twice
    assert all(t.stop_reason is StopReason.DONE for t in out)
    assert (await m.take_metrics(1.0))["rollout/job_retries"] == 1.0


async def test_the_workers_failovers_are_counted_per_step() -> None:
    """Each worker's own client retries requests to a dead replica: the step's metrics count them (the driver's
    router never sees those requests)."""

    class Retries(FakeWorker):
        retries, life = 0, "first"

        async def _stats(self) -> dict:
            return {**await super()._stats(), "life": self.life, "server_retries": self.retries, "replica_restarts": 0}

    one, two = Retries("w0"), Retries("w1")
    m = manager([one, two])
    one.retries, two.retries = 2, 1
    assert (await m.take_metrics(1.0))["rollout/worker_server_retries"] == 3.0
    one.retries = 5  # totals since the worker started: the step reports what is new
    metrics = await m.take_metrics(1.0)
    assert metrics["rollout/worker_server_retries"] == 3.0 and metrics["rollout/worker_replica_restarts"] == 0.0
    one.life, one.retries = "second", 1  # Ray restarted it: it counts from 0 again
    assert (await m.take_metrics(1.0))["rollout/worker_server_retries"] == 1.0


class OneTrajectoryWorker(FakeWorker):
    """A worker written for the old contract: `run(job)` answers one trajectory, not the job's list."""

    async def _run(self, job) -> Trajectory:
        (traj,) = await super()._run(job)
        return traj


async def test_a_worker_answering_one_trajectory_instead_of_the_job_s_list_fails_naming_the_contract() -> None:
    with pytest.raises(TypeError, match=r"rollout worker w0 answered a job with Trajectory: a worker's run\(job\)"):
        await manager([OneTrajectoryWorker("w0")]).run(SAMPLES)
