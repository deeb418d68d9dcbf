"""The viewer's data: runs → steps → groups → trajectories (and a step's tree rollouts, `trees`), as one JSON-ready
dict inlined in the page.

Trajectories are one flat list (`trajs`); runs, steps and groups refer to them by index, so the page filters one
list and rebuilds the tree from it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from agentrl.types import Trajectory
from agentrl.viewer.messages import message_view
from agentrl.viewer.runs import RunData, StepData
from agentrl.viewer.tokens import TokenDecoder
from agentrl.viewer.trees import tree_views

LOGPROB_DIGITS = 4


def build_payload(runs: list[RunData], decoder: TokenDecoder | None, token_note: str, page_dir: Path) -> dict:
    """Everything the page shows, with non-finite numbers replaced by None (JSON has no NaN)."""
    trajs: list[dict[str, Any]] = []
    run_views = []
    for run_index, run in enumerate(runs):
        metrics_by_step = _metrics_by_step(run.metrics)
        steps = []
        for step_index, step in enumerate(run.steps):
            groups: dict[str, list[int]] = defaultdict(list)
            first = len(trajs)
            for traj in step.trajectories:
                groups[traj.group_id or traj.id].append(len(trajs))
                trajs.append(trajectory_view(traj, run, decoder, page_dir, (run_index, step_index)))
            trees, tree_of = tree_views(list(enumerate(step.trajectories, first)))
            for index, tree in tree_of.items():
                trajs[index]["tree_at"] = tree
            steps.append({**_step_view(step, groups, metrics_by_step), "trees": trees})
        run_views.append({"name": run.name, "path": str(run.path), "steps": steps, "warnings": run.warnings})
    return _finite(
        {
            "runs": run_views,
            "trajs": trajs,
            "token_note": token_note,
            "token_text": decoder is not None,
        }
    )


def _step_view(step: StepData, groups: dict[str, list[int]], metrics: dict[int, dict[str, Any]]) -> dict:
    view: dict[str, Any] = {
        "name": step.name,
        "step": step.step,
        "source": step.source.name,
        "groups": [{"id": gid, "trajs": idx} for gid, idx in groups.items()],
    }
    if step.step is not None and step.step in metrics:
        view["metrics"] = metrics[step.step]
    return view


def trajectory_view(
    traj: Trajectory, run: RunData, decoder: TokenDecoder | None, page_dir: Path, where: tuple[int, int]
) -> dict[str, Any]:
    """One trajectory for the page: its summary fields (filtered on), messages, token segments and drift."""
    metadata = dict(traj.metadata)
    return {
        "run": where[0],
        "step": where[1],
        "id": traj.id,
        "group": traj.group_id,
        "sample_index": traj.sample_index,
        "sample_id": metadata.get("sample_id"),
        "data_source": metadata.get("data_source"),
        "agent": traj.agent_name,
        "reward": traj.reward,
        "components": traj.reward_components,
        "policy_rewards": traj.policy_rewards,
        "details": traj.reward_details,
        "stop": str(traj.stop_reason) if traj.stop_reason is not None else None,
        "error": traj.error,
        "failed": traj.failed,
        "turns": traj.num_turns,
        "timings": traj.timings,
        "metrics": traj.metrics,
        "metadata": metadata,
        "drift": drift_of(traj),
        "num_tokens": traj.num_tokens,
        "num_generated": traj.num_generated_tokens_in_all_steps(),
        **_step_sample_view(traj, run, decoder, page_dir),
        "earlier_steps": [_step_sample_view(s, run, decoder, page_dir) for s in traj.earlier_steps],
    }


def _step_sample_view(sample: Trajectory, run: RunData, decoder: TokenDecoder | None, page_dir: Path) -> dict:
    """One step sample's messages (each reply labelled with its policy, when the run has several) and token
    segments: the trajectory's own (its last sample), or an earlier one (the loop rewrote its context after it, e.g.
    a gym history window, or another role's conversation), shown before the last."""
    messages = [message_view(m, run.path, page_dir) for m in sample.messages]
    _label_policies(messages, sample)
    return {"messages": messages, "segments": [_segment_view(s, decoder) for s in sample.segments]}


def _label_policies(messages: list[dict[str, Any]], sample: Trajectory) -> None:
    """Label each assistant message with the policy that generated it (several policies: `Segment.policy`), the
    k-th assistant message being the k-th reply: a run of generated segments (trained, or a frozen policy's, which
    carry logprobs) of one policy."""
    policies: list[str | None] = []
    in_reply, current = False, None
    for segment in sample.segments:
        generated = segment.trainable or segment.logprobs is not None
        if generated and (not in_reply or segment.policy != current):
            policies.append(segment.policy)
        in_reply, current = generated, segment.policy
    if not any(policies):
        return
    replies = [m for m in messages if m["role"] == "assistant"]
    for message, policy in zip(replies, policies, strict=False):
        if policy:
            message["policy"] = policy


def drift_of(traj: Trajectory) -> dict[str, Any] | None:
    """The drift found by the checker, read from `metadata["drift"]`, or None when there is none.

    Accepted shapes: a `DriftReport` as a dict (`{"ok": false, "kind", "position", "expected", "actual"}`), or a
    non-empty message string. `{"ok": true}`, an empty string or no key mean no drift.
    """
    drift = traj.metadata.get("drift")
    if isinstance(drift, dict):
        if drift.get("ok", False):
            return None
        return {k: drift.get(k) for k in ("kind", "position", "expected", "actual")}
    if isinstance(drift, str) and drift and drift != "no drift":
        return {"kind": "", "message": drift}
    return None


def _segment_view(segment: Any, decoder: TokenDecoder | None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "role": segment.role,
        "trainable": segment.trainable,
        "version": segment.policy_version,
        "ids": segment.token_ids,
    }
    if segment.logprobs is not None:
        view["lp"] = [round(lp, LOGPROB_DIGITS) if math.isfinite(lp) else None for lp in segment.logprobs]
    if decoder is not None:
        view["text"] = decoder.texts(segment.token_ids)
    return view


def _metrics_by_step(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    by_step: dict[int, dict[str, Any]] = {}
    for row in rows:
        step = row.get("step")
        if isinstance(step, int):
            by_step.setdefault(step, {}).update({k: v for k, v in row.items() if k != "step"})
    return by_step


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
