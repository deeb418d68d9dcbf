"""Tree rollouts for the page: the leaves of one step that share a tree (`metadata["tree"]`, written by
`agentrl.loops.tree`) put back together as nodes, so the page can draw the tree: its branch points, siblings side
by side, each node's turns, outcome (the mean reward of the leaves below it) and, when the run trained with
`tree_grpo`, its advantage (`metadata["tree"]["node_advantages"]`, recorded by the training loop with
`agentrl.trainer.tree_advantages.record_node_advantages`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agentrl.types import Trajectory


def tree_views(leaves: list[tuple[int, Trajectory]]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The trees that the `(page index, trajectory)` pairs of one step form, and for each leaf's page index the
    index of its tree in that list. Trajectories played alone are left out."""
    by_tree: dict[str, list[tuple[int, Trajectory]]] = defaultdict(list)
    for index, traj in leaves:
        tree = traj.metadata.get("tree")
        if isinstance(tree, dict) and "id" in tree:
            by_tree[str(tree["id"])].append((index, traj))
    views, where = [], {}
    for tree_id, members in by_tree.items():
        for index, _ in members:
            where[index] = len(views)
        views.append({"id": tree_id, "group": members[0][1].group_id, "nodes": _nodes(members)})
    return views, where


def _nodes(members: list[tuple[int, Trajectory]]) -> list[dict[str, Any]]:
    """A node per path prefix, in depth-first order: its path, turns, leaf (page index), value and advantage."""
    nodes: dict[tuple[int, ...], dict[str, Any]] = {}
    rewards: dict[tuple[int, ...], list[float]] = defaultdict(list)
    for index, traj in members:
        tree = traj.metadata["tree"]
        path, forks = tuple(tree.get("path", ())), list(tree.get("branch_turns", ()))
        advantages = tree.get("node_advantages") or []
        for depth in range(len(path) + 1):
            key = path[:depth]
            node = nodes.setdefault(key, _node(key, forks, depth))
            if depth < len(advantages):
                node["advantage"] = advantages[depth]
            if traj.reward is not None:
                rewards[key].append(float(traj.reward))
        leaf = nodes[path]
        leaf.update(leaf=index, turns=[leaf["turns"][0], traj.num_turns], reward=traj.reward)
    for key, node in nodes.items():
        node["value"] = sum(rewards[key]) / len(rewards[key]) if rewards[key] else None
    return [nodes[key] for key in sorted(nodes)]


def _node(path: tuple[int, ...], forks: list[int], depth: int) -> dict[str, Any]:
    start = forks[depth - 1] if depth else 0
    end = forks[depth] if depth < len(forks) else None
    return {"path": list(path), "turns": [start, end], "leaf": None, "advantage": None}
