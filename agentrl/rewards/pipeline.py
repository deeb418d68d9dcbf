"""RewardPipeline: weighted components from config, applied to finished trajectories.

Declared in YAML as `reward.components: [{name: exact, type: normalized_match, weight: 1.0, ...kwargs}]`.
A component that raises is recorded in the trajectory's reward details and scores 0 (`on_failure: zero`) or is
left out with the weights renormalized (`on_failure: skip`); it never fails the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.config.schema import RewardConfig
from agentrl.errors import AgentRLError
from agentrl.rewards.base import RewardInput, RewardResult, final_answer
from agentrl.rewards.rule import RULES
from agentrl.types import Sample, Trajectory


@dataclass
class Component:
    name: str
    type: str
    weight: float = 1.0
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self, inp: RewardInput) -> RewardResult:
        return RULES[self.type](inp, **self.kwargs)


class RewardPipeline:
    """Scores trajectories with the weighted sum of the configured components."""

    def __init__(self, config: RewardConfig):
        self.on_failure = config.on_failure
        self.components = [_component(spec, i) for i, spec in enumerate(config.components)]

    def score(self, trajectory: Trajectory, sample: Sample) -> float:
        """Set `reward`, `reward_components` and `reward_details` on the trajectory; return the reward.

        With no components configured, a reward the agent loop set itself is kept (0.0 when it set none).
        """
        if not self.components:
            trajectory.reward = trajectory.reward or 0.0
            return trajectory.reward
        inp = RewardInput(trajectory=trajectory, sample=sample, answer=final_answer(trajectory))
        total = used_weight = 0.0
        for comp in self.components:
            try:
                result = comp(inp)
            except Exception as exc:
                trajectory.reward_details[comp.name] = {"error": f"{type(exc).__name__}: {exc}"}
                if self.on_failure == "skip":
                    continue
                result = RewardResult(0.0, {"error": str(exc)})
            trajectory.reward_components[comp.name] = result.score
            trajectory.reward_details.setdefault(comp.name, result.details)
            total += comp.weight * result.score
            used_weight += comp.weight
        all_weight = sum(c.weight for c in self.components)
        if used_weight and used_weight != all_weight:  # skipped components: renormalize the remaining weights
            total *= all_weight / used_weight
        trajectory.reward = total
        return total


def _component(spec: dict[str, Any], index: int) -> Component:
    spec = dict(spec)
    kind = spec.pop("type", None)
    if kind not in RULES:
        raise AgentRLError(f"reward.components[{index}].type is {kind!r}; known types: {', '.join(sorted(RULES))}")
    name = spec.pop("name", kind)
    weight = float(spec.pop("weight", 1.0))
    return Component(name=name, type=kind, weight=weight, kwargs=spec)
