"""`validate_run`: every name a run gives is resolved, and every problem listed at once, before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.config import AgentRLConfig, ConfigError, load_config
from agentrl.loops.preflight import episode_problems, validate_episodes
from agentrl.trainer.preflight import run_problems, validate_run


def config(**sections: object) -> AgentRLConfig:
    return AgentRLConfig.model_validate(sections)


def test_the_five_typos_of_the_issue_are_all_reported_with_exit_2_and_nothing_loaded() -> None:
    code = """
import sys
from agentrl.cli import main
rc = main(["train", "recipe=quickstart", "agent.name=nope", "trainer.loss=nope", "trainer.advantage=nope",
           "tools=[{class: nope}]", "agent.tool_parser=nope"])
print("RESULT", rc, sorted(m for m in ("torch", "transformers", "ray", "docker") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip().splitlines()[-1] == "RESULT 2 []", done.stdout + done.stderr
    err = done.stderr
    assert "5 problem(s)" in err and "Traceback" not in err
    for line in (
        "agent.name: unknown agent loop 'nope'",
        "agent.tool_parser: unknown tool-call parser 'nope'",
        "tools[0].class: unknown tool 'nope'",
        "trainer.advantage: unknown advantage estimator 'nope'",
        "trainer.loss: unknown policy loss 'nope'",
    ):
        assert line in err, err


def test_a_valid_recipe_has_no_problems() -> None:
    for recipe in ("quickstart", "gym", "swe_agent", "gui_agent"):
        assert run_problems(load_config(recipe)) == [], recipe


def test_loop_options_are_checked_against_the_loop_options_model() -> None:
    problems = run_problems(config(agent={"name": "swe_agent", "kwargs": {"time_budget": 5, "on_no_tool_call": "x"}}))
    joined = "\n".join(problems)
    assert "agent.kwargs.time_budget: Extra inputs are not permitted" in joined
    assert "agent.kwargs.on_no_tool_call: Input should be 'remind' or 'stop'" in joined
    assert "options of SWEAgentLoop: prompt, examples, time_budget_s" in joined
    assert "agent.name=swe_agent calls tools, but `tools:` is empty" in joined
    # a loop without options takes none
    assert run_problems(config(agent={"kwargs": {"oops": 1}})) == [
        "agent.kwargs.oops: Extra inputs are not permitted (options of SingleTurnAgentLoop: none)"
    ]


def test_a_custom_loop_without_options_takes_any_kwargs() -> None:
    cfg = config(agent={"name": "tests.unit.test_loops:EchoTwice", "kwargs": {"anything": 1}})
    assert run_problems(cfg) == []


def test_reward_types_and_options_are_checked_without_building() -> None:
    components = [
        {"name": "a", "type": "exact_mach"},
        {"name": "b", "type": "regex", "patern": "x"},
        {"name": "c", "type": "reward_model", "model": "/no/such/model", "normalise": "sigmoid"},
        {"name": "d", "type": "exact_match", "gate": {"component": "zzz"}},
    ]
    problems = run_problems(config(reward={"components": components}))
    joined = "\n".join(problems)
    assert "unknown reward type 'exact_mach'. Did you mean 'exact_match'?" in joined
    assert "reward.components[1] (b): options ['patern'] do not fit regex_match" in joined
    assert "reward.components[2] (c): options" in joined and "normalise" in joined  # and no model was loaded
    assert len(problems) == 3  # the gate is checked once the components themselves are fine
    gated = run_problems(config(reward={"components": [components[3]]}))
    assert gated == [
        "reward component 'd' is gated on 'zzz', which is not a component; known: d",
    ]


def test_env_names_are_resolved() -> None:
    problems = run_problems(config(env={"id": "FrozenLake-v9", "adapter": "agentrl.types:Trajectory"}))
    assert problems[0].startswith("env.id='FrozenLake-v9' is not a registered gymnasium env")
    assert problems[1].startswith("env.adapter=agentrl.types:Trajectory is not an EnvAdapter subclass")
    problems = run_problems(config(env={"entry_point": "no_such_pkg.envs:Env"}))
    assert problems == [
        "env.entry_point: cannot import 'no_such_pkg.envs' for 'no_such_pkg.envs:Env' "
        "(ModuleNotFoundError: No module named 'no_such_pkg')"
    ]


def test_data_files_exist_and_their_first_row_parses(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"prompt": "hi"}) + "\n")
    bad_row = tmp_path / "bad.jsonl"
    bad_row.write_text(json.dumps({"question": "hi"}) + "\n")
    bad_loop = tmp_path / "loop.jsonl"
    bad_loop.write_text(json.dumps({"prompt": "hi", "agent_name": "tool_agnt"}) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    files = [str(good), str(tmp_path / "missing.jsonl"), str(bad_row), str(bad_loop), str(empty)]
    problems = run_problems(config(data={"train_files": files}))
    assert len(problems) == 4
    assert problems[0].startswith("data.train_files[1]: dataset file") and "does not exist" in problems[0]
    assert problems[1].startswith("data.train_files[2]:") and "field prompt is missing" in problems[1]
    assert problems[2].startswith("data.train_files[3]:") and "Did you mean 'tool_agent'?" in problems[2]
    assert problems[3] == f"data.train_files[4]: {empty} holds no rows"


def test_trainer_settings_that_depend_on_each_other() -> None:
    problems = run_problems(config(trainer={"resume": True, "overlong_max_tokens": 10, "overlong_cache_tokens": 20}))
    assert problems[0].startswith("trainer.resume=true needs output_dir=DIR")
    assert problems[1].startswith("trainer.overlong_cache_tokens must be in (0, overlong_max_tokens=10]")


def test_validate_run_raises_every_problem_at_once_and_load_config_leaves_names_to_it() -> None:
    cfg = load_config("quickstart", ["trainer.loss=nope", "agent.tool_parser=hermess"])  # the schema holds
    with pytest.raises(ConfigError) as raised:
        validate_run(cfg)
    assert len(raised.value.problems) == 2
    assert "Did you mean 'hermes'?" in raised.value.problems[0]
    validate_run(load_config("quickstart"))  # the recipe itself is fine


def test_episodes_are_checked_without_the_trainer_settings() -> None:
    """`agentrl rollout`, `eval` and the gateway check what an episode needs; a training-only name is not theirs."""
    cfg = load_config("quickstart", ["trainer.loss=nope", "agent.tool_parser=hermess"])
    (problem,) = episode_problems(cfg)
    assert problem.startswith("agent.tool_parser: unknown tool-call parser 'hermess'")
    with pytest.raises(ConfigError):
        validate_episodes(cfg)
    validate_episodes(load_config("quickstart", ["trainer.loss=nope"]))


def test_the_readme_custom_loop_options_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    name = "examples.custom_loop:GuessNumberLoop"
    assert run_problems(config(agent={"name": name, "kwargs": {"hints": False}})) == []
    (problem,) = run_problems(config(agent={"name": name, "kwargs": {"hint": False}}))
    assert problem == "agent.kwargs.hint: Extra inputs are not permitted (options of GuessNumberLoop: hints)"


def test_off_policy_correction_settings_need_the_correction_on():
    from agentrl.config.loader import load_config
    from agentrl.trainer.preflight import run_problems

    problems = run_problems(load_config(overrides=["trainer.is_mode=mask"]))
    assert any("set trainer.tis_cap=C" in p for p in problems)
    problems = run_problems(load_config(overrides=["trainer.is_mode=mask", "trainer.tis_cap=0.4"]))
    assert any("is_mask_low (0.5) must be below trainer.tis_cap (0.4)" in p for p in problems)
    ok = ["trainer.is_level=sequence", "trainer.tis_cap=2.0"]
    assert not [p for p in run_problems(load_config(overrides=ok)) if "trainer." in p]


@pytest.mark.parametrize("mode", ["async", "fully_async"])
def test_stale_groups_corrected_by_default_accept_the_mask_shape(mode: str) -> None:
    corrected = [f"trainer.mode={mode}", "trainer.stale_samples=correct", "trainer.is_mode=mask"]
    assert not [p for p in run_problems(load_config(overrides=corrected)) if "trainer.is_mode" in p]
    low = run_problems(load_config(overrides=[*corrected, "trainer.is_mask_low=2.5"]))  # against the default cap
    assert "trainer.is_mask_low (2.5) must be below trainer.tis_cap (2.0)" in low
    for off in ("drop", "regenerate"):  # the async modes correct the tokens within the bound too
        bounded = [f"trainer.mode={mode}", f"trainer.stale_samples={off}", "trainer.is_mode=mask"]
        assert not [p for p in run_problems(load_config(overrides=bounded)) if "trainer.is_mode" in p]


def test_gigpo_options_set_for_tree_grpo_are_refused_at_start() -> None:
    # the gym recipe tunes GiGPO; tree_grpo takes none of its options and would only fail at the first step
    cfg = load_config("gym", ["trainer.advantage=tree_grpo", "rollout.tree.branch_turns=[1]"])
    assert run_problems(cfg) == [
        "trainer.advantage=tree_grpo does not take gigpo_step_weight, gigpo_anchor_scope: leave them at the default, "
        "or add the keyword to the estimator"
    ]
