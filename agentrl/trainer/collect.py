"""BatchCollector: one training step's scored trajectories — rollout, rewards, DAPO shaping and dynamic sampling."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.config.schema import TrainerConfig
from agentrl.loops.manager import RolloutManager
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.trainer.cursor import DataCursor
from agentrl.trainer.sampling import DynamicSamplingBuffer, groups_to_request, overlong_penalty
from agentrl.trainer.staleness import STARTED_VERSION
from agentrl.types import Sample, Trajectory


@dataclass
class CollectedBatch:
    """The trajectories of one step, with what it took to make them."""

    step: int
    trajectories: list[Trajectory]
    """Scored trajectories to train on (zero-variance groups already dropped under dynamic sampling; failed ones
    left out unless `trainer.failed_trajectories=zero_reward`)."""
    generated: list[Trajectory]
    """Everything generated for the step (for metrics and the saved trajectories)."""
    cursor_state: dict[str, int]
    """The data cursor right after this batch was drawn (saved with the checkpoint of this step)."""
    timings: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> list[Trajectory]:
        """The generated trajectories an infrastructure failure ended."""
        return [t for t in self.generated if t.failed]


class BatchCollector:
    """Draws prompts with a `DataCursor`, rolls them out, scores them and shapes the rewards.

    Args:
        manager: the rollout manager (`rollout.n` samples per prompt form a group).
        rewards: the reward pipeline.
        samples: the training set.
        batch_size: prompts (groups) per step.
        trainer: `dynamic_sampling`, `max_sampling_rounds`, `overlong_*`.
        seed: seeds the data order, and each step's sampling when `rollout.seed` is set.
        version: the policy version the rollout servers hold (recorded on each trajectory as the version its group
            started at: the age of a token whose server reported no version, `agentrl.trainer.staleness`).
    """

    def __init__(
        self,
        manager: RolloutManager,
        rewards: RewardPipeline,
        samples: list[Sample],
        batch_size: int,
        trainer: TrainerConfig,
        seed: int = 0,
        version: Callable[[], int] = lambda: 0,
    ):
        self.manager = manager
        self.rewards = rewards
        self.samples = samples
        self.batch_size = batch_size
        self.trainer = trainer
        self.cursor = DataCursor(len(samples), seed=seed)
        self.rollout_seed = manager.rollout.seed
        self.version = version

    async def collect(self, step: int) -> CollectedBatch:
        """Roll out and score the batch of `step` (several rounds under dynamic sampling)."""
        timings = {"rollout_s": 0.0, "reward_s": 0.0}
        buffer = DynamicSamplingBuffer(self.batch_size)
        generated: list[Trajectory] = []
        rounds = self.trainer.max_sampling_rounds if self.trainer.dynamic_sampling else 1
        request = self.batch_size
        for round_index in range(rounds):
            scored = await self._round(step, round_index, request, timings)
            generated.extend(scored)
            if not self.trainer.dynamic_sampling:
                break
            buffer.add(self._trainable(scored))
            if buffer.needed == 0:
                break
            request = groups_to_request(buffer.needed, buffer.keep_ratio)
        train_on = buffer.take() if self.trainer.dynamic_sampling else self._trainable(generated)
        metrics = {"rollout/sampling_rounds": float(round_index + 1)}
        take_metrics = getattr(self.manager, "take_metrics", None)  # rollout workers (`rollout.workers` > 0)
        if take_metrics is not None:
            metrics.update(await take_metrics(timings["rollout_s"]))
        if self.trainer.dynamic_sampling:
            metrics["rollout/kept_groups"] = float(len({t.group_id for t in train_on}))
        return CollectedBatch(step, train_on, generated, self.cursor.state(), timings, metrics)

    async def _round(self, step: int, round_index: int, count: int, timings: dict[str, float]) -> list[Trajectory]:
        batch = [self.samples[i] for i in self.cursor.take(count)]
        started, version = time.perf_counter(), self.version()
        seed = None if self.rollout_seed is None else self.rollout_seed + 7919 * step + 104729 * round_index
        trajectories = await self.manager.run(batch, seed=seed)
        for traj in trajectories:
            traj.metadata[STARTED_VERSION] = version
        timings["rollout_s"] += time.perf_counter() - started
        started = time.perf_counter()
        await score_rollout(self.rewards, self.trainer, trajectories, batch)
        timings["reward_s"] += time.perf_counter() - started
        for traj in trajectories:
            traj.metadata["step"] = step
        return trajectories

    def _trainable(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        return trainable(self.trainer, trajectories)

    def state(self) -> dict[str, Any]:
        """The data position (for checkpoints)."""
        return self.cursor.state()


async def score_rollout(
    rewards: RewardPipeline, trainer: TrainerConfig, trajectories: list[Trajectory], samples: list[Sample]
) -> None:
    """Grade the trajectories of a rollout of `samples` (`metadata["sample_position"]` indexes them), shape the
    rewards (DAPO's overlong penalty), and give a failed trajectory no reward (or 0 under
    `failed_trajectories=zero_reward`): a failed trajectory is no answer to grade."""
    scored = [t for t in trajectories if not t.failed]
    await rewards.ascore_batch(scored, [samples[t.metadata["sample_position"]] for t in scored])
    max_tokens = trainer.overlong_max_tokens
    for traj in scored if max_tokens is not None else []:
        penalty = overlong_penalty(traj.num_generated_tokens, max_tokens, trainer.overlong_cache_tokens)
        traj.reward = (traj.reward or 0.0) + penalty
        traj.reward_components["overlong"] = penalty
    for traj in trajectories:
        if traj.failed:
            traj.reward = 0.0 if trainer.failed_trajectories == "zero_reward" else None


def trainable(trainer: TrainerConfig, trajectories: list[Trajectory]) -> list[Trajectory]:
    """Those that generated a token and that no infrastructure failure ended (under
    `failed_trajectories=zero_reward`, failed ones too). A trajectory that generated nothing has no token to
    train; it is left out like a failed one, before advantages, so a group that lost members is normalised over
    the rest (`rollout/empty_trajectories` counts them)."""
    keep_failed = trainer.failed_trajectories == "zero_reward"
    return [t for t in trajectories if (keep_failed or not t.failed) and t.step_samples()]


def empty_count(trajectories: list[Trajectory]) -> int:
    """Trajectories that ended without generating a token (failed or not): never trained, never in a baseline."""
    return sum(1 for t in trajectories if not t.step_samples())
