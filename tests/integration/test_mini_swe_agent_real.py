"""The unmodified mini-swe-agent through the gateway on a bundled SWE task, real Docker: a scripted policy writes
mini-swe-agent's own text format, its commands run inside the task's container (not on the host), the gold fix it
applies is graded resolved, the trajectory is one token-exact conversation, and no container is left."""

from __future__ import annotations

import json
import os

import pytest

from agentrl.config import load_config
from agentrl.loops.drift import check_drift
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import StopReason

pytestmark = pytest.mark.integration


def action(command: str, thought: str = "THOUGHT: next step.") -> str:
    return f"{thought}\n\n```mswea_bash_command\n{command}\n```"


def mini_config(tmp_path, **overrides):
    extra = [f"{key}={json.dumps(value) if isinstance(value, dict) else value}" for key, value in overrides.items()]
    return load_config(overrides=["recipe=mini_swe_agent", f"output_dir={tmp_path}", "rollout.n=1", *extra])


async def test_mini_swe_agent_fixes_a_task_inside_its_container(task, default_tokenizer, tmp_path, no_leftovers):
    cfg = mini_config(tmp_path)
    marker = f"/tmp/agentrl-host-marker-{tmp_path.name}"
    replies = [
        action(f"git status --short && touch {marker} && cat /etc/hostname"),
        action(f"cat > /tmp/fix.diff <<'EOF'\n{task.patch}\nEOF\ngit apply /tmp/fix.diff && git diff --stat"),
        action("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "THOUGHT: done."),
    ]
    policy = ScriptedPolicy(default_tokenizer, replies)
    async with rollout_session(cfg, policy, default_tokenizer) as manager:
        (traj,) = await manager.run([task.to_sample(agent_name="openai_agent")])
    assert traj.stop_reason is StopReason.DONE, (traj.error, traj.messages[-1:])
    assert traj.metadata["agent_result"]["exit_status"] == "Submitted"
    assert not os.path.exists(marker)  # the command ran in the container, not on the host
    assert traj.num_turns == 3 and len(policy.calls) == 3 and not traj.earlier_steps
    assert traj.metrics["gateway/prefix_reuse_rate"] == 1.0
    assert "Please solve this issue" in traj.messages[1].content  # mini-swe-agent's own prompt
    assert "<returncode>0</returncode>" in traj.messages[3].content  # its own observation format
    report = check_drift(default_tokenizer, traj)
    assert report.kind != "template", str(report)
    reward = await RewardPipeline(cfg.reward).ascore(traj, task.to_sample())
    assert traj.reward_details["resolved"]["resolved"] is True, traj.reward_details
    assert reward == pytest.approx(1.2)


async def test_the_turn_budget_stops_mini_swe_agent(task, default_tokenizer, tmp_path, no_leftovers):
    cfg = mini_config(tmp_path, **{"agent.max_turns": 2})
    policy = ScriptedPolicy(default_tokenizer, [action("ls")])
    async with rollout_session(cfg, policy, default_tokenizer) as manager:
        (traj,) = await manager.run([task.to_sample(agent_name="openai_agent")])
    assert traj.stop_reason is StopReason.MAX_TURNS and len(policy.calls) == 2
    assert traj.metadata["model_patch"] == ""


def test_train_mini_swe_agent_for_a_step_with_the_real_model(hf_server_url, task, tmp_path, no_leftovers):
    """`agentrl train recipe=mini_swe_agent` end to end: the real model drives the unmodified agent in real task
    containers; the trajectories hold its turns, open in the viewer, and no container is left."""
    from agentrl.cli import main
    from agentrl.viewer import build_viewer
    from tests.integration.test_train_real import step_trajectories

    rows = tmp_path / "task.jsonl"  # the run's start builds the images of its rows: one task, not the recipe's
    rows.write_text(json.dumps(task.to_row(agent_name="openai_agent")) + "\n")
    args = [
        "train",
        "recipe=mini_swe_agent",
        f"data.train_files=[{rows}]",
        f"rollout.urls=[{hf_server_url}]",
        "trainer.steps=1",  # one step runs the loop end to end; a second added ~80 s and nothing else
        "data.batch_size=1",
        "rollout.n=2",
        "rollout.max_tokens=48",
        "agent.max_turns=2",
        "data.eval_files=[]",
        "trainer.skip_zero_advantage=false",
        f"output_dir={tmp_path}",
    ]
    assert main(args) == 0
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "train/rows_trained" in m]
    assert [m["step"] for m in steps] == [1] and steps[0]["train/rows_trained"] >= 2
    trajectories = step_trajectories(tmp_path, 1)
    assert len(trajectories) == 2
    for traj in trajectories:
        assert not traj.failed, (traj.stop_reason, traj.error)
        assert traj.num_turns >= 1 and traj.num_generated_tokens > 0
        assert "Please solve this issue" in str(traj.messages[1].content)  # mini-swe-agent's own prompt
        assert "instance_id" in traj.metadata and "resolved" in traj.reward_details
    page = build_viewer(tmp_path, tokenizer=None).read_text()
    assert "Please solve this issue" in page and trajectories[0].id in page
