"""GymAgentLoop with a scripted policy on FrozenLake, Taxi, Blackjack, CliffWalking and a custom env of this file."""

import asyncio
from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from agentrl.config import AgentConfig, AgentRLConfig, RolloutConfig
from agentrl.config.schema import EnvConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.gym import GymAgentLoop
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.types import Message, Sample, StopReason

NOT_SLIPPERY = {"is_slippery": False}
FROZEN_LAKE_WIN = ["DOWN", "DOWN", "RIGHT", "RIGHT", "DOWN", "RIGHT"]
LONG = AgentConfig(name="gym", max_turns=40, max_total_tokens=16384)  # the test tokenizer spends a token per byte


class LineWorld(gym.Env):
    """A custom env: walk along a line to the target. Observation Box([position, target]); actions 0 left,
    1 stay, 2 right (no names: the default adapter reads integers); reward 1 at the target, -0.1 per step."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 7, render_mode: str | None = None):
        self.length = length
        self.observation_space = spaces.Box(0, length - 1, shape=(2,), dtype=np.int64)
        self.action_space = spaces.Discrete(3)
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, self.length - 3))
        self.target = self.position + 3
        return self._obs(), {}

    def step(self, action):
        self.position = int(np.clip(self.position + int(action) - 1, 0, self.length - 1))
        done = self.position == self.target
        return self._obs(), 1.0 if done else -0.1, done, False, {}

    def _obs(self):
        return np.array([self.position, self.target], dtype=np.int64)


def trajectories(tokenizer, replies, env: EnvConfig, n=1, seeds=(0,), agent=None, **rollout):
    agent = agent or AgentConfig(name="gym", max_turns=30)
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, replies),
        tokenizer,
        agent,
        RolloutConfig(**{"n": n, **rollout}),
        run_config=AgentRLConfig(agent=agent, env=env),
    )
    samples = [Sample(prompt=[], extra_info={"seed": s}) for s in seeds]
    return asyncio.run(manager.run(samples))


def play(tokenizer, replies, env: EnvConfig, **kwargs):
    (traj,) = trajectories(tokenizer, replies, env, **kwargs)
    assert traj.error is None, traj.error
    assert check_drift(tokenizer, traj).ok
    return traj


def user_texts(traj):
    return [m.content for m in traj.messages if m.role == "user"]


def test_frozen_lake_reaches_the_goal_with_exact_tokens(tokenizer):
    traj = play(tokenizer, FROZEN_LAKE_WIN, EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY))
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 6
    assert traj.reward == 1.0 and traj.reward_components == {"env": 1.0}
    assert traj.metrics["env/success"] == 1.0 and traj.metrics["env/steps"] == 6
    assert traj.metadata["env"] == {
        "seed": 0,
        "terminated": True,
        "truncated": False,
        "success": True,
        "final_message": "You reached the goal!",
    }
    # Only the model's replies are trainable; observations are user messages after each non-final step.
    assert [s.role for s in traj.segments if s.trainable] == ["assistant"] * 6
    assert all(s.role == "user" for s in traj.segments if not s.trainable)
    first, *after = user_texts(traj)
    assert "reply with one of LEFT, DOWN, RIGHT, UP" in first and "@ F F F" in first
    assert len(after) == 5
    assert after[0] == "You moved DOWN. You are at row 2, column 1.\nChoose one: LEFT, DOWN, RIGHT, UP."
    assert all(text.endswith("\nChoose one: LEFT, DOWN, RIGHT, UP.") for text in [first, *after])


def test_frozen_lake_hole_ends_the_episode_without_reward(tokenizer):
    traj = play(tokenizer, ["RIGHT", "DOWN"], EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY))
    assert traj.stop_reason is StopReason.DONE and traj.reward == 0.0
    assert traj.metrics["env/success"] == 0.0
    assert traj.metadata["env"]["final_message"] == "You fell into a hole."


def test_invalid_replies_get_feedback_and_the_penalty(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, invalid_action_penalty=0.25)
    traj = play(tokenizer, ["jump!", "go LEFT or RIGHT", *FROZEN_LAKE_WIN], env)
    assert user_texts(traj)[1] == "Invalid action 'jump!': it names no action. Reply with one of LEFT, DOWN, RIGHT, UP."
    assert "names several actions" in user_texts(traj)[2]
    assert traj.stop_reason is StopReason.DONE and traj.metrics["env/invalid_actions"] == 2
    assert traj.reward == pytest.approx(1.0 - 2 * 0.25)
    assert traj.reward_components == {"env": 1.0, "invalid_actions": -0.5}


def test_invalid_replies_in_a_row_end_the_episode(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, max_invalid_actions=2, invalid_action_penalty=0.1)
    traj = play(tokenizer, ["DOWN", "??", "DOWN", "??", "??", "DOWN"], env)
    assert traj.stop_reason is StopReason.TOOL_ERROR_LIMIT and traj.num_turns == 5
    assert traj.metrics["env/steps"] == 2 and traj.reward == pytest.approx(-0.3)


def test_truncation_at_max_steps_keeps_the_return(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, max_steps=3)
    traj = play(tokenizer, ["LEFT"], env)
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.num_turns == 3
    assert traj.metadata["env"]["truncated"] and not traj.metadata["env"]["success"]


def test_agent_turn_budget_ends_the_episode_and_the_reward_is_still_set(tokenizer):
    traj = play(
        tokenizer, ["UP"], EnvConfig(id="CliffWalking-v1", max_steps=50), agent=AgentConfig(name="gym", max_turns=4)
    )
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.num_turns == 4
    assert traj.reward == -4.0  # CliffWalking: -1 per step, set although a budget ended the loop


def test_a_reply_cut_at_max_tokens_is_parsed_not_fatal(tokenizer):
    rambling = "DOWN is my move, because the hole is to the right of me"
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, max_steps=2)
    traj = play(tokenizer, [rambling, "DOWN"], env, max_tokens=20)
    assert traj.segments[1].token_ids[-1] != tokenizer.eos_token_id  # the first reply was cut (byte tokenizer)
    assert user_texts(traj)[1].startswith("You moved DOWN.")
    assert traj.metrics["env/steps"] == 2


def test_discount_applies_per_step(tokenizer):
    path = ["UP", *["RIGHT"] * 11, "DOWN"]
    env = EnvConfig(id="CliffWalking-v1", max_steps=50, discount=0.5)
    traj = play(tokenizer, path, env, agent=LONG, max_model_len=16384)
    assert traj.stop_reason is StopReason.DONE and traj.metrics["env/return"] == -13
    assert traj.reward == pytest.approx(-sum(0.5**t for t in range(13)))
    assert traj.metrics["env/success"] == 1.0


def test_cliff_walking_cliff_costs_100_and_returns_to_start(tokenizer):
    traj = play(tokenizer, ["RIGHT", "UP"], EnvConfig(id="CliffWalking-v1", max_steps=2))
    assert traj.metrics["env/return"] == -101
    assert "You fell off the cliff" in user_texts(traj)[1] and "row 4, column 1" in user_texts(traj)[1]


def taxi_solution(seed: int) -> list[str]:
    """Shortest action sequence to a successful drop-off, by breadth-first search over Taxi's transition table."""
    env = gym.make("Taxi-v4")
    start, _ = env.reset(seed=seed)
    table = env.unwrapped.P
    names = ["SOUTH", "NORTH", "EAST", "WEST", "PICKUP", "DROPOFF"]
    queue, seen = deque([(start, [])]), {start}
    while queue:
        state, path = queue.popleft()
        for action, [(_, nxt, reward, done)] in table[state].items():
            if done and reward == 20:
                return [*path, names[action]]
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, [*path, names[action]]))
    raise AssertionError("no solution")


def test_taxi_delivery(tokenizer):
    path = taxi_solution(seed=3)
    traj = play(tokenizer, path, EnvConfig(id="Taxi-v4", max_steps=40), seeds=(3,), agent=LONG, max_model_len=16384)
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == len(path)
    assert traj.reward == 20 - (len(path) - 1)
    assert traj.metrics["env/success"] == 1.0
    assert "The passenger is in the taxi" in "".join(user_texts(traj))


def test_blackjack_stick_ends_with_the_envs_outcome(tokenizer):
    expected = gym.make("Blackjack-v1")
    expected.reset(seed=5)
    _, reward, terminated, _, _ = expected.step(0)
    traj = play(tokenizer, ["STICK"], EnvConfig(id="Blackjack-v1"), seeds=(5,))
    assert terminated and traj.stop_reason is StopReason.DONE and traj.num_turns == 1
    assert traj.reward == reward
    assert "Your cards total" in user_texts(traj)[0]  # no ansi rendering: the adapter's own text


def test_blackjack_hitting_until_bust(tokenizer):
    traj = play(tokenizer, ["HIT"], EnvConfig(id="Blackjack-v1"), seeds=(1,))
    assert traj.stop_reason is StopReason.DONE and traj.reward == -1.0
    assert traj.metadata["env"]["final_message"].startswith("You went over 21")


def test_custom_env_by_entry_point_with_the_default_adapter(tokenizer):
    env = EnvConfig(entry_point=f"{__name__}:LineWorld", kwargs={"length": 7}, max_steps=10)
    traj = play(tokenizer, ["2", "action 2", "2"], env, seeds=(0,))
    first = user_texts(traj)[0]
    assert "You are playing the environment LineWorld" in first
    assert "reply with a whole number from 0 to 2" in first
    start = LineWorld()
    obs, _ = start.reset(seed=0)
    assert first.endswith(f"[{obs[0]} {obs[1]}]")  # the structured text of the Box observation
    assert traj.stop_reason is StopReason.DONE and traj.reward == pytest.approx(1.0 - 0.2)
    assert user_texts(traj)[1] == f"Reward: -0.1\n[{obs[0] + 1} {obs[1]}]"


def test_same_seed_same_episode_and_a_group_per_sample(tokenizer):
    env = EnvConfig(entry_point=f"{__name__}:LineWorld", max_steps=2)
    trajs = trajectories(tokenizer, ["1"], env, n=2, seeds=(4, 9))
    assert len(trajs) == 4
    firsts = [user_texts(t)[0] for t in trajs]
    assert firsts[0] == firsts[1] and firsts[2] == firsts[3]
    assert trajs[0].group_id == trajs[1].group_id != trajs[2].group_id
    assert [t.metadata["env"]["seed"] for t in trajs] == [4, 4, 9, 9]


def test_row_env_kwargs_override_the_config(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY)
    agent = AgentConfig(name="gym", max_turns=5)
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, ["RIGHT"]), tokenizer, agent, RolloutConfig(n=1), run_config=AgentRLConfig(env=env)
    )
    sample = Sample(prompt=[], extra_info={"seed": 0, "env_kwargs": {"desc": ["SFG", "HHH"]}})
    (traj,) = asyncio.run(manager.run([sample]))
    assert traj.stop_reason is StopReason.DONE and traj.reward == 1.0 and traj.num_turns == 2


def test_without_an_env_the_loop_says_how_to_configure_one(tokenizer):
    (traj,) = trajectories(tokenizer, ["LEFT"], EnvConfig())
    assert traj.stop_reason is StopReason.ERROR and "set env.id (e.g. env.id=FrozenLake-v1)" in traj.error


def test_bad_seed_is_reported(tokenizer):
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, ["LEFT"]),
        tokenizer,
        AgentConfig(name="gym"),
        RolloutConfig(n=1),
        run_config=AgentRLConfig(env=EnvConfig(id="FrozenLake-v1")),
    )
    (traj,) = asyncio.run(manager.run([Sample(prompt=[], id="r1", extra_info={"seed": "zero"})]))
    assert "row r1: extra_info.seed must be a whole number" in traj.error


def test_loop_built_directly_with_an_env_config(tokenizer):
    loop = GymAgentLoop(AgentConfig(name="gym"), env=EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY))
    manager = RolloutManager(ScriptedPolicy(tokenizer, FROZEN_LAKE_WIN), tokenizer, AgentConfig(name="gym"))
    manager._loops["gym"] = loop
    (traj,) = asyncio.run(manager.run([Sample(prompt=[], extra_info={"seed": 1})], n=1))
    assert traj.reward == 1.0


def play_after_a_system_message(tokenizer, env: EnvConfig):
    """The winning replies, for a row whose own prompt is the system message "Be brief."."""
    sample = Sample(prompt=[Message(role="system", content="Be brief.")], extra_info={"seed": 0})
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, FROZEN_LAKE_WIN),
        tokenizer,
        LONG,
        RolloutConfig(n=1),
        run_config=AgentRLConfig(env=env),
    )
    (traj,) = asyncio.run(manager.run([sample]))
    return traj


EXAMPLE = {"observation": "You are at row 9, column 9.", "reply": "RIGHT"}


def test_instructions_as_the_system_message_and_a_few_shot_turn_before_the_first_observation(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, instructions_role="system", examples=[EXAMPLE])
    traj = play_after_a_system_message(tokenizer, env)
    assert traj.error is None and traj.reward == 1.0 and check_drift(tokenizer, traj).ok
    system, example, shown, first = traj.messages[:4]
    assert system.role == "system" and system.content.startswith("You walk on a frozen lake.")
    assert system.content.endswith("reply with one of LEFT, DOWN, RIGHT, UP.\n\nBe brief.")
    assert example.content == "You are at row 9, column 9.\nChoose one: LEFT, DOWN, RIGHT, UP."
    assert (shown.role, shown.content) == ("assistant", "RIGHT")
    assert first.role == "user" and first.content.startswith("@ F F F") and "frozen lake" not in first.content
    # The example's reply is prompt, not a turn: only the episode's six replies are trainable.
    assert [s.role for s in traj.segments if s.trainable] == ["assistant"] * 6 and traj.num_turns == 6


def test_a_few_shot_reply_that_is_not_an_action_is_refused_before_any_episode(tokenizer):
    bad = EnvConfig(id="FrozenLake-v1", examples=[{"observation": "x", "reply": "JUMP"}])
    (traj,) = trajectories(tokenizer, ["LEFT"], bad)
    assert traj.stop_reason is StopReason.ERROR
    assert "env.examples[0].reply is not a valid action: Invalid action 'JUMP'" in traj.error


def test_few_shot_turns_need_an_observation_and_a_reply():
    with pytest.raises(ValueError, match="examples.0.reply"):
        EnvConfig(id="FrozenLake-v1", examples=[{"observation": "x", "reply": ""}])


def test_without_history_every_turn_is_a_step_sample_of_the_current_state_alone(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, history_turns=0, invalid_action_penalty=0.1)
    traj = play(tokenizer, ["LEFT", "jump", *FROZEN_LAKE_WIN], env, agent=LONG)
    assert traj.reward == pytest.approx(1.0 - 0.1) and traj.metrics["env/success"] == 1.0
    samples = traj.step_samples()
    assert len(samples) == 8 and traj.num_turns_in_all_steps() == 8 and len(traj.turn_rewards) == 8
    for sample in samples:  # each one token-exact on its own: a prompt, then one reply
        assert check_drift(tokenizer, sample).ok
        assert [m.role for m in sample.messages] == ["user", "assistant"]
        assert [s.trainable for s in sample.segments] == [False, True]
    prompts = [sample.messages[0].content for sample in samples]
    # LEFT from the corner leaves the agent where it was: the same state is the same prompt, token for token
    assert prompts[1] == prompts[0] and samples[1].segments[0].token_ids == samples[0].segments[0].token_ids
    assert all(p.startswith("You walk on a frozen lake.") and p.count("You are at row") == 1 for p in prompts)
    assert "Invalid action 'jump'" in prompts[2] and prompts[2].endswith("Choose one: LEFT, DOWN, RIGHT, UP.")
    assert "You moved" not in "".join(prompts)  # the state as observed, not the step that led there


def test_a_history_window_keeps_the_last_turns_and_opens_with_the_instructions(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, history_turns=1, instructions_role="system")
    traj = play_after_a_system_message(tokenizer, env)
    assert traj.error is None and traj.reward == 1.0 and len(traj.step_samples()) == 6
    second, third = traj.step_samples()[1:3]
    assert [m.role for m in third.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert third.messages[0].content.endswith("Be brief.")
    assert third.messages[1] == second.messages[-2] and third.messages[2].content == "DOWN"  # the previous turn
    assert [m.content.count("You are at row") for m in third.messages[1::2]] == [1, 1]
    assert all(check_drift(tokenizer, s).ok for s in traj.step_samples())


def test_a_windowed_episode_cut_by_the_turn_budget_ends_on_its_last_reply(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, history_turns=0)
    traj = play(tokenizer, FROZEN_LAKE_WIN, env, agent=AgentConfig(name="gym", max_turns=3))
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.num_turns == 3
    assert [s.num_generated_turns for s in traj.step_samples()] == [1, 1, 1] and traj.messages[-1].role == "assistant"
    assert len(traj.turn_rewards) == len(traj.turn_states) == 3
