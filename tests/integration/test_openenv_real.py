"""An OpenEnv environment, for real: agentrl serves the openenv recipe's environment folder (openenv-core's own
create_app, under uvicorn) and the default model plays it on the shared `hf` server, one training step, the reward
the environment's own."""

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration
pytest.importorskip("openenv.core")


def test_an_openenv_environment_is_served_played_and_trained_a_step(hf_server_url, tmp_path):
    args = ["train", "recipe=openenv", "data.batch_size=1", "rollout.n=2", "trainer.steps=1", "trainer.eval_every=0"]
    args += ["trainer.skip_zero_advantage=false", f"rollout.urls=[{hf_server_url}]", f"output_dir={tmp_path}"]
    assert main(args) == 0
    (metrics,) = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert metrics["rollout/trajectories"] == 2.0 and metrics["train/tokens"] > 0
    with gzip.open(tmp_path / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        played = [Trajectory.from_json(line) for line in f]
    for traj in played:
        rewards = traj.metadata["openenv"]["rewards"]  # the environment's own, one per step
        assert not traj.failed and len(rewards) == traj.num_turns >= 1 and traj.reward == sum(rewards)
        assert "prompt: Say the word" in traj.messages[0].content  # the reset observation
