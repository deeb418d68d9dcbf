"""check_env passes on every env we claim to support and explains what is wrong with broken ones."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from agentrl.config.schema import EnvConfig
from agentrl.envs import EnvAdapter, EnvCheckError, InvalidAction, check_env
from tests.unit.test_gym_loop import LineWorld


class Thermostat(gym.Env):
    """A custom env with a Box action: nudge the temperature toward 20 degrees."""

    def __init__(self):
        self.observation_space = spaces.Box(-50, 50, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Box(-2.5, 2.5, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.temperature = np.array([self.np_random.uniform(0, 40)], dtype=np.float32)
        return self.temperature.copy(), {}

    def step(self, action):
        self.temperature = np.clip(self.temperature + action, -50, 50).astype(np.float32)
        error = float(abs(self.temperature[0] - 20))
        return self.temperature.copy(), -error, error < 0.5, False, {}


class Forgetful(LineWorld):
    """Ignores the reset seed (starts one cell further at each reset): episodes cannot be named by seeds."""

    resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        self.position, self.target = self.resets % 4, 6
        return self._obs(), {}


@pytest.mark.parametrize(
    ("env", "actions"),
    [
        ("FrozenLake-v1", ["LEFT", "DOWN", "RIGHT", "UP"]),
        ("Taxi-v4", ["SOUTH", "NORTH", "EAST", "WEST", "PICKUP", "DROPOFF"]),
        ("Blackjack-v1", ["STICK", "HIT"]),
        ("CliffWalking-v1", ["UP", "RIGHT", "DOWN", "LEFT"]),
    ],
)
def test_toy_text_envs_pass(env, actions):
    report = check_env(env)
    assert report.env == env and report.actions_checked == actions and report.steps_played == 20
    assert "Each turn, reply with one of" in report.first_message


def test_custom_envs_pass_by_instance_and_by_entry_point():
    report = check_env(Thermostat(), max_actions=5)
    assert report.env == "Thermostat" and len(report.actions_checked) == 5
    assert "1 numbers separated by spaces, each between -2.5 and 2.5" in report.first_message
    report = check_env(EnvConfig(entry_point="tests.unit.test_gym_loop:LineWorld"))
    assert report.actions_checked == ["0", "1", "2"]


class LowercaseWriter(EnvAdapter):
    """Broken: writes actions with a prefix its own parser does not accept."""

    action_names = ["LEFT", "DOWN", "RIGHT", "UP"]

    def action_text(self, action):
        return f"move-{int(action)}"


class SilentObserver(EnvAdapter):
    """Broken: empty observations, and garbage replies mapped to action 0 instead of feedback."""

    def observation_text(self, obs, info):
        return ""

    def parse_action(self, text):
        try:
            return super().parse_action(text)
        except InvalidAction:
            return np.int64(0)


def test_broken_round_trip_is_reported_with_the_fix():
    with pytest.raises(EnvCheckError) as caught:
        check_env("FrozenLake-v1", adapter=LowercaseWriter)
    message = str(caught.value)
    assert "FrozenLake-v1 cannot be played through text (4 problem(s))" in message
    assert "action 0 is written as 'move-0', which parse_action rejects" in message
    assert "make parse_action accept what action_text writes" in message


def test_empty_observations_and_lenient_parsers_are_reported():
    with pytest.raises(EnvCheckError) as caught:
        check_env("FrozenLake-v1", adapter=SilentObserver)
    problems = caught.value.problems
    assert any("observation_text(...) returned '' after reset; return non-empty text" in p for p in problems)
    assert any("a reply naming no action must raise InvalidAction" in p for p in problems)


def test_adapter_by_dotted_path_and_a_wrong_class():
    check_env("FrozenLake-v1", adapter="agentrl.envs.toy_text:FrozenLakeAdapter")
    with pytest.raises(EnvCheckError, match="is not an EnvAdapter subclass; subclass agentrl.envs.EnvAdapter"):
        check_env("FrozenLake-v1", adapter="tests.unit.test_gym_loop:LineWorld")


def test_seed_ignoring_env_is_reported():
    with pytest.raises(EnvCheckError) as caught:
        check_env(Forgetful())
    assert any("two resets with seed 0 gave different observation texts" in p for p in caught.value.problems)
    assert any("reset(seed) must be deterministic" in p for p in caught.value.problems)


def test_seed_ignoring_env_is_reported_even_when_its_texts_agree():
    class OneStart(Forgetful):
        def reset(self, *, seed=None, options=None):
            _, info = super().reset(seed=seed)
            self.np_random.random()  # consumes randomness but always starts at 0
            self.position, self.target = 0, 3
            return self._obs(), info

    with pytest.raises(EnvCheckError, match="left the env's random generator in different states"):
        check_env(OneStart())


def test_action_space_without_codec_points_to_adapters():
    class Pairs(LineWorld):
        def __init__(self):
            super().__init__()
            self.action_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))

    with pytest.raises(EnvCheckError, match="write an EnvAdapter subclass that overrides parse_action/action_text"):
        check_env(Pairs())


def test_frozen_lake_local_view_passes_the_check():
    check_env("FrozenLake-v1", adapter="agentrl.envs.toy_text:FrozenLakeLocalViewAdapter")


def test_frozen_lake_local_view_names_what_each_move_steps_onto():
    from agentrl.envs.frozen_lake import FrozenLakeRandomStart
    from agentrl.envs.toy_text import FrozenLakeLocalViewAdapter

    env = FrozenLakeRandomStart(is_slippery=False)
    adapter = FrozenLakeLocalViewAdapter(env)
    # cell 6 is row 2, column 3 of the 4x4 map: holes left and right of it
    assert adapter.observation_text(6, {}) == "G is 2 DOWN, 1 RIGHT. LEFT: hole. DOWN: ice. RIGHT: hole. UP: ice."
    assert adapter.observation_text(14, {}) == "G is 1 RIGHT. LEFT: ice. DOWN: edge. RIGHT: goal. UP: ice."
    assert adapter.observation_text(0, {}) == "G is 3 DOWN, 3 RIGHT. LEFT: edge. DOWN: ice. RIGHT: ice. UP: edge."
    assert "HFFG" not in adapter.instructions()  # no map: the view replaces it


def test_frozen_lake_move_view_passes_the_check():
    check_env("FrozenLake-v1", adapter="agentrl.envs.toy_text:FrozenLakeMoveViewAdapter")


def test_frozen_lake_move_view_says_which_moves_onto_ice_get_nearer_the_goal():
    from agentrl.envs.frozen_lake import FrozenLakeRandomStart
    from agentrl.envs.toy_text import FrozenLakeMoveViewAdapter

    adapter = FrozenLakeMoveViewAdapter(FrozenLakeRandomStart(is_slippery=False))
    # cell 6 is row 2, column 3 of the 4x4 map: holes left and right of it
    assert adapter.observation_text(6, {}) == "LEFT: hole. DOWN: ice, nearer G. RIGHT: hole. UP: ice, farther from G."
    assert (
        adapter.observation_text(14, {})
        == "LEFT: ice, farther from G. DOWN: edge. RIGHT: goal. UP: ice, farther from G."
    )
    assert adapter.observation_text(3, {}) == "LEFT: ice, farther from G. DOWN: hole. RIGHT: edge. UP: edge."
    assert "G is" not in adapter.observation_text(0, {})


def test_frozen_lake_move_view_carries_enough_to_reach_the_goal_from_every_safe_cell():
    """Following the view alone (a move onto the goal or onto ice nearer G, else any move onto ice) reaches G from
    every start cell within the gym recipe's 6 steps."""
    from agentrl.envs.frozen_lake import FrozenLakeRandomStart
    from agentrl.envs.toy_text import FrozenLakeMoveViewAdapter

    env = FrozenLakeRandomStart(is_slippery=False)
    adapter = FrozenLakeMoveViewAdapter(env)
    starts = [s for s in range(16) if env.desc.flat[s] in (b"S", b"F")]
    assert len(starts) == 11
    for start in starts:
        env.reset(seed=0)
        env.s, state, terminated, steps = start, start, False, 0
        while not terminated and steps < 6:
            clauses = adapter.observation_text(state, {}).rstrip(".").split(". ")
            good = [c for c in clauses if c.endswith(("goal", "nearer G"))] or [c for c in clauses if "ice" in c]
            state, _, terminated, _, _ = env.step(adapter.parse_action(good[0].split(":")[0]))
            steps += 1
        assert env.desc.flat[state] == b"G", f"from cell {start} the view led to cell {state}"


def test_cliff_walking_local_view_and_random_start_near_the_target():
    from agentrl.envs.cliff_walking import CliffWalkingRandomStart
    from agentrl.envs.toy_text import CliffWalkingLocalViewAdapter

    env = CliffWalkingRandomStart(max_start_distance=3, distance_reward=0.1)
    check_env(env, adapter=CliffWalkingLocalViewAdapter)
    starts = {env.reset(seed=seed)[0] for seed in range(200)}
    assert starts == {23, 34, 35, 22, 33, 11}  # the safe cells 1-3 steps from the target (cell 47)
    adapter = CliffWalkingLocalViewAdapter(env)
    assert (
        adapter.observation_text(34, {})
        == "T is 1 DOWN, 1 RIGHT. UP: ground. RIGHT: ground. DOWN: cliff. LEFT: ground."
    )
    env.reset(seed=0)
    env.unwrapped.s = 34
    obs, reward, *_ = env.step(2)  # DOWN: onto the cliff, back to the start (not shaped: the agent did not walk)
    assert obs == 36 and reward == -100


def test_a_start_distance_below_one_is_refused():
    from agentrl.envs.cliff_walking import CliffWalkingRandomStart

    with pytest.raises(ValueError, match="max_start_distance=0 leaves no start cell; use 1 or more"):
        CliffWalkingRandomStart(max_start_distance=0)


def test_cliff_walking_rewards_can_be_rescaled():
    from agentrl.envs.cliff_walking import CliffWalkingRandomStart
    from agentrl.envs.toy_text import CliffWalkingLocalViewAdapter

    env = CliffWalkingRandomStart(
        max_start_distance=2, step_reward=0, cliff_reward=-1, goal_reward=1, distance_reward=0.1
    )
    env.reset(seed=0)
    env.unwrapped.s = 34  # row 3, column 11: the cliff below, the target one step down and one right
    obs, reward, terminated, *_ = env.step(1)  # RIGHT
    assert (obs, terminated) == (35, False) and reward == pytest.approx(0.1)
    obs, reward, terminated, *_ = env.step(2)  # DOWN onto the target
    assert (obs, terminated) == (47, True) and reward == pytest.approx(1.1)
    env.reset(seed=0)
    env.unwrapped.s = 34
    obs, reward, *_ = env.step(2)  # DOWN onto the cliff: its reward alone, no shaping for the jump to the start
    assert (obs, reward) == (36, -1.0)
    text = CliffWalkingLocalViewAdapter(env).step_text(2, obs, reward, {})
    assert "You fell off the cliff and are back at the start." in text
