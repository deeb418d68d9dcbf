"""A 2-step training run of the real model through the whole loop: rollout, reward, step, weight sync."""

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration


def test_two_step_sync_training_run(hf_server_url, tmp_path):
    code = main(
        [
            "train",
            "recipe=quickstart",
            f"rollout.urls=[{hf_server_url}]",
            "trainer.steps=2",
            "data.batch_size=2",
            "rollout.n=2",
            "rollout.max_tokens=16",
            "data.eval_files=[]",
            f"output_dir={tmp_path}",
        ]
    )
    assert code == 0
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:
        print({k: s[k] for k in ("train/loss", "train/rollout_logprob_abs_diff", "perf/weight_sync_s")})
        assert s["train/rollout_logprob_abs_diff"] < 1e-3  # training-inference mismatch of the hf backend, fp32
        assert s["train/tokens"] > 0
    with gzip.open(tmp_path / "trajectories" / "step_0002.jsonl.gz", "rt") as f:
        second = [Trajectory.from_json(line) for line in f]
    # step 2 was sampled after step 1's weights were pushed: its tokens carry the new policy version
    versions = {seg.policy_version for t in second for seg in t.segments if seg.trainable}
    assert versions == {1}
