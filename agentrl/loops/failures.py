"""How a trajectory whose loop failed is recorded: the stop reason an exception means, and the error."""

from __future__ import annotations

from agentrl.rollout.errors import RolloutError
from agentrl.sandbox.base import SandboxError
from agentrl.types import StopReason, Trajectory


def fail_trajectory(traj: Trajectory, reason: StopReason, message: str) -> None:
    """End `traj` with `reason` and the error `message`."""
    traj.stop_reason = reason
    traj.error = message


def stop_reason_for(exc: Exception) -> StopReason:
    """The stop reason of a trajectory whose loop raised `exc`: `sandbox_error`, `server_error`, else `error`."""
    if isinstance(exc, SandboxError):
        return StopReason.SANDBOX_ERROR
    if isinstance(exc, RolloutError):
        return StopReason.SERVER_ERROR
    return StopReason.ERROR
