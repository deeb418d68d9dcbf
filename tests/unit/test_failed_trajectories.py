"""Trajectories ended by an infrastructure failure are data, not training data."""

from __future__ import annotations

import asyncio

import pytest
import torch

from agentrl.config import RewardConfig, RolloutConfig
from agentrl.config.schema import TrainerConfig
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rollout.errors import ServerUnavailableError
from agentrl.sandbox.base import SandboxError
from agentrl.trainer.algorithms import compute_advantages, rewards_and_groups
from agentrl.trainer.collect import BatchCollector, empty_count, trainable
from agentrl.trainer.loop import eval_metrics
from agentrl.trainer.metrics import rollout_metrics
from agentrl.types import Message, Sample, Segment, StopReason, Trajectory

MODEL_ENDINGS = [
    StopReason.DONE,
    StopReason.MAX_TURNS,
    StopReason.MAX_TOKENS,
    StopReason.CONTEXT_OVERFLOW,
    StopReason.CONTEXT_EXHAUSTED,
    StopReason.TOOL_ERROR_LIMIT,
    StopReason.TIME_BUDGET,
]
FAILURES = [
    StopReason.ERROR,
    StopReason.SERVER_ERROR,
    StopReason.SANDBOX_ERROR,
    StopReason.TIMEOUT,
    StopReason.ABORTED,
    StopReason.WORKER_LOST,
]


def test_stop_reasons_split_into_model_endings_and_failures() -> None:
    assert set(MODEL_ENDINGS) | set(FAILURES) == set(StopReason)
    assert not any(r.is_failure for r in MODEL_ENDINGS)
    assert all(r.is_failure for r in FAILURES)
    assert Trajectory(stop_reason=StopReason.SERVER_ERROR).failed
    assert not Trajectory(stop_reason=StopReason.MAX_TURNS).failed and not Trajectory().failed


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ServerUnavailableError(["http://h:1"], "refused"), StopReason.SERVER_ERROR),
        (SandboxError("container died"), StopReason.SANDBOX_ERROR),
        (ValueError("a bug in the loop"), StopReason.ERROR),
    ],
)
def test_the_manager_classifies_failures_by_type(tokenizer, error: Exception, reason: StopReason) -> None:
    manager = RolloutManager(ScriptedPolicy(tokenizer, ["x"], fail_with=error), tokenizer)
    (traj,) = asyncio.run(manager.run([Sample(prompt=[Message(role="user", content="hi")])], n=1))
    assert traj.stop_reason is reason and traj.failed and type(error).__name__ in (traj.error or "")


def flaky_policy(tokenizer):
    """Says the word it is asked for; every request for "b" after the first fails as if the server were down."""
    seen = {"b": 0}

    def reply(text: str) -> str:
        if "say b" in text:
            seen["b"] += 1
            if seen["b"] > 1:
                raise ServerUnavailableError(["http://127.0.0.1:1"], "connection refused")
        return "a" if "say a" in text else ("b" if seen["b"] == 1 else "x")

    return ScriptedPolicy(tokenizer, [reply])


def collect(tokenizer, mode: str) -> tuple[BatchCollector, object]:
    data = [Sample(prompt=[Message(role="user", content=f"say {w}")], ground_truth=w) for w in ("a", "b")]
    manager = RolloutManager(flaky_policy(tokenizer), tokenizer, rollout=RolloutConfig(n=4, max_concurrency=1))
    rewards = RewardPipeline(RewardConfig(components=[{"name": "hit", "type": "contains"}]))
    trainer = TrainerConfig(failed_trajectories=mode)  # type: ignore[arg-type]
    collector = BatchCollector(manager, rewards, data, 2, trainer, seed=0)
    return collector, asyncio.run(collector.collect(step=1))


def test_failed_trajectories_are_kept_counted_and_left_out_of_training(tokenizer) -> None:
    _, batch = collect(tokenizer, "exclude")
    failed = batch.failed  # type: ignore[attr-defined]
    assert len(batch.generated) == 8 and len(failed) == 3  # type: ignore[attr-defined]
    assert all(t.stop_reason is StopReason.SERVER_ERROR and t.reward is None for t in failed)
    assert all(not t.reward_components for t in failed)  # not graded
    trained = batch.trajectories  # type: ignore[attr-defined]
    assert len(trained) == 5 and not any(t.failed for t in trained)
    metrics = rollout_metrics(batch.generated, 1.0)  # type: ignore[attr-defined]
    assert metrics["rollout/failed"] == 3.0 and metrics["rollout/failed/server_error"] == 3.0
    assert metrics["rollout/trajectories"] == 8.0 and metrics["rollout/reward_mean"] == 1.0  # not 5/8


def test_a_group_that_lost_members_is_normalised_over_the_rest(tokenizer) -> None:
    _, batch = collect(tokenizer, "exclude")
    rewards, groups = rewards_and_groups(batch.trajectories)  # type: ignore[attr-defined]
    advantages = compute_advantages("grpo", rewards, groups)
    b_group = [i for i, t in enumerate(batch.trajectories) if "say b" in t.messages[0].content]  # type: ignore[attr-defined]
    assert len(b_group) == 1  # the one b trajectory that got through: a group of one carries no signal
    assert advantages[b_group].tolist() == [0.0]
    assert torch.all(advantages == 0)  # the a group all hit: no variance either


def test_zero_reward_mode_gives_failures_reward_zero_but_trains_only_what_generated_tokens(tokenizer) -> None:
    _, batch = collect(tokenizer, "zero_reward")
    failed = batch.failed  # type: ignore[attr-defined]
    assert [t.reward for t in failed] == [0.0, 0.0, 0.0]
    # the server failed before any token: nothing to train, so they are left out of the batch (and its baseline),
    # and counted, rather than dropped later without a word
    trained = batch.trajectories  # type: ignore[attr-defined]
    assert len(trained) == 5 and not any(t.failed for t in trained)
    assert empty_count(batch.generated) == 3  # type: ignore[attr-defined]


def test_a_failure_that_generated_tokens_is_trained_with_reward_zero_under_zero_reward() -> None:
    generated = [Segment(token_ids=[1], trainable=False), Segment(token_ids=[2], trainable=True, logprobs=[-1.0])]
    cut = Trajectory(segments=generated, stop_reason=StopReason.TIMEOUT, reward=0.0)
    empty = Trajectory(segments=generated[:1], stop_reason=StopReason.DONE, reward=1.0)
    assert trainable(TrainerConfig(failed_trajectories="zero_reward"), [cut, empty]) == [cut]
    assert trainable(TrainerConfig(), [cut, empty]) == []


def test_success_is_the_env_or_grader_flag_when_there_is_one() -> None:
    gym_win = Trajectory(reward=0.9, metrics={"env/success": 1.0}, stop_reason=StopReason.DONE)
    gym_loss = Trajectory(reward=1.0, metrics={"env/success": 0.0}, stop_reason=StopReason.DONE)  # shaped reward
    swe = Trajectory(reward=0.3, reward_details={"tests": {"resolved": True}}, stop_reason=StopReason.DONE)
    plain = Trajectory(reward=1.0, stop_reason=StopReason.DONE)
    failed = Trajectory(reward=None, stop_reason=StopReason.SERVER_ERROR, metrics={"env/success": 1.0})
    assert [t.success for t in (gym_win, gym_loss, swe, plain)] == [True, False, True, None]
    metrics = eval_metrics([gym_win, gym_loss, swe, plain, failed])
    assert metrics["eval/success_rate"] == pytest.approx(3 / 5)
    assert metrics["eval/failed"] == 1.0 and metrics["eval/failed/server_error"] == 1.0
