"""Each policy's share of a batch of several-policy episodes (`policies:`).

One trajectory holds the whole episode as it happened, every role's turns in it. Policy P trains on a view of it
(`policy_view`): the same token sequences, in which only P's generated segments stay trainable (the other
policies' turns are context P saw, like a tool result), P's own reward (`Trajectory.policy_rewards`, else the
episode's), and the per-turn rewards and states of P's turns only. Groups and advantages are then computed over
P's views alone, so each policy's advantages compare its own replies.
"""

from __future__ import annotations

from typing import TypeVar

from agentrl.types import Segment, Trajectory

T = TypeVar("T")


def policy_of(segment: Segment, default: str) -> str:
    """The policy that generated `segment` (None on the segment: the run's first policy)."""
    return segment.policy or default


def policy_view(traj: Trajectory, policy: str, default: str, turn_policies: list[str] | None = None) -> Trajectory:
    """`traj` as `policy` trains on it: only its own generated tokens trainable, its own reward, the turn rewards
    and states of its own turns. A trajectory in which `policy` generated nothing has no step samples.
    `turn_policies`: each turn's policy, when the caller has them already."""
    turn_policies = _turn_policies(traj, default) if turn_policies is None else turn_policies
    mine = [i for i, name in enumerate(turn_policies) if name == policy]
    steps = [_masked(step, policy, default) for step in traj.earlier_steps]
    view = _masked(traj, policy, default).model_copy(
        update={
            "earlier_steps": steps,
            "reward": traj.policy_rewards.get(policy, traj.reward),
            "turn_rewards": _pick(traj.turn_rewards, mine),
            "turn_states": _pick(traj.turn_states, mine),
        }
    )
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
    out = []
    for step in traj.step_samples():
        firsts: dict[int, Segment] = {}
        for i, seg in zip(step.turn_index(), step.segments, strict=True):
            if i is not None:
                firsts.setdefault(i, seg)
        out += [policy_of(firsts[i], default) for i in sorted(firsts)]
    return out


def _masked(traj: Trajectory, policy: str, default: str) -> Trajectory:
    segments = [
        seg if not seg.trainable or policy_of(seg, default) == policy else seg.model_copy(update={"trainable": False})
        for seg in traj.segments
    ]
    return traj.model_copy(update={"segments": segments})


def _pick(values: list[T] | None, keep: list[int]) -> list[T] | None:
    return None if values is None else [values[i] for i in keep if i < len(values)]


__all__ = ["generated_policies", "policy_batches", "policy_of", "policy_reward_metrics", "policy_view"]
