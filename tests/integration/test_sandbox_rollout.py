"""Rollouts with Docker sandboxes: SandboxHooks leases one container per trajectory from a real pool.

The policy is scripted (this tests the sandbox wiring, not the model); the containers, the pool and the `bash`
tool are real. Afterwards no container or volume labelled `agentrl.sandbox` of these runs is left.
"""

from __future__ import annotations

import json

import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.config.schema import SandboxConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.sandbox_setup import SandboxHooks, chain_hooks
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_setup import ToolHooks
from agentrl.sandbox.docker import LABEL, remove_all
from agentrl.tools import build_tools
from agentrl.types import Message, Sample, StopReason
from tests.unit.chatml import chatml_tokenizer

pytestmark = pytest.mark.integration

AGENT = AgentConfig(name="tool_agent", max_turns=4)
COMMAND = "echo from-$(id -u) > note.txt; cat note.txt; pwd; cat /etc/hostname; ls | wc -l"


def _ours(client, run_id: str) -> tuple[list, list]:
    label = [LABEL, f"agentrl.run={run_id}"]
    return client.containers.list(all=True, filters={"label": label}), client.volumes.list(filters={"label": label})


def _replies():
    call = f"<tool_call>\n{json.dumps({'name': 'bash', 'arguments': {'command': COMMAND}})}\n</tool_call>"
    # one policy serves all concurrent trajectories: call the tool on each one's first turn, then answer
    return [lambda text: call if text.count("<|im_start|>assistant") == 1 else "done"]


def _manager(tokenizer, hooks: SandboxHooks, n: int) -> RolloutManager:
    setup, teardown = chain_hooks(hooks, ToolHooks(build_tools([{"class": "bash"}]), AGENT, tokenizer))
    return RolloutManager(
        ScriptedPolicy(tokenizer, _replies()),
        tokenizer,
        AGENT,
        RolloutConfig(n=n, max_concurrency=n),
        setup_context=setup,
        teardown_context=teardown,
    )


@pytest.fixture
def run_id(docker_client, sandbox_base_image, request):
    run_id = f"test-rollout-{request.node.name[:20]}"
    yield run_id
    containers, volumes = _ours(docker_client, run_id)
    remove_all(docker_client, run_id)
    assert not containers and not volumes, f"left behind: {[c.name for c in containers]} {volumes}"


async def test_concurrent_trajectories_each_run_bash_in_their_own_container(docker_client, run_id) -> None:
    tokenizer = chatml_tokenizer()
    config = SandboxConfig(backend="docker", pool_size=2, max_containers=4, memory="128m", cpus=0.5)
    async with SandboxHooks(config, run_id=run_id) as hooks:
        trajs = await _manager(tokenizer, hooks, n=4).run([Sample(prompt=[Message(role="user", content="go")])])
        assert hooks.stats()["held"] == 0 and hooks.stats()["leased"] == 0
    hostnames = set()
    for traj in trajs:
        assert traj.stop_reason is StopReason.DONE, traj.error
        [tool] = [m.content for m in traj.messages if m.role == "tool"]
        note, cwd, hostname, files = tool.splitlines()
        assert (note, cwd, files) == ("from-1000", "/work", "1")  # non-root, in /work, a fresh container
        hostnames.add(hostname)
        assert check_drift(tokenizer, traj).ok
        assert traj.timings["sandbox_setup_s"] > 0
    assert len(hostnames) == 4
    assert _ours(docker_client, run_id) == ([], [])


async def test_missing_image_gives_sandbox_error(docker_client, run_id) -> None:
    tokenizer = chatml_tokenizer()
    config = SandboxConfig(backend="docker", image="agentrl/sandbox:no-such-image", pool_size=0, memory="128m")
    async with SandboxHooks(config, run_id=run_id) as hooks:
        trajs = await _manager(tokenizer, hooks, n=2).run([Sample(prompt=[Message(role="user", content="go")])])
    for traj in trajs:
        assert traj.stop_reason is StopReason.SANDBOX_ERROR
        assert "no-such-image" in traj.error and traj.num_turns == 0
