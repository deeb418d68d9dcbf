"""The swe_explore recipe on real Docker: the gold exploration (run the failing test, read the lines its traceback
points at, edit) resolves a bundled bug through the real loop and tools, and one training step with the real model
grades every episode and leaves no container."""

from __future__ import annotations

import gzip
import json

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration


@pytest.fixture
def explore_task(easy_task):
    """The smallest built easy task: swe_explore asks the easy tier's bugs differently."""
    return easy_task


def call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


async def test_the_gold_exploration_resolves_the_bug(explore_task, default_tokenizer, tmp_path, no_leftovers) -> None:
    cfg = load_config(overrides=["recipe=swe_explore", f"output_dir={tmp_path}", "rollout.n=1"])
    bug = explore_task.image_build["bug"]
    _, name, _, typo = bug["kind"].split()
    replies = [
        call("run_tests", test=explore_task.FAIL_TO_PASS[0]),
        call("view_lines", path=bug["file"], start=bug["line"] - 2, end=bug["line"] + 2),
        call("edit_line", path=bug["file"], line=bug["line"], old=typo, new=name),
    ]
    async with rollout_session(cfg, ScriptedPolicy(default_tokenizer, replies), default_tokenizer) as manager:
        (traj,) = await manager.run([explore_task.to_sample()])
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 3, (traj.error, traj.messages[-1])
    task_at = max(i for i, m in enumerate(traj.messages) if m.role == "user")  # after the worked examples
    assert traj.messages[task_at].content.startswith(f"The test `{explore_task.FAIL_TO_PASS[0]}` fails")
    ran, shown, *_ = [m.content for m in traj.messages[task_at:] if m.role == "tool"]
    assert ran.startswith("A test fails here:") and explore_task.FAIL_TO_PASS[0] not in ran  # the frame, no test id
    assert f"{bug['file']}:{bug['line']}: NameError" in ran  # the frame that raised points at the bug
    assert typo in shown and f"lines {bug['line'] - 2}-{bug['line'] + 2}" in shown
    assert "test_" not in traj.metadata["model_patch"]  # the visible tests are not part of the patch
    reward = await RewardPipeline(cfg.reward).ascore(traj, explore_task.to_sample())
    assert traj.reward_components == {"resolved": 1.0} and reward == 1.0


def test_one_training_step_grades_every_episode(explore_task, hf_server_url, tmp_path, no_leftovers) -> None:
    rows = tmp_path / "train.jsonl"
    rows.write_text(json.dumps(explore_task.to_row()) + "\n")
    args = [
        "train", "recipe=swe_explore", f"rollout.urls=[{hf_server_url}]", f"data.train_files=[{rows}]",
        "data.eval_files=[]", "trainer.steps=1", "trainer.eval_every=0", "data.batch_size=1", "rollout.n=2",
        "rollout.seed=1", f"output_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    assert main(args) == 0
    with gzip.open(tmp_path / "run" / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        played = [Trajectory.from_json(line) for line in f]
    assert len(played) == 2
    for traj in played:
        assert not traj.failed and "resolved" in traj.reward_components, traj.error
        assert traj.messages[-1].role in ("assistant", "tool") and traj.num_turns >= 1
