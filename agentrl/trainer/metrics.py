"""Per-step metrics of the trajectories a step generated: `rollout/…` and `reward/…` names."""

from __future__ import annotations

import statistics
from collections import Counter

from agentrl.types import Trajectory


def rollout_metrics(trajectories: list[Trajectory], rollout_s: float) -> dict[str, float]:
    """Reward mean/std (total and per component), lengths, turns, stop-reason shares, errors and tokens/s."""
    if not trajectories:
        return {"rollout/trajectories": 0.0}
    rewards = [t.reward or 0.0 for t in trajectories]
    lengths = [t.num_generated_tokens for t in trajectories]
    out = {
        "rollout/trajectories": float(len(trajectories)),
        "rollout/reward_mean": statistics.fmean(rewards),
        "rollout/reward_std": statistics.pstdev(rewards),
        "rollout/response_tokens_mean": statistics.fmean(lengths),
        "rollout/response_tokens_max": float(max(lengths)),
        "rollout/turns_mean": statistics.fmean(t.num_turns for t in trajectories),
        "rollout/errors": float(sum(t.error is not None for t in trajectories)),
        "perf/rollout_tokens_per_s": sum(lengths) / rollout_s if rollout_s > 0 else 0.0,
    }
    out.update(_component_means(trajectories))
    for reason, count in Counter(str(t.stop_reason) for t in trajectories).items():
        out[f"rollout/stop_reason/{reason}"] = count / len(trajectories)
    return out


def _component_means(trajectories: list[Trajectory]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for traj in trajectories:
        for name, value in traj.reward_components.items():
            values.setdefault(name, []).append(value)
    return {f"reward/{name}": statistics.fmean(v) for name, v in values.items()}
