"""The swe_easy recipe on real Docker: the gold `edit_line` call resolves a bundled typo through the real loop after a
refused call, and one training step with the real model grades every sampled patch and leaves no container."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.swe.report import patch_files
from agentrl.swe.task import SWETask
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration

EASY_DATA = Path(__file__).resolve().parents[2] / "recipes" / "swe_easy" / "data"


def edit_line(path: str, line: int, old: str, new: str) -> str:
    args = {"path": path, "line": line, "old": old, "new": new}
    return f"<tool_call>\n{json.dumps({'name': 'edit_line', 'arguments': args})}\n</tool_call>"


def gold_call(task: SWETask) -> str:
    """The edit_line call that undoes the task's typo (`typo word -> wordd` on the bug's line)."""
    bug = task.image_build["bug"]
    _, name, _, typo = bug["kind"].split()
    return edit_line(bug["file"], bug["line"], typo, name)


async def test_the_gold_edit_resolves_a_typo_after_a_refused_call(easy_task, default_tokenizer, tmp_path, no_leftovers):
    cfg = load_config(overrides=["recipe=swe_easy", f"output_dir={tmp_path}", "rollout.n=1", "agent.max_turns=2"])
    bug = easy_task.image_build["bug"]
    wrong = edit_line(bug["file"], bug["line"], "no such text", "x")
    async with rollout_session(cfg, ScriptedPolicy(default_tokenizer, [wrong, gold_call(easy_task)]),
                               default_tokenizer) as manager:  # fmt: skip
        (traj,) = await manager.run([easy_task.to_sample()])
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 2, (traj.error, traj.messages[-1])
    refused = next(m for m in traj.messages if m.role == "tool")
    assert "is not on line" in refused.content  # the model sees the line's text and tries again
    assert "colorsys.py:111" in traj.messages[1].content  # the worked examples come first
    assert patch_files(traj.metadata["model_patch"]) == [bug["file"]]
    cfg.reward.components.append({"name": "applied", "type": "swe_tests", "metric": "applied", "weight": 0.1})
    reward = await RewardPipeline(cfg.reward).ascore(traj, easy_task.to_sample())
    assert traj.reward_components == {"resolved": 1.0, "applied": 1.0}
    assert reward == pytest.approx(1.1)


def test_one_training_step_grades_every_sampled_patch(hf_server_url, tmp_path, no_leftovers):
    eval_rows, train_rows = tmp_path / "eval.jsonl", tmp_path / "train.jsonl"
    eval_rows.write_text("".join((EASY_DATA / "eval.jsonl").read_text().splitlines(keepends=True)[:2]))
    # two training rows: the run's start builds the images of its rows (all of them with the recipe's data)
    train_rows.write_text("".join((EASY_DATA / "train.jsonl").read_text().splitlines(keepends=True)[:2]))
    args = [
        "train",
        "recipe=swe_easy",
        f"rollout.urls=[{hf_server_url}]",
        "trainer.steps=1",
        "trainer.eval_every=1",
        "data.batch_size=1",
        "rollout.n=4",
        "rollout.seed=1",
        f"data.eval_files=[{eval_rows}]",
        f"data.train_files=[{train_rows}]",
        f"output_dir={tmp_path / 'run'}",
    ]
    assert main(args) == 0
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len([m for m in metrics if "train/loss" in m or "train/skipped" in m]) == 1
    assert [m["step"] for m in metrics if "eval/reward/resolved" in m] == [0, 1]
    with gzip.open(tmp_path / "run" / "trajectories" / "step_0001.jsonl.gz", "rt") as f:
        trajs = [Trajectory.from_json(line) for line in f]
    assert len(trajs) == 4
    for traj in trajs:  # each patch went to the task's tests in a container (an empty one is failed unrun)
        details = traj.reward_details["resolved"]
        assert traj.reward_components["resolved"] == float(details["resolved"])
        assert bool(traj.metadata["model_patch"]) == ("empty patch" not in (details.get("error") or ""))
