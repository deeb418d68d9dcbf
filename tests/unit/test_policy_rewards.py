"""A reward section per policy (`policies.<name>.reward`): each policy scored on its own last reply."""

import pytest

from agentrl.config.errors import ConfigError
from agentrl.config.loader import load_config
from agentrl.loops.preflight import episode_problems
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.policy_rewards import PolicyRewards, last_reply_view, reward_pipeline
from agentrl.trainer.policy_batches import policy_view
from agentrl.types import Message, Sample, Segment, Trajectory


def prompt(ids):
    return Segment(token_ids=ids, trainable=False)


def reply(ids, policy, trainable=True):
    return Segment(token_ids=ids, trainable=trainable, logprobs=[-0.1] * len(ids), policy=policy)


def chat(*turns: tuple[str, str]) -> list[Message]:
    """Messages from (role, content) pairs."""
    return [Message(role=role, content=content) for role, content in turns]


def game() -> Trajectory:
    """The describer's own conversation (an earlier step), then the guesser's; in the guesser's, the describer's
    clue arrives as a user message."""
    describer = Trajectory(
        messages=chat(
            ("user", "Describe: apple"), ("assistant", "fruit red round"), ("user", "Shorter"), ("assistant", "fruit")
        ),
        segments=[prompt([1]), reply([10, 11, 12], "describer"), prompt([2]), reply([13], "describer")],
    )
    return Trajectory(
        group_id="g",
        messages=chat(("user", "Clue: fruit. Pick: apple, car"), ("assistant", "apple")),
        segments=[prompt([3]), reply([20], "guesser")],
        earlier_steps=[describer],
        reward=0.5,
        policy_rewards={"describer": 0.25, "guesser": 0.75},  # what the loop assigned
    )


OVERRIDES = [
    "policies={describer: {reward: {components: [{name: short, type: brevity, max_words: 1}]}}, guesser: {}}",
]


def test_each_policy_with_its_own_reward_is_scored_on_its_last_reply():
    cfg = load_config("quickstart", OVERRIDES)
    rewards = reward_pipeline(cfg)
    assert isinstance(rewards, PolicyRewards)
    traj = game()
    sample = Sample(prompt=[Message(role="user", content="x")], ground_truth="apple")
    rewards.score(traj, sample)
    assert traj.reward == pytest.approx(0.3 * 1 + 0.2 * 1 + 0.5 * 1)  # the episode's reward: the recipe's, of "apple"
    assert traj.policy_rewards == {"describer": 1.0, "guesser": 0.75}  # "fruit": one word; the guesser keeps its own
    assert traj.reward_components["describer/short"] == 1.0 and traj.reward_details["describer/short"]["words"] == 1
    assert policy_view(traj, "describer", "describer").reward == 1.0  # what the describer trains on


def test_a_policy_s_own_reward_is_what_the_roles_it_played_train_on():
    from agentrl.loops.player_views import player_rows

    traj = game()
    for step in (*traj.earlier_steps, traj):
        for seg in step.segments:
            if seg.trainable:
                seg.player = seg.policy  # each policy plays the role of its name, as in the referential game
    traj.player_rewards = {"describer": 0.25, "guesser": 0.75}  # the loop's outcome per role
    reward_pipeline(load_config("quickstart", OVERRIDES)).score(traj, Sample(prompt=[], ground_truth="apple"))
    assert traj.player_rewards == {"describer": 1.0, "guesser": 0.75}  # the section's score replaces the loop's
    rows = {row.metadata["player"]: row.reward for row in player_rows([traj])}
    assert rows == {"describer": 1.0, "guesser": 0.75}


def test_a_policy_scored_in_the_episodes_own_conversation_leaves_the_episodes_reward_alone():
    """The guesser's last reply is in the trajectory's own conversation, and its component has the name of one of
    the episode's: each keeps its own."""
    cfg = load_config(
        "quickstart",
        ["policies={describer: {}, guesser: {reward: {components: [{name: exact, type: brevity, max_words: 3}]}}}"],
    )
    traj = game()
    reward_pipeline(cfg).score(traj, Sample(prompt=[Message(role="user", content="x")], ground_truth="car"))
    assert traj.reward_components["exact"] == 0.0 and traj.reward == pytest.approx(0.2)  # "apple" is not "car"
    assert traj.reward_components["guesser/exact"] == 1.0 and traj.policy_rewards["guesser"] == 1.0
    assert traj.reward_details["exact"] != traj.reward_details["guesser/exact"]


def test_the_last_reply_is_found_by_policy_in_a_shared_conversation():
    shared = Trajectory(
        messages=chat(
            ("user", "start"),
            ("assistant", "a1"),
            ("assistant", "b1"),
            ("user", "go on"),
            ("assistant", "a2"),
            ("assistant", "b2"),
        ),
        segments=[
            prompt([1]),
            reply([10], "a"),
            reply([20], "b", trainable=False),  # a frozen policy's reply: a reply all the same
            prompt([2]),
            reply([11], None),  # unlabelled: the first policy's
            reply([21], "b", trainable=False),
        ],
    )
    assert last_reply_view(shared, "a", "a").messages[-1].content == "a2"
    assert last_reply_view(shared, "b", "a").messages[-1].content == "b2"
    assert last_reply_view(shared, "c", "a") is None  # replied nowhere
    no_logprobs = [s.model_copy(update={"logprobs": None}) if s.trainable else s for s in shared.segments]
    from_chat_api = shared.model_copy(update={"segments": no_logprobs})  # a chat API's replies (agentrl eval) have none
    assert last_reply_view(from_chat_api, "a", "a").messages[-1].content == "a2"


def test_a_policy_that_replied_nowhere_keeps_what_the_loop_gave_it():
    cfg = load_config("quickstart", OVERRIDES)
    traj = game()
    traj.earlier_steps = []  # the describer never spoke
    reward_pipeline(cfg).score(traj, Sample(prompt=[Message(role="user", content="x")], ground_truth="apple"))
    assert traj.policy_rewards["describer"] == 0.25 and "describer/short" not in traj.reward_components


def test_without_policy_rewards_the_run_has_its_one_pipeline():
    assert type(reward_pipeline(load_config("quickstart"))) is RewardPipeline
    assert type(reward_pipeline(load_config("quickstart", ["policies={a: {}, b: {}}"]))) is RewardPipeline


def test_a_bad_policy_reward_is_reported_at_start():
    cfg = load_config("quickstart", ["policies={a: {reward: {components: [{name: x, type: nope}]}}, b: {}}"])
    assert any(p.startswith("policies.a.reward: ") and "nope" in p for p in episode_problems(cfg))
    empty = load_config("quickstart", ["policies={a: {reward: {}}, b: {}}"])
    assert any(p.startswith("policies.a.reward has no components") for p in episode_problems(empty))
    with pytest.raises(ConfigError, match="policies.a.reward.weights"):
        load_config("quickstart", ["policies={a: {reward: {weights: 1}}}"])
