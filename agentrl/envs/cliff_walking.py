"""`CliffWalkingRandomStart`: CliffWalking whose episodes start on a safe cell near the target, drawn from the seed.

Every CliffWalking episode starts in the same corner, 13 steps from the target: too long an episode for a small
model's first attempts, and a greedy evaluation over held-out seeds scores 0 or 1. Starting on a seeded random
safe cell within `max_start_distance` steps of the target (the grid, the cliff and its -100 unchanged) gives
graded, shorter episodes; a step onto the cliff still sends the agent back to the far start, so the episode is
lost.

    env.entry_point=agentrl.envs.cliff_walking:CliffWalkingRandomStart env.kwargs.max_start_distance=5

`distance_reward=c` adds potential-based shaping (as `FrozenLakeRandomStart` does): +c per step toward the
target, -c per step away; a step onto the cliff gets `cliff_reward` alone (the jump back to the start is not the
agent walking away: shaped, a fall from 2 steps away cost 1.2 more than the cliff itself).

`step_reward`, `cliff_reward` and `goal_reward` rescale the env's rewards (-1 per step, -100 for the cliff,
nothing more at the target): with -1 per step and an invalid reply ending the episode at a small penalty, not
playing at all scores better than a 3-step success, and a policy learns exactly that.
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
        step_reward: the reward of a step that stays off the cliff (the env's -1).
        cliff_reward: the reward of a step onto the cliff (the env's -100).
        goal_reward: added on reaching the target (the env adds nothing).
        **kwargs: `CliffWalkingEnv`'s arguments (`render_mode`, `is_slippery`).
    """

    def __init__(
        self,
        max_start_distance: int | None = None,
        distance_reward: float = 0.0,
        step_reward: float = -1.0,
        cliff_reward: float = -100.0,
        goal_reward: float = 0.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.step_reward = float(step_reward)
        self.cliff_reward = float(cliff_reward)
        self.goal_reward = float(goal_reward)
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
        self.fell = False  # whether the last step went onto the cliff

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        before = self._distance[int(self.s)]
        obs, reward, terminated, truncated, info = super().step(action)
        self.fell = reward <= -100
        reward = self.cliff_reward if reward <= -100 else self.step_reward
        if terminated:
            reward += self.goal_reward
        if self.distance_reward and not self.fell:  # the jump back to the start is not walking away
            reward = float(reward) + self.distance_reward * float(before - self._distance[int(obs)])
        return obs, reward, terminated, truncated, info
