"""verifiers environments, for real: a SingleTurnEnv and a ToolEnv written in verifiers' own API
(tests/verifiers_envs.py), played by the default model on the shared `hf` server, one training step each, the
reward from the environment's own rubric."""

import gzip
import json
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.types import Trajectory

pytestmark = pytest.mark.integration
pytest.importorskip("verifiers")

ENV_FILE = str(Path(__file__).parents[1] / "verifiers_envs.py")


def run(out, url, kind, *overrides):
    args = [
        "train",
        "recipe=verifiers",
        f"agent.kwargs={{env_id: {ENV_FILE}, env_args: {{kind: {kind}}}}}",
        "data.batch_size=1",
        "rollout.n=2",
        "trainer.steps=1",
        "trainer.eval_every=0",
        "trainer.skip_zero_advantage=false",  # a step is trained whatever the two rewards are
        f"rollout.urls=[{url}]",
        f"output_dir={out}",
    ]
    assert main([*args, *overrides]) == 0
    (metrics,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    with gzip.open(out / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        return metrics, [Trajectory.from_json(line) for line in f]


def test_a_single_turn_environment_rolls_out_and_trains_a_step(hf_server_url, tmp_path):
    metrics, played = run(tmp_path, hf_server_url, "single")
    assert metrics["rollout/trajectories"] == 2.0 and metrics["train/tokens"] > 0
    for traj in played:
        assert not traj.failed and traj.num_turns == 1
        assert traj.reward == traj.reward_components["says_the_colour"]  # the rubric's one weighted function
        assert traj.metrics["verifiers/reply_length"] > 0
        assert traj.messages[0].content == "Answer with one word."  # the environment's own system prompt


def test_a_tool_environment_rolls_out_and_trains_a_step(hf_server_url, tmp_path):
    metrics, played = run(tmp_path, hf_server_url, "tool", "agent.max_turns=3", "rollout.max_tokens=64")
    assert metrics["rollout/trajectories"] == 2.0 and metrics["train/tokens"] > 0
    for traj in played:
        assert not traj.failed and traj.num_turns >= 1
        assert traj.reward == traj.reward_components["sum_in_answer"]
        calls = traj.metrics["verifiers/total_tool_calls"]
        answered = [m for m in traj.messages if m.role == "tool"]  # a last turn's calls may go unanswered
        assert calls >= len(answered) and all(m.tool_call_id for m in answered)
