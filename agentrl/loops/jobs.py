"""Trajectory jobs: what one rollout call asks for, planned the same way whoever runs it.

`plan_jobs` turns (samples, n, seed) into one `Job` per trajectory, with the group id, sample index and seed each
trajectory gets; `RolloutManager` (in this process) and `DistributedRolloutManager` (over Ray workers) run the
same plan, so the same seed gives the same trajectories wherever they run. `JobRunner` is their shared surface.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Self

from agentrl.config.schema import RolloutConfig
from agentrl.types import Sample, Trajectory


@dataclass
class Job:
    """One trajectory to run: what `RolloutManager.run_one` takes, plus the sampling settings and the policy
    versions the driver has pushed to each replica (a worker takes a restarted replica back only once it serves
    them; the versions of generated tokens always come from the replies)."""

    sample: Sample
    group_id: str
    sample_index: int
    position: int
    seed: int | None
    rollout: RolloutConfig
    versions: dict[str, int] = field(default_factory=dict)
    attempt: int = 0


def trajectory_seed(seed: int, position: int, sample_index: int) -> int:
    """A 31-bit seed for one trajectory, spread far apart so that per-turn increments never collide."""
    return derived_seed(seed, position, sample_index)


def derived_seed(*parts: object) -> int:
    """A 31-bit seed hashed from `parts`, its low 12 bits clear: room for a trajectory's per-turn increments."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_F000


def plan_jobs(
    samples: list[Sample], n: int, seed: int | None, rollout: RolloutConfig, versions: dict[str, int] | None = None
) -> list[Job]:
    """`n` jobs per sample, grouped per sample (one group id each), seeded from `seed` and their position."""
    batch = uuid.uuid4().hex[:8]
    return [
        Job(
            sample=sample,
            group_id=f"{batch}-{pos}",
            sample_index=k,
            position=pos,
            seed=None if seed is None else trajectory_seed(seed, pos, k),
            rollout=rollout,
            versions=dict(versions or {}),
        )
        for pos, sample in enumerate(samples)
        for k in range(n)
    ]


class JobRunner:
    """What both rollout managers offer: `stream` (each defines it), `run` and `with_rollout`."""

    rollout: RolloutConfig

    def with_rollout(self, rollout: RolloutConfig) -> Self:
        """A manager sharing this one's resources with other sampling settings (e.g. greedy eval)."""
        sibling = copy.copy(self)
        sibling.rollout = rollout
        return sibling

    async def run(self, samples: list[Sample], n: int | None = None, seed: int | None = None) -> list[Trajectory]:
        """All trajectories, ordered by (sample, sample_index); `seed` as in `stream`."""
        out = [t async for t in self.stream(samples, n, seed)]
        return sorted(out, key=lambda t: (t.metadata["sample_position"], t.sample_index))

    def stream(self, samples: list[Sample], n: int | None = None, seed: int | None = None) -> AsyncIterator[Trajectory]:
        raise NotImplementedError

    def plan(
        self, samples: list[Sample], n: int | None, seed: int | None, versions: dict[str, int] | None = None
    ) -> list[Job]:
        """The jobs of a `stream` call: `n` (default `rollout.n`) per sample, seeded by `seed` (default
        `rollout.seed`)."""
        seed = seed if seed is not None else self.rollout.seed
        return plan_jobs(samples, n or self.rollout.n, seed, self.rollout, versions)
