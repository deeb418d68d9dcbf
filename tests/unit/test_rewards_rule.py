import pytest

from agentrl.config import RewardConfig
from agentrl.errors import AgentRLError
from agentrl.rewards.base import RewardInput
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.registry import REWARDS
from agentrl.rewards.rule import brevity, normalize
from agentrl.types import Message, Sample, Trajectory


def traj(answer):
    return Trajectory(
        messages=[
            Message(role="user", content="q"),
            Message(role="assistant", content="thinking"),
            Message(role="tool", content="apple"),  # tool output never counts as the answer
            Message(role="assistant", content=answer),
        ]
    )


def sample(gt):
    return Sample(prompt=[Message(role="user", content="q")], ground_truth=gt)


def test_normalize():
    assert normalize("  Apple!  ") == "apple"
    assert normalize("A  b,\nC") == "a b c"


@pytest.mark.parametrize(
    ("answer", "exact", "normalized"),
    [("apple", 1.0, 1.0), ("Apple.", 0.0, 1.0), ("apples", 0.0, 0.0), ("the apple", 0.0, 0.0)],
)
def test_match_rules(answer, exact, normalized):
    pipe = RewardPipeline(
        RewardConfig(components=[{"name": "e", "type": "exact_match"}, {"name": "n", "type": "normalized_match"}])
    )
    t = traj(answer)
    pipe.score(t, sample("apple"))
    assert t.reward_components == {"e": exact, "n": normalized}
    assert t.reward == exact + normalized


def test_weighted_sum_and_details():
    pipe = RewardPipeline(
        RewardConfig(
            components=[
                {"name": "n", "type": "normalized_match", "weight": 0.7},
                {"name": "fmt", "type": "regex", "weight": 0.3, "pattern": "^[a-z]+$"},
            ]
        )
    )
    t = traj("Apple")
    assert pipe.score(t, sample("apple")) == pytest.approx(0.7)
    assert t.reward_details["n"]["answer"] == "Apple"


@pytest.fixture
def broken_rule():
    def broken(inp):
        raise RuntimeError("judge down")

    with REWARDS.override("broken", broken):
        yield


def test_failures_zero_or_skip(broken_rule):
    comps = [{"name": "n", "type": "normalized_match", "weight": 0.5}, {"name": "b", "type": "broken", "weight": 0.5}]
    t = traj("apple")
    assert RewardPipeline(RewardConfig(components=comps, on_failure="zero")).score(t, sample("apple")) == 0.5
    assert "judge down" in t.reward_details["b"]["error"]
    t = traj("apple")
    assert RewardPipeline(RewardConfig(components=comps, on_failure="skip")).score(t, sample("apple")) == 1.0
    assert "b" not in t.reward_components


def test_unknown_type_lists_known():
    with pytest.raises(AgentRLError, match="Known reward types: .*exact_match.*normalized_match.*regex"):
        RewardPipeline(RewardConfig(components=[{"type": "nope"}]))


def test_loop_reward_kept_without_components():
    t = traj("x")
    t.reward = 0.25
    assert RewardPipeline(RewardConfig()).score(t, sample("y")) == 0.25


@pytest.mark.parametrize(("answer", "score"), [("Apple", 1.0), ("Sure: apple!", 1.0), ("pineapple", 0.0), ("", 0.0)])
def test_contains_whole_words(answer, score):
    t = traj(answer)
    RewardPipeline(RewardConfig(components=[{"name": "c", "type": "contains"}])).score(t, sample("apple"))
    assert t.reward == score


@pytest.mark.parametrize(("answer", "score"), [("apple", 1.0), ("  Apple. ", 1.0), ("an apple", 0.5),
                                               ("a red apple here", 0.25), ("", 0.0)])  # fmt: skip
def test_brevity_is_graded_by_the_words_over_the_limit(answer, score):
    t = traj(answer)
    RewardPipeline(RewardConfig(components=[{"name": "b", "type": "brevity", "max_words": 1}])).score(t, sample("x"))
    assert t.reward == score


def test_brevity_needs_a_positive_limit():
    with pytest.raises(ValueError, match="max_words must be at least 1"):
        brevity(RewardInput(trajectory=traj("apple"), sample=sample("x"), answer="apple"), max_words=0)
