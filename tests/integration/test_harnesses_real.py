"""Claude Code and Codex CLI, the real binaries from the npm registry, unchanged, inside a bundled SWE task's own
container: their tools run there, every call reaches the gateway through its socket and is recorded token-exactly,
the diff is graded, one training step runs with the real model, and a probe from inside such a container reaches
the gateway and nothing else."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pytest

from agentrl.cli import main
from agentrl.config import load_config
from agentrl.gateway import Gateway
from agentrl.harnesses.builtin import get_harness
from agentrl.harnesses.install import prepare_harness
from agentrl.harnesses.run import harness_mounts, harness_socket_dir, run_harness, session_url
from agentrl.harnesses.spec import Harness, Launch
from agentrl.loops.drift import check_drift
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.swe.repo import open_task_sandbox
from agentrl.types import StopReason
from tests.integration.test_train_real import step_trajectories

pytestmark = pytest.mark.integration

HARNESSES = ["claude_code", "codex"]
SHELL_TOOL = {"claude_code": ("Bash", "command"), "codex": ("exec_command", "cmd")}


def shell_call(harness: str, command: str) -> str:
    """What a policy that learned the harness's shell tool replies (the hermes format the recipes parse)."""
    name, argument = SHELL_TOOL[harness]
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': {argument: command}})}\n</tool_call>"


@pytest.mark.parametrize("harness", HARNESSES)
async def test_the_harness_fixes_a_task_with_its_own_tool_inside_the_container(
    harness, task, default_tokenizer, tmp_path, no_leftovers
):
    cfg = load_config(overrides=[f"recipe={harness}", f"output_dir={tmp_path}", "rollout.n=1"])
    marker = f"/tmp/agentrl-host-marker-{tmp_path.name}"
    fix = (
        f"cat > /tmp/fix.diff <<'EOF'\n{task.patch}\nEOF\ngit apply /tmp/fix.diff && touch {marker} && git diff --stat"
    )
    policy = ScriptedPolicy(default_tokenizer, [shell_call(harness, fix), "Fixed."])
    async with rollout_session(cfg, policy, default_tokenizer) as manager:
        (traj,) = await manager.run([task.to_sample(agent_name="openai_agent")])
    assert traj.stop_reason is StopReason.DONE, (traj.error, traj.messages[-2:])
    results = [str(m.content) for m in traj.messages if m.role == "tool"]
    assert any("1 file changed" in r for r in results), results  # its tool ran the command, in the container:
    assert not os.path.exists(marker)  # not on the host
    assert len(policy.calls) == 2 and traj.metrics["gateway/prefix_reuse_rate"] == 1.0 and not traj.earlier_steps
    assert check_drift(default_tokenizer, traj).kind != "template"
    await RewardPipeline(cfg.reward).ascore(traj, task.to_sample())
    assert traj.reward_details["resolved"]["resolved"] is True, traj.reward_details


@pytest.mark.parametrize("harness", HARNESSES)
def test_train_the_harness_for_a_step_with_the_real_model(
    harness, hf_server_url, task, default_tokenizer, tmp_path, no_leftovers
):
    rows = tmp_path / "task.jsonl"
    rows.write_text(json.dumps(task.to_row(agent_name="openai_agent")) + "\n")
    args = [
        "train", f"recipe={harness}", f"rollout.urls=[{hf_server_url}]", "trainer.steps=1", "data.batch_size=1",
        "rollout.n=2", "rollout.max_tokens=48", "agent.max_turns=2", f"data.train_files=[{rows}]",
        # the shared test server holds 2048 positions: a short ask, and the session's budget ends an episode first
        "agent.kwargs.harness_prompt=Fix the bug that makes the tests fail.", "agent.max_total_tokens=2048",
        "rollout.max_model_len=2048",
        "data.eval_files=[]", "trainer.skip_zero_advantage=false", f"output_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    assert main(args) == 0
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    (step,) = [m for m in metrics if "train/rows_trained" in m]
    assert step["train/rows_trained"] >= 1
    for traj in step_trajectories(tmp_path / "run", 1):
        assert not traj.failed, (traj.stop_reason, traj.error)
        assert traj.num_generated_tokens > 0 and traj.metrics["gateway/calls"] >= 1
        for sample in [*traj.earlier_steps, traj]:  # every call the harness made, token-exact
            assert check_drift(default_tokenizer, sample).kind != "template"
        assert "resolved" in traj.reward_details and "instance_id" in traj.metadata


PROBE = """
import json, os, socket, sys, urllib.request
host_ports = json.loads(sys.argv[1])
out = {"gateway": urllib.request.urlopen(sys.argv[2] + "/models", timeout=10).status}
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return True
    except OSError:
        return False
out["host_ports"] = {f"{h}:{p}": reach(h, p) for h, p in host_ports}
out["docker_socket"] = os.path.exists("/var/run/docker.sock")
out["mirror"] = reach("deb.debian.org", 80)
print(json.dumps(out))
"""


async def test_a_probe_in_a_harness_container_reaches_the_gateway_and_nothing_else(
    hf_server_url, task, default_tokenizer, tmp_path, no_leftovers
):
    """The probe runs the way a harness runs (its volume and the gateway's socket mounted, through the bridge), in
    the task's container: the gateway answers; the rollout server, a port every host interface listens on (as a
    Ray port does), the Docker socket and the package mirror do not."""
    listener = socket.create_server(("0.0.0.0", 0))  # as Ray's ports are bound
    host_port = listener.getsockname()[1]
    server_port = int(hf_server_url.rsplit(":", 1)[1].split("/")[0])
    targets = [[h, p] for h in ("127.0.0.1", "172.17.0.1", socket.gethostname()) for p in (server_port, host_port)]
    base = get_harness("claude_code")
    probe = Harness(name=base.name, package=base.package, executable=base.executable, api="probe",
                    command=lambda h, launch: ["python3", "-c", PROBE, json.dumps(targets), launch.base_url],
                    env=lambda h, launch: {})  # fmt: skip
    folder = harness_socket_dir()
    policy = ScriptedPolicy(default_tokenizer, ["unused"])
    try:
        async with Gateway(policy, default_tokenizer, unix_socket=f"{folder}/gateway.sock") as gateway:
            session = gateway.open_session("probe")
            await asyncio.to_thread(prepare_harness, base)
            sandbox, _ = await open_task_sandbox(task, mounts=harness_mounts(base, folder))
            try:
                launch = Launch("", "policy", session_url(session.id))
                out = json.loads(await run_harness(probe, sandbox, launch, timeout_s=60, workdir=sandbox.workdir))
            finally:
                await sandbox.close()
    finally:
        listener.close()
    assert out["gateway"] == 200
    assert not any(out["host_ports"].values()), out["host_ports"]
    assert out["docker_socket"] is False and out["mirror"] is False
