"""Per-step metrics of the trajectories a step generated: `rollout/…` and `reward/…` names."""

from __future__ import annotations

import statistics
from collections import Counter

from agentrl.types import Trajectory


def rollout_metrics(trajectories: list[Trajectory], rollout_s: float) -> dict[str, float]:
    """Reward mean/std (total and per component, over the scored trajectories), lengths, turns, stop-reason
    shares, errors, infrastructure failures and tokens/s."""
    if not trajectories:
        return {"rollout/trajectories": 0.0}
    scored = [t for t in trajectories if t.reward is not None] or trajectories
    rewards = [t.reward or 0.0 for t in scored]
    lengths = [t.num_generated_tokens for t in trajectories]
    out = {
        "rollout/trajectories": float(len(trajectories)),
        "rollout/reward_mean": statistics.fmean(rewards),
        "rollout/reward_std": statistics.pstdev(rewards),
        "rollout/response_tokens_mean": statistics.fmean(lengths),
        "rollout/response_tokens_max": float(max(lengths)),
        "rollout/turns_mean": statistics.fmean(t.num_turns for t in trajectories),
        "rollout/errors": float(sum(t.error is not None for t in trajectories)),
        **failure_metrics(trajectories, "rollout"),
        "perf/rollout_tokens_per_s": sum(lengths) / rollout_s if rollout_s > 0 else 0.0,
    }
    out.update(_component_means(trajectories))
    for reason, count in Counter(str(t.stop_reason) for t in trajectories).items():
        out[f"rollout/stop_reason/{reason}"] = count / len(trajectories)
    return out


def failure_metrics(trajectories: list[Trajectory], prefix: str) -> dict[str, float]:
    """`<prefix>/failed` (trajectories an infrastructure failure ended) and `<prefix>/failed/<stop reason>`."""
    failed = Counter(str(t.stop_reason) for t in trajectories if t.failed)
    return {f"{prefix}/failed": float(sum(failed.values()))} | {
        f"{prefix}/failed/{reason}": float(n) for reason, n in failed.items()
    }


def _component_means(trajectories: list[Trajectory]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for traj in trajectories:
        for name, value in traj.reward_components.items():
            values.setdefault(name, []).append(value)
    return {f"reward/{name}": statistics.fmean(v) for name, v in values.items()}
