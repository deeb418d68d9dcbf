"""Off-policy bookkeeping for async training: how many policy versions behind a trajectory's tokens are.

One rule for a token of unknown version (a server that reported none): it is never fresh. It is taken to be as old
as the version at which its trajectory's group started (`STARTED_VERSION`, which no token of the group can be older
than), or as version 0 when that is not recorded either.
"""

from __future__ import annotations

from agentrl.types import Trajectory

STARTED_VERSION = "started_version"
"""`Trajectory.metadata` key: the policy version when the trajectory's group started rolling out."""


def generated_versions(traj: Trajectory) -> set[int]:
    """The policy versions that wrote the trajectory's generated tokens, its earlier step samples' included
    (an agent behind the gateway that rewrote its history trains on those too)."""
    parts = [traj, *traj.earlier_steps]
    return {s.policy_version for t in parts for s in t.segments if s.trainable and s.policy_version is not None}


def oldest_version(traj: Trajectory) -> int | None:
    """The oldest policy version among the trajectory's generated segments (None if it generated nothing); a
    segment of unknown version counts as the version its group started at (see the module docstring)."""
    versions = generated_versions(traj)
    if has_unknown_version(traj):
        versions.add(int(traj.metadata.get(STARTED_VERSION, 0)))
    return min(versions) if versions else None


def has_unknown_version(traj: Trajectory) -> bool:
    """Whether a generated segment of `traj` (its earlier step samples' included) has no version."""
    parts = [traj, *traj.earlier_steps]
    return any(s.trainable and s.token_ids and s.policy_version is None for t in parts for s in t.segments)


def staleness(traj: Trajectory, current_version: int) -> int:
    """Versions between the policy being trained (`current_version`) and the oldest one that wrote `traj`."""
    oldest = oldest_version(traj)
    return 0 if oldest is None else max(0, current_version - oldest)


def split_stale(
    trajectories: list[Trajectory], current_version: int, max_staleness: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """`(fresh, stale)`: stale trajectories lag more than `max_staleness` versions behind."""
    fresh, stale = [], []
    for traj in trajectories:
        (stale if staleness(traj, current_version) > max_staleness else fresh).append(traj)
    return fresh, stale


def versions_of(traj: Trajectory) -> int:
    """How many policy versions wrote the trajectory's generated tokens (more than 1: a partial rollout)."""
    return len(generated_versions(traj))


def staleness_metrics(trajectories: list[Trajectory], current_version: int) -> dict[str, float]:
    """`rollout/staleness_mean|max`, the share of each staleness `rollout/staleness/<k>`, and
    `rollout/versions_per_trajectory` (mean versions that wrote a trajectory)."""
    if not trajectories:
        return {}
    lags = [staleness(t, current_version) for t in trajectories]
    out = {
        "rollout/staleness_mean": sum(lags) / len(lags),
        "rollout/staleness_max": float(max(lags)),
        "rollout/versions_per_trajectory": sum(versions_of(t) for t in trajectories) / len(trajectories),
    }
    for lag in sorted(set(lags)):
        out[f"rollout/staleness/{lag}"] = lags.count(lag) / len(lags)
    return out
