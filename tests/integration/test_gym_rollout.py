"""`agentrl rollout recipe=gym` with the real model: valid multi-turn trajectories (masks, stop reasons, rewards)."""

import json

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.loops.drift import check_drift
from agentrl.trainer.batch import trajectory_to_tensors
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration

GYM_STOPS = {StopReason.DONE, StopReason.MAX_TURNS, StopReason.TOOL_ERROR_LIMIT, StopReason.CONTEXT_OVERFLOW}


def test_gym_recipe_rollout(hf_server_url, default_tokenizer, tmp_path):
    code = main(
        [
            "rollout",
            "recipe=gym",
            f"rollout.urls=[{hf_server_url}]",
            "rollout.n=2",
            "env.num_eval_seeds=2",
            "env.max_steps=4",
            "env.max_invalid_actions=2",  # exercise the feedback turn too
            f"output_dir={tmp_path}",
        ]
    )
    assert code == 0
    penalty = load_config("gym").env.invalid_action_penalty
    trajs = [Trajectory.from_json(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == 4
    assert sorted(t.metadata["env"]["seed"] for t in trajs) == [1_000_000, 1_000_000, 1_000_001, 1_000_001]
    for traj in trajs:
        assert traj.error is None and traj.agent_name == "gym"
        assert traj.stop_reason in GYM_STOPS
        assert traj.reward is not None and traj.reward == pytest.approx(
            traj.metrics["env/discounted_return"] - penalty * traj.metrics["env/invalid_actions"]
        )
        assert traj.metrics["env/success"] == float(traj.metadata["env"]["success"])
        if traj.stop_reason is not StopReason.CONTEXT_OVERFLOW:  # else the last reply was cut, never acted on
            assert traj.metrics["env/steps"] + traj.metrics["env/invalid_actions"] == traj.num_turns
        if traj.stop_reason is StopReason.DONE:
            assert traj.metadata["env"]["terminated"]
        # Each turn is a step sample of its own (env.history_turns=0): the task as the system message and the
        # current state; the mask covers exactly the model's reply, and tokens re-render exactly.
        samples = traj.step_samples()
        assert len(samples) == traj.num_turns == traj.num_turns_in_all_steps()
        for sample in samples:
            assert [s.trainable for s in sample.segments] == [False, True]
            assert sample.segments[0].role == "user" and sample.segments[1].logprobs is not None
            assert sample.segments[1].policy_version is not None
            assert int(trajectory_to_tensors(sample).response_mask.sum()) == sample.num_generated_tokens
            report = check_drift(default_tokenizer, sample)
            assert report.ok or report.kind == "tokenization", str(report)
            system, state = sample.messages[:2]
            assert system.role == "system" and system.content.startswith("You walk on a frozen lake to the goal G")
            assert "LEFT: " in state.content and state.content.endswith("Choose one: LEFT, DOWN, RIGHT, UP.")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["trajectories"] == 4
