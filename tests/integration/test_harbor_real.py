"""Harbor tasks on real Docker with the bundled tasks: the reference solutions score 1 and doing nothing 0, a
Dockerfile on a missing image fails naming it, `agentrl rollout recipe=harbor` with the real model produces graded
trajectories and `agentrl eval` reports per task; no container is left behind."""

from __future__ import annotations

import json
import textwrap

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.config.schema import SandboxConfig
from agentrl.data import run_samples
from agentrl.harbor.container import open_task_container
from agentrl.harbor.dataset import load_tasks
from agentrl.harbor.limits import task_limits
from agentrl.harbor.task import load_task
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.integration

TASKS = ["agentrl/fix-script", "agentrl/hello-file", "agentrl/word-count"]


async def play(tokenizer, overrides, replies, samples=None):
    """Every bundled task once (or `samples`), scored with the recipe's rewards; trajectories by task name."""
    cfg = load_config(overrides=["recipe=harbor", "rollout.n=1", *overrides])
    samples = samples or run_samples(cfg, "train")
    async with rollout_session(cfg, ScriptedPolicy(tokenizer, replies), tokenizer) as manager:
        trajs = await manager.run(samples)
    rewards = RewardPipeline(cfg.reward)
    for traj in trajs:
        await rewards.ascore(traj, samples[traj.metadata["sample_position"]])
    return {t.metadata["sample_id"]: t for t in trajs}


async def test_reference_solutions_score_1_and_doing_nothing_0(sandbox_base_image, default_tokenizer, no_leftovers):
    solved = await play(default_tokenizer, ["data.agent_name=harbor_oracle"], ["unused"])
    nothing = await play(default_tokenizer, [], ["I am done."])  # harbor_agent: no tool call, so it stops
    assert sorted(solved) == sorted(nothing) == TASKS
    for name in TASKS:
        good, idle = solved[name], nothing[name]
        assert good.stop_reason is StopReason.DONE and good.metadata["harbor"]["solution"]["exit_code"] == 0, name
        assert good.reward_components["tests"] == 1.0 and good.success is True, (name, good.reward_details)
        assert idle.stop_reason is StopReason.DONE and idle.num_turns == 1, (name, idle.error)
        assert idle.reward_components["tests"] == 0.0 and idle.success is False, (name, idle.reward_details)
        assert idle.reward_details["tests"]["test_output"], name  # the verifier's output, for the viewer
    counted = nothing["agentrl/word-count"].reward_details["tests"]["rewards"]  # reward.json's components
    assert counted == {"reward": 0.0, "file_exists": 0.0, "is_number": 0.0}
    assert solved["agentrl/word-count"].reward_details["tests"]["rewards"]["is_number"] == 1.0
    assert "FAIL: mean of [1, 2, 3, 4, 5]" in nothing["agentrl/fix-script"].reward_details["tests"]["test_output"]


async def test_the_task_container_is_the_image_as_built_within_our_limits(sandbox_base_image, docker_client,
                                                                          no_leftovers):  # fmt: skip
    cfg = load_config(overrides=["recipe=harbor"])
    task = next(t for t in load_tasks(cfg.data.train_files[0]) if t.name == "agentrl/fix-script")
    limits = task_limits(task, SandboxConfig(memory="2g", cpus=1.0, network=True))  # the task says no-network
    container = await open_task_container(task, limits, cfg.sandbox, run_id="harbor-test")
    try:
        seen = await container.exec("id -u; pwd; ls; touch /logs/verifier/x average.py && echo writable")
        assert seen.stdout.split() == ["0", "/app", "average.py", "numbers.txt", "writable"], seen
        interfaces = await container.exec("tail -n +3 /proc/net/dev | cut -d: -f1")
        assert interfaces.stdout.split() == ["lo"]
        await container.exec("kill -9 -1", timeout=5)  # PID 1 (the shell reaper) survives
        assert (await container.exec("echo alive")).stdout == "alive\n"
        host = docker_client.api.inspect_container(container.id)["HostConfig"]
        assert (host["Memory"], host["NanoCpus"], host["NetworkMode"]) == (512 << 20, 10**9, "none")
    finally:
        await container.close()


async def test_a_dockerfile_on_a_missing_image_fails_naming_it(tmp_path, sandbox_base_image, default_tokenizer,
                                                               no_leftovers):  # fmt: skip
    folder = tmp_path / "offline-only"
    for rel, text in {
        "instruction.md": "Nothing to do.\n",
        "task.toml": "[agent]\ntimeout_sec = 30\n",
        "environment/Dockerfile": "FROM agentrl-test/no-such-image:1\nWORKDIR /app\n",
        "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    trajs = await play(default_tokenizer, [], ["done"], samples=[load_task(folder).to_sample()])
    traj = trajs["offline-only"]
    assert traj.stop_reason is StopReason.ERROR and "agentrl-test/no-such-image:1" in traj.error
    assert "nothing is pulled" in traj.error


def test_rollout_with_the_real_model_and_eval_per_task(hf_server_url, tmp_path, no_leftovers):
    small = [
        f"rollout.urls=[{hf_server_url}]",
        "rollout.n=1",
        "rollout.max_tokens=96",
        "rollout.max_model_len=2048",
        "rollout.seed=0",
        "agent.max_turns=2",
        "agent.max_total_tokens=2048",
    ]
    out = tmp_path / "rollout"
    assert main(["rollout", "recipe=harbor", f"output_dir={out}", *small]) == 0
    trajs = [Trajectory.from_json(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(t.metadata["sample_id"] for t in trajs) == TASKS
    for t in trajs:
        assert not t.failed and t.num_generated_tokens > 0, (t.stop_reason, t.error)
        tests = t.reward_details["tests"]  # graded by the task's own verifier, in its container
        assert t.reward_components["tests"] in (0.0, 1.0) and "test_output" in tests, tests
        assert t.metadata["harbor"]["verifier"]["source"].startswith("/logs/verifier/reward.")

    out = tmp_path / "eval"
    assert main(["eval", "recipe=harbor", "data.agent_name=harbor_oracle", f"output_dir={out}", *small]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["per_task"]) == [f"harbor/{name}" for name in TASKS]
    for task in summary["per_task"].values():
        assert task == {"trajectories": 1, "mean_reward": 1.0, "resolved_rate": 1.0}, textwrap.shorten(str(task), 200)
    assert summary["resolved_rate"] == 1.0


async def test_a_harbor_episode_forks_with_its_container(sandbox_base_image, default_tokenizer, docker_client,
                                                         no_leftovers):  # fmt: skip
    from agentrl.sandbox.containers import FORK_LABEL
    from tests.integration.test_swe_real import SUBMIT, bash

    replies = [  # the root's turn, then the two children's turns in turn
        bash("printf 'Hello, Harbor!\\n' > /app/draft.txt"),
        bash("cp /app/draft.txt /app/greeting.txt"),  # sees the parent's draft: solves the task
        bash("echo 'Hello, forks!' > /app/greeting.txt"),
        SUBMIT,
        SUBMIT,
    ]
    cfg = load_config(overrides=["recipe=harbor", "rollout.n=1", "rollout.tree.branch_turns=[1]"])
    (sample,) = [s for s in run_samples(cfg, "train") if s.id == "agentrl/hello-file"]
    async with rollout_session(cfg, ScriptedPolicy(default_tokenizer, replies), default_tokenizer) as manager:
        leaves = await manager.run([sample])
    rewards = RewardPipeline(cfg.reward)
    for leaf in leaves:
        await rewards.ascore(leaf, sample)
    assert len(leaves) == 2 and all(leaf.metadata["fork"] for leaf in leaves), [leaf.error for leaf in leaves]
    by_outcome = sorted(leaves, key=lambda leaf: leaf.reward_components["tests"])
    assert [leaf.reward_components["tests"] for leaf in by_outcome] == [0.0, 1.0]
    assert "Hello, forks!" in by_outcome[0].reward_details["tests"]["test_output"]  # its own edit, graded apart
    assert not docker_client.images.list(filters={"label": f"{FORK_LABEL}=1"}), "fork images left behind"
