"""The rollout settings' own checks: settings that contradict each other, and a backend this machine lacks."""

from __future__ import annotations

from pathlib import Path

from agentrl.config.schema import RolloutConfig
from agentrl.rollout.servers.availability import backend_problem


def rollout_problems(r: RolloutConfig) -> list[str]:
    """Every problem of the `rollout:` settings, each with its fix (empty when the servers can start)."""
    problems = []
    if r.placement == "ray" and r.urls:
        problems.append(
            "rollout.placement=ray starts servers on the Ray cluster, rollout.urls connects to running ones: "
            "set only one of them"
        )
    if r.weight_transfer == "nccl" and (r.backend == "hf" or r.placement == "ray"):
        problems.append(
            "rollout.weight_transfer=nccl is for vLLM and SGLang servers reached by URL or started here; the hf "
            "server and Ray server actors get weights by file or object store: use rollout.weight_transfer=file"
        )
    if r.shared_weights_dir is not None and not Path(r.shared_weights_dir).is_dir():
        problems.append(f"rollout.shared_weights_dir: {r.shared_weights_dir} is not a folder on this machine")
    if problem := backend_problem(r):
        problems.append(problem)
    return problems
