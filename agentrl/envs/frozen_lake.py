"""`FrozenLakeRandomStart`: FrozenLake whose episodes start on a safe cell drawn from the reset seed.

On a fixed, non-slippery map every FrozenLake episode is the same one, so a greedy evaluation over held-out seeds
scores 0 or 1. Starting each episode on a seeded random frozen cell (the map and its dynamics unchanged) makes
seeds name different episodes, gives a graded success rate, and puts some episodes near the goal, where a
policy that is still mostly random already succeeds sometimes.

    env.entry_point=agentrl.envs.frozen_lake:FrozenLakeRandomStart env.kwargs.is_slippery=false

`distance_reward=c` adds potential-based shaping (Ng, Harada & Russell, 1999) with potential -c x the Manhattan
distance to the nearest goal: +c for a step toward it, -c for a step away. An episode's shaping sums to
c x (start distance - end distance), so with c x (largest distance) < 1 a reward of 1 or more still means success.

`fall_forfeits_shaping=True` takes the episode's shaping back on the step that falls into a hole, so that every
fall scores 0 whatever path led to it: with shaping alone, walking toward G and falling in on the way (+c per step)
outscores an episode that goes round the hole and runs out of steps, and group-relative estimators reward the fall.
`hole_reward=-1` makes falling into a hole cost something: FrozenLake's own reward for it is 0, the same as
wandering until the step limit, and with distance shaping a fall toward the goal even earns +c, so a per-turn
estimator would see the fatal step as a good one.
`bump_reward=-c` is added to a move into the edge of the lake (the agent stays where it was). With potential-based
shaping and undiscounted returns such a move is free: bumping and then walking to G scores the same as walking
to G at once, so a per-turn estimator cannot tell the bump from the good move, and a greedy policy that bumps
repeats the bump until the episode's step limit. `bump_ends_episode=True` also ends the episode on such a move:
a policy that reads only the current state and answers greedily repeats a bump forever anyway, so this scores a
bump in training as evaluation does. Like any cost on valid moves, `bump_reward` can make an invalid reply
(which ends the episode) look cheaper to a policy that has not yet learned to succeed; `recipe=gym` uses neither
(README, "Recipes", for what each did there).

`random_orientation=True` plays each episode on one of the map's eight rotations and mirror images, drawn from the
reset seed (the same seed, the same orientation and start). On FrozenLake's own map nearly every good move is
RIGHT or DOWN, so a policy that says RIGHT everywhere already reaches the goal from the bottom row, and a small
model's preference for one word across all states pays before reading each state does (and then leaves every
group alike). Across the eight orientations each direction is as often the good move as any other: no single word
pays, only reading the observation does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv


class FrozenLakeRandomStart(FrozenLakeEnv):
    """`FrozenLakeEnv` (same arguments) with the start drawn uniformly from the S and F cells.

    Args:
        distance_reward: shaping per step of Manhattan distance gained toward the goal (0: none).
        hole_reward: added to the reward of the step that falls into a hole (FrozenLake's own: 0).
        bump_reward: added to the reward of a move that leaves the agent where it was (into the lake's edge).
        bump_ends_episode: such a move also ends the episode (terminated, not a success).
        fall_forfeits_shaping: the step that falls into a hole takes back the shaping the episode earned.
        random_orientation: each episode's map is one of the map's 8 rotations and mirror images, drawn at reset.
        **kwargs: `FrozenLakeEnv`'s arguments (`desc`, `map_name`, `is_slippery`, `render_mode`, ...).
    """

    fork_shared = ("_layouts",)  # never written after __init__: a forked episode shares them (agentrl.envs.gym)
    # Its attributes are rebound (`_use`, `reset`), never changed in place: a fork copies it shallowly with its
    # generator (agentrl.envs.gym). Not inherited: a subclass is copied deeply unless it says so too.
    fork_rebinds_only = True

    def __init__(
        self,
        distance_reward: float = 0.0,
        hole_reward: float = 0.0,
        fall_forfeits_shaping: bool = False,
        bump_reward: float = 0.0,
        bump_ends_episode: bool = False,
        random_orientation: bool = False,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        tables = {k: kwargs[k] for k in ("is_slippery", "success_rate", "reward_schedule") if k in kwargs}
        maps = _orientations(self.desc) if random_orientation else [self.desc]
        self._layouts = tuple(_Layout.of(desc, tables) for desc in maps)
        self._use(self._layouts[0])
        self.distance_reward = float(distance_reward)
        self.hole_reward = float(hole_reward)
        self.fall_forfeits_shaping = bool(fall_forfeits_shaping)
        self.bump_reward = float(bump_reward)
        self.bump_ends_episode = bool(bump_ends_episode)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        if len(self._layouts) > 1:
            gym.Env.reset(self, seed=seed)  # seed the generator, which then draws the orientation and the start
            self._use(self._layouts[int(self.np_random.integers(len(self._layouts)))])
            seed = None
        obs, info = super().reset(seed=seed, options=options)
        self._start_distance = self._distance[int(obs)]
        return obs, info

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        here = int(self.s)
        before = self._distance[here]
        obs, reward, terminated, truncated, info = super().step(action)
        fell = terminated and self.desc.flat[int(obs)] == b"H"
        if fell and self.fall_forfeits_shaping:  # the episode's shaping sums to 0
            reward = float(reward) - self.distance_reward * float(self._start_distance - before)
        elif self.distance_reward:
            reward = float(reward) + self.distance_reward * float(before - self._distance[int(obs)])
        if fell:
            reward = float(reward) + self.hole_reward
        if int(obs) == here:
            reward = float(reward) + self.bump_reward
            terminated = terminated or self.bump_ends_episode
        return obs, float(reward), terminated, truncated, info

    def _use(self, layout: _Layout) -> None:
        self.desc, self.P = layout.desc, layout.transitions
        self.nrow, self.ncol = layout.desc.shape
        self.initial_state_distrib, self._distance = layout.starts, layout.distance


@dataclass(frozen=True)
class _Layout:
    """One map to play on: the map, its transition table (FrozenLakeEnv's `P`), the start distribution over its
    safe cells, and each cell's Manhattan distance to the nearest goal."""

    desc: np.ndarray
    transitions: dict[int, dict[int, list[tuple[float, int, float, bool]]]]
    starts: np.ndarray
    distance: np.ndarray

    @classmethod
    def of(cls, desc: np.ndarray, table_kwargs: dict[str, Any]) -> _Layout:
        rows = ["".join(c.decode() for c in row) for row in np.asarray(desc)]
        env = FrozenLakeEnv(desc=rows, **table_kwargs)
        safe = np.isin(env.desc.ravel(), [b"S", b"F"]).astype(np.float64)
        goals = np.argwhere(env.desc == b"G")
        cells = np.indices(env.desc.shape).reshape(2, -1).T
        distance = np.abs(cells[:, None, :] - goals[None, :, :]).sum(-1).min(1)
        return cls(env.desc, env.P, safe / safe.sum(), distance)


def _orientations(desc: np.ndarray) -> list[np.ndarray]:
    """The 8 rotations and mirror images of a map (the first is the map itself)."""
    turns = [np.rot90(desc, k) for k in range(4)]
    return turns + [np.fliplr(t) for t in turns]
