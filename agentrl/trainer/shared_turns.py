"""Turns that several episodes hold: in a tree rollout (`agentrl.loops.tree`) every leaf holds a copy of each turn
played before its branch points. A per-turn estimator credits such a turn as the one turn it is and trains it once:
the first leaf holding it (by path) trains it, the others leave their copy untrained (`TurnAdvantages.untrained`),
so that each generated turn weighs one turn in the batch whatever the tree's shape.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from agentrl.trainer.turn_credit import TurnEpisode

TurnKey = tuple[Hashable, int]
"""A turn's key (`turn_keys`): where it was played (a tree node, or an episode alone) and its index."""


def node_of(episode: TurnEpisode, turn: int) -> tuple[str, tuple[int, ...]]:
    """The tree node a turn (0-based) of a tree's leaf belongs to: the tree's id and the leaf's path cut at the
    branch points the turn came after."""
    tree = episode.tree or {}
    depth = sum(1 for branch in tree["branch_turns"] if branch <= turn)
    return tree["id"], tuple(tree["path"][:depth])


def turn_keys(episodes: Sequence[TurnEpisode]) -> list[list[TurnKey]]:
    """Per episode, a key for each of its turns, equal for the copies of one turn: its tree node and its index in a
    tree's leaf, the episode's place and the turn's index in an episode played alone."""
    return [
        [(node_of(episode, turn) if episode.tree is not None else index, turn) for turn in range(episode.num_turns)]
        for index, episode in enumerate(episodes)
    ]


def untrained_copies(episodes: Sequence[TurnEpisode], keys: Sequence[Sequence[TurnKey]]) -> list[list[int]]:
    """Per episode, its turns that another episode trains (`keys` from `turn_keys`): each turn is trained by the
    first episode that holds it, the leaves of a tree taken by path."""
    owners: dict[TurnKey, int] = {}
    for index in sorted(range(len(episodes)), key=lambda i: tuple((episodes[i].tree or {}).get("path", ()))):
        for key in keys[index]:
            owners.setdefault(key, index)
    return [[turn for turn, key in enumerate(mine) if owners[key] != index] for index, mine in enumerate(keys)]
