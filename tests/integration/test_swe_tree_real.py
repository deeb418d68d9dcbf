"""Tree rollouts of the SWE agent on real Docker: an episode forked after it edited a file gives leaves that each
see the edit and not each other's, each leaf graded on its own patch; one forked before its uncertain edit
(`resample_uncertain`) whose sibling starts from the container as it was before that edit; Ctrl-C of a SWE tree
rollout (the real CLI, model and server) leaves no container behind."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.sandbox.base import FORK_NOTE
from agentrl.swe.report import patch_files
from agentrl.types import StopReason
from tests.integration.test_distributed_swe_rollout import rows_with_images, sandbox_ids
from tests.integration.test_swe_real import SUBMIT, bash, edit_call, swe_config

pytestmark = pytest.mark.integration


async def test_a_swe_episode_forked_after_an_edit_gives_leaves_graded_on_their_own(
    task, default_tokenizer, tmp_path, no_leftovers
):
    cfg = swe_config(tmp_path)
    cfg.rollout.tree.branch_turns, cfg.rollout.tree.width = [1], 2
    path = patch_files(task.patch)[0]
    replies = [  # one per generate call: the root's first turn, then the two children's turns in turn
        bash(f"echo '# the parent was here' >> {path}"),
        edit_call(task.patch),
        bash(f"echo '# a child was here' >> {path}"),
        SUBMIT,
        SUBMIT,
    ]
    async with rollout_session(cfg, ScriptedPolicy(default_tokenizer, replies), default_tokenizer) as manager:
        leaves = await manager.run([task.to_sample()])
    assert len(leaves) == 2 and all(leaf.stop_reason is StopReason.DONE for leaf in leaves), [
        leaf.error for leaf in leaves
    ]
    assert sorted(leaf.metadata["tree"]["path"] for leaf in leaves) == [[0], [1]]
    assert all(leaf.metadata["fork"] == FORK_NOTE for leaf in leaves)
    patches = [leaf.metadata["model_patch"] for leaf in leaves]
    assert all("# the parent was here" in p for p in patches)  # the edit made before the fork, in both
    fixed, other = sorted(patches, key=lambda p: "# a child was here" in p)
    assert "# a child was here" not in fixed and "# a child was here" in other  # each child's edits its own
    rewards = RewardPipeline(cfg.reward)
    for leaf in leaves:
        await rewards.ascore(leaf, task.to_sample())
    resolved = {leaf.metadata["model_patch"]: leaf.reward_details["resolved"]["resolved"] for leaf in leaves}
    assert resolved == {fixed: True, other: False}


class UnsureOfTheEdit(ScriptedPolicy):
    """The scripted replies, the editor call the one turn it is unsure of (3 nats a token), the others near certain."""

    async def generate(self, prompt_ids, sampling, session_id=None):
        out = await super().generate(prompt_ids, sampling, session_id)
        nats = 3.0 if '"editor"' in self.tokenizer.decode(out.token_ids) else 0.01
        return dataclasses.replace(out, logprobs=[-nats] * len(out.token_ids))


async def test_a_swe_episode_forked_before_its_uncertain_edit_resamples_it_from_the_container_before(
    task, default_tokenizer, tmp_path, no_leftovers
):
    """`resample_uncertain`: the container is copied before each turn; the first (certain) turn's copy is freed,
    the edit (uncertain) forks there: the episode as played keeps it, its sibling starts from the container as it
    was before it and submits without it."""
    cfg = swe_config(tmp_path)
    tree = cfg.rollout.tree
    tree.branch_turns, tree.entropy, tree.resample_uncertain, tree.max_branch_points = [], 1.0, True, 1
    path = patch_files(task.patch)[0]
    replies = [bash(f"echo '# the parent was here' >> {path}"), edit_call(task.patch), SUBMIT, SUBMIT]
    async with rollout_session(cfg, UnsureOfTheEdit(default_tokenizer, replies), default_tokenizer) as manager:
        leaves = await manager.run([task.to_sample()])
    assert sorted((leaf.metadata["tree"]["path"], leaf.metadata["tree"]["branch_turns"]) for leaf in leaves) == [
        ([0], [1]),
        ([1], [1]),
    ], [leaf.error for leaf in leaves]
    played, sibling = sorted(leaves, key=lambda leaf: leaf.metadata["tree"]["path"])
    assert all("# the parent was here" in leaf.metadata["model_patch"] for leaf in leaves)
    said = [[m.content for m in leaf.messages if m.role == "assistant"] for leaf in (played, sibling)]
    assert [len(turns) for turns in said] == [3, 2] and ['"editor"' in str(turns) for turns in said] == [True, False]
    rewards = RewardPipeline(cfg.reward)
    for leaf in leaves:
        await rewards.ascore(leaf, task.to_sample())
    assert [leaf.reward_details["resolved"]["resolved"] for leaf in (played, sibling)] == [True, False]


def test_ctrl_c_during_a_swe_tree_rollout_leaves_no_container(docker_client, hf_server_url, tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text("\n".join(rows_with_images(docker_client, 2)) + "\n")
    cmd = [
        sys.executable,
        "-m",
        "agentrl.cli",
        "rollout",
        "recipe=swe_agent",
        f"data.eval_files=[{data}]",
        f"rollout.urls=[{hf_server_url}]",
        "rollout.n=2",
        "rollout.tree.branch_turns=[1]",
        "agent.max_turns=6",
        "agent.on_cut_turn=continue",  # a cut reply goes on: the children run several turns after the fork
        f"output_dir={tmp_path / 'run'}",
    ]
    log_path = tmp_path / "cli.log"
    before = sandbox_ids(docker_client)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            # more containers than trees started: some episode has forked
            while len(sandbox_ids(docker_client) - before) <= 2 * 2 and proc.poll() is None:
                assert time.monotonic() < deadline, f"no fork within 300 s:\n{log_path.read_text()[-8000:]}"
                time.sleep(0.2)
            assert proc.poll() is None, f"the rollout ended before the interrupt:\n{log_path.read_text()[-8000:]}"
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert not sandbox_ids(docker_client) - before, "sandbox containers left behind"
