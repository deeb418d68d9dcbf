"""The Harbor loops with a scripted policy and a fake task container: the agent's turns, then the verifier in the
same container, whatever ended the agent; budgets from task.toml; the oracle; the container always removed."""

import asyncio
import json

import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.harbor.task import load_task
from agentrl.harbor.verifier import VerifierResult
from agentrl.loops import harbor as harbor_loop
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_setup import ToolHooks
from agentrl.rollout.errors import RolloutError
from agentrl.sandbox.base import ExecResult, SandboxError
from agentrl.tools.registry import build_tools
from agentrl.types import StopReason
from tests.unit.harbor_helpers import write_task


class FakeContainer:
    workdir = "/app"
    exec_timeout_s = 5.0

    def __init__(self, delay: float = 0.0):
        self.commands: list[str] = []
        self.uploads: list[tuple[str, str]] = []
        self.closed = False
        self.delay = delay

    async def exec(self, cmd, timeout=None, workdir=None, env=None):
        self.commands.append(cmd)
        if cmd.startswith("test -e"):
            return ExecResult(1, "", "")
        if not cmd.startswith(("rm ", "tail ")):
            await asyncio.sleep(self.delay)
        return ExecResult(0, f"ran: {cmd}\n", "")

    async def upload_dir(self, local_dir, dest=None):
        self.uploads.append((str(local_dir), dest))

    async def write_file(self, path, content, mode=0o644):
        self.commands.append(f"write {path}")

    def resolve(self, path):
        return path

    async def close(self):
        self.closed = True


class Made(list):
    """The containers opened, the verifier runs seen, and the command delay of the next container."""

    def __init__(self):
        super().__init__()
        self.delay = {"s": 0.0}
        self.events: list[str] = []


@pytest.fixture
def containers(monkeypatch):
    made = Made()
    events = made.events

    async def fake_open(task, limits, sandbox, run_id):
        made.append(FakeContainer(delay=made.delay["s"]))
        made[-1].limits = limits
        return made[-1]

    async def fake_verify(container, task, timeout_s):
        events.append(f"verify after {len(container.commands)} commands, timeout {timeout_s:g}")
        assert not container.closed
        return VerifierResult({"reward": 1.0}, 0, False, "PASS\n", 0.1, source="/logs/verifier/reward.txt")

    monkeypatch.setattr(harbor_loop, "open_task_container_shielded", fake_open)
    monkeypatch.setattr(harbor_loop, "run_verifier", fake_verify)
    return made


def call(name, **args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def run(tokenizer, task, replies, name="harbor_agent", **agent):
    cfg = AgentConfig(**{"name": name, "max_turns": 6, "max_total_tokens": 4096, **agent})
    tools = build_tools([{"class": "bash"}, {"class": "editor"}, {"class": "submit"}])
    hooks = ToolHooks(tools, cfg, tokenizer)
    policy = ScriptedPolicy(tokenizer, replies)
    mgr = RolloutManager(policy, tokenizer, cfg, RolloutConfig(n=1, max_model_len=4096, max_tokens=200),
                         setup_context=hooks.setup, teardown_context=hooks.teardown)  # fmt: skip
    (traj,) = asyncio.run(mgr.run([task.to_sample(agent_name=name)]))
    return traj, policy


@pytest.fixture
def task(tmp_path):
    return load_task(write_task(tmp_path, "alpha"))


def test_the_agent_works_in_the_task_container_then_the_verifier_runs_there(tokenizer, task, containers):
    replies = [call("bash", command="ls /app"), call("submit", answer="done")]
    traj, _ = run(tokenizer, task, replies)
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 2, traj.error
    (container,) = containers
    assert "ls /app" in container.commands and container.closed
    assert containers.events == ["verify after 1 commands, timeout 30"]  # task.toml's [verifier].timeout_sec
    harbor = traj.metadata["harbor"]
    assert harbor["task"] == "test/alpha" and harbor["verifier"]["rewards"] == {"reward": 1.0}
    assert harbor["limits"]["agent_timeout_s"] == 60.0 and harbor["limits"]["cpus"] == 1.0  # capped by sandbox
    assert traj.messages[1].content == "Do the alpha thing.\n"  # the instruction is the prompt
    assert {"sandbox_setup_s", "verifier_s", "sandbox_close_s"} <= set(traj.timings)
    assert traj.metadata["final_tool_calls"] == ["submit"]
    assert check_drift(tokenizer, traj).ok


def test_a_reply_without_a_tool_call_ends_the_agent_and_the_verifier_still_runs(tokenizer, task, containers):
    traj, _ = run(tokenizer, task, ["I am done."])
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 1
    assert "verifier" in traj.metadata["harbor"] and containers[0].closed
    traj, _ = run(tokenizer, task, ["I am done."] * 4, kwargs={"on_no_tool_call": "remind"}, max_turns=3,
                  max_consecutive_tool_errors=5)  # fmt: skip
    assert traj.stop_reason is StopReason.MAX_TURNS and "verifier" in traj.metadata["harbor"]


def test_the_time_budget_ends_the_agent_not_the_verifier(tokenizer, task, containers):
    containers.delay["s"] = 5.0
    traj, _ = run(tokenizer, task, [call("bash", command="sleep 100")], kwargs={"time_budget_s": 0.3})
    assert traj.stop_reason is StopReason.TIME_BUDGET and "0.3s" in traj.error
    assert "verifier" in traj.metadata["harbor"] and containers[0].closed
    assert containers.events[-1].endswith("timeout 30")


def test_caps_in_agent_kwargs_cut_the_tasks_timeouts(tokenizer, task, containers):
    run(tokenizer, task, ["done"], kwargs={"time_budget_s": 10, "verifier_timeout_s": 7})
    assert containers[0].limits.agent_timeout_s == 10 and containers.events == ["verify after 0 commands, timeout 7"]


def test_a_model_server_failure_ends_without_a_verifier_and_removes_the_container(tokenizer, task, containers):
    cfg = AgentConfig(name="harbor_agent")
    hooks = ToolHooks(build_tools([{"class": "bash"}]), cfg, tokenizer)
    policy = ScriptedPolicy(tokenizer, ["x"], fail_with=RolloutError("server gone"))
    mgr = RolloutManager(policy, tokenizer, cfg, RolloutConfig(n=1), setup_context=hooks.setup,
                         teardown_context=hooks.teardown)  # fmt: skip
    (traj,) = asyncio.run(mgr.run([task.to_sample()]))
    assert traj.stop_reason is StopReason.SERVER_ERROR and "verifier" not in traj.metadata["harbor"]
    assert containers[0].closed


def test_a_container_that_cannot_start_is_a_sandbox_error(tokenizer, task, monkeypatch):
    async def broken(task, limits, sandbox, run_id):
        raise SandboxError("cannot start a sandbox")

    monkeypatch.setattr(harbor_loop, "open_task_container_shielded", broken)
    traj, _ = run(tokenizer, task, ["done"])
    assert traj.stop_reason is StopReason.SANDBOX_ERROR and "cannot start" in traj.error


def test_the_oracle_runs_the_reference_solution_without_the_model(tokenizer, task, containers):
    traj, policy = run(tokenizer, task, ["never asked"], name="harbor_oracle")
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 0 and policy.calls == []
    (container,) = containers
    assert container.uploads == [(str(task.solution_dir), "/solution")]
    assert "bash /solution/solve.sh > /logs/agent/oracle.txt 2>&1" in container.commands
    assert traj.metadata["harbor"]["solution"]["exit_code"] == 0 and "verifier" in traj.metadata["harbor"]
    assert container.closed


def test_the_oracle_needs_a_solution(tokenizer, tmp_path, containers):
    task = load_task(write_task(tmp_path, "beta", skip=("solution/solve.sh",)))
    traj, _ = run(tokenizer, task, ["x"], name="harbor_oracle")
    assert traj.stop_reason is StopReason.ERROR and "solution/solve.sh" in traj.error and containers[0].closed
