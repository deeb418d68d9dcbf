"""GiGPO on tree rollouts: a turn before a branch point, of which every leaf below it holds a copy, is one turn. It
counts once in its anchor-state group (with the mean of its copies' returns) and is trained once, by one leaf, as
`tree_grpo` trains a shared prefix."""

from __future__ import annotations

import math

import pytest

from agentrl.config import TrainerConfig
from agentrl.trainer.advantages import RowAdvantages, row_advantages
from agentrl.types import Segment, Trajectory

EPS = 1e-6
BASE = {"A": 0, "B": 10}
"""Each tree's tokens: its shared first turn is (3, 4) offset by this, leaf p's own turn (6 + p)."""


def tree_leaf(tree: str, path: int, reward: float, windowed: bool = False) -> Trajectory:
    """A leaf of tree `tree` forked after its first turn: the prompt, the first turn from state s0 (every leaf of the
    tree holds a copy), an observation, then the leaf's own turn from the state the fork left (`<tree>1`), rewarded
    with the outcome. `windowed`: the first turn lies in an earlier step sample (a history window)."""
    prompt, obs = (
        Segment(token_ids=[1, 2], trainable=False, role="user"),
        Segment(token_ids=[5], trainable=False, role="user"),
    )
    first = Segment(token_ids=first_turn(tree), trainable=True, logprobs=[-1.0, -1.0], policy_version=0)
    own = Segment(token_ids=[BASE[tree] + 6 + path], trainable=True, logprobs=[-1.0], policy_version=0)
    fields = {
        "group_id": "g",
        "reward": reward,
        "turn_rewards": [0.0, reward],
        "turn_states": ["s0", f"{tree}1"],
        "metadata": {"tree": {"id": tree, "path": [path], "branch_turns": [1]}},
    }
    if windowed:
        earlier = Trajectory(group_id="g", segments=[prompt, first])
        return Trajectory(segments=[obs.model_copy(), own], earlier_steps=[earlier], **fields)
    return Trajectory(segments=[prompt, first, obs, own], **fields)


def first_turn(tree: str) -> list[int]:
    return [BASE[tree] + 3, BASE[tree] + 4]


def two_trees(windowed: bool = False) -> list[Trajectory]:
    """Two trees of one prompt, two leaves each: only tree A's first leaf succeeds."""
    return [
        tree_leaf(tree, path, reward, windowed)
        for tree, path, reward in (("A", 0, 1.0), ("A", 1, 0.0), ("B", 0, 0.0), ("B", 1, 0.0))
    ]


def trained_turns(rows: RowAdvantages) -> list[tuple[tuple[int, ...], float]]:
    """(token ids, advantage) of every trainable segment of the rows."""
    out = []
    for row, advantages in zip(rows.rows, rows.tokens, strict=True):
        first = next(i for i, s in enumerate(row.segments) if s.trainable)
        at = 0
        for segment in row.segments[first:]:
            if segment.trainable:
                out.append((tuple(segment.token_ids), float(advantages[at])))
            at += len(segment.token_ids)
    return out


@pytest.mark.parametrize("windowed", [False, True])
def test_gigpo_counts_a_shared_turn_once_in_its_anchor_group_and_trains_it_once(windowed: bool) -> None:
    rows = row_advantages(TrainerConfig(advantage="gigpo"), two_trees(windowed))
    a_e = [(r - 0.25) / (0.5 + EPS) for r in (1.0, 0.0, 0.0, 0.0)]  # Eq. 3 over the four leaves: mean 1/4, std 1/2
    # anchor s0: one member a tree, its return the mean of its copies' (A: (1 + 0)/2, B: 0); the std of (1/2, 0): √⅛
    s0 = (0.5 - 0.25) / (math.sqrt(1 / 8) + EPS)
    expected = {"A": (a_e[0] + a_e[1]) / 2 + s0, "B": (a_e[2] + a_e[3]) / 2 - s0}  # its leaves' mean episode term
    trained = trained_turns(rows)
    for tree in ("A", "B"):  # trained once a tree, by one of its leaves
        (advantage,) = [a for ids, a in trained if list(ids) == first_turn(tree)]
        assert advantage == pytest.approx(expected[tree], abs=1e-5)
    # the leaves' own turns, from the fork's state: anchor A1 compares returns (1, 0), B1's (0, 0) are all equal
    a1 = 0.5 / (math.sqrt(0.5) + EPS)
    own = {ids[0]: a for ids, a in trained if len(ids) == 1}
    assert own == pytest.approx({6: a_e[0] + a1, 7: a_e[1] - a1, 16: a_e[2], 17: a_e[3]}, abs=1e-5)
    assert len(trained) == 2 + 4
