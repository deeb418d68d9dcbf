"""`rollout.tree.fill`: a tree whose episodes end before a branch point below them starts new first branches from
the prompt, so that it keeps its count of leaves (as many as flat episodes), never more."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import replace

import pytest

from agentrl.config import ConfigError, load_config
from agentrl.config.schema import EnvConfig, TrainerConfig
from agentrl.errors import UserError
from agentrl.loops.gym import GymAgentLoop
from agentrl.loops.testing import ScriptedOutput
from agentrl.loops.tree import TreeShape, run_tree, split
from agentrl.rollout.protocol import SamplingParams
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.tree_advantages import tree_nodes
from tests.unit.test_tree_rollout import ACTIONS, AGENT, SeededPolicy, context

SHAPE = TreeShape(branch_turns=(0, 1), width=2)
FILLED = TreeShape(branch_turns=(0, 1), width=2, fill=True)


class SometimesInvalid(SeededPolicy):
    """Half the replies (by seed) are not a move, which ends the episode at once."""

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        self.seeds.append(sampling.seed)
        draw = random.Random(sampling.seed)
        text = "hmm" if draw.random() < 0.5 else draw.choice(ACTIONS)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return ScriptedOutput(ids, [-0.25] * len(ids), "stop")


def play(shape: TreeShape, tokenizer, seed: int):
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}, max_steps=12, max_invalid_actions=1)
    ctx = context(tokenizer, SometimesInvalid(tokenizer), seed=seed)
    return asyncio.run(run_tree(GymAgentLoop(AGENT, env=env), ctx.sample, ctx, shape))


def test_a_filled_tree_keeps_its_leaves_where_episodes_end_early(tokenizer) -> None:
    plain = {seed: play(SHAPE, tokenizer, seed) for seed in range(12)}
    filled = {seed: play(FILLED, tokenizer, seed) for seed in range(12)}
    assert any(len(leaves) < 4 for leaves in plain.values())  # early ends cost the plain tree leaves
    assert all(len(leaves) == 4 for leaves in filled.values())
    added = [leaf for leaves in filled.values() for leaf in leaves if _first(leaf) >= 2]
    assert added and all(leaf.metadata["tree"]["branch_turns"][0] == 0 for leaf in added)
    for leaves in filled.values():
        assert len({tuple(leaf.metadata["tree"]["path"]) for leaf in leaves}) == 4
        assert len({leaf.turn_states[0] for leaf in leaves}) == 1  # every first branch starts from the same state
        assert len({leaf.metadata["tree"]["id"] for leaf in leaves}) == 1
    for seed, leaves in plain.items():  # a filled tree plays the plain tree's branches first, then adds
        first = sorted(tuple(leaf.token_ids) for leaf in filled[seed] if _first(leaf) < 2)
        assert first == sorted(tuple(leaf.token_ids) for leaf in leaves)


def test_a_wider_filled_tree_keeps_width_squared_leaves(tokenizer) -> None:
    wide = TreeShape(branch_turns=(0, 1), width=3, fill=True)  # the `treeeq` arm's shape, without its budget
    for seed in range(8):
        leaves = play(wide, tokenizer, seed)
        assert len(leaves) == 9
        assert len({tuple(leaf.metadata["tree"]["path"]) for leaf in leaves}) == 9
        assert len({leaf.turn_states[0] for leaf in leaves}) == 1


def test_added_first_branches_are_siblings_at_the_root_for_credit(tokenizer) -> None:
    trees = [play(FILLED, tokenizer, seed) for seed in range(12)]
    leaves = next(leaves for leaves in trees if any(_first(leaf) >= 2 for leaf in leaves))
    for i, leaf in enumerate(leaves):
        leaf.reward = float(i % 2)
        leaf.turn_rewards = [0.0] * (leaf.num_turns_in_all_steps() - 1) + [leaf.reward]
    nodes = tree_nodes(leaves)
    root = next(n.id for n in nodes if n.parent is None)
    first_branches = {_first(leaf) for leaf in leaves}
    assert sum(n.parent == root for n in nodes) == len(first_branches) > 2
    assert len(row_advantages(TrainerConfig(advantage="tree_grpo"), leaves).rows) == 4


def _first(leaf) -> int:
    return leaf.metadata["tree"]["path"][0]


def test_a_spent_budget_adds_no_branches(tokenizer) -> None:
    spent = TreeShape(branch_turns=(0, 1), width=2, fill=True, max_tokens=1)
    for seed in range(12):
        assert all(_first(leaf) < 2 for leaf in play(spent, tokenizer, seed))


def test_quotas_split_evenly_and_fill_needs_a_branch_at_the_prompt() -> None:
    assert (split(4, 2), split(5, 2), split(3, 3)) == ([2, 2], [3, 2], [1, 1, 1])
    assert load_config("gym", ["rollout.tree.branch_turns=[0,1]", "rollout.tree.fill=true"]).rollout.tree.fill
    with pytest.raises(ConfigError, match="set rollout.tree.branch_turns to start with 0"):
        load_config("gym", ["rollout.tree.branch_turns=[1]", "rollout.tree.fill=true"])
    with pytest.raises(ConfigError, match="no tree is set"):
        load_config("gym", ["rollout.tree.fill=true"])
    assert load_config("gym", ["rollout.tree.every=1", "rollout.tree.fill=true"]).rollout.tree.fill
    with pytest.raises(UserError, match="it must branch at 0"):
        TreeShape(branch_turns=(1,), fill=True)


class SometimesUnsure(SometimesInvalid):
    """As SometimesInvalid, and a third of the replies (by seed) uncertain: 3 nats a token."""

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        out = await super().generate(prompt_ids, sampling, session_id)
        unsure = random.Random(f"{sampling.seed}-unsure").random() < 1 / 3
        return ScriptedOutput(out.token_ids, [-3.0 if unsure else -0.25] * len(out.token_ids), "stop")


@pytest.mark.parametrize(
    "shape",
    [
        TreeShape(every=2, max_branch_points=1, fill=True),
        TreeShape(entropy=2.0, max_branch_points=2, fill=True),
        TreeShape(entropy=2.0, max_branch_points=2, fill=True, resample_uncertain=True),
    ],
    ids=["every", "entropy", "resample_uncertain"],
)
def test_a_filled_tree_without_a_fork_at_the_prompt_keeps_its_leaves_and_its_root_is_the_first_branch(
    tokenizer, shape
) -> None:
    """`every` and `entropy` need not fork before the first turn: where first branches were added, the root's
    episode is the first of them (path 0), so the tree is still a tree (no leaf's path above another's)."""
    env = EnvConfig(id="FrozenLake-v1", kwargs={"is_slippery": False}, max_steps=12, max_invalid_actions=1)
    forked_later = refilled = 0
    for seed in range(16):
        trees = []
        for fill in (False, True):
            ctx = context(tokenizer, SometimesUnsure(tokenizer), seed=seed)
            trees.append(
                asyncio.run(run_tree(GymAgentLoop(AGENT, env=env), ctx.sample, ctx, replace(shape, fill=fill)))
            )
        plain, leaves = trees
        paths = [tuple(leaf.metadata["tree"]["path"]) for leaf in leaves]
        assert len(leaves) == shape.leaves and len(set(paths)) == len(paths)
        assert not any(a != b and b[: len(a)] == a for a in paths for b in paths)
        if len(plain) < len(leaves):  # first branches were added: every leaf now comes after a fork at 0
            refilled += 1
            assert all(leaf.metadata["tree"]["branch_turns"][0] == 0 for leaf in leaves)
            kept = Counter(tuple(leaf.token_ids) for leaf in leaves)
            assert not Counter(tuple(leaf.token_ids) for leaf in plain) - kept  # the plain tree's episodes, then more
        forked_later += any(t > 0 for leaf in leaves for t in leaf.metadata["tree"]["branch_turns"])
        _scored(leaves)
        assert len(row_advantages(TrainerConfig(advantage="tree_grpo"), leaves).rows) == len(leaves)
    assert refilled and forked_later


def _scored(leaves):
    for i, leaf in enumerate(leaves):
        leaf.reward = float(i % 2)
        leaf.turn_rewards = [0.0] * (leaf.num_turns_in_all_steps() - 1) + [leaf.reward]
