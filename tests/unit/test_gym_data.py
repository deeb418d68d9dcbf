"""env config, seed-generated datasets, the rollout command's samples, and env construction errors."""

import json

import gymnasium as gym
import numpy as np
import pytest

from agentrl.config import ConfigError, load_config
from agentrl.config.schema import EnvConfig
from agentrl.data import DatasetError, run_samples
from agentrl.envs import check_env, make_env, seed_samples
from agentrl.errors import AgentRLError
from agentrl.runner import rollout_samples

NOT_SLIPPERY = {"is_slippery": False}


def test_seed_datasets_are_disjoint_and_name_the_gym_loop():
    cfg = load_config(None, ["env.id=FrozenLake-v1", "env.num_train_seeds=5", "env.num_eval_seeds=3"])
    train, held_out = run_samples(cfg, "train"), run_samples(cfg, "eval")
    assert [s.extra_info["seed"] for s in train] == [0, 1, 2, 3, 4]
    assert [s.extra_info["seed"] for s in held_out] == [1_000_000, 1_000_001, 1_000_002]
    assert {s.agent_name for s in train + held_out} == {"gym"}
    assert held_out[0].id == "FrozenLake-v1/eval/1000000" and held_out[0].data_source == "gym/FrozenLake-v1"
    assert rollout_samples(cfg) == held_out


def test_a_custom_loop_plays_generated_episodes():
    cfg = load_config(None, ["env.entry_point=tests.unit.test_gym_loop:LineWorld", "agent.name=my.pkg:MyGymLoop"])
    samples = run_samples(cfg, "train")
    assert len(samples) == 64 and samples[0].agent_name is None  # played by agent.name
    assert samples[0].data_source == "gym/LineWorld"


def test_data_files_take_precedence_over_seeds(tmp_path):
    rows = tmp_path / "eval.jsonl"
    rows.write_text(json.dumps({"prompt": "Play well.", "agent_name": "gym", "extra_info": {"seed": 7}}) + "\n")
    cfg = load_config(None, ["env.id=FrozenLake-v1", f"data.eval_files=[{rows}]"])
    (sample,) = run_samples(cfg, "eval")
    assert sample.extra_info == {"seed": 7} and sample.prompt[0].content == "Play well."
    assert len(run_samples(cfg, "train")) == 64


def test_without_held_out_seeds_rollout_uses_training_seeds():
    cfg = load_config(None, ["env.id=Taxi-v4", "env.num_eval_seeds=0", "env.num_train_seeds=2"])
    assert run_samples(cfg, "eval") == []
    assert [s.extra_info["seed"] for s in rollout_samples(cfg)] == [0, 1]


def test_no_data_and_no_env_say_both_fixes():
    cfg = load_config(None, [])
    with pytest.raises(DatasetError, match=r"or an environment \(env.id=FrozenLake-v1\)"):
        run_samples(cfg, "train")
    with pytest.raises(AgentRLError, match="data.eval_files or data.train_files"):
        rollout_samples(cfg)
    with pytest.raises(DatasetError, match="env.num_train_seeds is 0"):
        run_samples(load_config(None, ["env.id=Taxi-v4", "env.num_train_seeds=0"]), "train")


def test_env_config_validation_lists_every_problem():
    with pytest.raises(ConfigError) as caught:
        load_config(
            None,
            [
                "env.id=FrozenLake-v1",
                "env.entry_point=a.b:C",
                "env.eval_seed_start=10",
                "env.discount=1.5",
                "env.render_mode=rgb",
            ],
        )
    text = str(caught.value)
    assert "env.discount: Input should be less than or equal to 1" in text
    assert "env.render_mode: Input should be 'auto', 'ansi' or 'none'" in text
    with pytest.raises(ConfigError) as caught:  # cross-field problems: reported once the fields are valid
        load_config(None, ["env.id=FrozenLake-v1", "env.entry_point=a.b:C", "env.eval_seed_start=10"])
    text = str(caught.value)
    assert "env.id and env.entry_point are both set; set one" in text
    assert "held-out seeds 10..25 overlap training seeds 0..63; move env.eval_seed_start past 63" in text


def test_gym_recipe_resolves_and_its_env_passes_the_check():
    cfg = load_config("gym", [])
    assert cfg.env.entry_point == "agentrl.envs.frozen_lake:FrozenLakeRandomStart"
    # a bump costs and ends the episode, as a greedy policy that sees only the current state would repeat it
    assert cfg.env.kwargs == {
        "is_slippery": False,
        "distance_reward": 0.1,
        "bump_reward": -0.1,
        "bump_ends_episode": True,
    }
    assert cfg.env.adapter == "agentrl.envs.toy_text:FrozenLakeMoveViewAdapter"
    assert cfg.env.history_turns == 0 and cfg.rollout.max_tokens == 3  # the current state only; a bare move
    assert cfg.agent.name == "gym" and cfg.reward.components == []  # the loop's env return is the reward
    assert cfg.trainer.advantage == "gigpo"  # per-turn credit
    assert cfg.trainer.entropy_coef > 0 and cfg.trainer.entropy_choices == ["LEFT", "DOWN", "RIGHT", "UP"]
    report = check_env(cfg.env)
    assert report.actions_checked == ["LEFT", "DOWN", "RIGHT", "UP"]


def test_random_start_frozen_lake_starts_on_safe_cells_named_by_the_seed():
    env = make_env(EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=NOT_SLIPPERY))
    desc = env.unwrapped.desc.ravel()
    starts = [env.reset(seed=seed)[0] for seed in range(200)]
    assert {desc[s] for s in starts} == {b"S", b"F"}
    assert len(set(starts)) == int(np.isin(desc, [b"S", b"F"]).sum())  # every safe cell is a start
    assert env.reset(seed=7)[0] == env.reset(seed=7)[0]


def test_distance_shaping_is_potential_based(tokenizer):
    from tests.unit.test_gym_loop import play

    kwargs = {**NOT_SLIPPERY, "distance_reward": 0.1}
    env = EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=kwargs, max_steps=8)
    start = make_env(env).reset(seed=0)[0]
    assert start == 9  # row 3, column 2: 3 steps from G
    win = play(tokenizer, ["DOWN", "UP", "DOWN", "RIGHT", "RIGHT"], env)
    assert win.metrics["env/success"] == 1.0 and win.reward == pytest.approx(1.0 + 0.1 * 3)
    assert [round(r, 1) for r in _step_rewards(env, [1, 3, 1, 2, 2])] == [0.1, -0.1, 0.1, 0.1, 1.1]
    hole = play(tokenizer, ["RIGHT", "RIGHT"], env)  # toward G, into the hole at row 3, column 4
    assert hole.reward == pytest.approx(0.2) and hole.metrics["env/success"] == 0.0  # a positive reward, no success


def test_hole_reward_is_added_to_the_fatal_step_only(tokenizer):
    from tests.unit.test_gym_loop import play

    kwargs = {**NOT_SLIPPERY, "distance_reward": 0.1, "hole_reward": -1.0}
    env = EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=kwargs, max_steps=8)
    assert [round(r, 1) for r in _step_rewards(env, [2, 2])] == [0.1, -0.9]  # toward G, then into the hole
    assert [round(r, 1) for r in _step_rewards(env, [1, 3, 1, 2, 2])] == [0.1, -0.1, 0.1, 0.1, 1.1]
    hole = play(tokenizer, ["RIGHT", "RIGHT"], env)
    assert hole.reward == pytest.approx(0.2 - 1.0) and hole.metrics["env/success"] == 0.0


def test_bump_reward_is_added_to_a_move_into_the_edge_only():
    kwargs = {**NOT_SLIPPERY, "distance_reward": 0.1, "bump_reward": -0.1}
    env = EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=kwargs, max_steps=8)
    # from row 3, column 2: LEFT (away from G), LEFT into the edge (the agent stays put), DOWN into a hole (no bump)
    assert [round(r, 2) for r in _step_rewards(env, [0, 0, 1])] == [-0.1, -0.1, 0.1]
    assert [round(r, 2) for r in _step_rewards(env, [1, 3, 1, 2, 2])] == [0.1, -0.1, 0.1, 0.1, 1.1]
    # row 4, column 3 (left of G): DOWN into the edge, then RIGHT onto G
    assert [round(r, 2) for r in _step_rewards(env, [1, 2, 1, 2])] == [0.1, 0.1, -0.1, 1.1]


def test_a_bump_can_end_the_episode(tokenizer):
    from tests.unit.test_gym_loop import play

    kwargs = {**NOT_SLIPPERY, "distance_reward": 0.1, "bump_reward": -0.1, "bump_ends_episode": True}
    env = EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=kwargs, max_steps=8)
    game = make_env(env)
    game.reset(seed=0)  # row 3, column 2
    assert game.step(0)[1:3] == (pytest.approx(-0.1), False)  # LEFT, away from G: the episode goes on
    assert game.step(0)[1:3] == (pytest.approx(-0.1), True)  # LEFT into the edge: it ends
    bump = play(tokenizer, ["LEFT", "LEFT", "RIGHT"], env)
    assert bump.num_turns == 2 and bump.reward == pytest.approx(-0.2) and bump.metrics["env/success"] == 0.0


def test_a_fall_can_forfeit_the_shaping_its_episode_earned(tokenizer):
    from tests.unit.test_gym_loop import play

    kwargs = {**NOT_SLIPPERY, "distance_reward": 0.1, "fall_forfeits_shaping": True}
    env = EnvConfig(entry_point="agentrl.envs.frozen_lake:FrozenLakeRandomStart", kwargs=kwargs, max_steps=8)
    # from row 3, column 2: RIGHT (toward G), LEFT (away), RIGHT, then RIGHT into the hole at row 3, column 4
    assert [round(r, 1) for r in _step_rewards(env, [2, 0, 2, 2])] == [0.1, -0.1, 0.1, -0.1]
    assert [round(r, 1) for r in _step_rewards(env, [1, 3, 1, 2, 2])] == [0.1, -0.1, 0.1, 0.1, 1.1]  # a win keeps it
    hole = play(tokenizer, ["RIGHT", "RIGHT"], env)
    assert hole.reward == pytest.approx(0.0) and hole.metrics["env/success"] == 0.0


def _step_rewards(env_config, actions):
    env = make_env(env_config)
    env.reset(seed=0)
    return [env.step(a)[1] for a in actions]


def test_make_env_applies_max_steps_render_mode_and_kwargs():
    env = make_env(EnvConfig(id="FrozenLake-v1", kwargs={"map_name": "8x8"}, max_steps=3))
    assert env.render_mode == "ansi" and env.unwrapped.desc.shape == (8, 8)
    env.reset(seed=0)
    truncated = [env.step(3)[3] for _ in range(3)]
    assert truncated == [False, False, True]
    assert make_env(EnvConfig(id="FrozenLake-v1", render_mode="none")).render_mode is None
    assert make_env(EnvConfig(id="Blackjack-v1")).render_mode is None  # no ansi mode: structured text


def test_make_env_errors_say_what_to_do():
    with pytest.raises(AgentRLError, match="is not a registered gymnasium env .*set env.entry_point"):
        make_env(EnvConfig(id="NoSuchEnv-v0"))
    with pytest.raises(AgentRLError, match="Blackjack-v1 renders only \\['human', 'rgb_array'\\]"):
        make_env(EnvConfig(id="Blackjack-v1", render_mode="ansi"))
    with pytest.raises(AgentRLError, match="rejected env.kwargs"):
        make_env(EnvConfig(id="FrozenLake-v1", kwargs={"slippery": False}))
    with pytest.raises(AgentRLError, match="returned a dict, not a gymnasium.Env"):
        make_env(EnvConfig(entry_point="builtins:dict"))
    with pytest.raises(AgentRLError, match="module 'tests.unit.test_gym_loop' has no attribute 'Nope'"):
        make_env(EnvConfig(entry_point="tests.unit.test_gym_loop:Nope"))
    with pytest.raises(AgentRLError, match="no environment configured"):
        make_env(EnvConfig())


def test_module_prefixed_ids_import_the_registering_module():
    gym.register("agentrl-test/LineWorld-v0", entry_point="tests.unit.test_gym_loop:LineWorld")
    env = make_env(EnvConfig(id="tests.unit.test_gym_loop:agentrl-test/LineWorld-v0", max_steps=4))
    assert env.spec.max_episode_steps == 4 and env.unwrapped.length == 7


def test_seed_samples_directly():
    samples = seed_samples(EnvConfig(id="Taxi-v4", num_eval_seeds=2, eval_seed_start=500), "eval", agent_name=None)
    assert [(s.extra_info["seed"], s.agent_name, s.prompt) for s in samples] == [(500, None, []), (501, None, [])]
