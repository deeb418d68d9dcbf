"""Where a tree branches (fixed turns, every k turns, after an uncertain turn) and its budget in generated tokens
and tool calls; the settings checked at load."""

from __future__ import annotations

import asyncio
import random
import re
import tempfile

import pytest

from agentrl.config import ConfigError, load_config
from agentrl.config.schema import AgentConfig, TrainerConfig
from agentrl.errors import UserError
from agentrl.loops.gym import GymAgentLoop
from agentrl.loops.testing import ScriptedOutput
from agentrl.loops.tool_calling import ToolAgentLoop
from agentrl.loops.tree import TreeShape, run_tree
from agentrl.loops.tree_shape import last_turn_surprisal
from agentrl.rollout.protocol import SamplingParams
from agentrl.sandbox.local import LocalSandbox
from agentrl.trainer.advantages import row_advantages
from agentrl.types import Message, Sample, StopReason
from tests.unit.test_tree_rollout import ACTIONS, AGENT, SeededPolicy, context, loop, tool_context

UNCERTAIN, CERTAIN = -3.0, -0.25


class SometimesUnsure(SeededPolicy):
    """An action drawn from the seed; a third of the turns (by seed) are uncertain: logprobs of -3 nats a token."""

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        draw = random.Random(sampling.seed)
        text, unsure = draw.choice(ACTIONS), draw.random() < 1 / 3
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return ScriptedOutput(ids, [UNCERTAIN if unsure else CERTAIN] * len(ids), "stop")


def play(shape: TreeShape, tokenizer, policy=None):
    ctx = context(tokenizer, policy or SeededPolicy(tokenizer))
    return ctx, asyncio.run(run_tree(loop(), ctx.sample, ctx, shape))


async def play_tool_tree(tokenizer, shape: TreeShape) -> list:
    """The leaves of a tool loop's tree (ShellPolicy's bash calls, in a local sandbox freed afterwards)."""
    sandbox = LocalSandbox()
    ctx = tool_context(tokenizer, sandbox)
    ctx.sample = Sample(prompt=[Message(role="user", content="write three words")])
    tool_loop = ToolAgentLoop(AgentConfig(name="tool_agent", tool_parser="hermes"))
    leaves = await run_tree(tool_loop, ctx.sample, ctx, shape)
    await ctx.tools.release()
    await sandbox.close()
    return leaves


def branches(leaves) -> list[tuple[list[int], list[int]]]:
    return sorted((leaf.metadata["tree"]["path"], leaf.metadata["tree"]["branch_turns"]) for leaf in leaves)


def test_every_k_turns_forks_at_its_multiples_up_to_max_branch_points(tokenizer) -> None:
    _, leaves = play(TreeShape(every=2, max_branch_points=2), tokenizer)
    assert branches(leaves) == [([a, b], [2, 4]) for a in (0, 1) for b in (0, 1)]
    _, leaves = play(TreeShape(every=1, max_branch_points=1, width=3), tokenizer)
    assert branches(leaves) == [([a], [1]) for a in (0, 1, 2)]


def test_a_tree_forks_after_the_turns_its_policy_was_unsure_of(tokenizer) -> None:
    _, leaves = play(TreeShape(entropy=2.0, max_branch_points=2), tokenizer, SometimesUnsure(tokenizer))
    assert len(leaves) >= 2
    for leaf in leaves:
        forks = leaf.metadata["tree"]["branch_turns"]
        replies = [s for s in leaf.segments if s.trainable or s.role == "assistant"]
        unsure = [turn for turn, s in enumerate(replies, 1) if s.logprobs and s.logprobs[0] == UNCERTAIN]
        assert len(forks) == len(leaf.metadata["tree"]["path"]) <= 2
        assert all(turn in unsure for turn in forks)  # it forked after uncertain turns only
        if len(forks) < 2:  # below the cap, it forked after every unsure turn but its last (nothing followed)
            assert [t for t in unsure if t < leaf.num_turns] == forks
    assert len({tuple(leaf.metadata["tree"]["branch_turns"]) for leaf in leaves}) >= 2  # subtrees branch apart
    rows = row_advantages(TrainerConfig(advantage="tree_grpo"), _scored(leaves))  # credit takes uneven trees
    assert len(rows.rows) == len(leaves)


def _assistant_turns(traj) -> list:
    return [s for s in traj.segments if s.trainable]


def _tokens_before_turn(traj, turn: int) -> tuple[int, ...]:
    ids: list[int] = []
    for segment in traj.segments:
        if segment is _assistant_turns(traj)[turn]:
            return tuple(ids)
        ids += segment.token_ids
    raise AssertionError(f"no turn {turn}")


def test_resample_uncertain_forks_before_the_uncertain_turn_and_the_siblings_sample_it_again(tokenizer) -> None:
    class Recording(SometimesUnsure):
        asked: list[tuple[tuple[int, ...], int]] = []

        async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
            self.asked.append((tuple(prompt_ids), sampling.seed))
            return await super().generate(prompt_ids, sampling, session_id)

    shape = TreeShape(entropy=2.0, max_branch_points=2, resample_uncertain=True)
    _, leaves = play(shape, tokenizer, Recording(tokenizer))
    assert len(leaves) >= 2
    by_path = {tuple(leaf.metadata["tree"]["path"]): leaf for leaf in leaves}
    for leaf in leaves:
        tree = leaf.metadata["tree"]
        for depth, at in enumerate(tree["branch_turns"]):
            played = next(p for path, p in by_path.items() if list(path[: depth + 1]) == [*tree["path"][:depth], 0])
            assert _assistant_turns(played)[at].logprobs[0] == UNCERTAIN  # the turn as played was uncertain
            shared = _assistant_turns(leaf)[:at]
            assert [s.token_ids for s in shared] == [s.token_ids for s in _assistant_turns(played)[:at]]
            prefix = _tokens_before_turn(leaf, at)  # the state both sampled the turn from, with seeds of their own
            assert len({seed for prompt, seed in Recording.asked if prompt == prefix}) == shape.width
    # a turn that forks is never one its episode was forked at: at most one fork per turn count along a path
    assert all(len(set(leaf.metadata["tree"]["branch_turns"])) == len(leaf.metadata["tree"]["path"]) for leaf in leaves)
    rows = row_advantages(TrainerConfig(advantage="tree_grpo"), _scored(leaves))
    assert len(rows.rows) == len(leaves)


class LiveStates(GymAgentLoop):
    """A gym loop that records which of its states are live: made by `begin` or `fork_state`, not yet freed by
    `discard` or `end`. Subclasses set their own `live` set."""

    live: set[int]

    async def begin(self, sample, ctx):
        state = await super().begin(sample, ctx)
        self.live.add(id(state))
        return state

    async def fork_state(self, state, children):
        states = await super().fork_state(state, children)
        self.live.update(id(s) for s in states)
        return states

    async def discard(self, state):
        self.live.discard(id(state))
        await super().discard(state)

    async def end(self, ctx, state):
        self.live.discard(id(state))
        await super().end(ctx, state)


def test_resample_uncertain_frees_every_copy_of_a_turn_that_did_not_fork(tokenizer) -> None:
    class Counting(LiveStates):
        live: set[int] = set()

    ctx = context(tokenizer, SometimesUnsure(tokenizer))
    gym = Counting(AGENT, env=loop().env_config)
    shape = TreeShape(entropy=2.0, max_branch_points=2, resample_uncertain=True)
    leaves = asyncio.run(run_tree(gym, ctx.sample, ctx, shape))
    assert len(leaves) >= 2 and Counting.live == set()


def _scored(leaves):
    for i, leaf in enumerate(leaves):
        leaf.reward = float(i % 2)
        leaf.turn_rewards = [0.0] * (leaf.num_turns_in_all_steps() - 1) + [leaf.reward]
    return leaves


def test_surprisal_is_the_mean_negative_logprob_of_the_turns_first_tokens(tokenizer) -> None:
    ctx, (leaf, *_) = play(TreeShape(branch_turns=(1,)), tokenizer)
    assert last_turn_surprisal(leaf, 16) == pytest.approx(0.25)
    assert last_turn_surprisal(ctx.trajectory.model_copy(update={"segments": []}), 16) == 0.0


def test_an_uncertain_turn_that_ends_the_episode_is_sampled_again_by_its_siblings(tokenizer) -> None:
    """An invalid reply that reaches the env's limit ends the episode by raising `StopLoop`: it was played all the
    same, so with `resample_uncertain` its siblings sample it again, and each keeps its stop reason."""

    class Invalid(SeededPolicy):
        async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
            ids = [*self.tokenizer.encode("jump", add_special_tokens=False), self.tokenizer.eos_token_id]
            return ScriptedOutput(ids, [UNCERTAIN] * len(ids), "stop")

    env = loop().env_config.model_copy(update={"max_invalid_actions": 1})
    ctx = context(tokenizer, Invalid(tokenizer))
    shape = TreeShape(entropy=2.0, max_branch_points=1, width=3, resample_uncertain=True)
    leaves = asyncio.run(run_tree(GymAgentLoop(AGENT, env=env), ctx.sample, ctx, shape))
    assert branches(leaves) == [([i], [0]) for i in range(3)]
    assert all(leaf.num_turns == 1 and leaf.stop_reason == StopReason.TOOL_ERROR_LIMIT for leaf in leaves)


def test_resampled_siblings_start_from_the_sandbox_before_the_turn(tokenizer, tmp_path, monkeypatch) -> None:
    """Each turn appends a word to log.txt and prints the line count; every turn is uncertain (0.5 nats), so each
    path forks before its first and second turns. A sibling sampling a turn again must not see the word the turn
    as played wrote: every leaf counts 1, 2, 3 lines. The copies made before each turn are all freed."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    leaves = asyncio.run(
        play_tool_tree(tokenizer, TreeShape(entropy=0.4, max_branch_points=2, resample_uncertain=True))
    )
    assert branches(leaves) == [([a, b], [0, 1]) for a in (0, 1) for b in (0, 1)]
    for leaf in leaves:
        counts = [m.content for m in leaf.messages if m.role == "tool"]
        assert [re.search(r"LINES=(\d)", str(c))[1] for c in counts] == ["1", "2", "3"]
    assert not list(tmp_path.glob("agentrl-local-sandbox-*"))


@pytest.mark.parametrize("resample", [False, True])
def test_a_history_window_forks_where_the_whole_conversation_does(tokenizer, resample) -> None:
    """The gym loop with `env.history_turns` starts a new step sample after each turn: the uncertain turn is in the
    sample before the current one, and the tree must still see it."""
    shape = TreeShape(entropy=2.0, max_branch_points=2, resample_uncertain=resample)
    trees = []
    for history_turns in (None, 0):
        ctx = context(tokenizer, SometimesUnsure(tokenizer))
        trees.append(branches(asyncio.run(run_tree(loop(history_turns), ctx.sample, ctx, shape))))
    assert trees[0] == trees[1] and len(trees[0]) > 2


def test_a_tree_forks_no_more_once_its_budget_is_spent(tokenizer) -> None:
    _, full = play(TreeShape(every=1, max_branch_points=2), tokenizer)
    first_turn = len(next(s for s in full[0].segments if s.trainable).token_ids)
    _, leaves = play(TreeShape(every=1, max_branch_points=2, max_tokens=first_turn + 1), tokenizer)
    assert branches(leaves) == [([0], [1]), ([1], [1])]  # forked after turn 1, spent by the children's turn 2
    _, leaves = play(TreeShape(every=1, max_branch_points=2, max_tokens=first_turn), tokenizer)
    assert branches(leaves) == [([], [])]  # spent by the root's first turn: one episode
    assert leaves[0].num_turns > 1 and leaves[0].stop_reason in (StopReason.DONE, StopReason.MAX_TURNS)


def test_a_tool_call_budget_counts_the_trees_calls(tokenizer) -> None:
    def scenario(budget: int | None):
        return play_tool_tree(tokenizer, TreeShape(every=1, max_branch_points=2, max_tool_calls=budget))

    assert len(asyncio.run(scenario(None))) == 4
    assert branches(asyncio.run(scenario(2))) == [([0], [1]), ([1], [1])]  # 1 call, fork; 1 + 2 calls: spent
    assert branches(asyncio.run(scenario(1))) == [([], [])]


def test_tree_settings_are_checked_at_load() -> None:
    cfg = load_config("gym", ["rollout.tree.every=2", "rollout.tree.max_tokens=4000"])
    assert cfg.rollout.tree.enabled and TreeShape.of(cfg.rollout.tree).leaves == 4
    assert load_config("gym", ["rollout.tree.entropy=1.5"]).rollout.tree.enabled
    with pytest.raises(ConfigError, match="branch_turns and every are set; choose one rule"):
        load_config("gym", ["rollout.tree.branch_turns=[1]", "rollout.tree.every=2"])
    with pytest.raises(ConfigError, match="no tree is set"):
        load_config("gym", ["rollout.tree.max_tool_calls=8"])
    with pytest.raises(ConfigError, match="no rollout.tree.entropy is set"):
        load_config("gym", ["rollout.tree.every=2", "rollout.tree.resample_uncertain=true"])
    cfg = load_config("gym", ["rollout.tree.entropy=1.5", "rollout.tree.resample_uncertain=true"])
    assert TreeShape.of(cfg.rollout.tree).resample_uncertain
    with pytest.raises(UserError, match="exactly one rule"):
        TreeShape(width=2)


def test_the_tree_prepares_each_fork_during_the_turn_before_it(tokenizer) -> None:
    class Preparing(GymAgentLoop):
        prepared: list[tuple[str, int, int]] = []

        async def prepare_fork(self, ctx, state, children):
            self.prepared.append((ctx.trajectory.id, ctx.trajectory.num_turns, children))

    for shape, turns in [(TreeShape(branch_turns=(2, 4), width=3), [1, 3]), (TreeShape(every=2), [1, 3])]:
        Preparing.prepared = []
        ctx = context(tokenizer, SeededPolicy(tokenizer))
        gym = Preparing(AGENT, env=loop().env_config)
        leaves = asyncio.run(run_tree(gym, ctx.sample, ctx, shape))
        forked = {turn for leaf in leaves for turn in leaf.metadata["tree"]["branch_turns"]}
        assert {turn for _, turn, _ in Preparing.prepared} == {t - 1 for t in forked} == set(turns)
        assert all(children == shape.width for *_, children in Preparing.prepared)
    Preparing.prepared = []
    ctx = context(tokenizer, SometimesUnsure(tokenizer))
    asyncio.run(run_tree(Preparing(AGENT, env=loop().env_config), ctx.sample, ctx, TreeShape(entropy=2.0)))
    assert Preparing.prepared == []  # an uncertain turn is known only once played


def test_a_failing_preparation_or_discard_takes_no_episode_down(tokenizer) -> None:
    class Clumsy(GymAgentLoop):
        async def prepare_fork(self, ctx, state, children):
            raise RuntimeError("no containers today")

        async def discard(self, state):
            raise RuntimeError("the parent would not close")

    ctx = context(tokenizer, SeededPolicy(tokenizer))
    leaves = asyncio.run(run_tree(Clumsy(AGENT, env=loop().env_config), ctx.sample, ctx, TreeShape(branch_turns=(1,))))
    assert len(leaves) == 2 and all(leaf.error is None for leaf in leaves)


def test_a_run_cancelled_while_resample_forks_its_copy_again_frees_every_state(tokenizer) -> None:
    """Ctrl-C while the copy made before an uncertain turn is forked into the further siblings of a wider tree:
    the episode as played and the copy are both freed (with a sandbox, no container is left for exit cleanup)."""

    class HangsOnSecondFork(LiveStates):
        live: set[int] = set()
        forks = 0
        hanging = asyncio.Event()

        async def fork_state(self, state, children):
            type(self).forks += 1
            if self.forks == 2:  # resample forking its copy for the third sibling
                self.hanging.set()
                await asyncio.Event().wait()
            return await super().fork_state(state, children)

    class Unsure(SeededPolicy):
        async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
            ids = [*self.tokenizer.encode("RIGHT", add_special_tokens=False), self.tokenizer.eos_token_id]
            return ScriptedOutput(ids, [UNCERTAIN] * len(ids), "stop")

    async def cancel_mid_fork() -> None:
        ctx = context(tokenizer, Unsure(tokenizer))
        shape = TreeShape(entropy=2.0, max_branch_points=1, width=3, resample_uncertain=True)
        task = asyncio.create_task(run_tree(HangsOnSecondFork(AGENT, env=loop().env_config), ctx.sample, ctx, shape))
        await HangsOnSecondFork.hanging.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_fork())
    assert HangsOnSecondFork.forks == 2 and HangsOnSecondFork.live == set()
