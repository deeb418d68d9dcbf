"""Tree rollouts in training with the real model and `hf` server: two steps of the gym recipe (GiGPO, whose
anchor states the forks make certain) and of the tool_use recipe (tree_grpo), and one of tool_chain (two dependent
lookups), each episode forked after its first turn."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.registry import import_object
from agentrl.rewards.base import message_text
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration
RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def train(url: str, out, recipe: str, *overrides: str) -> list[dict]:
    args = [
        "train",
        f"recipe={recipe}",
        f"rollout.urls=[{url}]",
        "rollout.tree.branch_turns=[1]",
        "rollout.tree.width=2",
        "rollout.n=2",
        "rollout.seed=3",
        "data.batch_size=2",
        "trainer.steps=2",
        "trainer.eval_every=0",
        *overrides,
        f"output_dir={out}",
    ]
    assert main(args) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def leaves(out, step: int) -> list[Trajectory]:
    with gzip.open(out / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
        return [Trajectory.from_json(line) for line in f]


def check_trees(out) -> None:
    for step in (1, 2):
        trees: dict[str, list[Trajectory]] = defaultdict(list)
        for leaf in leaves(out, step):
            trees[leaf.metadata["tree"]["id"]].append(leaf)
        assert len(trees) == 2 * 2  # data.batch_size prompts x rollout.n trees
        for tree in trees.values():
            assert len(tree) <= 2 and len({leaf.group_id for leaf in tree}) == 1
            if len(tree) == 2:  # forked after turn 1: the same first reply, token for token
                first = [next(s for s in leaf.step_samples()[0].segments if s.role == "assistant") for leaf in tree]
                assert first[0].token_ids == first[1].token_ids and first[0].logprobs == first[1].logprobs
                assert all(s.trainable for s in first)  # saved as generated (one leaf trained it: unit-tested)


def test_two_gym_steps_with_tree_rollouts(hf_server_url, tmp_path):
    steps = train(hf_server_url, tmp_path, "gym", "env.max_steps=3", "agent.max_turns=3", "env.history_turns=0",
                  "env.kwargs.bump_ends_episode=false", "trainer.eval_every=2", "env.num_eval_seeds=4")  # fmt: skip
    trained = [s for s in steps if "rollout/trajectories" in s]
    assert [s["step"] for s in trained] == [1, 2]
    with gzip.open(tmp_path / "trajectories" / "eval_step_0002.jsonl.gz", "rt") as f:
        held_out = [Trajectory.from_json(line) for line in f]
    evaluated = next(s for s in steps if "eval/success_rate" in s and s["step"] == 2)
    assert held_out and not any(t.metadata.get("tree") for t in held_out)  # evaluation plays episodes, not trees
    assert len({t.metadata["sample_position"] for t in held_out}) == len(held_out) and evaluated
    check_trees(tmp_path)
    assert all(s["train/gigpo_anchor_share"] > 0 for s in trained)


def test_two_tool_use_steps_with_tree_rollouts_and_tree_grpo(hf_server_url, tmp_path):
    steps = train(hf_server_url, tmp_path, "tool_use", "agent.max_turns=2", "trainer.advantage=tree_grpo")
    assert [s["step"] for s in steps] == [1, 2]
    check_trees(tmp_path)
    assert all(1.0 <= s["train/tree_leaves_per_tree"] <= 2.0 for s in steps)
    for leaf in leaves(tmp_path, 2):  # the saved leaves carry their nodes' advantages (the viewer draws them)
        assert len(leaf.metadata["tree"]["node_advantages"]) == len(leaf.metadata["tree"]["path"]) + 1


def test_a_gym_tree_forks_before_an_uncertain_turn_and_its_siblings_sample_that_turn_again(hf_server_url, tmp_path):
    entropy = ["rollout.tree.branch_turns=[]", "rollout.tree.entropy=0.5", "rollout.tree.resample_uncertain=true",
               "rollout.tree.max_branch_points=1"]  # fmt: skip
    steps = train(hf_server_url, tmp_path, "gym", "env.max_steps=3", "agent.max_turns=3", "env.history_turns=0",
                  "env.kwargs.bump_ends_episode=false", "trainer.steps=1", *entropy)  # fmt: skip
    assert [s["step"] for s in steps] == [1]
    trees: dict[str, list[Trajectory]] = defaultdict(list)
    for leaf in leaves(tmp_path, 1):
        trees[leaf.metadata["tree"]["id"]].append(leaf)
    forked = [sorted(tree, key=lambda leaf: leaf.metadata["tree"]["path"]) for tree in trees.values() if len(tree) > 1]
    assert forked, "no turn of the untrained policy had a mean surprisal of 0.5 nats or more, so no tree forked"
    for played, sibling in forked:
        (at,) = played.metadata["tree"]["branch_turns"]
        mine, theirs = _turns(played), _turns(sibling)
        assert [s.token_ids for s in mine[:at]] == [s.token_ids for s in theirs[:at]]  # the state before it, shared
        first = mine[at].logprobs[:16]
        assert -sum(first) / len(first) >= 0.5  # the turn as played was uncertain; the sibling sampled it again
        assert len(theirs) > at


def _turns(leaf: Trajectory) -> list:
    """The leaf's generated turns in order, over all its step samples (history_turns=0 starts one a turn)."""
    return [s for sample in leaf.step_samples() for s in sample.segments if s.trainable]


def test_a_filled_tree_has_flats_four_episodes_a_prompt(hf_server_url, tmp_path):
    """Untrained, many first replies answer without calling the tool and end the episode before the fork after
    turn 1: `fill` starts new first branches for them, so every tree still has 4 leaves. The children of the fork
    after turn 1 sample hotter (`child_temperature`), and the trainer scores their tokens at that temperature."""
    fill = ["rollout.n=1", "rollout.tree.branch_turns=[0,1]", "rollout.tree.fill=true", "trainer.steps=1"]
    hot = "rollout.tree.child_temperature=1.3"
    steps = train(hf_server_url, tmp_path, "tool_use", "agent.max_turns=2", "trainer.advantage=tree_grpo", *fill, hot)
    assert [s["train/tree_leaves_per_tree"] for s in steps] == [4.0]
    assert steps[0]["train/rollout_logprob_abs_diff"] < 1e-3  # each token scored at the temperature it was sampled at
    forked_after_turn_1 = 0
    for leaf in leaves(tmp_path, 1):  # a refilled first branch with one leaf's share forks no more: all at 1.0
        first, *later = [s.temperature for s in leaf.segments if s.role == "assistant"]
        forked = 1 in leaf.metadata["tree"]["branch_turns"]
        assert first == 1.0 and set(later) <= ({1.3} if forked else {1.0})
        forked_after_turn_1 += forked and bool(later)
    assert forked_after_turn_1 > 0
    trees: dict[str, list[Trajectory]] = defaultdict(list)
    for leaf in leaves(tmp_path, 1):
        trees[leaf.metadata["tree"]["id"]].append(leaf)
    assert len(trees) == 2  # data.batch_size prompts x one tree
    for tree in trees.values():
        assert len({tuple(leaf.metadata["tree"]["path"]) for leaf in tree}) == 4
        assert all(leaf.metadata["tree"]["branch_turns"][0] == 0 for leaf in tree)
    assert any(leaf.metadata["tree"]["path"][0] >= 2 for tree in trees.values() for leaf in tree)  # branches added


def test_a_tool_chain_tree_forks_after_the_first_lookup_and_its_leaves_share_its_result(hf_server_url, tmp_path):
    """The recipe's own `lookup` (tools.py beside it) runs in the episodes; a tree forked after the first turn gives
    both leaves that turn's call and result, and each leaf goes on from there on its own."""
    steps = train(hf_server_url, tmp_path, "tool_chain", "trainer.advantage=tree_grpo", "rollout.n=4",
                  "trainer.steps=1")  # fmt: skip
    assert [s["step"] for s in steps] == [1]
    lookup = import_object(f"{RECIPES / 'tool_chain' / 'tools.py'}:lookup", "tool")
    trees: dict[str, list[Trajectory]] = defaultdict(list)
    for leaf in leaves(tmp_path, 1):
        trees[leaf.metadata["tree"]["id"]].append(leaf)
        assert set(leaf.reward_components) == {"correct", "right_lookup"}
    forked = [tree for tree in trees.values() if len(tree) == 2]
    assert forked, "no first reply called a tool (untrained, about 40% do), so no tree forked"
    for tree in forked:
        question, *episode = _from_question(tree[0])
        call, result = episode[:2]
        assert _from_question(tree[1])[:3] == [question, call, result] and result.role == "tool"
        if not result.is_error:  # the recipe's tool answered the key the reply asked for
            key = json.loads(call.content.split("<tool_call>")[1].split("</tool_call>")[0])["arguments"]["key"]
            assert result.content == lookup(key)


def _from_question(leaf: Trajectory) -> list:
    """The leaf's last user message (the question after the worked examples) and what followed it."""
    start = max(i for i, m in enumerate(leaf.messages) if m.role == "user")
    return [_Said(m.role, message_text(m)) for m in leaf.messages[start:]]


@dataclass(frozen=True)
class _Said:
    role: str
    content: str

    @property
    def is_error(self) -> bool:
        return self.content.startswith("Error")
