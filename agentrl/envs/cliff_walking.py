"""`CliffWalkingRandomStart`: CliffWalking whose episodes start on a safe cell near the target, drawn from the seed.

Every CliffWalking episode starts in the same corner, 13 steps from the target: too long an episode for a small
model's first attempts, and a greedy evaluation over held-out seeds scores 0 or 1. Starting on a seeded random
safe cell within `max_start_distance` steps of the target (the grid, the cliff and its -100 unchanged) gives
graded, shorter episodes; a step onto the cliff still sends the agent back to the far start, so the episode is
lost.

    env.entry_point=agentrl.envs.cliff_walking:CliffWalkingRandomStart env.kwargs.max_start_distance=5

`distance_reward=c` adds potential-based shaping (as `FrozenLakeRandomStart` does): +c per step toward the
target, -c per step away.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.toy_text.cliffwalking import CliffWalkingEnv


class CliffWalkingRandomStart(CliffWalkingEnv):
    """`CliffWalkingEnv` (same arguments) starting on a uniformly drawn safe cell near the target.

    Args:
        max_start_distance: largest Manhattan distance of a start cell from the target (None: any safe cell).
        distance_reward: shaping per step of Manhattan distance gained toward the target (0: none).
        **kwargs: `CliffWalkingEnv`'s arguments (`render_mode`, `is_slippery`).
    """

    def __init__(self, max_start_distance: int | None = None, distance_reward: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        target = np.array(self.shape) - 1
        cells = np.indices(self.shape).reshape(2, -1).T
        self._distance = np.abs(cells - target).sum(1)
        safe = ~self._cliff.ravel() & (self._distance > 0)
        if max_start_distance is not None:
            if max_start_distance < 1:
                raise ValueError(f"max_start_distance={max_start_distance} leaves no start cell; use 1 or more")
            safe &= self._distance <= max_start_distance
        self.initial_state_distrib = safe / safe.sum()
        self.distance_reward = float(distance_reward)

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        before = self._distance[int(self.s)]
        obs, reward, terminated, truncated, info = super().step(action)
        if self.distance_reward:
            reward = float(reward) + self.distance_reward * float(before - self._distance[int(obs)])
        return obs, reward, terminated, truncated, info
