"""ContinuousCollector: `trainer.mode=fully_async`. Rollout never stops; each training step takes the next
`data.batch_size` complete groups (all `rollout.n` samples of a prompt), in completion order.

Admission follows AReaL's staleness rule: a new group may start only while the groups started so far number at
most (version + `trainer.max_staleness` + 1) × `batch_size`, `version` being the policy steps taken. A group
therefore starts at most `max_staleness` versions before the step that trains it; tokens generated after a weight
push carry the newer version (with `rollout.weight_update=resume`, generations in flight at a push continue on
the new weights), and what is still too stale when trained is corrected or dropped (`trainer.stale_samples`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from agentrl.config.schema import TrainerConfig
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.trainer.collect import CollectedBatch, score_rollout, trainable
from agentrl.trainer.cursor import DataCursor
from agentrl.types import Sample, Trajectory


class ContinuousCollector:
    """Keeps groups rolling out under the staleness bound and hands out complete ones per step.

    Args:
        manager: the rollout manager (local or over rollout workers).
        rewards: the reward pipeline (each group is scored as soon as it is complete).
        samples: the training set.
        batch_size: groups per step.
        trainer: `max_staleness`, `failed_trajectories`.
        version: the policy version the trainer has pushed (steps done).
        max_groups_in_flight: groups rolling out at once, at most (from `rollout.max_concurrency`).
        seed: seeds the data order, and each group's sampling when `rollout_seed` is set.
        rollout_seed: `rollout.seed`.
    """

    def __init__(
        self,
        manager: Any,
        rewards: RewardPipeline,
        samples: list[Sample],
        batch_size: int,
        trainer: TrainerConfig,
        version: Callable[[], int],
        max_groups_in_flight: int,
        seed: int = 0,
        rollout_seed: int | None = None,
    ) -> None:
        self.manager, self.rewards, self.samples = manager, rewards, samples
        self.batch_size, self.trainer, self.version = batch_size, trainer, version
        self.cursor = DataCursor(len(samples), seed=seed)
        self.rollout_seed = rollout_seed
        self.started = 0
        """Groups admitted so far."""
        self._ready: asyncio.Queue[list[Trajectory] | BaseException] = asyncio.Queue()
        self._changed = asyncio.Condition()
        self._slots = asyncio.Semaphore(max(1, max_groups_in_flight))
        self._groups: set[asyncio.Task[None]] = set()

    def admissible(self) -> bool:
        """Whether one more group may start now (AReaL's rule, see the module docstring)."""
        return self.started < (self.version() + self.trainer.max_staleness + 1) * self.batch_size

    async def notify(self) -> None:
        """Call after each weight push: the bound moved."""
        async with self._changed:
            self._changed.notify_all()

    async def run(self) -> None:
        """Start groups for as long as the run lasts (cancel to stop; unfinished groups are cancelled)."""
        try:
            while True:
                async with self._changed:
                    await self._changed.wait_for(self.admissible)
                await self._slots.acquire()
                (index,) = self.cursor.take(1)
                seed = None if self.rollout_seed is None else self.rollout_seed + 104729 * self.started
                task = asyncio.create_task(self._group(self.samples[index], seed))
                self._groups.add(task)
                task.add_done_callback(self._groups.discard)
                self.started += 1
        finally:
            for task in list(self._groups):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*self._groups, return_exceptions=True)

    async def next_batch(self, step: int) -> CollectedBatch:
        """The next `batch_size` complete, scored groups (waits for them)."""
        started = time.perf_counter()
        groups = [await self._next_group() for _ in range(self.batch_size)]
        generated = [traj for group in groups for traj in group]
        for traj in generated:
            traj.metadata["step"] = step
        train_on = trainable(self.trainer, generated)
        waited = time.perf_counter() - started
        metrics = {"rollout/groups_started": float(self.started), "rollout/groups_ready": float(self._ready.qsize())}
        timings = {"rollout_s": waited, "reward_s": 0.0}
        return CollectedBatch(step, train_on, generated, self.cursor.state(), timings, metrics)

    async def _next_group(self) -> list[Trajectory]:
        group = await self._ready.get()
        if isinstance(group, BaseException):
            raise RuntimeError(f"a rollout group failed outside the agent loop: {group!r}") from group
        return group

    async def _group(self, sample: Sample, seed: int | None) -> None:
        try:
            trajectories = await self.manager.run([sample], seed=seed)
            await score_rollout(self.rewards, self.trainer, trajectories, [sample])
            await self._ready.put(trajectories)
        except Exception as error:  # handed to the trainer, which stops the run with it
            await self._ready.put(error)
        finally:
            self._slots.release()
