"""`FrozenLakeRandomStart`: FrozenLake whose episodes start on a safe cell drawn from the reset seed.

On a fixed, non-slippery map every FrozenLake episode is the same one, so a greedy evaluation over held-out seeds
scores 0 or 1. Starting each episode on a seeded random frozen cell (the map and its dynamics unchanged) makes
seeds name different episodes, gives a graded success rate, and puts some episodes near the goal, where a
policy that is still mostly random already succeeds sometimes — the signal GRPO needs to start learning.

    env.entry_point=agentrl.envs.frozen_lake:FrozenLakeRandomStart env.kwargs.is_slippery=false
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv


class FrozenLakeRandomStart(FrozenLakeEnv):
    """`FrozenLakeEnv` (same arguments) with the start drawn uniformly from the S and F cells."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        safe = np.isin(self.desc.ravel(), [b"S", b"F"]).astype(np.float64)
        self.initial_state_distrib = safe / safe.sum()
