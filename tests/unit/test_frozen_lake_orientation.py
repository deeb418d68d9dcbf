"""FrozenLakeRandomStart(random_orientation=True): each episode plays one of the map's 8 rotations and mirror
images, named by the reset seed, with transitions, starts and distance shaping that follow the drawn map."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import MAPS

from agentrl.envs.frozen_lake import FrozenLakeRandomStart

FOUR = np.asarray(MAPS["4x4"], dtype="c")


def dihedral_images(desc: np.ndarray) -> set[bytes]:
    turns = [np.rot90(desc, k) for k in range(4)]
    return {m.tobytes() for m in turns + [np.fliplr(t) for t in turns]}


def test_seeds_draw_all_eight_orientations_and_name_them():
    env = FrozenLakeRandomStart(is_slippery=False, random_orientation=True)
    seen = set()
    for seed in range(64):
        start, _ = env.reset(seed=seed)
        drawn = env.desc.copy()
        seen.add(drawn.tobytes())
        assert env.desc.flat[start] in (b"S", b"F")  # a safe start on the drawn map
        again, _ = env.reset(seed=seed)
        assert again == start and np.array_equal(env.desc, drawn)  # the seed names the map and the start
    assert seen == dihedral_images(FOUR)


def test_without_the_flag_every_episode_plays_the_map_itself():
    env = FrozenLakeRandomStart(is_slippery=False)
    for seed in range(16):
        env.reset(seed=seed)
        assert np.array_equal(env.desc, FOUR)


def test_moves_and_shaping_follow_the_drawn_map():
    """On every orientation a move lands where the drawn map says (clamped at its edge), a hole or the goal ends
    the episode, and the shaping is the change of distance to the drawn map's goal."""
    env = FrozenLakeRandomStart(is_slippery=False, random_orientation=True, distance_reward=0.1)
    moves = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}  # LEFT, DOWN, RIGHT, UP
    rng = np.random.default_rng(0)
    for seed in range(40):
        state, _ = env.reset(seed=seed)
        goal = tuple(np.argwhere(env.desc == b"G")[0])
        terminated = False
        while not terminated:
            action = int(rng.integers(4))
            row, col = divmod(state, env.ncol)
            row = min(max(row + moves[action][0], 0), env.nrow - 1)
            col = min(max(col + moves[action][1], 0), env.ncol - 1)
            before = _distance(state, goal, env.ncol)
            state, reward, terminated, _, _ = env.step(action)
            assert state == row * env.ncol + col
            assert terminated == (env.desc[row, col] in (b"H", b"G"))
            goal_reward = 1.0 if (row, col) == goal else 0.0
            assert reward == pytest.approx(0.1 * (before - _distance(state, goal, env.ncol)) + goal_reward)


def _distance(state: int, goal: tuple[int, int], ncol: int) -> int:
    row, col = divmod(state, ncol)
    return abs(row - goal[0]) + abs(col - goal[1])
