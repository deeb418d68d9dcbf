"""SandboxHooks + chain_hooks: a sandbox per trajectory, attached before the tools, released at the end."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.config.schema import SandboxConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.sandbox_setup import SandboxHooks, chain_hooks
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_setup import ToolHooks
from agentrl.sandbox.base import SandboxError
from agentrl.sandbox.local import LocalSandbox
from agentrl.tools import build_tools
from agentrl.types import Message, Sample, StopReason

AGENT = AgentConfig(name="tool_agent", max_turns=4)


def call(name: str, **args) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def rollout(tokenizer, replies, sandbox_hooks: SandboxHooks, n: int = 1, max_concurrency: int = 4):
    tool_hooks = ToolHooks(build_tools([{"class": "bash"}]), AGENT, tokenizer)
    setup, teardown = chain_hooks(sandbox_hooks, tool_hooks)
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, replies),
        tokenizer,
        AGENT,
        RolloutConfig(n=n, max_concurrency=max_concurrency),
        setup_context=setup,
        teardown_context=teardown,
    )
    sample = Sample(prompt=[Message(role="user", content="make a file")])
    return asyncio.run(manager.run([sample]))


def script(first: str):
    """Per-trajectory replies from a policy shared by concurrent trajectories: `first`, then "done"."""
    return [lambda text: first if text.count("<|im_start|>assistant") == 1 else "done"]


def tool_messages(traj) -> list[str]:
    return [m.content for m in traj.messages if m.role == "tool"]


BASH = call("bash", command="echo made > f.txt && cat f.txt && pwd")


def test_bash_tool_runs_in_the_local_sandbox_and_it_is_released(tokenizer) -> None:
    hooks = SandboxHooks(SandboxConfig(backend="local"))
    traj = rollout(tokenizer, [BASH, "done"], hooks)[0]
    assert traj.stop_reason is StopReason.DONE, traj.error
    [out] = tool_messages(traj)
    made, workdir = out.splitlines()
    assert made == "made" and "agentrl-local-sandbox-" in workdir
    assert not os.path.exists(workdir)  # released: the temporary folder is gone
    assert hooks.stats() == {"held": 0}
    assert traj.timings["sandbox_setup_s"] > 0
    assert check_drift(tokenizer, traj).ok


def test_each_trajectory_gets_its_own_sandbox(tokenizer) -> None:
    hooks = SandboxHooks(SandboxConfig(backend="local"))
    command = "ls | wc -l; touch mine; pwd"
    trajs = rollout(tokenizer, script(call("bash", command=command)), hooks, n=4)
    outs = [tool_messages(t)[0].splitlines() for t in trajs]
    assert all(t.stop_reason is StopReason.DONE for t in trajs)
    assert [o[0] for o in outs] == ["0"] * 4  # nobody saw another's file
    assert len({o[1] for o in outs}) == 4
    assert not any(os.path.exists(o[1]) for o in outs)


def test_factory_sandbox_is_closed_after_the_trajectory(tokenizer) -> None:
    made: list[LocalSandbox] = []

    async def factory() -> LocalSandbox:
        made.append(LocalSandbox(exec_timeout_s=5))
        return made[-1]

    traj = rollout(tokenizer, [BASH, "done"], SandboxHooks(factory=factory))[0]
    assert traj.stop_reason is StopReason.DONE
    assert tool_messages(traj)[0].splitlines()[0] == "made"
    assert len(made) == 1 and made[0].closed


@pytest.mark.parametrize("error", [SandboxError("engine gone"), RuntimeError("no space left")])
def test_failing_factory_gives_sandbox_error(tokenizer, error: Exception) -> None:
    def factory():
        raise error

    trajs = rollout(tokenizer, script(BASH), SandboxHooks(factory=factory), n=2)
    for traj in trajs:
        assert traj.stop_reason is StopReason.SANDBOX_ERROR
        assert str(error) in traj.error
        assert traj.num_turns == 0 and "teardown_error" not in traj.metadata


def test_no_sandbox_backend_leaves_ctx_sandbox_empty(tokenizer) -> None:
    traj = rollout(tokenizer, [BASH, "done"], SandboxHooks(SandboxConfig(backend="none")))[0]
    assert traj.stop_reason is StopReason.DONE
    assert "needs a sandbox" in tool_messages(traj)[0]


def test_sandbox_released_when_the_loop_fails(tokenizer) -> None:
    made: list[LocalSandbox] = []

    def factory() -> LocalSandbox:
        made.append(LocalSandbox())
        return made[-1]

    hooks = SandboxHooks(factory=factory)
    tool_hooks = ToolHooks(build_tools([{"class": "bash"}]), AGENT, tokenizer)
    setup, teardown = chain_hooks(hooks, tool_hooks)
    policy = ScriptedPolicy(tokenizer, ["x"], fail_with=ConnectionError("server died"))
    manager = RolloutManager(
        policy, tokenizer, AGENT, RolloutConfig(n=1), setup_context=setup, teardown_context=teardown
    )
    traj = asyncio.run(manager.run([Sample(prompt=[Message(role="user", content="hi")])]))[0]
    assert traj.stop_reason is StopReason.ERROR and "server died" in traj.error
    assert made[0].closed and hooks.stats() == {"held": 0}


class Recorder:
    def __init__(self, name: str, log: list[str], fail_setup: bool = False, fail_teardown: bool = False):
        self.name, self.log, self.fail_setup, self.fail_teardown = name, log, fail_setup, fail_teardown

    async def setup(self, ctx) -> None:
        self.log.append(f"setup {self.name}")
        if self.fail_setup:
            raise SandboxError(f"{self.name} setup failed")

    def teardown(self, ctx) -> None:  # sync hooks are fine too
        self.log.append(f"teardown {self.name}")
        if self.fail_teardown:
            raise RuntimeError(f"{self.name} teardown failed")


async def test_chain_hooks_order_and_error_isolation() -> None:
    log: list[str] = []
    setup, teardown = chain_hooks(Recorder("a", log), Recorder("b", log, fail_teardown=True), Recorder("c", log))
    await setup(object())
    with pytest.raises(RuntimeError, match="b teardown failed"):
        await teardown(object())
    assert log == ["setup a", "setup b", "setup c", "teardown c", "teardown b", "teardown a"]

    log.clear()
    setup, teardown = chain_hooks(Recorder("a", log, fail_setup=True), Recorder("b", log))
    with pytest.raises(SandboxError):
        await setup(object())
    await teardown(object())
    assert log == ["setup a", "teardown b", "teardown a"]

    log.clear()
    _, teardown = chain_hooks(Recorder("a", log, fail_teardown=True), Recorder("b", log, fail_teardown=True))
    with pytest.raises(ExceptionGroup) as info:
        await teardown(object())
    assert len(info.value.exceptions) == 2 and log == ["teardown b", "teardown a"]
