"""PPO mini-batches and epochs on a tiny random model: one update keeps the ratio at exactly 1 (π_θ_old is the
training forward itself); several updates recompute π_θ_old once before the first, so the later ones see real
ratios, the clipping acts, and the learning-rate schedule still advances once per step."""

from __future__ import annotations

import pytest

from agentrl.trainer.backend import LocalBackend
from tests.trainer_cases import batch_of_trajectories, run_config, tiny_model_dir

torch = pytest.importorskip("torch")


def step(tmp_path, **trainer):
    backend = LocalBackend(run_config(skip_zero_advantage=False, **trainer), tiny_model_dir(tmp_path / "m"), 0)
    metrics = backend.step(batch_of_trajectories())
    return backend, metrics


def test_one_update_has_ratio_one_and_nothing_clipped(tmp_path):
    backend, metrics = step(tmp_path)
    assert metrics["train/ppo_updates"] == 1.0
    assert metrics["train/ppo_kl"] == 0.0 and metrics["train/clipfrac"] == 0.0
    assert backend.engine.step_count == 1


def test_mini_batches_see_real_ratios_and_clip(tmp_path):
    backend, metrics = step(tmp_path, ppo_mini_batches=2, ppo_epochs=2, clip_low=0.01, clip_high=0.01)
    assert metrics["train/ppo_updates"] == 4.0
    assert metrics["train/ppo_kl"] != 0.0  # the updates after the first ran on a policy that had moved
    assert metrics["train/clipfrac"] > 0.0
    assert backend.engine.step_count == 1  # one training step: the schedule advanced once
    assert backend.engine.scheduler.last_epoch == 1


def test_first_mini_batch_starts_at_ratio_one(tmp_path):
    # with a learning rate too small to move the policy, two epochs over one recomputed π_old see ratio 1
    _, once = step(tmp_path, lr=1e-12, ppo_epochs=2)
    assert abs(once["train/ppo_kl"]) < 1e-6 and once["train/clipfrac"] == 0.0  # the policy barely moves


def test_mismatch_is_measured_against_pi_old(tmp_path):
    _, one = step(tmp_path)
    _, four = step(tmp_path, ppo_mini_batches=4)
    # π_old of the mini-batches is the policy before the step, as in the one-update path's forward
    assert four["train/rollout_logprob_abs_diff"] == pytest.approx(one["train/rollout_logprob_abs_diff"], rel=1e-4)
