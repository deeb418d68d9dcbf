"""Supervised fine-tuning for real: demonstrations recorded by `agentrl rollout` (the quickstart's training rows,
played by the real model, kept when they scored), then `trainer.objective=sft` on that file through the whole loop:
every kept reply's tokens trained, the loss falls on the same demonstrations, the recipe's own loop and reward
evaluate the held-out rows before and after, and the run checkpoints as an RL run does."""

from __future__ import annotations

import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration

TRAIN_ROWS = "recipes/quickstart/data/train.jsonl"


def test_an_sft_run_on_recorded_demonstrations_learns_them_and_evaluates_the_task(hf_server_url, tmp_path):
    record = [
        "rollout", "recipe=quickstart", f"rollout.urls=[{hf_server_url}]", "rollout.n=1", "rollout.seed=5",
        f"data.eval_files=[{TRAIN_ROWS}]", f"output_dir={tmp_path / 'teacher'}",
    ]  # fmt: skip
    assert main(record) == 0
    recorded = tmp_path / "teacher" / "trajectories.jsonl"
    episodes = [Trajectory.from_json(line) for line in recorded.read_text().splitlines()]
    scores = sorted({t.reward or 0.0 for t in episodes})  # the untrained model scores low, and unevenly
    threshold = scores[len(scores) // 2]  # the better-scored half of the episodes
    kept = [t for t in episodes if (t.reward or 0.0) >= threshold and not t.failed]
    assert 0 < len(kept) < len(episodes)  # the filter has something to keep and something to leave out
    train = [
        "train", "recipe=quickstart", f"rollout.urls=[{hf_server_url}]", "trainer.objective=sft",
        f"data.demonstrations=[{recorded}]", f"data.min_reward={threshold}", f"data.batch_size={len(kept)}",
        "trainer.steps=2", "trainer.lr=1e-4", "trainer.eval_every=2", "trainer.save_every=2",
        f"output_dir={tmp_path / 'student'}",
    ]  # fmt: skip
    assert main(train) == 0
    run = tmp_path / "student"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "train/loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    generated = sum(t.num_generated_tokens for t in kept)
    assert all(m["train/tokens"] == generated and m["data/demonstrations"] == len(kept) for m in steps)
    assert steps[1]["train/loss"] < steps[0]["train/loss"]  # the same demonstrations, after one step on them
    evaluated = [m["step"] for m in metrics if "eval/reward_mean" in m]
    assert evaluated == [0, 2]  # the quickstart's held-out rows, by its own loop and reward
    assert (run / "checkpoints" / "step_000002").is_dir()
    assert not any(k.startswith("rollout/") for m in steps for k in m)  # nothing was rolled out to train on
