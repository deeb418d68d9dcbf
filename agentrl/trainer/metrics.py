"""Per-step metrics of the trajectories a step generated (`rollout/…`, `reward/…` names) and of tool use."""

from __future__ import annotations

import statistics
from collections import Counter

from agentrl.types import Trajectory


def rollout_metrics(trajectories: list[Trajectory], rollout_s: float) -> dict[str, float]:
    """Reward mean/std (total and per component, over the scored trajectories), lengths, turns, stop-reason
    shares, errors, infrastructure failures, tokens/s, and `rollout/template_rewrites` (new step samples started
    because the chat template rewrote history, `loop/template_rewrites`; only when there were any)."""
    if not trajectories:
        return {"rollout/trajectories": 0.0}
    scored = [t for t in trajectories if t.reward is not None] or trajectories
    rewards = [t.reward or 0.0 for t in scored]
    lengths = [t.num_generated_tokens_in_all_steps() for t in trajectories]
    out = {
        "rollout/trajectories": float(len(trajectories)),
        "rollout/reward_mean": statistics.fmean(rewards),
        "rollout/reward_std": statistics.pstdev(rewards),
        "rollout/response_tokens_mean": statistics.fmean(lengths),
        "rollout/response_tokens_max": float(max(lengths)),
        "rollout/generated_tokens": float(generated_tokens(trajectories)),
        "rollout/turns_mean": statistics.fmean(t.num_turns for t in trajectories),
        "rollout/errors": float(sum(t.error is not None for t in trajectories)),
        **failure_metrics(trajectories, "rollout"),
        "perf/rollout_tokens_per_s": sum(lengths) / rollout_s if rollout_s > 0 else 0.0,
    }
    out.update(component_means(trajectories))
    out.update(tool_use_metrics(trajectories, "rollout"))
    rewrites = sum(t.metrics.get("loop/template_rewrites", 0.0) for t in trajectories)
    if rewrites:
        out["rollout/template_rewrites"] = rewrites
    for reason, count in Counter(str(t.stop_reason) for t in trajectories).items():
        out[f"rollout/stop_reason/{reason}"] = count / len(trajectories)
    return out


def generated_tokens(trajectories: list[Trajectory]) -> int:
    """The tokens the trajectories cost to generate: a tree rollout's shared prefix counted once (its leaves each
    repeat it; `metadata["tree"]["tokens"]` is the whole tree's), what a flat trajectory generated otherwise. The
    figure to hold equal when tree and flat rollouts are compared at equal cost."""
    trees: dict[str, int] = {}
    flat = 0
    for traj in trajectories:
        tree = traj.metadata.get("tree") or {}
        if "tokens" in tree:
            trees[tree["id"]] = tree["tokens"]
        else:
            flat += traj.num_generated_tokens_in_all_steps()
    return flat + sum(trees.values())


def failure_metrics(trajectories: list[Trajectory], prefix: str) -> dict[str, float]:
    """`<prefix>/failed` (trajectories an infrastructure failure ended) and `<prefix>/failed/<stop reason>`."""
    failed = Counter(str(t.stop_reason) for t in trajectories if t.failed)
    return {f"{prefix}/failed": float(sum(failed.values()))} | {
        f"{prefix}/failed/{reason}": float(n) for reason, n in failed.items()
    }


def component_means(trajectories: list[Trajectory], prefix: str = "reward") -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for traj in trajectories:
        for name, value in traj.reward_components.items():
            values.setdefault(name, []).append(value)
    return {f"{prefix}/{name}": statistics.fmean(v) for name, v in values.items()}


def tool_use_metrics(trajectories: list[Trajectory], prefix: str) -> dict[str, float]:
    """How the trajectories used their tools, when any tried to (empty otherwise):

    * `<prefix>/tool_call_rate`: share of trajectories with at least one executed call;
    * `<prefix>/tool_parse_rate`: of the calls the model attempted, the share that parsed (`tool/parse_errors`);
    * `<prefix>/tool_error_rate`: of the executed calls, the share that failed (`tool/errors`).
    """
    calls = [t.metrics.get("tool/calls", 0.0) for t in trajectories]
    parse_errors = sum(t.metrics.get("tool/parse_errors", 0.0) for t in trajectories)
    if not trajectories or sum(calls) + parse_errors == 0:
        return {}
    errors = sum(t.metrics.get("tool/errors", 0.0) for t in trajectories)
    return {
        f"{prefix}/tool_call_rate": sum(c > 0 for c in calls) / len(trajectories),
        f"{prefix}/tool_parse_rate": sum(calls) / (sum(calls) + parse_errors),
        f"{prefix}/tool_error_rate": errors / sum(calls) if sum(calls) else 0.0,
    }
