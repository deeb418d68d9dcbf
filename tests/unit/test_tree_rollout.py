"""Forking a running episode (the gym loop: tokens, env and history window) and tree rollouts built from forks."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from agentrl.config import ConfigError
from agentrl.config.schema import AgentConfig, AgentRLConfig, EnvConfig, RolloutConfig, TrainerConfig
from agentrl.errors import ForkUnsupportedError, UserError
from agentrl.loops.context import AgentContext, Budgets, StopLoop
from agentrl.loops.gym import GymAgentLoop
from agentrl.loops.manager import RolloutManager
from agentrl.loops.single_turn import SingleTurnAgentLoop
from agentrl.loops.testing import ScriptedOutput
from agentrl.loops.tool_calling import ToolAgentLoop
from agentrl.loops.tree import TreeShape, check_forkable, child_seed, run_tree
from agentrl.rollout.protocol import SamplingParams
from agentrl.sandbox.base import FORK_NOTE, SandboxError
from agentrl.sandbox.local import LocalSandbox
from agentrl.tools.builtin.shell import BashTool
from agentrl.tools.toolset import ToolSet
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.batch import response_length, trajectory_to_tensors
from agentrl.trainer.metrics import rollout_metrics
from agentrl.trainer.tree_advantages import record_node_advantages, tree_grpo_advantages, tree_nodes
from agentrl.types import Message, Sample, StopReason, Trajectory

ACTIONS = ["LEFT", "DOWN", "RIGHT", "UP"]
AGENT = AgentConfig(name="gym", max_turns=12, max_total_tokens=16384)


class SeededPolicy:
    """Replies with an action drawn from the request's seed: the same seed, the same reply. Records each request's
    seed and temperature."""

    def __init__(self, tokenizer, fail_seeds: frozenset[int] = frozenset()):
        self.tokenizer, self.fail_seeds, self.seeds, self.temperatures = tokenizer, fail_seeds, [], []

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        self.seeds.append(sampling.seed)
        self.temperatures.append(sampling.temperature)
        if sampling.seed in self.fail_seeds:
            raise ConnectionError("the server went away")
        text = random.Random(sampling.seed).choice(ACTIONS)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return ScriptedOutput(ids, [-0.25] * len(ids), "stop", policy_version=3)


def context(tokenizer, policy, seed: int = 11) -> AgentContext:
    return AgentContext(
        sample=Sample(prompt=[], extra_info={"seed": 0}),
        trajectory=Trajectory(group_id="g"),
        llm=policy,
        tokenizer=tokenizer,
        sampling=SamplingParams(temperature=1.0, max_tokens=8, seed=seed),
        budgets=Budgets(max_turns=12, max_tokens_per_turn=8, max_total_tokens=16384, max_model_len=16384),
    )


def loop(history_turns: int | None = None) -> GymAgentLoop:
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": True}, max_steps=12, history_turns=history_turns)
    return GymAgentLoop(AGENT, env=env)


async def play_out(gym: GymAgentLoop, ctx: AgentContext, state) -> Trajectory:
    try:
        while not await gym.step(ctx, state):
            pass
    except StopLoop as stop:
        ctx.trajectory.stop_reason = stop.reason
    await gym.end(ctx, state)
    return ctx.trajectory


def comparable(traj: Trajectory) -> tuple:
    return (traj.token_ids, [s.logprobs for s in traj.segments], traj.reward, traj.turn_rewards, traj.turn_states,
            traj.stop_reason, [len(s.segments) for s in traj.earlier_steps])  # fmt: skip


@pytest.mark.parametrize("history_turns", [None, 1])
def test_forked_children_continue_exactly_as_the_parent_given_the_same_seeds(tokenizer, history_turns) -> None:
    """Slippery FrozenLake draws from the env's generator at every step, so a child that did not carry the env's
    state over would drift; with a history window, the window must be carried over too."""

    async def scenario() -> None:
        gym = loop(history_turns)
        parent = context(tokenizer, SeededPolicy(tokenizer))
        state = await gym.begin(parent.sample, parent)
        for _ in range(2):
            assert not await gym.step(parent, state)
        children = parent.fork(2)
        states = await gym.fork_state(state, children)
        assert [c.env for c in children] == [s.episode for s in states] and children[0].env is not parent.env
        parent_end = comparable(await play_out(gym, parent, state))
        for child, child_state in zip(children, states, strict=True):
            assert comparable(await play_out(gym, child, child_state)) == parent_end
        assert len({parent.trajectory.id, *(c.trajectory.id for c in children)}) == 3

    asyncio.run(scenario())


def test_a_tree_forks_at_its_branch_turns_and_its_leaves_share_the_prefix_exactly(tokenizer) -> None:
    policy = SeededPolicy(tokenizer)
    ctx = context(tokenizer, policy)
    leaves = asyncio.run(run_tree(loop(), ctx.sample, ctx, TreeShape(branch_turns=(1, 2), width=2)))
    paths = sorted(tuple(leaf.metadata["tree"]["path"]) for leaf in leaves)
    assert paths == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {leaf.metadata["tree"]["id"] for leaf in leaves} == {ctx.trajectory.id}
    assert all(leaf.metadata["tree"]["branch_turns"] == [1, 2] for leaf in leaves)
    first_turn = _turn_tokens(leaves[0], 1)
    assert all(_turn_tokens(leaf, 1) == first_turn for leaf in leaves)  # one root: every leaf's first turn
    assert all(leaf.reward is not None and leaf.stop_reason is not None for leaf in leaves)
    assert {child_seed(11, 0) + 1, child_seed(11, 1) + 1} <= set(policy.seeds)  # each child's own seed (+ turn)


def test_children_of_a_fork_after_a_turn_sample_at_the_child_temperature_and_record_it(tokenizer) -> None:
    policy = SeededPolicy(tokenizer)
    ctx = context(tokenizer, policy)
    shape = TreeShape(branch_turns=(0, 1), width=2, child_temperature=1.6)
    leaves = asyncio.run(run_tree(loop(), ctx.sample, ctx, shape))
    assert len(leaves) == 4
    for leaf in leaves:
        generated = [s.temperature for s in leaf.segments if s.trainable]
        assert generated[0] == 1.0  # a first turn: a child of the fork before the first turn, at the rollout's
        assert set(generated[1:]) == {1.6}  # every turn after the fork at turn 1
        scored_at = {round(t, 4) for t in trajectory_to_tensors(leaf).temperatures.tolist()}
        assert scored_at == {1.0, 1.6}  # the trainer scores each token at the temperature it was sampled at
    assert policy.temperatures.count(1.0) == 2  # the two first turns, each generated once for both its leaves
    first_turn = _turn_tokens(leaves[0], 1)
    siblings = [leaf for leaf in leaves if _turn_tokens(leaf, 1) == first_turn]
    assert len(siblings) == 2  # the shared first turn is kept exactly, at its own temperature


@pytest.mark.parametrize("max_steps", [12, 2])  # 2: every leaf ends on a turn that raises StopLoop (truncation)
def test_a_trees_cost_counts_its_shared_prefix_once(tokenizer, max_steps) -> None:
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": True}, max_steps=max_steps)
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    leaves = asyncio.run(run_tree(GymAgentLoop(AGENT, env=env), ctx.sample, ctx, TreeShape(branch_turns=(1,), width=2)))
    assert len(leaves) == 2 and all(leaf.num_turns == len(_turns(leaf)) for leaf in leaves)
    root = len(_turn_tokens(leaves[0], 1))
    cost = root + sum(leaf.num_generated_tokens_in_all_steps() - root for leaf in leaves)
    assert {leaf.metadata["tree"]["tokens"] for leaf in leaves} == {cost}
    flat = Trajectory(group_id="h", segments=leaves[0].segments)
    metric = rollout_metrics([*leaves, flat], 1.0)["rollout/generated_tokens"]
    assert metric == cost + flat.num_generated_tokens_in_all_steps()


def test_an_episode_that_ends_before_a_branch_point_is_one_leaf(tokenizer) -> None:
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    leaves = asyncio.run(run_tree(loop(), ctx.sample, ctx, TreeShape(branch_turns=(50,), width=3)))
    assert len(leaves) == 1 and leaves[0].metadata["tree"]["path"] == []


def test_a_failing_child_leaves_its_siblings_standing(tokenizer) -> None:
    doomed = child_seed(11, 1) + 1  # the second child's first turn (a turn's seed: the child's seed + turns so far)
    policy = SeededPolicy(tokenizer, fail_seeds=frozenset({doomed}))
    ctx = context(tokenizer, policy)
    leaves = asyncio.run(run_tree(loop(), ctx.sample, ctx, TreeShape(branch_turns=(1,), width=2)))
    by_path = {tuple(leaf.metadata["tree"]["path"]): leaf for leaf in leaves}
    assert by_path[(1,)].stop_reason is StopReason.ERROR and "server went away" in by_path[(1,)].error
    assert by_path[(0,)].error is None and by_path[(0,)].reward is not None


def test_a_leaf_whose_end_fails_is_a_failed_leaf_as_in_a_plain_run(tokenizer) -> None:
    class LosingItsOutcome(GymAgentLoop):
        """`end` fails for the second child (as the SWE loop's does when the patch cannot be taken out)."""

        doomed = ""

        async def fork_state(self, state, children):
            self.doomed = children[1].trajectory.id
            return await super().fork_state(state, children)

        async def end(self, ctx, state):
            await super().end(ctx, state)
            if ctx.trajectory.id == self.doomed:
                raise SandboxError("the container went away")

    ctx = context(tokenizer, SeededPolicy(tokenizer))
    doomed_loop = LosingItsOutcome(AGENT, env=loop().env_config)
    leaves = asyncio.run(run_tree(doomed_loop, ctx.sample, ctx, TreeShape(branch_turns=(1,), width=2)))
    by_path = {tuple(leaf.metadata["tree"]["path"]): leaf for leaf in leaves}
    assert by_path[(1,)].stop_reason is StopReason.SANDBOX_ERROR and "went away" in by_path[(1,)].error
    assert by_path[(0,)].error is None


def test_the_leaves_give_tree_grpo_its_tree(tokenizer) -> None:
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    leaves = asyncio.run(run_tree(loop(), ctx.sample, ctx, TreeShape(branch_turns=(1, 2), width=2)))
    for i, leaf in enumerate(leaves):
        leaf.reward = float(i == 0)
    nodes = tree_nodes(leaves)
    assert len(nodes) == 1 + 2 + 4
    advantages = tree_grpo_advantages(nodes)
    best = (ctx.trajectory.id, tuple(leaves[0].metadata["tree"]["path"]))
    assert advantages[best] == max(advantages.values())


def test_loops_that_cannot_fork_and_bad_shapes_are_refused() -> None:
    from agentrl.loops.gui import GUIAgentLoop
    from agentrl.loops.harbor import HarborOracleLoop

    with pytest.raises(ForkUnsupportedError, match="the GUIAgentLoop loop cannot be forked"):
        check_forkable(GUIAgentLoop())
    with pytest.raises(ForkUnsupportedError, match="the HarborOracleLoop loop cannot be forked"):
        check_forkable(HarborOracleLoop())
    with pytest.raises(UserError, match="2 children or more"):
        TreeShape(branch_turns=(1,), width=1)
    with pytest.raises(UserError, match="increasing"):
        TreeShape(branch_turns=(3, 1), width=2)


def _turn_tokens(traj: Trajectory, turn: int) -> list[int]:
    """The tokens of the `turn`-th generated segment (1-based) of `traj`."""
    return _turns(traj)[turn - 1].token_ids


def _turns(traj: Trajectory) -> list:
    return [s for step in traj.step_samples() for s in step.segments if s.trainable]


class ShellPolicy:
    """A bash call appending a word drawn from the turn's seed to log.txt, three times, then a final answer."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        written = len(re.findall(r"LINES=\d", self.tokenizer.decode(prompt_ids)))
        word = random.Random(sampling.seed).choice(["alpha", "beta", "gamma", "delta"])
        command = f"echo {word} >> log.txt; echo LINES=$(wc -l < log.txt)"
        text = (
            "done"
            if written >= 3
            else f"<tool_call>\n{json.dumps({'name': 'bash', 'arguments': {'command': command}})}\n</tool_call>"
        )
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return ScriptedOutput(ids, [-0.5] * len(ids), "stop")


def tool_context(tokenizer, sandbox: LocalSandbox) -> AgentContext:
    ctx = context(tokenizer, ShellPolicy(tokenizer))
    ctx.sandbox = sandbox
    ctx.tools = ToolSet([BashTool()], trajectory_id=ctx.trajectory.id, sandbox=sandbox)
    return ctx


def test_a_tool_episode_forks_with_its_sandbox_and_tools(tokenizer) -> None:
    async def scenario() -> None:
        sandbox = LocalSandbox()
        loop = ToolAgentLoop(AgentConfig(name="tool_agent", tool_parser="hermes"))
        parent = tool_context(tokenizer, sandbox)
        parent.sample = Sample(prompt=[Message(role="user", content="write three words")])
        state = await loop.begin(parent.sample, parent)
        assert not await loop.step(parent, state)
        children = parent.fork(2)
        states = await loop.fork_state(state, children)
        assert children[0].sandbox is not sandbox and children[0].tools is not parent.tools
        assert children[0].tools.metrics["tool/calls"] == parent.tools.metrics["tool/calls"] == 1
        assert children[0].trajectory.metadata["fork"] == FORK_NOTE
        for child in children:
            assert (await child.sandbox.read_file("log.txt")) == await sandbox.read_file("log.txt")
        await loop.step(children[0], states[0])
        assert len((await children[0].sandbox.read_file("log.txt")).split()) == 2
        assert len((await children[1].sandbox.read_file("log.txt")).split()) == 1  # its sibling's edit unseen
        assert len((await sandbox.read_file("log.txt")).split()) == 1
        for child, child_state in zip(children, states, strict=True):
            await loop.end(child, child_state)
            assert child.sandbox.closed
        await loop.discard(state)
        await parent.tools.release()
        await sandbox.close()

    asyncio.run(scenario())


def test_a_tool_tree_gives_each_leaf_its_own_files(tokenizer) -> None:
    async def scenario() -> list[tuple[Trajectory, list[str]]]:
        sandbox = LocalSandbox()
        ctx = tool_context(tokenizer, sandbox)
        ctx.sample = Sample(prompt=[Message(role="user", content="write three words")])
        logs = []

        class Recording(ToolAgentLoop):
            async def end(self, ctx, state):
                logs.append((ctx.trajectory.id, (await ctx.sandbox.read_file("log.txt")).decode().split()))
                await super().end(ctx, state)

        leaves = await run_tree(Recording(AgentConfig(name="tool_agent", tool_parser="hermes")), ctx.sample, ctx,
                                TreeShape(branch_turns=(1, 2), width=2))  # fmt: skip
        await sandbox.close()
        return leaves, dict(logs)

    leaves, logs = asyncio.run(scenario())
    assert len(leaves) == 4 and all(leaf.stop_reason is StopReason.DONE for leaf in leaves)
    words = [logs[leaf.id] for leaf in leaves]
    assert all(len(w) == 3 for w in words) and len({w[0] for w in words}) == 1  # one root, then their own
    assert len({tuple(w[:2]) for w in words}) <= 2


class _Holding(BashTool):
    async def create(self, ctx) -> None:
        ctx.shared["process"] = "a resource"


def test_tools_holding_resources_are_refused_by_name() -> None:
    tools = ToolSet([_Holding()], trajectory_id="t")
    tools._created.add("bash")
    with pytest.raises(ForkUnsupportedError, match="tool 'bash' holds resources"):
        tools.fork("child")


def test_the_manager_runs_rollout_n_trees_per_prompt_and_yields_their_leaves(tokenizer) -> None:
    rollout = RolloutConfig(n=2, seed=5, max_tokens=8, tree={"branch_turns": [1, 2], "width": 2})
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": True}, max_steps=12)
    manager = RolloutManager(SeededPolicy(tokenizer), tokenizer, AGENT, rollout, run_config=AgentRLConfig(env=env))
    samples = [Sample(prompt=[], extra_info={"seed": s}) for s in (0, 1)]
    leaves = asyncio.run(manager.run(samples))
    trees: dict[str, list[tuple[int, ...]]] = {}
    for leaf in leaves:
        trees.setdefault(leaf.metadata["tree"]["id"], []).append(tuple(leaf.metadata["tree"]["path"]))
    assert len(trees) == 2 * 2  # rollout.n trees per prompt
    assert all(len(set(paths)) == len(paths) <= 4 for paths in trees.values())  # an episode may end before a fork
    assert sum(len(paths) for paths in trees.values()) > 2 * 2  # and most branch
    for position in (0, 1):
        mine = [t for t in leaves if t.metadata["sample_position"] == position]
        assert len({t.group_id for t in mine}) == 1 and len({t.metadata["tree"]["id"] for t in mine}) == 2
    assert len({t.id for t in leaves}) == len(leaves)
    assert all(t.reward is not None and "total_s" in t.timings for t in leaves)


def test_tree_settings_are_checked_before_a_run() -> None:
    from agentrl.config import load_config
    from agentrl.trainer.preflight import run_problems

    assert run_problems(load_config("gym", ["rollout.tree.branch_turns=[1]"])) == []
    gigpo_defaults = ["trainer.gigpo_step_weight=1", "trainer.gigpo_anchor_scope=group"]  # the gym recipe tunes GiGPO
    tree = ["rollout.tree.branch_turns=[1]", "trainer.advantage=tree_grpo"]
    assert run_problems(load_config("gym", [*tree, *gigpo_defaults])) == []
    (alone,) = run_problems(load_config("gym", ["trainer.advantage=tree_grpo", *gigpo_defaults]))
    assert "set rollout.tree.branch_turns" in alone
    (gui,) = run_problems(load_config("gui_agent", ["rollout.tree.branch_turns=[1]"]))
    assert "the GUIAgentLoop loop cannot be forked" in gui
    (problem,) = run_problems(load_config("tool_use", ["rollout.tree.branch_turns=[1]", "trainer.mode=fully_async"]))
    assert "trainer.mode=sync" in problem
    with pytest.raises(ConfigError, match="increasing turn counts"):
        load_config("gym", ["rollout.tree.branch_turns=[3,1]"])
    with pytest.raises(ConfigError, match="child_temperature samples the children of a fork, but no tree is set"):
        load_config("gym", ["rollout.tree.child_temperature=1.5"])
    with pytest.raises(ConfigError, match="child_temperature"):
        load_config("gym", ["rollout.tree.branch_turns=[1]", "rollout.tree.child_temperature=0"])


def test_tree_grpo_credits_each_turn_with_its_node_and_trains_a_shared_prefix_once(tokenizer) -> None:
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}, max_steps=12)
    gym = GymAgentLoop(AGENT, env=env)
    leaves = asyncio.run(run_tree(gym, ctx.sample, ctx, TreeShape(branch_turns=(1, 2), width=2)))
    assert len(leaves) == 4, [leaf.stop_reason for leaf in leaves]  # this seed plays past turn 2 on every branch
    for leaf, reward in zip(leaves, (1.0, 0.0, 0.0, 0.0), strict=True):
        leaf.reward = reward
        leaf.turn_rewards = [0.0] * (leaf.num_turns_in_all_steps() - 1) + [reward]
    expected = tree_grpo_advantages(tree_nodes(leaves))
    generated = [sum(s.trainable for s in leaf.segments) for leaf in leaves]
    rows = row_advantages(TrainerConfig(advantage="tree_grpo"), leaves)
    tree_id = ctx.trajectory.id
    for leaf, row_adv in zip(leaves, rows.tokens, strict=True):
        path = tuple(leaf.metadata["tree"]["path"])
        turn_values = sorted({round(float(a), 5) for a in row_adv if a != 0})
        nodes = [(tree_id, ()), (tree_id, path[:1]), (tree_id, path)]
        assert set(turn_values) <= {round(expected[n], 5) for n in nodes}
    first_reply = [next(s for s in row.segments if s.role == "assistant") for row in rows.rows]
    assert sum(segment.trainable for segment in first_reply) == 1  # the root's turn: trained by one leaf only
    assert sum(sum(s.trainable for s in row.segments) for row in rows.rows) == sum(generated) - 3 - 2  # root x3, 2 mids
    assert [sum(s.trainable for s in leaf.segments) for leaf in leaves] == generated  # the leaves as generated
    assert rows.metrics["train/tree_leaves_per_tree"] == 4.0
    record_node_advantages(TrainerConfig(advantage="tree_grpo"), leaves)
    for leaf in leaves:  # recorded for the viewer: each node's advantage on the leaf's path
        path = tuple(leaf.metadata["tree"]["path"])
        on_path = [expected[(tree_id, path[:depth])] for depth in range(3)]
        assert leaf.metadata["tree"]["node_advantages"] == pytest.approx(on_path)
    for row, row_adv in zip(rows.rows, rows.tokens, strict=True):  # each advantage on its own turn's tokens
        first = next(i for i, s in enumerate(row.segments) if s.trainable)
        trained = [s.trainable for s in row.segments[first:] for _ in s.token_ids]
        assert row_adv.numel() == response_length(row) == len(trained)
        assert all(a == 0 for a, t in zip(row_adv.tolist(), trained, strict=True) if not t)
        path = tuple(row.metadata["tree"]["path"])
        assert round(float(row_adv[-2]), 5) == round(expected[(tree_id, path)], 5)  # the leaf's last reply


def test_tree_prefix_weight_leaves_trains_a_shared_turn_as_every_leaf_below_it_would(tokenizer) -> None:
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}, max_steps=12)
    leaves = asyncio.run(
        run_tree(GymAgentLoop(AGENT, env=env), ctx.sample, ctx, TreeShape(branch_turns=(1, 2), width=2))
    )
    for leaf, reward in zip(leaves, (1.0, 0.0, 0.0, 0.0), strict=True):
        leaf.reward = reward
        leaf.turn_rewards = [0.0] * (leaf.num_turns_in_all_steps() - 1) + [reward]
    expected = tree_grpo_advantages(tree_nodes(leaves))
    # the paper's gradient: every leaf trains every turn on its path with its node's advantage
    per_leaf = 0.0
    for leaf in leaves:
        tree = leaf.metadata["tree"]
        for turn, segment in enumerate(_turns(leaf)):
            depth = sum(1 for branch in tree["branch_turns"] if branch <= turn)
            per_leaf += abs(expected[(tree["id"], tuple(tree["path"][:depth]))]) * len(segment.token_ids)
    once = row_advantages(TrainerConfig(advantage="tree_grpo"), leaves)
    weighted = row_advantages(TrainerConfig(advantage="tree_grpo", tree_prefix_weight="leaves"), leaves)
    assert sum(float(adv.abs().sum()) for adv in weighted.tokens) == pytest.approx(per_leaf)
    assert sum(float(adv.abs().sum()) for adv in once.tokens) < per_leaf - 1  # its mid nodes weigh 1, not 2
    for row_once, row_weighted in zip(once.tokens, weighted.tokens, strict=True):
        assert set((row_weighted[row_once != 0] / row_once[row_once != 0]).round().tolist()) <= {1.0, 2.0}


def test_tree_grpo_refuses_episodes_played_alone(tokenizer) -> None:
    traj = Trajectory(group_id="g", reward=1.0, turn_rewards=[], turn_states=[])
    with pytest.raises(UserError, match="set rollout.tree.branch_turns"):
        row_advantages(TrainerConfig(advantage="tree_grpo"), [traj])


def test_a_single_turn_tree_forked_before_its_turn_is_a_group_of_samples(tokenizer) -> None:
    ctx = context(tokenizer, SeededPolicy(tokenizer))
    ctx.sample = Sample(prompt=[Message(role="user", content="pick a move")])
    leaves = asyncio.run(run_tree(SingleTurnAgentLoop(), ctx.sample, ctx, TreeShape(branch_turns=(0,), width=3)))
    assert sorted(leaf.metadata["tree"]["path"] for leaf in leaves) == [[0], [1], [2]]
    assert all(leaf.num_turns == 1 and leaf.stop_reason is StopReason.DONE for leaf in leaves)
    prompts = {tuple(leaf.segments[0].token_ids) for leaf in leaves}
    assert len(prompts) == 1 and len({leaf.id for leaf in leaves}) == 3
