"""Training runs of the real model through the whole loop: rollout, reward, step, weight sync — async mode (the
zero-advantage rows left out), and checkpoint → resume reproducing the next step's loss. A 2-step sync run of each
backend, every row trained, is `test_matrix_real.py`'s (its tokens checked against their versions)."""

import gzip
import json
from collections import defaultdict

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration


def train(url, out, *overrides):
    args = [
        "train",
        "recipe=quickstart",
        f"rollout.urls=[{url}]",
        "data.batch_size=2",
        "rollout.n=2",
        "rollout.max_tokens=12",
        "data.eval_files=[]",
        f"output_dir={out}",
        *overrides,
    ]
    assert main(args) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def step_trajectories(out, step):
    with gzip.open(out / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
        return [Trajectory.from_json(line) for line in f]


def rows_with_signal(out, step):
    groups = defaultdict(list)
    for t in step_trajectories(out, step):
        groups[t.group_id].append(t.reward)
    return float(sum(len(rewards) for rewards in groups.values() if max(rewards) > min(rewards)))


def versions_of_step(out, step):
    trajectories = step_trajectories(out, step)
    return {seg.policy_version for t in trajectories for seg in t.segments if seg.trainable}


def test_two_step_async_training_run_overlaps_rollout_with_training(hf_server_url, tmp_path):
    steps = train(hf_server_url, tmp_path, "trainer.steps=2", "trainer.mode=async", "trainer.max_staleness=1")
    assert [s["step"] for s in steps] == [1, 2]
    # step 2 was sampled while step 1 trained, by the weights of version 0: one version stale, TIS-corrected
    assert versions_of_step(tmp_path, 2) == {0}
    assert steps[1]["rollout/staleness_mean"] == 1.0 and steps[1]["rollout/stale_trajectories"] == 0.0
    assert all(s["train/tokens"] > 0 for s in steps)
    # trajectories of groups with equal rewards (advantage 0) are left out of the update
    assert [s["train/rows_trained"] for s in steps] == [rows_with_signal(tmp_path, k) for k in (1, 2)]


def test_resume_from_a_checkpoint_reproduces_the_next_step(hf_server_url, tmp_path):
    # seed 7: the updates before the cut are real (grad norm > 0); the run saves after step 2 only (a checkpoint
    # writes ~1.6 GB of weights and optimizer state). One request at a time: the server's batch is then the same in
    # every run (a batch of other shape can round a logit differently and flip a sampled token).
    one_at_a_time = ("rollout.seed=7", "rollout.max_concurrency=1")
    run = tmp_path / "run"
    whole = train(hf_server_url, run, "trainer.steps=3", "trainer.save_every=2", *one_at_a_time)
    assert (run / "checkpoints" / "step_000002" / "trainer_state.json").is_file()
    # the run as it was when stopped after step 2 (its checkpoint is the last), resumed in place
    lines = (run / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run / "metrics.jsonl").write_text("".join(lines[:2]))
    resumed = train(hf_server_url, run, "trainer.steps=3", "trainer.resume=true", *one_at_a_time)
    assert whole[1]["train/grad_norm"] > 0  # the update before the cut was not empty
    assert [s["step"] for s in resumed] == [1, 2, 3]  # appended to the interrupted run's metrics
    after, uninterrupted = resumed[-1], whole[-1]
    print({k: (after[k], uninterrupted[k]) for k in ("train/loss", "train/grad_norm", "rollout/reward_mean")})
    assert after["rollout/reward_mean"] == uninterrupted["rollout/reward_mean"]
    assert after["train/loss"] == pytest.approx(uninterrupted["train/loss"], abs=1e-6)
    assert after["train/grad_norm"] == pytest.approx(uninterrupted["train/grad_norm"], rel=1e-4, abs=1e-6)


def test_ppo_mini_batches_train_on_real_ratios(hf_server_url, tmp_path):
    # four optimizer steps per batch of 8 trajectories: π_old is recomputed before the first, so the later
    # mini-batches run on a policy that has moved (ratio != 1) and a tight clip range is visibly hit
    metrics = train(
        hf_server_url,
        tmp_path,
        "trainer.steps=2",
        "rollout.n=4",
        "rollout.seed=7",
        "trainer.ppo_mini_batches=4",
        "trainer.skip_zero_advantage=false",
        "trainer.lr=1e-4",
        "trainer.clip_low=0.001",
        "trainer.clip_high=0.001",
    )
    assert [m["train/ppo_updates"] for m in metrics] == [4.0, 4.0]
    print({k: [m[k] for m in metrics] for k in ("train/ppo_kl", "train/clipfrac", "train/rollout_logprob_abs_diff")})
    assert all(m["train/ppo_kl"] != 0.0 for m in metrics)
    assert any(m["train/clipfrac"] > 0.0 for m in metrics)
    assert all(m["train/rollout_logprob_abs_diff"] < 1e-3 for m in metrics)  # π_old is the rollout policy


def test_masked_sequence_importance_sampling_runs_in_training(hf_server_url, tmp_path):
    metrics = train(
        hf_server_url,
        tmp_path,
        "trainer.steps=1",
        "rollout.n=4",
        "trainer.skip_zero_advantage=false",
        "trainer.tis_cap=2.0",
        "trainer.is_mode=mask",
        "trainer.is_level=geometric",
    )
    (step,) = metrics
    # fp32 hf server: π_old and π_rollout agree to ~1e-5, so no sequence leaves the band and every weight is ~1
    assert step["train/tis_maskfrac"] == 0.0
    assert step["train/tis_weight_mean"] == pytest.approx(1.0, abs=1e-3)
    assert step["train/tis_weight_max"] == pytest.approx(1.0, abs=1e-3)


def test_fully_async_training_with_partial_rollouts(hf_server_url, tmp_path):
    metrics = train(
        hf_server_url,
        tmp_path,
        "trainer.mode=fully_async",
        "trainer.max_staleness=1",
        "rollout.weight_update=resume",
        "trainer.steps=3",
        "rollout.n=4",
        "rollout.max_tokens=48",
    )
    assert [m["step"] for m in metrics] == [1, 2, 3]
    print({k: [m.get(k) for m in metrics] for k in ("rollout/staleness_max", "rollout/versions_per_trajectory")})
    assert all(m["rollout/trajectories"] == 8.0 for m in metrics)
    # the staleness bound: no trained trajectory started more than max_staleness versions before its step
    assert all(m["rollout/staleness_max"] <= 1.0 for m in metrics)
    assert all(m["rollout/stale_trajectories"] == 0.0 for m in metrics)
    # rollout ran ahead: later steps trained groups that started before the previous push
    assert any(m["rollout/staleness_max"] >= 1.0 for m in metrics[1:])
    trajectories = []
    for step in (1, 2, 3):
        with gzip.open(tmp_path / "trajectories" / f"step_{step:04d}.jsonl.gz", "rt") as f:
            trajectories += [Trajectory.from_json(line) for line in f]
    assert not [t for t in trajectories if t.failed]
