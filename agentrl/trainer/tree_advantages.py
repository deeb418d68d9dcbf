"""Tree-GRPO credit on a tree of forked episodes (Ji et al. 2025, "Tree Search for LLM Agent Reinforcement
Learning", arXiv:2509.21240): an advantage per node, from the outcomes of the leaves alone.

A tree rollout forks an episode at turn boundaries. Each node is the stretch of turns between two branch points
(the root: the turns before the first one; a leaf: the turns after the last one, ending in an outcome). The
children of one node started from one true state, so they form a group of their own. For a node n with value
V(n), the mean outcome of the leaves below it:

    A_intra(n) = (V(n) − mean_{s ∈ siblings(n)} V(s)) / (std_{s ∈ siblings(n)} V(s) + ε)    within its branch point
    A_inter(n) = (V(n) − mean_{l ∈ leaves(prompt)} R(l)) / (std_{l ∈ leaves(prompt)} R(l) + ε)   across the trees
    A(n)       = intra_weight · A_intra(n) + inter_weight · A_inter(n)

The siblings include n itself; the statistics are GRPO's (unbiased std; a group of one, or of equal values, gives
0), and `norm="none"` drops the division (Dr. GRPO). The inter-tree term is the paper's: every tree of the prompt
is one sample of the policy from the prompt. The intra-tree term is the paper's at the leaves and, at inner nodes,
the same comparison one level up: a turn is credited by how much better its subtree did than its siblings' from
the same state.

Shared-prefix tokens are trained once, with their node's advantage, rather than once per leaf (as the paper does,
which weights a prefix by its number of leaves). For the inter-tree term the two agree up to that weight: V(n) is
the mean of the leaves below n, so A_inter(n) is the mean of their A_inter. Training a prefix once keeps every
generated token at weight one in the batch, whatever the tree's shape. `prefix_weight="leaves"`
(`trainer.tree_prefix_weight=leaves`) gives the paper's weighting instead, still computing the prefix once: its
advantage is multiplied by the number of leaves below it, which for a clipped policy loss is the gradient of
training it once per leaf (up to token-mean's denominator, which counts its tokens once). A turn shared by k leaves
then weighs what it weighs in k flat episodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from agentrl.config.schema import TrainerConfig
from agentrl.errors import UserError
from agentrl.trainer.algorithms import DEFAULT_EPS, dr_grpo_advantage, get_advantage, grpo_advantage
from agentrl.trainer.shared_turns import turn_keys, untrained_copies
from agentrl.trainer.turn_algorithms import TurnAdvantages, per_turn
from agentrl.trainer.turn_credit import TurnEpisode
from agentrl.types import Trajectory


@dataclass(frozen=True)
class TreeNode:
    """One node of a tree rollout.

    Attributes:
        id: unique among the nodes passed together.
        parent: the parent node's id; None for a tree's root.
        group_id: the prompt's group: the trees of one prompt share it.
        reward: a leaf's outcome (the episode's reward); None for an inner node.
    """

    id: Hashable
    parent: Hashable | None
    group_id: Hashable
    reward: float | None = None


def tree_grpo_advantages(
    nodes: Sequence[TreeNode],
    *,
    intra_weight: float = 1.0,
    inter_weight: float = 1.0,
    norm: Literal["std", "none"] = "std",
    eps: float = DEFAULT_EPS,
) -> dict[Hashable, float]:
    """The Tree-GRPO advantage of every node (see the module docstring).

    Raises:
        UserError: a leaf without a reward, an inner node with one, or a parent that is not among `nodes`.
    """
    by_id = {n.id: n for n in nodes}
    children: dict[Hashable, list[Hashable]] = defaultdict(list)
    for node in nodes:
        if node.parent is not None:
            if node.parent not in by_id:
                raise UserError(f"tree node {node.id!r} names a parent {node.parent!r} that is not in the tree")
            children[node.parent].append(node.id)
    _check_rewards(nodes, children)
    values = _subtree_values(nodes, children)
    centre = grpo_advantage if norm == "std" else dr_grpo_advantage
    ids = [n.id for n in nodes]
    value = torch.tensor([values[i] for i in ids], dtype=torch.float64)
    siblings = [(by_id[i].group_id, by_id[i].parent if by_id[i].parent is not None else ("root", i)) for i in ids]
    intra = centre(value, siblings, eps=eps)
    inter = _inter_tree(nodes, values, children, norm, eps)
    return {i: intra_weight * float(intra[k]) + inter_weight * inter[i] for k, i in enumerate(ids)}


def _check_rewards(nodes: Sequence[TreeNode], children: dict[Hashable, list[Hashable]]) -> None:
    for node in nodes:
        is_leaf = node.id not in children
        if is_leaf and node.reward is None:
            raise UserError(f"tree leaf {node.id!r} has no reward; score every leaf before computing advantages")
        if not is_leaf and node.reward is not None:
            raise UserError(f"tree node {node.id!r} has children and a reward; only leaves carry outcomes")


def _subtree_values(nodes: Sequence[TreeNode], children: dict[Hashable, list[Hashable]]) -> dict[Hashable, float]:
    """V(n): the mean reward of the leaves below n (n itself for a leaf)."""
    by_id = {n.id: n for n in nodes}
    leaves: dict[Hashable, list[float]] = {}

    def collect(node_id: Hashable) -> list[float]:
        if node_id not in leaves:
            kids = children.get(node_id, [])
            reward = by_id[node_id].reward
            leaves[node_id] = [float(reward)] if not kids and reward is not None else [
                r for kid in kids for r in collect(kid)]  # fmt: skip
        return leaves[node_id]

    return {n.id: sum(collect(n.id)) / len(collect(n.id)) for n in nodes}


def _inter_tree(
    nodes: Sequence[TreeNode],
    values: dict[Hashable, float],
    children: dict[Hashable, list[Hashable]],
    norm: str,
    eps: float,
) -> dict[Hashable, float]:
    """A_inter(n): V(n) against the outcomes of every leaf of the prompt's trees."""
    outcomes: dict[Hashable, list[float]] = defaultdict(list)
    for node in nodes:
        if node.id not in children:
            outcomes[node.group_id].append(values[node.id])
    out = {}
    for node in nodes:
        group = torch.tensor(outcomes[node.group_id], dtype=torch.float64)
        if len(group) < 2 or bool((group == group[0]).all()):
            out[node.id] = 0.0
            continue
        spread = float(group.std()) + eps if norm == "std" else 1.0
        out[node.id] = (values[node.id] - float(group.mean())) / spread
    return out


def tree_nodes(leaves: Sequence[Trajectory]) -> list[TreeNode]:
    """The `TreeNode`s of the trees the scored leaves of tree rollouts form (`agentrl.loops.tree`: each leaf's
    `metadata["tree"]` holds its tree's id and its path): a node per path prefix (the root `()`, each branch's
    children), the leaves carrying their rewards. Node ids are `(tree id, path)`."""
    episodes = [TurnEpisode(t.group_id, t.reward, [], None, t.metadata["tree"]) for t in leaves]  # type: ignore[arg-type]
    return _nodes(episodes)


@per_turn
def tree_grpo_advantage(
    episodes: Sequence[TurnEpisode],
    *,
    intra_weight: float = 1.0,
    inter_weight: float = 1.0,
    step_norm: Literal["std", "none"] = "std",
    prefix_weight: Literal["once", "leaves"] = "once",
    eps: float = DEFAULT_EPS,
) -> TurnAdvantages:
    """`trainer.advantage=tree_grpo`: each turn of a tree rollout's leaf gets the Tree-GRPO advantage of the node it
    belongs to (`tree_grpo_advantages`; `trainer.tree_intra_weight`, `trainer.tree_inter_weight`, and
    `trainer.gigpo_step_norm` as the normalization). A turn before a branch point belongs to the inner node all the
    leaves below share: one leaf trains it (the first by path), the others leave it untrained; with
    `prefix_weight="leaves"` (`trainer.tree_prefix_weight`) its advantage is multiplied by that number of leaves.

    The leaves are left as they are (`record_node_advantages` writes each node's advantage for the viewer). Metric:
    `train/tree_leaves_per_tree`.

    Raises:
        UserError: an episode that was not played as part of a tree (`rollout.tree`).
    """
    if any(e.tree is None for e in episodes):
        raise UserError(
            "trainer.advantage=tree_grpo credits the nodes of tree rollouts, but some trajectories were played alone: "
            "set rollout.tree.branch_turns (e.g. rollout.tree.branch_turns=[1,3])"
        )
    nodes = _nodes(episodes)
    advantage = tree_grpo_advantages(nodes, intra_weight=intra_weight, inter_weight=inter_weight, norm=step_norm,
                                     eps=eps)  # fmt: skip
    weight = _leaves_below(episodes) if prefix_weight == "leaves" else defaultdict(lambda: 1)
    keys = turn_keys(episodes)
    per_turn = [
        torch.tensor([advantage[node] * weight[node] for node, _ in mine], dtype=torch.float32) for mine in keys
    ]
    untrained = untrained_copies(episodes, keys)
    trees = {e.tree["id"] for e in episodes}  # type: ignore[index]
    return TurnAdvantages(per_turn, {"train/tree_leaves_per_tree": len(episodes) / max(len(trees), 1)}, untrained)


def record_node_advantages(cfg: TrainerConfig, leaves: Sequence[Trajectory]) -> None:
    """For the viewer, when `cfg.advantage` is `tree_grpo`: write into each scored leaf's `metadata["tree"]` its
    `node_advantages`, the Tree-GRPO advantage of every node on its path, root first (with `cfg`'s weights and
    normalization). The training loop calls it on the trajectories it saves, whichever process trained them."""
    if get_advantage(cfg.advantage) is not tree_grpo_advantage or not leaves:
        return
    advantage = tree_grpo_advantages(
        tree_nodes(leaves),
        intra_weight=cfg.tree_intra_weight,
        inter_weight=cfg.tree_inter_weight,
        norm=cfg.gigpo_step_norm,
    )
    for leaf in leaves:
        tree = leaf.metadata["tree"]
        tree["node_advantages"] = [
            advantage[(tree["id"], tuple(tree["path"][:depth]))] for depth in range(len(tree["path"]) + 1)
        ]


def _leaves_below(episodes: Sequence[TurnEpisode]) -> dict[Hashable, int]:
    """How many leaves (episodes) lie below each node: one per node on an episode's path."""
    count: dict[Hashable, int] = defaultdict(int)
    for episode in episodes:
        tree = episode.tree or {}
        for depth in range(len(tree["path"]) + 1):
            count[(tree["id"], tuple(tree["path"][:depth]))] += 1
    return count


def _nodes(episodes: Sequence[TurnEpisode]) -> list[TreeNode]:
    nodes: dict[Hashable, TreeNode] = {}
    for episode in episodes:
        tree = episode.tree or {}
        path = tuple(tree["path"])
        for depth in range(len(path)):
            key = (tree["id"], path[:depth])
            parent = (tree["id"], path[: depth - 1]) if depth else None
            nodes.setdefault(key, TreeNode(key, parent, episode.group_id))
        parent = (tree["id"], path[:-1]) if path else None
        nodes[(tree["id"], path)] = TreeNode((tree["id"], path), parent, episode.group_id, episode.reward)
    return list(nodes.values())
