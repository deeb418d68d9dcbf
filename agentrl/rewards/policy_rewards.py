"""Each policy's own reward (`policies.<name>.reward`), beside the episode's (`reward:`).

With several policies, a loop can assign each role its outcome itself (`Trajectory.policy_rewards`); a policy
with a reward section of its own is instead scored by that section's components on its own last reply: the
conversation (step sample) in which it last replied, its messages cut after that reply, so that `final_answer` and
the rules that read messages see what that policy said and what it had seen. Its score replaces what the loop
assigned it, and its components are recorded as `<policy>/<component>` in `reward_components` and
`reward_details` (the viewer and the report show them). A policy that replied nowhere in an episode gets no reward
of its own there (the loop's, else the episode's, stands).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.config.schema import AgentRLConfig
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import Sample, Trajectory


class PolicyRewards(RewardPipeline):
    """The episode's reward (`reward:`), then each policy's own (`policies.<name>.reward`) on its last reply."""

    def __init__(self, cfg: AgentRLConfig):
        super().__init__(cfg.reward)
        self.default_policy = next(iter(cfg.policies))
        self.by_policy = {name: RewardPipeline(p.reward) for name, p in cfg.policies.items() if p.reward is not None}

    async def ascore_batch(
        self, trajectories: Sequence[Trajectory], samples: Sequence[Sample], sandboxes: Sequence[Any] | None = None
    ) -> list[float]:
        rewards = await super().ascore_batch(trajectories, samples, sandboxes)
        boxes = list(sandboxes) if sandboxes is not None else [None] * len(trajectories)
        for policy, pipeline in self.by_policy.items():
            views = [last_reply_view(t, policy, self.default_policy) for t in trajectories]
            played = [i for i, view in enumerate(views) if view is not None]
            if not played:
                continue
            scored = [views[i] for i in played]
            await pipeline.ascore_batch(scored, [samples[i] for i in played], [boxes[i] for i in played])
            for i, view in zip(played, scored, strict=True):
                _record(trajectories[i], policy, view, self.default_policy)
        return rewards

    async def aclose(self) -> None:
        await super().aclose()
        for pipeline in self.by_policy.values():
            await pipeline.aclose()


def reward_pipeline(cfg: AgentRLConfig) -> RewardPipeline:
    """The run's reward: `reward:` alone, or with each policy's own reward section when any policy has one."""
    if any(p.reward is not None for p in cfg.policies.values()):
        return PolicyRewards(cfg)
    return RewardPipeline(cfg.reward)


def last_reply_view(traj: Trajectory, policy: str, default: str) -> Trajectory | None:
    """The conversation in which `policy` last replied, cut after that reply (None: it replied nowhere).

    A reply is a run of generated segments of one policy (a frozen policy's too); the k-th reply from the end of a
    step sample is its k-th assistant message from the end. Only the messages are cut: the view's segments, metrics
    and stop reason are still the whole conversation's."""
    for step in reversed([*traj.earlier_steps, traj]):
        replies = _reply_policies(step, default)
        assistant = [i for i, m in enumerate(step.messages) if m.role == "assistant"]
        for index, name in zip(reversed(assistant), reversed(replies), strict=False):
            if name == policy:
                cut = {"messages": step.messages[: index + 1], "earlier_steps": []}
                # a copy shares the step's dicts, and scoring writes into them: fresh ones keep the episode's own
                fresh = {"reward": None, "reward_components": {}, "reward_details": {}, "policy_rewards": {}}
                own = {"metadata": dict(step.metadata), "metrics": dict(step.metrics)}
                return step.model_copy(update={**cut, **fresh, **own})
    return None


def _reply_policies(step: Trajectory, default: str) -> list[str]:
    """The policy of each reply in `step`, in order."""
    out: list[str] = []
    in_reply, current = False, None
    for seg in step.segments:
        if not (seg.trainable or seg.logprobs is not None):  # generated: trained, or a frozen policy's reply
            in_reply = False
            continue
        name = seg.policy or default
        if not in_reply or name != current:
            out.append(name)
        in_reply, current = True, name
    return out


def _record(traj: Trajectory, policy: str, view: Trajectory, default: str) -> None:
    """The policy's own score replaces what the loop assigned it: its `policy_rewards` entry, and the reward of each
    role it played (`player_rewards`, which its tokens train on)."""
    traj.policy_rewards[policy] = float(view.reward or 0.0)
    for role in _roles_of(traj, policy, default):
        traj.player_rewards[role] = traj.policy_rewards[policy]
    traj.reward_components.update({f"{policy}/{k}": v for k, v in view.reward_components.items()})
    traj.reward_details.update({f"{policy}/{k}": v for k, v in view.reward_details.items()})


def _roles_of(traj: Trajectory, policy: str, default: str) -> set[str]:
    """The roles (`Segment.player`) whose generated tokens `policy` produced."""
    steps = [*traj.earlier_steps, traj]
    return {
        seg.player
        for step in steps
        for seg in step.segments
        if seg.player is not None and seg.token_ids and seg.role == "assistant" and (seg.policy or default) == policy
    }


__all__ = ["PolicyRewards", "last_reply_view", "reward_pipeline"]
