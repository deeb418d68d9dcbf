"""Rows whose advantage is 0 are left out of the update without changing it."""

import copy

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.trainer.engine import EngineConfig, PolicyEngine
from agentrl.trainer.reference import ReferencePolicy
from agentrl.trainer.step import policy_step
from tests.tiny_models import tiny_llama
from tests.unit.test_engine import traj


def batch():
    """Group a has signal; group b (the longest responses) all rewarded the same: advantage 0."""
    return [
        traj([1, 2], [4, 5], "a", 1.0),
        traj([1, 2], [6, 7, 8], "a", 0.0),
        traj([3], [9, 10, 11, 12, 13, 14], "b", 0.5),
        traj([3], [15, 16, 17, 18, 19, 20, 21], "b", 0.5),
    ]


def step_weights(model, trajectories, reference=None, **trainer):
    engine = PolicyEngine(copy.deepcopy(model), EngineConfig(lr=1e-2))
    metrics = policy_step(engine, TrainerConfig(**trainer), trajectories, 0, reference=reference)
    return {k: v.detach().clone() for k, v in engine.model.state_dict().items()}, metrics, engine


@pytest.mark.parametrize("loss_agg", [None, "token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_skipping_zero_advantage_rows_gives_the_same_update(loss_agg):
    torch.manual_seed(0)
    model = tiny_llama()
    full, full_metrics, _ = step_weights(model, batch(), skip_zero_advantage=False, loss_agg=loss_agg)
    skipped, metrics, _ = step_weights(model, batch(), skip_zero_advantage=True, loss_agg=loss_agg)
    assert full_metrics["train/rows_trained"] == 4.0 and metrics["train/rows_trained"] == 2.0
    assert any(not torch.equal(full[k], model.state_dict()[k]) for k in full)  # the step did move the weights
    for key in full:  # atol: Adam divides tiny gradients by their tiny norms
        torch.testing.assert_close(skipped[key], full[key], rtol=1e-5, atol=1e-5)
    assert metrics["train/tokens"] == full_metrics["train/tokens"]  # the batch's figures, not the trained rows'


def test_rows_are_kept_when_a_kl_penalty_gives_them_gradient():
    model = tiny_llama()
    _, metrics, _ = step_weights(model, batch(), reference=ReferencePolicy.frozen_copy(model), kl_coef=0.1)
    assert metrics["train/rows_trained"] == 4.0


def test_a_batch_without_signal_still_takes_its_optimizer_step():
    flat = [traj([1, 2], [4, 5], "a", 1.0), traj([1, 2], [6, 7], "a", 1.0)]
    _, metrics, engine = step_weights(tiny_llama(), flat)
    assert metrics["train/rows_trained"] == 0.0 and engine.step_count == 1
    assert "train/rollout_logprob_abs_diff" not in metrics and "train/entropy" not in metrics  # nothing scored
