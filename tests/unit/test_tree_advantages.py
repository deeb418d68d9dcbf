"""Tree-GRPO on hand-built trees: every node's advantage against values computed by hand."""

from __future__ import annotations

import math

import pytest

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.trainer.loop import prepare_config
from agentrl.trainer.preflight import untrained_root_warning
from agentrl.trainer.tree_advantages import TreeNode, tree_grpo_advantages

S = math.sqrt(0.5)  # the unbiased std of {1, 0}: a pair differing by 1 normalizes to ±1/(2·S) = ±S


def one_tree(group: str = "p", tag: str = "") -> list[TreeNode]:
    """root → a, b (branched at turn 1); a → a1 (1), a2 (0); b → b1 (0), b2 (0)."""
    n = lambda i, parent, reward=None: TreeNode(f"{tag}{i}", f"{tag}{parent}" if parent else None, group, reward)  # noqa: E731
    return [n("r", None), n("a", "r"), n("b", "r"), n("a1", "a", 1.0), n("a2", "a", 0.0), n("b1", "b", 0.0),
            n("b2", "b", 0.0)]  # fmt: skip


def test_intra_and_inter_tree_terms_match_the_hand_computed_values() -> None:
    adv = tree_grpo_advantages(one_tree())
    # leaves {1,0,0,0}: mean 0.25, unbiased std 0.5. a1: intra +S vs a2, inter (1-.25)/.5 = 1.5
    expected = {"a1": S + 1.5, "a2": -S - 0.5, "b1": -0.5, "b2": -0.5, "a": S + 0.5, "b": -S - 0.5, "r": 0.0}
    assert adv == pytest.approx(expected, abs=1e-5)


def test_an_inner_nodes_inter_term_is_the_mean_of_its_leaves() -> None:
    inter = tree_grpo_advantages(one_tree(), intra_weight=0.0)
    assert inter["a"] == pytest.approx((inter["a1"] + inter["a2"]) / 2)
    assert inter["r"] == pytest.approx(sum(inter[x] for x in ("a1", "a2", "b1", "b2")) / 4)


def test_trees_of_one_prompt_share_the_inter_term_and_other_prompts_do_not() -> None:
    second = [TreeNode("s", None, "p"), TreeNode("s1", "s", "p", 1.0), TreeNode("s2", "s", "p", 1.0)]
    other = [TreeNode("o", None, "q"), TreeNode("o1", "o", "q", 0.0), TreeNode("o2", "o", "q", 0.0)]
    adv = tree_grpo_advantages([*one_tree(), *second, *other], intra_weight=0.0, norm="none")
    mean = (1 + 0 + 0 + 0 + 1 + 1) / 6  # every leaf of prompt p's two trees
    assert adv["a1"] == pytest.approx(1 - mean) and adv["s"] == pytest.approx(1 - mean)
    assert adv["r"] == pytest.approx(0.25 - mean)
    assert adv["o1"] == adv["o"] == 0.0  # a prompt whose leaves all scored alike gives no signal


def test_siblings_compare_within_their_branch_point_only() -> None:
    adv = tree_grpo_advantages(one_tree(), inter_weight=0.0, norm="none")
    assert adv["a1"] == pytest.approx(0.5) and adv["a2"] == pytest.approx(-0.5)
    assert adv["b1"] == adv["b2"] == 0.0
    assert adv["a"] == pytest.approx(0.25) and adv["r"] == 0.0


def test_malformed_trees_are_refused() -> None:
    with pytest.raises(UserError, match="leaf 'x' has no reward"):
        tree_grpo_advantages([TreeNode("r", None, "p"), TreeNode("x", "r", "p")])
    with pytest.raises(UserError, match="has children and a reward"):
        tree_grpo_advantages([TreeNode("r", None, "p", 1.0), TreeNode("x", "r", "p", 1.0)])
    with pytest.raises(UserError, match="parent 'nope'"):
        tree_grpo_advantages([TreeNode("x", "nope", "p", 1.0)])


def test_a_run_whose_tree_roots_always_get_advantage_zero_is_warned_of_at_start(capsys) -> None:
    def warning(n: int, tree: dict, **trainer) -> str | None:
        rollout = {"n": n, "tree": tree}
        return untrained_root_warning(AgentRLConfig.model_validate({"rollout": rollout, "trainer": {
            "advantage": "tree_grpo", **trainer}}))  # fmt: skip

    assert tree_grpo_advantages(one_tree())["r"] == 0.0  # one tree a prompt: its root is compared with nothing
    line = warning(1, {"branch_turns": [1, 3]})
    assert line is not None and "\n" not in line and "rollout.n=1" in line and "branch_turns=[0,...]" in line
    assert "rollout.n=1" in (warning(1, {"every": 2}) or "")  # every / entropy fork after a turn, never before
    assert "tree_inter_weight=0" in (warning(2, {"branch_turns": [1]}, tree_inter_weight=0.0) or "")
    assert warning(2, {"branch_turns": [1, 3]}) is None  # the inter-tree term compares the prompt's trees
    assert warning(1, {"branch_turns": [0, 1]}) is None  # the root has no turns
    assert untrained_root_warning(AgentRLConfig.model_validate({"rollout": {"n": 1}})) is None  # no tree_grpo
    run = {"rollout": {"n": 1, "tree": {"branch_turns": [2]}}, "agent": {"name": "tool_agent"},
           "tools": [{"class": "calculator"}], "trainer": {"advantage": "tree_grpo"}}  # fmt: skip
    prepare_config(AgentRLConfig.model_validate(run))
    assert "their advantage is 0 and they are not learned" in capsys.readouterr().out  # what `agentrl train` prints
