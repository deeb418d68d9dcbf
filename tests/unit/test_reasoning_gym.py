"""reasoning-gym datasets as tasks: samples from the package, checked at start, scored by the package."""

import sys

import pytest

from agentrl.config.loader import load_config
from agentrl.config.schema import RewardConfig
from agentrl.data import run_samples
from agentrl.loops.preflight import episode_problems
from agentrl.rewards.aio import run_sync
from agentrl.rewards.base import RewardInput
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.reasoning_gym import reasoning_gym_score
from agentrl.types import Message, Sample, Trajectory

pytest.importorskip("reasoning_gym")


def test_a_dataset_gives_seeded_training_and_disjoint_held_out_samples():
    cfg = load_config("reasoning_gym", ["data.num_train_samples=64", "data.num_eval_samples=16"])
    train, held_out = run_samples(cfg, "train"), run_samples(cfg, "eval")
    assert 60 <= len(train) <= 64 and 0 < len(held_out) <= 16  # a question equal to the worked example is dropped
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


def test_a_reply_without_tags_is_scored_as_the_package_scores_it_unless_the_reward_is_lenient():
    import reasoning_gym
    from reasoning_gym.utils import extract_answer

    from agentrl.rewards.registry import build_component

    cfg = load_config("reasoning_gym", ["data.num_train_samples=4"])
    sample = run_samples(cfg, "train")[0]
    entry, reply = sample.extra_info["reasoning_gym_entry"], str(sample.ground_truth)  # right, but not in tags
    theirs = reasoning_gym.get_score_answer_fn("chain_sum")(answer=extract_answer(reply), entry=entry)
    assert score(sample, reply).score == theirs == 0.0
    assert score(sample, reply).details["answer"] is None
    lenient = build_component("reasoning_gym", {"lenient_answer": True}, "reward.components[0]")

    def lenient_score(answer):
        return run_sync(lenient.ascore(RewardInput(trajectory=Trajectory(), sample=sample, answer=answer))).score

    assert lenient_score(reply) == 1.0  # no tags: the whole reply is the answer
    tagged = reasoning_gym.get_score_answer_fn("chain_sum")(answer="12345", entry=entry)
    assert lenient_score(f"{reply} <answer>12345</answer>") == tagged < 1.0  # tags: what they hold, as by default


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


def test_worked_examples_come_before_each_question_and_are_never_asked():
    shots = ["data.reasoning_gym_shots=3", "data.num_train_samples=200"]  # the recipe's reply for chain_sum
    cfg = load_config("reasoning_gym", [*shots, "data.num_eval_samples=200"])
    train, held_out = run_samples(cfg, "train"), run_samples(cfg, "eval")
    examples = train[0].prompt[1:-1]
    assert [m.role for m in examples] == ["user", "assistant"] * 3
    assert all(s.prompt[1:-1] == examples for s in train + held_out)  # the same examples before every question
    question, answer = examples[0].content, examples[1].content
    expression = question.rsplit(": ", 1)[-1].removesuffix(" =")
    assert answer == f"{expression} = {eval(expression)}\n<answer>{eval(expression)}</answer>"
    asked = {s.prompt[-1].content for s in train + held_out}
    assert not asked & {m.content for m in examples[::2]}  # one-digit sums repeat: an example is never asked
    unshot = load_config("reasoning_gym", ["data.num_train_samples=200", "data.num_eval_samples=200"])
    assert len(train) < len(run_samples(unshot, "train"))  # the questions equal to an example were dropped


def test_a_worked_example_reply_naming_what_entries_lack_is_reported_at_start():
    cfg = load_config("reasoning_gym", ["data.reasoning_gym_shot_reply.chain_sum='{metadata[sum]}'"])
    (problem,) = [p for p in episode_problems(cfg) if "shot_reply" in p]
    assert "shot_reply.chain_sum" in problem and "KeyError: 'sum'" in problem and "expression" in problem
    cfg = load_config("reasoning_gym", ["data.reasoning_gym_shot_reply={chain_sums: x}"])
    (problem,) = [p for p in episode_problems(cfg) if "shot_reply" in p]
    assert "chain_sums is no reasoning-gym dataset" in problem


def test_another_dataset_s_examples_are_answered_plainly():
    cfg = load_config("reasoning_gym", ["data.reasoning_gym=spell_backward", "data.num_train_samples=2"])
    assert not episode_problems(cfg)  # the recipe's chain_sum reply does not follow the run to another dataset
    (reply,) = [m.content for m in run_samples(cfg, "train")[0].prompt if m.role == "assistant"]
    assert reply.startswith("<answer>") and reply.endswith("</answer>")


@pytest.mark.parametrize("reward", ["[]", "[{name: exact, type: exact_match}]"])
def test_a_dataset_without_its_reward_is_refused_at_start(reward):
    cfg = load_config("reasoning_gym", [f"reward.components={reward}"])
    (problem,) = [p for p in episode_problems(cfg) if "type: reasoning_gym" in p]
    assert problem.startswith("data.reasoning_gym=chain_sum:") and "add it" in problem
    by_path = "[{name: score, type: 'agentrl.rewards.reasoning_gym:reasoning_gym_score'}]"
    assert not episode_problems(load_config("reasoning_gym", [f"reward.components={by_path}"]))


def test_the_reward_on_samples_that_are_no_reasoning_gym_samples_is_refused_at_start():
    cfg = load_config("gym", ["reward.components=[{name: score, type: reasoning_gym}]"])
    (problem,) = [p for p in episode_problems(cfg) if "reasoning_gym" in p]
    assert problem.startswith("reward.components[0] (score): type reasoning_gym scores samples of data.reasoning_gym")
    cfg = load_config("quickstart", ["reward.components=[{name: score, type: reasoning_gym}]"])
    assert not [p for p in episode_problems(cfg) if "reasoning_gym" in p]  # data files: their rows may be such


def test_a_sample_without_an_entry_is_a_recorded_reward_failure():
    pipeline = RewardPipeline(RewardConfig(components=[{"name": "score", "type": "reasoning_gym"}]))
    sample = Sample(prompt=[Message(role="user", content="1 + 1 =")], ground_truth="2", id="plain")
    trajectory = Trajectory(messages=[*sample.prompt, Message(role="assistant", content="<answer>2</answer>")])
    assert pipeline.score(trajectory, sample) == 0.0
    error = trajectory.reward_details["score"]["error"]
    assert "samples generated by data.reasoning_gym" in error and "this sample has none" in error
