"""Per-turn credit: what a turn is, turn_grpo and gigpo against their papers' formulas on hand-built episodes, each
turn's advantage on exactly that turn's tokens (cut-and-continued and resumed turns included), the gym loop's
turn rewards and states, and the start-up check of the configuration."""

import asyncio
import math

import pytest
import torch

from agentrl.config import AgentConfig, AgentRLConfig, TrainerConfig
from agentrl.config.schema import EnvConfig
from agentrl.errors import UserError
from agentrl.loops.builder import TrajectoryBuilder
from agentrl.loops.context import AgentContext, Budgets
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.protocol import SamplingParams
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.batch import trajectory_to_tensors
from agentrl.trainer.preflight import run_problems
from agentrl.trainer.registry import is_per_turn_advantage
from agentrl.trainer.turn_algorithms import gigpo_advantage, turn_grpo_advantage
from agentrl.trainer.turn_credit import TurnEpisode, token_advantages, turn_episodes
from agentrl.types import Message, Sample, Segment, Trajectory
from tests.unit.test_gym_loop import NOT_SLIPPERY, play

EPS = 1e-6


def seg(ids, trainable=True, version=0, role="assistant"):
    logprobs = [-1.0] * len(ids) if trainable else None
    return Segment(
        token_ids=ids, trainable=trainable, logprobs=logprobs, policy_version=version if trainable else None, role=role
    )


def three_turns(**fields):
    """Prompt; turn 0 resumed after a weight push (versions 3 and 4); an observation; turn 1; a tool result; turn 2."""
    segments = [
        seg([1, 2], trainable=False, role="user"),
        seg([3, 4], version=3),
        seg([5], version=4),
        seg([6, 7], trainable=False, role="user"),
        seg([8, 9, 10]),
        seg([11], trainable=False, role="tool"),
        seg([12]),
    ]
    return Trajectory(segments=segments, **fields)


def approx(values):
    return pytest.approx(values, abs=1e-5)


# ---- what a turn is ---------------------------------------------------------------------------------------------


def test_a_turn_is_a_maximal_run_of_trainable_segments():
    traj = three_turns()
    assert traj.turn_index() == [None, 0, 0, None, 1, None, 2]
    assert traj.num_generated_turns == 3
    assert Trajectory(segments=[seg([1], trainable=False)]).num_generated_turns == 0


def test_a_cut_reply_continued_without_a_message_between_is_one_turn(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["abcdefgh", "ij", "k"])
    budgets = Budgets(max_tokens_per_turn=4, max_total_tokens=4096, max_model_len=4096, continue_cut_turns=True)
    ctx = AgentContext(Sample(prompt=[]), Trajectory(), policy, tokenizer, SamplingParams(), budgets=budgets)

    async def run():
        ctx.start([Message(role="user", content="go")])
        cut = await ctx.generate()
        assert cut.finish_reason == "length"
        await ctx.generate()  # the loop continues the cut reply: same turn
        ctx.add_messages([Message(role="user", content="obs")])
        await ctx.generate()

    asyncio.run(run())
    traj = ctx.trajectory
    assert traj.num_turns == 3  # generate calls
    assert traj.turn_index() == [None, 0, 0, None, 1]
    adv = token_advantages(traj, [2.0, -1.0])
    first, second, obs, third = (len(s.token_ids) for s in traj.segments[1:])
    assert adv.tolist() == [2.0] * (first + second) + [0.0] * obs + [-1.0] * third


def test_a_resumed_generation_is_one_turn_of_one_segment_per_version(tokenizer):
    traj = Trajectory()
    builder = TrajectoryBuilder(tokenizer, traj)
    builder.start([Message(role="user", content="go")])
    builder.add_generation_pieces([([5, 6], [-1.0, -1.0], 0), ([], [], 1), ([7], [-1.0], 2)])
    assert [(s.token_ids, s.policy_version) for s in traj.segments[1:]] == [([5, 6], 0), ([7], 2)]
    assert traj.turn_index() == [None, 0, 0]
    builder.add_messages([Message(role="user", content="obs")])
    builder.add_generation_pieces([([], [], 3), ([], [], 4)])  # nothing generated: still a turn, of one segment
    assert traj.turn_index()[-1] == 1 and traj.segments[-1].policy_version == 4


# ---- turn advantages onto tokens ----------------------------------------------------------------------------------


def test_each_turns_advantage_lands_on_exactly_its_tokens():
    traj = three_turns()
    adv = token_advantages(traj, [0.5, -1.0, 2.0])
    # response = [3, 4, 5 | 6, 7 | 8, 9, 10 | 11 | 12]; the resumed turn's two versions share turn 0's advantage
    assert adv.tolist() == [0.5, 0.5, 0.5, 0.0, 0.0, -1.0, -1.0, -1.0, 0.0, 2.0]
    mask = trajectory_to_tensors(traj).response_mask
    assert adv.shape == mask.shape and bool((adv[mask == 0] == 0).all())
    with pytest.raises(ValueError, match="3 turns but 2 advantages"):
        token_advantages(traj, [1.0, 2.0])


# ---- turn_grpo ----------------------------------------------------------------------------------------------------


def test_turn_grpo_is_grpo_process_supervision_over_turns():
    episodes = [
        TurnEpisode("g", 1.0, [0.0, 1.0]),
        TurnEpisode("g", 0.5, [0.5]),
        TurnEpisode("h", 2.0, [1.0, 1.0]),  # every turn reward of group h equal: no signal
        TurnEpisode("h", 1.0, [1.0]),
    ]
    got = turn_grpo_advantage(episodes, discount=0.5, eps=EPS).per_turn
    # group g: R = {0, 1, 0.5}, mean 0.5, unbiased std 0.5 -> normalised rewards -1, 1 | 0
    mean, std = 0.5, 0.5
    n = [(r - mean) / (std + EPS) for r in (0.0, 1.0, 0.5)]
    assert got[0].tolist() == approx([n[0] + 0.5 * n[1], n[1]])  # Â_t = Σ_{k≥t} γ^{k−t} r̃_k
    assert got[1].tolist() == approx([n[2]])
    assert got[2].tolist() == [0.0, 0.0] and got[3].tolist() == [0.0]
    assert all(a.dtype == torch.float32 for a in got)


def test_turn_grpo_without_discount_sums_the_normalised_rewards_to_go():
    episodes = [TurnEpisode("g", 1.0, [1.0, 0.0, 0.0]), TurnEpisode("g", 0.0, [0.0])]
    (first, second) = turn_grpo_advantage(episodes, eps=0.0).per_turn
    mean, std = 0.25, math.sqrt((0.75**2 + 3 * 0.25**2) / 3)
    low, high = -mean / std, (1 - mean) / std
    assert first.tolist() == approx([high + 2 * low, 2 * low, low]) and second.tolist() == approx([low])


def test_turn_grpo_of_a_single_turn_gives_zero():
    (only,) = turn_grpo_advantage([TurnEpisode("g", 1.0, [1.0])]).per_turn
    assert only.tolist() == [0.0]


# ---- gigpo --------------------------------------------------------------------------------------------------------


def gigpo_group():
    return [
        TurnEpisode("g", 1.0, [0.0, 1.0], ["A", "B"]),
        TurnEpisode("g", 0.0, [0.0, 0.0], ["A", "C"]),
        TurnEpisode("g", 0.5, [0.5, 0.0], ["A", "B"]),
    ]


def test_gigpo_adds_episode_and_anchor_state_advantages():
    result = gigpo_advantage(gigpo_group(), discount=0.5, step_weight=0.5, eps=EPS)
    # Eq. 3: R = (1, 0, 0.5): mean 0.5, unbiased std 0.5
    a_e = [(r - 0.5) / (0.5 + EPS) for r in (1.0, 0.0, 0.5)]
    # Eq. 5, γ = 0.5: returns (0 + 0.5·1, 1), (0, 0), (0.5 + 0, 0)
    # Eq. 6-7: anchor A = {0.5, 0, 0.5}: mean 1/3, std √(1/12); B = {1, 0}: mean 0.5, std √0.5; C = {0}: singleton
    sa, sb = math.sqrt(1 / 12), math.sqrt(0.5)
    a_s = [
        [(0.5 - 1 / 3) / (sa + EPS), (1 - 0.5) / (sb + EPS)],
        [(0.0 - 1 / 3) / (sa + EPS), 0.0],
        [(0.5 - 1 / 3) / (sa + EPS), (0 - 0.5) / (sb + EPS)],
    ]
    for got, e, s in zip(result.per_turn, a_e, a_s, strict=True):  # Eq. 8: A = A^E + ω·A^S, ω = 0.5
        assert got.tolist() == approx([e + 0.5 * x for x in s])
    assert result.metrics["train/gigpo_anchor_share"] == pytest.approx(5 / 6)  # all turns but C's


def test_gigpo_without_step_norm_keeps_step_advantages_in_reward_units():
    result = gigpo_advantage(gigpo_group(), discount=0.5, step_weight=0.5, step_norm="none", eps=EPS)
    a_e = [(r - 0.5) / (0.5 + EPS) for r in (1.0, 0.0, 0.5)]  # the episode level keeps its std (Eq. 3)
    # Eq. 7 with F_norm = 1: A = {0.5, 0, 0.5} minus 1/3; B = {1, 0} minus 0.5; C a singleton
    a_s = [[0.5 - 1 / 3, 1 - 0.5], [0.0 - 1 / 3, 0.0], [0.5 - 1 / 3, 0 - 0.5]]
    for got, e, s in zip(result.per_turn, a_e, a_s, strict=True):
        assert got.tolist() == approx([e + 0.5 * x for x in s])
    trajectories = [
        three_turns(group_id="g", reward=3 * r, turn_rewards=[r] * 3, turn_states=["A", "B", "C"]) for r in (2.0, 0.0)
    ]
    std, raw = (
        row_advantages(TrainerConfig(advantage="gigpo", gigpo_step_norm=n), trajectories) for n in ("std", "none")
    )
    assert float(raw.tokens[0].max()) - float(raw.tokens[1].max()) != pytest.approx(
        float(std.tokens[0].max()) - float(std.tokens[1].max())
    )  # the trainer passes the option on


def test_gigpo_anchor_groups_stay_within_the_prompt_group_and_repeated_states_count():
    lone = TurnEpisode("h", 3.0, [1.0, 2.0], ["A", "A"])  # same key as group g's anchor A; revisits it
    with_lone = gigpo_advantage([*gigpo_group(), lone], discount=0.5, step_weight=0.5, eps=EPS).per_turn
    without = gigpo_advantage(gigpo_group(), discount=0.5, step_weight=0.5, eps=EPS).per_turn
    for a, b in zip(with_lone, without, strict=False):
        assert torch.equal(a, b)
    # group h: one episode (A^E = 0); its two turns from A form an anchor group of returns (1 + 0.5·2, 2) = (2, 2)
    assert with_lone[3].tolist() == [0.0, 0.0]
    returns = gigpo_advantage([TurnEpisode("h", 3.0, [1.0, 2.0], ["A", "A"])], discount=1.0, eps=0.0).per_turn[0]
    assert returns.tolist() == approx([(3 - 2.5) / math.sqrt(0.5), (2 - 2.5) / math.sqrt(0.5)])


def test_gigpo_batch_scope_pools_a_state_across_prompt_groups():
    lone = TurnEpisode("h", 3.0, [1.0, 2.0], ["A", "A"])  # group h reaches group g's state A too
    pooled = gigpo_advantage([*gigpo_group(), lone], discount=0.5, step_weight=0.5, anchor_scope="batch", eps=EPS)
    # anchor A over the batch: g's returns (0.5, 0, 0.5) and h's (1 + 0.5·2, 2) = (2, 2)
    a = [0.5, 0.0, 0.5, 2.0, 2.0]
    mean, std = sum(a) / 5, math.sqrt(sum((x - sum(a) / 5) ** 2 for x in a) / 4)
    sb = math.sqrt(0.5)  # anchor B is g's alone, as within the group: returns (1, 0)
    a_e = [(r - 0.5) / (0.5 + EPS) for r in (1.0, 0.0, 0.5)] + [0.0]  # episode level stays within each group
    a_s = [
        [(0.5 - mean) / (std + EPS), (1 - 0.5) / (sb + EPS)],
        [(0.0 - mean) / (std + EPS), 0.0],
        [(0.5 - mean) / (std + EPS), (0 - 0.5) / (sb + EPS)],
        [(2.0 - mean) / (std + EPS), (2.0 - mean) / (std + EPS)],
    ]
    for got, e, s in zip(pooled.per_turn, a_e, a_s, strict=True):
        assert got.tolist() == approx([e + 0.5 * x for x in s])
    within = gigpo_advantage([*gigpo_group(), lone], discount=0.5, step_weight=0.5, eps=EPS)
    assert within.per_turn[3].tolist() == [0.0, 0.0]  # the default keeps h's state A to itself
    assert pooled.metrics["train/gigpo_anchor_share"] == pytest.approx(7 / 8)  # all turns but C's


def test_the_trainer_passes_its_anchor_scope_to_gigpo():
    trajectories = [  # one episode per prompt group, both through states A, B, C: 1 per turn in g, 0 in h
        three_turns(group_id=group, reward=3 * r, turn_rewards=[r] * 3, turn_states=["A", "B", "C"])
        for group, r in (("g", 1.0), ("h", 0.0))
    ]
    within = row_advantages(TrainerConfig(advantage="gigpo"), trajectories)
    pooled = row_advantages(TrainerConfig(advantage="gigpo", gigpo_anchor_scope="batch"), trajectories)
    assert all(float(t.abs().sum()) == 0.0 for t in within.tokens)  # one episode per group: nothing to compare
    assert float(pooled.tokens[0].min()) >= 0 >= float(pooled.tokens[1].max())  # g's turns above h's, state by state
    assert float(pooled.tokens[0].max()) > 0 > float(pooled.tokens[1].min())


def test_gigpo_of_identical_episodes_is_zero_and_needs_state_keys():
    same = [TurnEpisode("g", 1.0, [0.0, 1.0], ["A", "B"]) for _ in range(3)]
    result = gigpo_advantage(same)
    assert all(a.tolist() == [0.0, 0.0] for a in result.per_turn)
    assert result.metrics["train/gigpo_anchor_share"] == 1.0
    with pytest.raises(UserError, match="turn_states"):
        gigpo_advantage([TurnEpisode("g", 1.0, [1.0])])


# ---- from trajectories --------------------------------------------------------------------------------------------


def test_the_reward_no_turn_accounts_for_goes_to_the_last_turn():
    traj = three_turns(group_id="g", reward=1.5, turn_rewards=[0.25, 0.0, 0.5], turn_states=["a", "b", "c"])
    (episode,) = turn_episodes([traj], "turn_grpo")
    assert episode.turn_rewards == [0.25, 0.0, 1.25] and sum(episode.turn_rewards) == traj.reward
    assert episode.turn_states == ["a", "b", "c"] and episode.group_id == "g"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reward": 1.0}, "records no per-turn rewards"),
        ({"reward": 1.0, "turn_rewards": [1.0]}, "3 generated turns but 1 turn_rewards"),
        ({"reward": 1.0, "turn_rewards": [0, 0, 0], "turn_states": ["a"]}, "3 generated turns but 1 turn_states"),
        ({"turn_rewards": [0, 0, 0]}, "has no reward"),
        ({"reward": 1.0, "turn_rewards": [0, 0, 0], "earlier_steps": [three_turns()]}, "6 generated turns but 3"),
    ],
)
def test_trajectories_a_per_turn_estimator_cannot_credit_are_user_errors(fields, message):
    with pytest.raises(UserError, match=message):
        turn_episodes([three_turns(**fields)], "gigpo")


def test_row_advantages_put_turn_advantages_on_turn_tokens_and_log_them():
    trajectories = [
        three_turns(group_id="g", reward=1.0, turn_rewards=[0.0, 0.0, 1.0], turn_states=["s", "t", "u"]),
        three_turns(group_id="g", reward=0.0, turn_rewards=[0.0, 0.0, 0.0], turn_states=["s", "t", "v"]),
    ]
    rows = row_advantages(TrainerConfig(advantage="gigpo"), trajectories)
    expected = gigpo_advantage(turn_episodes(trajectories, "gigpo")).per_turn
    for traj, tokens, turns in zip(rows.rows, rows.tokens, expected, strict=True):
        assert torch.equal(tokens, token_advantages(traj, turns.tolist()))
        assert len(set(turns.tolist())) > 1  # the turns differ: same state s, t, then u vs v
    per_turn = torch.cat(expected)
    assert rows.metrics["train/turn_adv_abs_mean"] == pytest.approx(float(per_turn.abs().mean()))
    assert rows.metrics["train/gigpo_anchor_share"] == pytest.approx(4 / 6)
    assert rows.metrics["train/advantage_max"] == pytest.approx(float(per_turn.max()))


def test_turn_advantages_follow_the_turns_across_step_samples():
    """A loop that rewrote its context (`env.history_turns`): the turns of its earlier step samples come first."""
    one_turn = Trajectory(segments=[seg([1], trainable=False, role="user"), seg([2, 3])])
    no_reply = Trajectory(segments=[seg([4], trainable=False, role="user")])  # generated nothing: not a row

    def episode(reward, turn_rewards):
        earlier = [one_turn.model_copy(deep=True), no_reply, three_turns()]
        return one_turn.model_copy(update={"reward": reward, "turn_rewards": turn_rewards, "earlier_steps": earlier})

    trajectories = [episode(1.0, [0.0, 0.0, 0.0, 0.0, 1.0]), episode(0.0, [0.0, 0.0, 0.0, 0.0, 0.0])]
    trajectories = [t.model_copy(update={"group_id": "g", "turn_states": list("abcde")}) for t in trajectories]
    rows = row_advantages(TrainerConfig(advantage="gigpo"), trajectories)
    expected = gigpo_advantage(turn_episodes(trajectories, "gigpo")).per_turn
    assert len(rows.rows) == 6 and rows.rows[2] is trajectories[0]  # per episode: 1-turn, 3-turn, last samples
    for i, turns in enumerate(t.tolist() for t in expected):
        first, middle, last = rows.tokens[3 * i : 3 * i + 3]
        assert first.tolist() == approx([turns[0]] * 2)
        assert torch.equal(middle, token_advantages(three_turns(), turns[1:4]))
        assert last.tolist() == approx([turns[4]] * 2)
    assert expected[0][4] > 0 > expected[1][4]


def test_an_outcome_estimator_gives_every_turn_the_trajectorys_advantage():
    trajectories = [three_turns(group_id="g", reward=1.0), three_turns(group_id="g", reward=0.0)]
    rows = row_advantages(TrainerConfig(advantage="grpo"), trajectories)
    a = (1.0 - 0.5) / (math.sqrt(0.5) + EPS)  # rewards (1, 0): mean 0.5, unbiased std √0.5
    assert rows.tokens[0].tolist() == approx([a] * 3 + [0] * 2 + [a] * 3 + [0] + [a])
    assert rows.tokens[1].tolist() == approx([-a] * 3 + [0] * 2 + [-a] * 3 + [0] + [-a])
    assert "train/turn_adv_abs_mean" not in rows.metrics


# ---- the gym loop records turn rewards and states ---------------------------------------------------------------


def test_gym_turns_carry_step_rewards_penalties_and_the_state_they_started_from(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, invalid_action_penalty=0.1)
    replies = ["LEFT", "jump", "DOWN", "DOWN", "RIGHT", "RIGHT", "DOWN", "RIGHT"]
    traj = play(tokenizer, replies, env)
    assert traj.turn_rewards == [0.0, -0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert sum(traj.turn_rewards) == pytest.approx(traj.reward)
    states = traj.turn_states
    # LEFT from the corner and an invalid reply both leave the agent where it was
    assert states[0] == states[1] == states[2] and len(set(states[2:])) == 6
    assert Trajectory.from_json(traj.to_json()).turn_states == states


def test_a_gym_turn_generated_but_never_played_gets_reward_zero(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY)
    full = play(tokenizer, ["DOWN", "DOWN"], env, agent=AgentConfig(name="gym", max_turns=2, max_total_tokens=4096))
    budget = sum(len(s.token_ids) for s in full.segments[:3]) + 2  # the second reply is cut by the token budget
    traj = play(tokenizer, ["DOWN", "DOWN"], env, agent=AgentConfig(name="gym", max_turns=2, max_total_tokens=budget))
    assert traj.stop_reason == "context_overflow" and traj.num_generated_turns == 2
    assert traj.turn_rewards == [0.0, 0.0] and traj.turn_states[1] == full.turn_states[1]


def test_a_gym_episode_without_history_trains_one_row_per_turn_with_that_turns_advantage(tokenizer):
    env = EnvConfig(id="FrozenLake-v1", kwargs=NOT_SLIPPERY, history_turns=0)
    won = play(tokenizer, ["DOWN", "DOWN", "RIGHT", "RIGHT", "DOWN", "RIGHT"], env)
    fell = play(tokenizer, ["DOWN", "RIGHT"], env)  # the second state's RIGHT falls in; its DOWN (above) did not
    trajectories = [t.model_copy(update={"group_id": "g"}) for t in (won, fell)]
    rows = row_advantages(TrainerConfig(advantage="gigpo"), trajectories)
    assert len(rows.rows) == 8 and all(r.num_generated_turns == 1 for r in rows.rows)
    assert all(len(set(t.tolist())) == 1 for t in rows.tokens)  # a row's response is its one reply
    per_turn = [float(t[0]) for t in rows.tokens]
    assert per_turn[1] > per_turn[7]  # same state, DOWN (won) against RIGHT (fell)


# ---- configuration ------------------------------------------------------------------------------------------------


def test_per_turn_estimators_are_told_apart_by_name():
    assert is_per_turn_advantage("turn_grpo") and is_per_turn_advantage("gigpo")
    assert not is_per_turn_advantage("grpo")
    assert is_per_turn_advantage("agentrl.trainer.turn_algorithms:gigpo_advantage")


def test_a_per_turn_estimator_needs_a_loop_that_records_turn_rewards():
    single = AgentRLConfig(trainer=TrainerConfig(advantage="turn_grpo"))
    (problem,) = [p for p in run_problems(single) if "turn_grpo" in p]
    assert "loop single_turn records no per-turn rewards" in problem and "trainer.advantage=grpo" in problem
    gym = AgentRLConfig(
        agent=AgentConfig(name="gym"), env=EnvConfig(id="FrozenLake-v1"), trainer=TrainerConfig(advantage="gigpo")
    )
    assert not [p for p in run_problems(gym) if "gigpo" in p]
    discounted = gym.model_copy(update={"env": EnvConfig(id="FrozenLake-v1", discount=0.9)})
    assert any("set env.discount=1" in p for p in run_problems(discounted))


def test_a_users_per_turn_estimator_gets_only_the_options_it_takes():
    from agentrl.trainer.algorithms import register_advantage
    from agentrl.trainer.registry import ADVANTAGES
    from agentrl.trainer.turn_algorithms import per_turn

    seen = []

    def older(episodes, *, discount=1.0, eps=1e-6):  # written before step_weight and anchor_scope existed
        seen.append(discount)
        return turn_grpo_advantage(episodes, discount=discount, eps=eps)

    trajectories = [three_turns(group_id="g", reward=3 * r, turn_rewards=[r] * 3) for r in (1.0, 0.0)]
    with ADVANTAGES.scoped():
        register_advantage("older_turns")(per_turn(older))
        result = row_advantages(TrainerConfig(advantage="older_turns", turn_discount=0.5), trajectories)
        assert seen == [0.5] and float(result.tokens[0].max()) > 0
        batch = TrainerConfig(advantage="older_turns", gigpo_anchor_scope="batch")
        with pytest.raises(UserError, match="does not take gigpo_anchor_scope: leave it at the default"):
            row_advantages(batch, trajectories)
        gym = AgentRLConfig(agent=AgentConfig(name="gym"), env=EnvConfig(id="FrozenLake-v1"), trainer=batch)
        assert any("does not take gigpo_anchor_scope" in p for p in run_problems(gym))
