"""The SWE agent on real Docker with a bundled task: grading semantics, a scripted policy solving the task through
the real loop, tools and containers, budgets ending with their stop reason, and no container left behind."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from agentrl.config import load_config
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.swe.grading import grade_patch
from agentrl.swe.report import patch_files
from agentrl.swe.task import SWETask
from agentrl.types import StopReason

pytestmark = pytest.mark.integration


def edit_call(patch: str) -> str:
    """The editor call that makes the gold patch's change (its first hunk, context included)."""
    path = patch_files(patch)[0]
    hunk = patch.split("\n@@", 1)[1].split("\n", 1)[1]
    hunk = re.split(r"\n(?=@@|diff --git)", hunk)[0]
    old = [ln[1:] for ln in hunk.splitlines() if ln[:1] in (" ", "-")]
    new = [ln[1:] for ln in hunk.splitlines() if ln[:1] in (" ", "+")]
    args = {"command": "str_replace", "path": path, "old_str": "\n".join(old), "new_str": "\n".join(new)}
    return f"<tool_call>\n{json.dumps({'name': 'editor', 'arguments': args})}\n</tool_call>"


def bash(command: str) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'bash', 'arguments': {'command': command}})}\n</tool_call>"


SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {"answer": "fixed"}}\n</tool_call>'


async def test_grading_gold_resolves_empty_and_wrong_do_not(task, no_leftovers):
    gold, empty, comment, broken = await asyncio.gather(
        grade_patch(task, task.patch),
        grade_patch(task, ""),  # really run, not short-cut
        grade_patch(task, _comment_patch(task)),
        grade_patch(task, _stale_patch(task)),
    )
    assert gold.resolved and gold.f2p_fraction == 1.0 and gold.p2p_fraction == 1.0, gold.details()
    assert not empty.resolved and empty.f2p_fraction == 0.0 and empty.p2p_fraction == 1.0, empty.details()
    assert not comment.resolved and comment.patch_applied and comment.f2p_fraction == 0.0
    assert not broken.resolved and not broken.patch_applied and "does not apply" in broken.error


def _comment_patch(task: SWETask) -> str:
    """A patch that applies but fixes nothing: a comment added on top of the buggy file."""
    path = patch_files(task.patch)[0]
    return f"--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+# looked at this file\n"


def _stale_patch(task: SWETask) -> str:
    """A patch written against lines the file does not have."""
    path = patch_files(task.patch)[0]
    return f"--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,2 @@\n-no such line here\n+a fix\n nor this one\n"


def swe_config(tmp_path: Path, **agent_kwargs):
    return load_config(
        overrides=[
            "recipe=swe_agent",
            f"output_dir={tmp_path}",
            "rollout.n=1",
            "rollout.max_tokens=1024",
            f"agent.kwargs={json.dumps(agent_kwargs)}",
        ]
    )


async def run_scripted(cfg, tokenizer, task: SWETask, replies):
    async with rollout_session(cfg, ScriptedPolicy(tokenizer, replies), tokenizer) as manager:
        (traj,) = await manager.run([task.to_sample()])
    return traj


async def test_scripted_policy_solves_a_bundled_task_end_to_end(task, default_tokenizer, tmp_path, no_leftovers):
    cfg = swe_config(tmp_path)
    replies = [bash("git status --short && ls"), edit_call(task.patch), bash("git diff --stat"), SUBMIT]
    traj = await run_scripted(cfg, default_tokenizer, task, replies)
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 4, (traj.error, traj.messages[-1])
    assert traj.messages[5].role == "tool" and "Edited" in traj.messages[5].content
    patch = traj.metadata["model_patch"]
    assert patch_files(patch) == patch_files(task.patch)
    rewards = RewardPipeline(cfg.reward)
    reward = await rewards.ascore(traj, task.to_sample())
    assert traj.reward_details["resolved"]["resolved"] is True, traj.reward_details
    assert traj.reward_components == {"resolved": 1.0, "f2p": 1.0, "uses_tools": 1.0}
    assert reward == pytest.approx(1.3)


async def test_budgets_end_with_their_stop_reason(task, default_tokenizer, tmp_path, no_leftovers):
    cfg = swe_config(tmp_path, time_budget_s=3)
    slow = [bash("echo note > NOTES.txt; sleep 30")]
    traj = await run_scripted(cfg, default_tokenizer, task, slow)
    assert traj.stop_reason is StopReason.TIME_BUDGET
    assert patch_files(traj.metadata["model_patch"]) == ["NOTES.txt"]  # the patch is taken out all the same

    cfg = swe_config(tmp_path)
    cfg.agent.max_turns = 2
    traj = await run_scripted(cfg, default_tokenizer, task, [bash("true")] * 5)
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.metadata["model_patch"] == ""
    await RewardPipeline(cfg.reward).ascore(traj, task.to_sample())
    assert traj.reward_components["resolved"] == traj.reward_components["f2p"] == 0.0
    assert "empty patch" in traj.reward_details["resolved"]["error"]
