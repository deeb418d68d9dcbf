"""`agentrl rollout` end to end with the real model: the custom-loop example and the quickstart recipe."""

import json

import pytest

from agentrl.cli import main
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration


def read(out_dir):
    return [Trajectory.from_json(line) for line in (out_dir / "trajectories.jsonl").read_text().splitlines()]


def test_custom_loop_example_runs(hf_server_url, tmp_path, monkeypatch):
    monkeypatch.chdir(__import__("pathlib").Path(__file__).resolve().parents[2])
    code = main(
        [
            "rollout",
            "data.eval_files=[examples/guess_number.jsonl]",
            "agent.name=examples.custom_loop:GuessNumberLoop",
            f"rollout.urls=[{hf_server_url}]",
            "rollout.n=1",
            "rollout.max_tokens=12",
            "agent.max_turns=2",
            "agent.kwargs.hints=false",
            f"output_dir={tmp_path}",
        ]
    )
    assert code == 0
    trajs = read(tmp_path)
    assert len(trajs) == 4
    for t in trajs:
        assert t.error is None and t.agent_name.endswith("GuessNumberLoop")
        feedback = [m.content for m in t.messages[1:] if m.role == "user"]
        assert set(feedback) <= {"Wrong.", "Answer with a single number."}  # the option reached the loop
        assert t.stop_reason in (StopReason.DONE, StopReason.MAX_TURNS, StopReason.MAX_TOKENS)
        assert t.num_generated_tokens > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["trajectories"] == 4


def test_quickstart_recipe_rollout_scores(hf_server_url, tmp_path):
    code = main(
        ["rollout", "recipe=quickstart", f"rollout.urls=[{hf_server_url}]", "rollout.n=1", f"output_dir={tmp_path}"]
    )
    assert code == 0
    trajs = read(tmp_path)
    assert len(trajs) == 16
    assert all(t.reward is not None and {"exact", "contains"} <= set(t.reward_components) for t in trajs)
