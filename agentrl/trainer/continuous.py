"""ContinuousCollector: `trainer.mode=fully_async`. Rollout never stops; each training step takes the next
`data.batch_size` complete groups (all `rollout.n` samples of a prompt), in completion order.

Admission follows AReaL's staleness rule: a new group may start only while the groups started so far (less those
retired unused) number at most (version + `trainer.max_staleness` + 1) × `batch_size`, `version` being the policy
steps taken. That keeps the pipeline full, but a group consumed in completion order can still be older than the
bound when a step takes it (one slow group, trained many versions later). So the bound is also checked where it
is stated: when a step takes a group, its lag (the policy version being trained minus the oldest version that
wrote any of its tokens) must be at most `max_staleness`; a group past it is handled as `trainer.stale_samples`
says, and counted:
- `drop`: left out; the step takes the next complete group instead;
- `regenerate`: left out, and its prompt starts again on the current policy (ahead of new prompts);
- `correct`: trained, with the truncated importance weight against its exact rollout logprobs (`tis_cap`).
Under `trainer.dynamic_sampling` a group whose rewards are all equal is left out the same way, and the step takes
the next one from the stream (DAPO's filter, without waiting for a round).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from agentrl.config.schema import TrainerConfig
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.trainer.collect import CollectedBatch, score_rollout, trainable
from agentrl.trainer.cursor import DataCursor
from agentrl.trainer.sampling import has_reward_variance
from agentrl.trainer.staleness import STARTED_VERSION, oldest_version
from agentrl.types import Sample, Trajectory

MAX_REGENERATIONS = 3
"""Regenerations of one prompt for staleness, at most; then it is dropped."""
logger = logging.getLogger(__name__)
_STALE_COUNTS = {"drop": "stale_dropped", "regenerate": "stale_regenerated", "correct": "stale_corrected"}


class ContinuousCollector:
    """Keeps groups rolling out under the staleness bound and hands out complete ones per step.

    Args:
        manager: the rollout manager (local or over rollout workers).
        rewards: the reward pipeline (each group is scored as soon as it is complete).
        samples: the training set.
        batch_size: groups per step.
        trainer: `max_staleness`, `stale_samples`, `dynamic_sampling`, `failed_trajectories`.
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
        self.retired = 0
        """Admitted groups left out of training (past the bound, or no reward variance): their slots are free."""
        self.counts = {"stale_dropped": 0, "stale_regenerated": 0, "stale_corrected": 0, "zero_variance": 0}
        """Groups handled at the bound and by dynamic sampling, over the run."""
        self._base = version()
        """The version this collector started at (a resumed run's step): the admission bound counts from it."""
        self._redo: list[Sample] = []
        self._samples_of: dict[str, Sample] = {}
        """The prompt of each complete group not yet taken by a step (to regenerate it)."""
        self._regenerations: dict[int, int] = {}
        """Times each prompt (by `id`) was regenerated for staleness: at `MAX_REGENERATIONS` it is dropped."""
        self._warned: set[str] = set()
        self._flat_in_a_row = 0
        self._ready: asyncio.Queue[list[Trajectory] | BaseException] = asyncio.Queue()
        self._changed = asyncio.Condition()
        self._slots = asyncio.Semaphore(max(1, max_groups_in_flight))
        self._groups: set[asyncio.Task[None]] = set()

    def admissible(self) -> bool:
        """Whether one more group may start now (AReaL's rule, see the module docstring)."""
        bound = (self.version() - self._base + self.trainer.max_staleness + 1) * self.batch_size
        return self.started - self.retired < bound

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
                sample = self._redo.pop(0) if self._redo else self.samples[self.cursor.take(1)[0]]
                seed = None if self.rollout_seed is None else self.rollout_seed + 104729 * self.started
                task = asyncio.create_task(self._group(sample, seed, self.version()))
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
        before = dict(self.counts)
        groups: list[list[Trajectory]] = []
        left_out: list[Trajectory] = []
        self._flat_in_a_row = 0
        while len(groups) < self.batch_size:
            group = await self._next_group()
            if await self._admit_to_step(group):
                groups.append(group)
            else:
                left_out.extend(group)
        generated = [traj for group in groups for traj in group]
        for traj in [*generated, *left_out]:
            traj.metadata["step"] = step
        train_on = trainable(self.trainer, generated)
        waited = time.perf_counter() - started
        metrics = {"rollout/groups_started": float(self.started), "rollout/groups_ready": float(self._ready.qsize())}
        metrics.update({f"rollout/{k}": float(v - before[k]) for k, v in self.counts.items()})
        timings = {"rollout_s": waited, "reward_s": 0.0}
        return CollectedBatch(step, train_on, [*generated, *left_out], self.cursor.state(), timings, metrics)

    def lag(self, group: list[Trajectory]) -> int:
        """Policy versions between the one being trained now and the oldest that wrote any of `group`'s tokens
        (`agentrl.trainer.staleness.oldest_version`: a token of unknown version is as old as its group's start; a
        group that generated nothing, the version it started at)."""
        oldest = [oldest_version(t) for t in group]
        known = [v for v in oldest if v is not None]
        first = min(known) if known else min((t.metadata.get(STARTED_VERSION, 0) for t in group), default=0)
        return max(0, self.version() - first)

    async def _admit_to_step(self, group: list[Trajectory]) -> bool:
        """Whether the step trains `group`; a group left out frees its admission slot (and, under
        `stale_samples=regenerate`, its prompt runs again)."""
        if not group:
            return await self._retire()
        sample = self._samples_of.pop(group[0].group_id, None)
        if self.lag(group) > self.trainer.max_staleness:
            mode = self._stale_mode(sample)
            self.counts[_STALE_COUNTS[mode]] += 1
            if mode == "regenerate" and sample is not None:
                self._redo.append(sample)
            if mode != "correct":
                return await self._retire()
        if self.trainer.dynamic_sampling and not _varies(trainable(self.trainer, group)):
            self._flat_in_a_row += 1
            if self._flat_in_a_row <= self.trainer.max_sampling_rounds * self.batch_size:
                self.counts["zero_variance"] += 1
                return await self._retire()
            self._warn_once(
                "flat",
                f"dynamic sampling: {self._flat_in_a_row - 1} groups in a row had equal rewards; training on them "
                "rather than waiting for more (raise trainer.max_sampling_rounds to wait longer)",
            )
        return True

    def _stale_mode(self, sample: Sample | None) -> str:
        """`trainer.stale_samples`, except that a prompt regenerated `MAX_REGENERATIONS` times is dropped (it is
        slower than the bound allows every time: regenerating it again would never end)."""
        mode = self.trainer.stale_samples
        if mode != "regenerate" or sample is None:
            return "drop" if mode == "regenerate" else mode
        tries = self._regenerations.get(id(sample), 0)
        if tries >= MAX_REGENERATIONS:
            self._warn_once(
                "regenerate",
                f"a prompt was past trainer.max_staleness={self.trainer.max_staleness} after {tries} regenerations: "
                "dropped (its episodes take longer than the bound allows; raise max_staleness to keep such prompts)",
            )
            return "drop"
        self._regenerations[id(sample)] = tries + 1
        return mode

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)

    async def _retire(self) -> bool:
        self.retired += 1
        await self.notify()
        return False

    async def _next_group(self) -> list[Trajectory]:
        group = await self._ready.get()
        if isinstance(group, BaseException):
            raise RuntimeError(f"a rollout group failed outside the agent loop: {group!r}") from group
        return group

    async def _group(self, sample: Sample, seed: int | None, version: int) -> None:
        try:
            trajectories = await self.manager.run([sample], seed=seed)
            for traj in trajectories:
                traj.metadata[STARTED_VERSION] = version
            await score_rollout(self.rewards, self.trainer, trajectories, [sample])
            if trajectories:
                self._samples_of[trajectories[0].group_id] = sample
            await self._ready.put(trajectories)
        except Exception as error:  # handed to the trainer, which stops the run with it
            await self._ready.put(error)
        finally:
            self._slots.release()


def _varies(group: list[Trajectory]) -> bool:
    """Whether the group's rewards differ (a group with fewer than two scored members never does)."""
    return len(group) > 1 and has_reward_variance(group)
