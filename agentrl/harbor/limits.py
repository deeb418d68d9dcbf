"""A task's budgets and container limits: what its task.toml asks for, capped by the run's config.

| task.toml | becomes | capped by |
|---|---|---|
| `[agent].timeout_sec` | the agent's wall-clock budget (stop reason `time_budget`) | `agent.kwargs.time_budget_s` |
| `[verifier].timeout_sec` | the limit of tests/test.sh | `agent.kwargs.verifier_timeout_s` |
| `[environment].build_timeout_sec` | the limit of building its image | — |
| `[environment].cpus` / `memory_mb` | the container's CPU / memory limits | `sandbox.cpus` / `sandbox.memory` |
| `[environment].network_mode` | network, unless `no-network` (allowlist: all) | `sandbox.network` (default off) |
| `[environment].workdir` | where commands run (else the image's WORKDIR) | — |

A limit the task leaves out is the cap itself. `storage_mb` is recorded, not enforced: Docker caps a container's
disk only on filesystems with project quotas. Keep `rollout.trajectory_timeout_s` above the agent's budget plus
the verifier's, or the whole trajectory is cut before its tests ran.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from agentrl.config.schema import SandboxConfig
from agentrl.harbor.task import HarborTask

_DOCKER_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_MB = {"": 1 / (1 << 20), "b": 1 / (1 << 20), "k": 1 / 1024, "m": 1.0, "g": 1024.0}


@dataclass(frozen=True)
class TaskLimits:
    """What one trajectory of a task may use.

    Attributes:
        agent_timeout_s: the agent's wall-clock budget (None: none besides the trajectory's own timeout).
        verifier_timeout_s: limit of tests/test.sh.
        build_timeout_s: limit of building the task's image.
        cpus: CPU limit of the container.
        memory_mb: memory limit of the container.
        network: the container has network access.
        workdir: where commands run; None for the image's WORKDIR.
        storage_mb: the task's disk limit (recorded only).
    """

    agent_timeout_s: float | None
    verifier_timeout_s: float
    build_timeout_s: float
    cpus: float
    memory_mb: int
    network: bool
    workdir: str | None = None
    storage_mb: int | None = None

    def record(self) -> dict[str, Any]:
        """The limits as JSON-safe trajectory metadata."""
        return asdict(self)


def task_limits(
    task: HarborTask,
    sandbox: SandboxConfig,
    agent_cap_s: float | None = None,
    verifier_cap_s: float | None = None,
) -> TaskLimits:
    """The limits of `task` under the run's `sandbox:` section and the loop's time caps."""
    env = task.config.environment
    return TaskLimits(
        agent_timeout_s=_least(task.config.agent.timeout_sec, agent_cap_s),
        verifier_timeout_s=_least(task.config.verifier.timeout_sec, verifier_cap_s) or task.config.verifier.timeout_sec,
        build_timeout_s=env.build_timeout_sec,
        cpus=_least(env.cpus, sandbox.cpus) or sandbox.cpus,
        memory_mb=int(_least(env.memory_mb, docker_size_mb(sandbox.memory)) or docker_size_mb(sandbox.memory)),
        network=sandbox.network and env.network_mode != "no-network",
        workdir=env.workdir,
        storage_mb=env.storage_mb,
    )


def docker_size_mb(size: str) -> int:
    """A Docker size ("1g", "512m", "1024k", bytes) in MB.

    Raises:
        ValueError: not a Docker size.
    """
    match = _DOCKER_SIZE.match(size)
    if match is None:
        raise ValueError(f"invalid size {size!r}; use a form like '1g' or '512m'")
    return max(int(float(match.group(1)) * _MB[match.group(2).lower()]), 1)


def _least(*values: float | None) -> float | None:
    given = [v for v in values if v is not None]
    return min(given) if given else None
