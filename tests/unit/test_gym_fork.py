"""Forking a Gym episode: each child continues exactly as the parent would, given the same replies and seeds;
an env that cannot be copied is refused by name."""

from __future__ import annotations

import socket

import gymnasium as gym
import pytest
from gymnasium.envs.toy_text import FrozenLakeEnv
from gymnasium.wrappers import TimeLimit

from agentrl.config.schema import EnvConfig
from agentrl.envs.adapter import EnvAdapter
from agentrl.envs.gym import GymEpisode, fork_problem
from agentrl.errors import ForkUnsupportedError

REPLIES = ["down", "right", "nonsense", "right", "down", "down", "right"]


def play(episode: GymEpisode, replies: list[str]) -> list[tuple[str, bool]]:
    out = []
    for reply in replies:
        if episode.done:
            break
        step = episode.act(reply)
        out.append((step.text, step.valid))
    return out


@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "CliffWalking-v1", "Taxi-v4", "Blackjack-v1"])
def test_children_continue_exactly_as_the_parent(env_id: str) -> None:
    """Slippery FrozenLake and Blackjack draw from the env's generator: a child must carry it over."""
    kwargs = {"is_slippery": True} if env_id == "FrozenLake-v1" else {}
    parent = GymEpisode.from_config(EnvConfig(id=env_id, kwargs=kwargs, max_steps=20))
    parent.reset(seed=3)
    replies = [parent.adapter.action_text(a) for a in _actions(parent)]
    play(parent, replies[:2])
    children = parent.fork(2)
    rest = play(parent, replies[2:])
    for child in children:
        assert play(child, replies[2:]) == rest
        assert (child.turn_rewards, child.turn_states, child.reward) == (
            parent.turn_rewards, parent.turn_states, parent.reward)  # fmt: skip
        assert child.env is not parent.env
    for episode in (parent, *children):
        episode.close()


def test_a_childs_moves_leave_its_siblings_and_parent_alone() -> None:
    parent = GymEpisode.from_config(EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}))
    parent.reset(seed=0)
    parent.act("right")
    a, b = parent.fork(2)
    a.act("down")
    assert (a.steps, b.steps, parent.steps) == (2, 1, 1)
    assert a.state_key != b.state_key == parent.state_key


class _SocketEnvAdapter(EnvAdapter):
    """An adapter holding an OS resource that cannot be deep-copied."""

    def __init__(self, env, instructions=None):
        super().__init__(env, instructions)
        self.connection = socket.socket()


class _SimulatorAdapter(EnvAdapter):
    forkable = False


def test_an_env_that_cannot_be_copied_is_refused_with_its_name() -> None:
    held = GymEpisode.from_config(EnvConfig(id="FrozenLake-v1", adapter=f"{__name__}:_SocketEnvAdapter"))
    held.reset(seed=0)
    with pytest.raises(ForkUnsupportedError, match="env FrozenLake-v1 cannot be forked: copying it failed"):
        held.fork(1)
    held.adapter.connection.close()
    assert "its adapter _SimulatorAdapter says so" in fork_problem(
        EnvConfig(id="FrozenLake-v1", adapter=f"{__name__}:_SimulatorAdapter"))  # fmt: skip
    assert fork_problem(EnvConfig(id="FrozenLake-v1")) is None


def _actions(episode: GymEpisode) -> list[int]:
    n = int(episode.env.action_space.n)
    return [i % n for i in (1, 2, 2, 1, 0, 2, 1, 1, 3, 0)]


def _random_start_map_and_child(slippery: bool, seed: int) -> tuple[GymEpisode, GymEpisode]:
    """A random-start, random-orientation map reset with `seed`, and one fork of it."""
    config = EnvConfig(
        entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart",
        kwargs={"is_slippery": slippery, "random_orientation": True},
    )
    parent = GymEpisode.from_config(config)
    parent.reset(seed=seed)
    (child,) = parent.fork(1)
    return parent, child


def test_a_fork_shares_only_what_the_env_never_writes() -> None:
    """The transition table, spec and a random-start map's layouts are shared; the position and generator are not."""
    parent, child = _random_start_map_and_child(slippery=False, seed=1)
    mine, theirs = parent.env.unwrapped, child.env.unwrapped
    assert theirs.P is mine.P and child.env.spec is parent.env.spec and theirs._layouts is mine._layouts
    assert theirs is not mine and theirs.np_random is not mine.np_random
    before = (parent.state_key, mine.P, mine.desc.tobytes())
    tables = set()
    for seed in range(2, 10):  # new episodes draw other orientations: the child rebinds its own P, not the parent's
        child.reset(seed=seed)
        tables.add(id(theirs.P))
    assert len(tables) > 1 and (parent.state_key, mine.P, mine.desc.tobytes()) == before


def test_a_shallow_fork_carries_the_generator_into_later_episodes() -> None:
    """A random-start map is forked shallowly (it only rebinds its attributes) with a copy of its generator: resets
    without a seed draw the same orientations and starts in the child as in the parent, and the child's draws do
    not move the parent's generator."""
    parent, child = _random_start_map_and_child(slippery=True, seed=5)
    seed_seq = parent.env.unwrapped.np_random.bit_generator.seed_seq
    assert child.env.unwrapped.np_random.bit_generator.seed_seq is not seed_seq
    theirs = [(child.reset(), play(child, ["down", "right", "down"])) for _ in range(6)]
    mine = [(parent.reset(), play(parent, ["down", "right", "down"])) for _ in range(6)]
    assert theirs == mine and len({opening for opening, _ in mine}) > 1


def test_a_wrapper_with_state_of_its_own_is_copied_deeply() -> None:
    """Only the wrappers `gym.make` adds are copied shallowly; a statistics wrapper's running lists are the child's
    own."""
    parent = GymEpisode(gym.wrappers.RecordEpisodeStatistics(gym.make("FrozenLake-v1", is_slippery=False)))
    parent.reset(seed=0)
    parent.act("right")
    (child,) = parent.fork(1)
    for reply in ["right", "down", "down", "down", "right"]:
        child.act(reply)
    assert child.success and len(child.env.return_queue) == 1 and len(parent.env.return_queue) == 0
    assert parent.env.unwrapped.s == 1


class _MovingHole(FrozenLakeEnv):
    """A toy-text subclass that writes its map in place at each reset: it must not be forked shallowly."""

    def reset(self, *, seed=None, options=None):
        out = super().reset(seed=seed, options=options)
        self.desc[1, 1] = b"F" if self.desc[1, 1] == b"H" else b"H"
        return out


def test_a_toy_text_subclass_is_copied_deeply() -> None:
    """gymnasium's own toy-text classes are forked shallowly; a subclass may change its map in place, so its
    children get maps of their own (and spaces, and start distribution)."""
    parent = GymEpisode(TimeLimit(_MovingHole(is_slippery=False), 100))
    parent.reset(seed=0)
    a, b = parent.fork(2)
    maps = []
    for child in (a, b):
        child.reset()
        maps.append(child.env.unwrapped.desc[1, 1])
    assert maps == [b"H", b"H"] and parent.env.unwrapped.desc[1, 1] == b"F"  # each toggled its own copy
    assert a.env.unwrapped.action_space is not parent.env.unwrapped.action_space
