"""TextArena games as a loop: the package's own game, observations and rewards, with a scripted player."""

import asyncio

import pytest

from agentrl.config.loader import load_config
from agentrl.config.schema import AgentConfig
from agentrl.loops.context import AgentContext, Budgets, StopLoop
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.textarena import TextArenaLoop
from agentrl.rollout.protocol import SamplingParams
from agentrl.trainer.preflight import run_problems
from agentrl.types import Message, Sample, StopReason, Trajectory

pytest.importorskip("textarena")


def play(tokenizer, replies, max_turns=20, **kwargs):
    loop = TextArenaLoop(AgentConfig(name="textarena", kwargs={"env_id": "GuessTheNumber-v0", **kwargs}))
    sample = Sample(prompt=[Message(role="user", content="play")], extra_info={"seed": 3})
    ctx = AgentContext(
        sample=sample,
        trajectory=Trajectory(),
        llm=ScriptedPolicy(tokenizer, replies),
        tokenizer=tokenizer,
        sampling=SamplingParams(max_tokens=16),
        budgets=Budgets(max_turns=max_turns, max_tokens_per_turn=16, max_total_tokens=4096, max_model_len=4096),
    )
    try:
        return asyncio.run(loop.run(sample, ctx))
    except StopLoop as stop:  # as the runner does: the trajectory is kept with the stop reason
        ctx.trajectory.stop_reason = stop.reason
        return ctx.trajectory


def test_a_binary_search_wins_guess_the_number_and_the_game_gives_the_reward(tokenizer):
    bounds, last = [1, 20], [0]

    def guess(conversation: str) -> str:  # halves the interval on the game's own hints
        hint = conversation[-160:]
        if last[0] and "higher" in hint:
            bounds[0] = last[0] + 1
        elif last[0] and "lower" in hint:
            bounds[1] = last[0] - 1
        last[0] = (bounds[0] + bounds[1]) // 2
        return f"[{last[0]}]"

    traj = play(tokenizer, [guess])
    assert traj.reward == 1.0 and traj.metrics["textarena/success"] == 1.0
    assert "Guess The Number" in traj.messages[0].content
    assert traj.metadata["textarena"]["rewards"] == {0: 1} and traj.metadata["textarena"]["finished"]


def test_a_game_the_turn_budget_ends_early_is_unfinished_and_scores_zero(tokenizer):
    traj = play(tokenizer, ["[1]"], max_turns=2)
    assert traj.stop_reason == StopReason.MAX_TURNS and traj.num_turns == 2
    assert traj.reward == 0.0 and traj.metadata["textarena"]["finished"] is False


def test_an_unknown_game_lists_the_packages_games():
    (problem,) = run_problems(load_config("textarena", ["agent.kwargs.env_id=NoSuchGame-v0"]))
    assert "textarena has no game 'NoSuchGame-v0'; its games: " in problem and "GuessTheNumber-v0" in problem


def test_a_forked_game_goes_on_as_the_parent_would_and_siblings_apart(tokenizer):
    from agentrl.loops.tree import TreeShape, run_tree

    def guess_from_seed(conversation: str) -> str:  # a pure function of the conversation so far
        return f"[{1 + conversation.count('[') * 7 % 20}]"

    def context(replies):
        return AgentContext(
            sample=Sample(prompt=[Message(role="user", content="play")], extra_info={"seed": 3}),
            trajectory=Trajectory(),
            llm=ScriptedPolicy(tokenizer, replies),
            tokenizer=tokenizer,
            sampling=SamplingParams(max_tokens=16),
            budgets=Budgets(max_turns=4, max_tokens_per_turn=16, max_total_tokens=4096, max_model_len=4096),
        )

    async def scenario():
        loop = TextArenaLoop(AgentConfig(name="textarena", kwargs={"env_id": "GuessTheNumber-v0"}))
        alone = context([guess_from_seed])
        state = await loop.begin(alone.sample, alone)
        for _ in range(3):
            await loop.step(alone, state)
        await loop.end(alone, state)
        parent = context([guess_from_seed])
        state = await loop.begin(parent.sample, parent)
        await loop.step(parent, state)
        child, sibling = parent.fork(2)
        child_state, sibling_state = await loop.fork_state(state, [child, sibling])
        for _ in range(2):
            await loop.step(child, child_state)
        await loop.end(child, child_state)
        await loop.step(sibling, sibling_state)  # one guess fewer: its game is its own
        return alone.trajectory, child.trajectory, (child_state, sibling_state)

    whole, continued, (child_state, sibling_state) = asyncio.run(scenario())
    assert [m.content for m in continued.messages] == [m.content for m in whole.messages]
    assert continued.reward == whole.reward
    assert sibling_state.env is not child_state.env and sibling_state.env.state.turn < child_state.env.state.turn
    leaves = asyncio.run(run_tree(TextArenaLoop(AgentConfig(name="textarena", kwargs={"env_id": "GuessTheNumber-v0"})),
                                  context([guess_from_seed]).sample, context([guess_from_seed]),
                                  TreeShape(branch_turns=(1,), width=2)))  # fmt: skip
    assert len(leaves) == 2 and all(leaf.metadata["textarena"] for leaf in leaves)


class _CapturedBatch:
    """A FAKE training backend: keeps the rows a step would train."""

    def step(self, trajectories):
        self.rows = trajectories
        return {}


def test_self_play_trains_each_player_on_its_own_reward(tokenizer):
    from agentrl.config import AgentRLConfig
    from agentrl.config.schema import TrainerConfig
    from agentrl.trainer.advantages import row_advantages
    from agentrl.trainer.policies import Policies, PolicyRuntime

    def move(conversation: str) -> str:  # player 0 takes the top row before player 1 completes the middle one
        made = conversation.count("<|im_start|>assistant") - 1
        return ("[3]", "[4]", "[5]")[made] if "You are Player 1" in conversation else ("[0]", "[1]", "[2]")[made]

    def game() -> Trajectory:
        loop = TextArenaLoop(AgentConfig(name="textarena", kwargs={"env_id": "TicTacToe-v0", "num_players": 2}))
        sample = Sample(prompt=[Message(role="user", content="play")], extra_info={"seed": 1})
        ctx = AgentContext(
            sample=sample,
            trajectory=Trajectory(group_id="g"),
            llm=ScriptedPolicy(tokenizer, [move]),
            tokenizer=tokenizer,
            sampling=SamplingParams(max_tokens=16),
            budgets=Budgets(max_turns=20, max_tokens_per_turn=16, max_total_tokens=4096, max_model_len=4096),
        )
        return asyncio.run(loop.run(sample, ctx))

    episodes = [game(), game()]
    assert all(e.metadata["textarena"]["rewards"] == {0: 1, 1: -1} for e in episodes)  # player 0 always wins
    captured = _CapturedBatch()
    policies = Policies.__new__(Policies)
    policies.several, policies.runtimes = False, [PolicyRuntime("policy", AgentRLConfig(), "", True, captured)]
    policies.step(episodes, version=0)
    rows = row_advantages(TrainerConfig(), captured.rows)
    by_player: dict[str, list[float]] = {"0": [], "1": []}
    for row, advantages in zip(rows.rows, rows.tokens, strict=True):
        first = next(i for i, s in enumerate(row.segments) if s.trainable)
        generated = [s.trainable for s in row.segments[first:] for _ in s.token_ids]
        mine = [a for a, trained in zip(advantages.tolist(), generated, strict=True) if trained]
        by_player["1" if "You are Player 1" in row.messages[0].content else "0"] += mine
    assert by_player["1"] and max(by_player["1"]) < 0 < min(by_player["0"])


def test_self_play_is_refused_what_cannot_keep_the_roles_apart_yet():
    two = ["agent.kwargs.env_id=TicTacToe-v0", "agent.kwargs.num_players=2"]
    problems = run_problems(load_config("textarena", [*two, "rollout.tree.branch_turns=[1]"]))
    assert any("played by several roles" in p and p.startswith("rollout.tree") for p in problems)
    problems = run_problems(load_config("textarena", [*two, "trainer.advantage=turn_grpo"]))
    assert any("several roles, each trained on its own reward" in p for p in problems)
    problems = run_problems(load_config("textarena", ["reward.components=[{name: x, type: contains}]"]))
    assert any("the TextArena game's own rewards" in p for p in problems)  # components would replace them
    assert not run_problems(load_config("textarena", ["rollout.tree.branch_turns=[1]"]))  # a puzzle forks


def test_a_self_play_group_varies_when_player_0_always_wins():
    from agentrl.trainer.sampling import has_reward_variance
    from agentrl.types import Segment

    def game() -> Trajectory:
        segments = [Segment(token_ids=[1], trainable=False)]
        segments += [Segment(token_ids=[2], trainable=True, logprobs=[-1.0], player=p) for p in ("player", "opponent")]
        return Trajectory(segments=segments, reward=1.0, player_rewards={"player": 1.0, "opponent": -1.0})

    assert has_reward_variance([game(), game()])  # each side's reward: +1 and -1
    failed = game().model_copy(update={"stop_reason": StopReason.ERROR, "reward": 0.0})
    assert not has_reward_variance([failed, failed])  # a failed game has no outcome: its zero_reward stands
