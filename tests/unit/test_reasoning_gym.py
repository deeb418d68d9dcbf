"""reasoning-gym datasets as tasks: samples from the package, checked at start, scored by the package."""

import sys

import pytest

from agentrl.config.loader import load_config
from agentrl.data import run_samples
from agentrl.loops.preflight import episode_problems
from agentrl.rewards.base import RewardInput
from agentrl.rewards.reasoning_gym import reasoning_gym_score
from agentrl.types import Trajectory

pytest.importorskip("reasoning_gym")


def test_a_dataset_gives_seeded_training_and_disjoint_held_out_samples():
    cfg = load_config("reasoning_gym", ["data.num_train_samples=64", "data.num_eval_samples=16"])
    train, held_out = run_samples(cfg, "train"), run_samples(cfg, "eval")
    assert len(train) == 64 and 0 < len(held_out) <= 16
    assert not {s.prompt[-1].content for s in train} & {s.prompt[-1].content for s in held_out}
    assert [s.prompt[-1].content for s in run_samples(cfg, "train")] == [s.prompt[-1].content for s in train]
    first = train[0]
    assert first.prompt[0].role == "system" and "<answer>" in first.prompt[0].content
    assert first.extra_info["reasoning_gym_entry"]["answer"] == first.ground_truth
    assert first.data_source == "reasoning_gym/chain_sum"


def test_the_system_prompt_is_the_packages_prompt_of_that_name():
    from reasoning_gym.utils import SYSTEM_PROMPTS

    cfg = load_config("reasoning_gym", ["data.num_train_samples=2", "data.reasoning_gym_prompt=direct"])
    assert {s.prompt[0].content for s in run_samples(cfg, "train")} == {SYSTEM_PROMPTS["direct"]}
    assert {s.prompt[0].content for s in run_samples(cfg, "eval")} == {SYSTEM_PROMPTS["direct"]}


def score(sample, reply):
    return reasoning_gym_score(RewardInput(trajectory=Trajectory(), sample=sample, answer=reply))


def test_the_reward_is_the_datasets_own_score_of_the_answer():
    import reasoning_gym

    cfg = load_config("reasoning_gym", ["data.num_train_samples=4"])
    sample = run_samples(cfg, "train")[0]
    right = f"Thinking... <answer>{sample.ground_truth}</answer>"
    assert score(sample, right).score == 1.0
    entry = sample.extra_info["reasoning_gym_entry"]
    theirs = reasoning_gym.get_score_answer_fn("chain_sum")(answer="12345", entry=entry)
    assert score(sample, "<answer>12345</answer>").score == theirs < 1.0
    assert score(sample, str(sample.ground_truth)).score == 1.0  # no tags: the whole reply is the answer


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.reasoning_gym=no_such_task"], "reasoning-gym has no dataset 'no_such_task'; its datasets: "),
        (["data.reasoning_gym_options={chain_sum: {bogus: 1}}"], "unexpected keyword argument 'bogus'"),
        (["data.reasoning_gym_options={spell_backward: {}, max_terms: {}}"], "max_terms is no reasoning-gym dataset"),
        (["data.reasoning_gym_prompt=terse"], "no system prompt 'terse'; its prompts: DeepSeekZero, default, simple"),
    ],
)
def test_an_unknown_dataset_or_option_is_reported_at_start(overrides, message):
    problems = episode_problems(load_config("reasoning_gym", overrides))
    assert any(message in p for p in problems), problems
    if "no_such_task" in message or "keyed" in message:
        assert any("basic_arithmetic" in p and "spell_backward" in p for p in problems)  # the package's names


def test_a_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # what an environment without the package imports
    problems = episode_problems(load_config("reasoning_gym"))
    assert "data.reasoning_gym needs the reasoning-gym package: pip install reasoning-gym" in problems
