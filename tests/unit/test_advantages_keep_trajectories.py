"""Computing advantages leaves the trajectories it is given as they were. The rows it trains may be copies (a tree's
shared turn left untrained in all leaves but one), but the caller's trajectories are what the run saves: what is
saved must not depend on whether training ran in this process or on Ray ranks, which train copies of their own."""

from __future__ import annotations

import pytest

from agentrl.config import AgentRLConfig, TrainerConfig
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.policies import PolicyRuntime, _step
from agentrl.types import Trajectory
from tests.unit.test_gigpo_trees import first_turn, two_trees


@pytest.mark.parametrize("advantage", ["grpo", "gigpo", "tree_grpo"])
@pytest.mark.parametrize("windowed", [False, True])
def test_row_advantages_leave_the_trajectories_passed_in_unchanged(advantage: str, windowed: bool) -> None:
    leaves = two_trees(windowed)
    before = [leaf.model_dump() for leaf in leaves]
    rows = row_advantages(TrainerConfig(advantage=advantage), leaves)
    assert [leaf.model_dump() for leaf in leaves] == before
    shared = (first_turn("A"), first_turn("B"))
    trained = [s for row in rows.rows for s in row.segments if s.trainable and s.token_ids in shared]
    assert len(trained) == (2 if advantage != "grpo" else 4)  # per-turn estimators still train a shared turn once


class InProcess:
    """Trains the step's trajectories themselves, as the in-process backend does."""

    def __init__(self, cfg: TrainerConfig):
        self.cfg = cfg

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return row_advantages(self.cfg, trajectories).metrics


class OnRanks(InProcess):
    """Trains copies, as Ray's trainer ranks do (the trajectories reach them through the object store)."""

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        return super().step([t.model_copy(deep=True) for t in trajectories])


@pytest.mark.parametrize("advantage", ["gigpo", "tree_grpo"])
def test_what_a_step_saves_does_not_depend_on_where_it_trained(advantage: str) -> None:
    cfg = AgentRLConfig(trainer=TrainerConfig(advantage=advantage))
    saved = {}
    for backend in (InProcess, OnRanks):
        leaves = two_trees()
        _step(PolicyRuntime("policy", cfg, "no-model", True, backend=backend(cfg.trainer)), leaves, version=0)
        saved[backend] = [leaf.model_dump(exclude={"id"}) for leaf in leaves]
    assert saved[InProcess] == saved[OnRanks]
    assert all(s["trainable"] for leaf in saved[OnRanks] for s in leaf["segments"] if s["role"] == "assistant")
    if advantage == "tree_grpo":  # what the viewer draws, recorded whichever process trained
        assert all(len(leaf["metadata"]["tree"]["node_advantages"]) == 2 for leaf in saved[OnRanks])
