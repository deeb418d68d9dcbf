"""Each policy's share of a batch of several-policy episodes (`policies:`).

One trajectory holds the whole episode as it happened, every role's turns in it. Policy P trains on a view of it
(`policy_view`, an `agentrl.loops.author_views` view): the same token sequences, in which only P's generated
segments stay trainable (the other policies' turns are context P saw, like a tool result), P's own reward
(`Trajectory.policy_rewards`, else the episode's), and the per-turn rewards and states of P's turns only. Groups
and advantages are then computed over P's views alone, so each policy's advantages compare its own replies.
"""

from __future__ import annotations

import functools

from agentrl.loops.author_views import author_view, turn_authors
from agentrl.types import Segment, Trajectory


def policy_of(segment: Segment, default: str) -> str:
    """The policy that generated `segment` (None on the segment: the run's first policy)."""
    return segment.policy or default


def policy_view(traj: Trajectory, policy: str, default: str, turn_policies: list[str] | None = None) -> Trajectory:
    """`traj` as `policy` trains on it: only its own generated tokens trainable, its own reward, the turn rewards
    and states of its own turns. A trajectory in which `policy` generated nothing has no step samples.
    `turn_policies`: each turn's policy, when the caller has them already."""
    reward = {"reward": traj.policy_rewards.get(policy, traj.reward)}
    view = author_view(traj, functools.partial(policy_of, default=default), policy, reward, turn_policies)
    view.metadata = {**traj.metadata, "policy": policy}
    return view


def policy_batches(trajectories: list[Trajectory], policies: list[str]) -> dict[str, list[Trajectory]]:
    """Each policy's views of `trajectories` that hold any of its generated tokens (`policies[0]` is the default
    policy of unlabelled segments)."""
    default = policies[0]
    turns = [_turn_policies(t, default) for t in trajectories]
    batches: dict[str, list[Trajectory]] = {}
    for policy in policies:
        views = [policy_view(t, policy, default, tp) for t, tp in zip(trajectories, turns, strict=True)]
        batches[policy] = [v for v in views if v.step_samples()]
    return batches


def generated_policies(traj: Trajectory, default: str) -> set[str]:
    """The policies that generated any turn of `traj`."""
    return set(_turn_policies(traj, default))


def policy_reward_metrics(trajectories: list[Trajectory], policies: list[str], section: str) -> dict[str, float]:
    """`<section>/<policy>/reward_mean` and `.../success_rate` (its reward >= 1) of each policy, over the
    trajectories in which it generated: each role's own outcome, for the report's per-policy curves."""
    default = policies[0]
    played = [(t, generated_policies(t, default)) for t in trajectories if not t.failed]
    out = {}
    for policy in policies:
        rewards = [t.policy_rewards.get(policy, t.reward or 0.0) for t, generated in played if policy in generated]
        if rewards:
            out[f"{section}/{policy}/reward_mean"] = sum(rewards) / len(rewards)
            out[f"{section}/{policy}/success_rate"] = sum(r >= 1.0 - 1e-6 for r in rewards) / len(rewards)
    return out


def _turn_policies(traj: Trajectory, default: str) -> list[str]:
    """The policy of each generated turn, over all step samples in `step_samples()` order (as `turn_rewards`)."""
    return turn_authors(traj, functools.partial(policy_of, default=default))


__all__ = ["generated_policies", "policy_batches", "policy_of", "policy_reward_metrics", "policy_view"]
