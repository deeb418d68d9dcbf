"""SWEAgentLoop with a scripted policy and a fake task sandbox: turns, submit, budgets, patch, cleanup."""

import asyncio
import json

import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.errors import UserError
from agentrl.loops import swe as swe_loop
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_setup import ToolHooks
from agentrl.sandbox.base import ExecResult, SandboxError
from agentrl.swe.task import SWETask
from agentrl.tools.registry import build_tools
from agentrl.types import StopReason

TASK = SWETask(instance_id="o__r-1", problem_statement="add() returns the wrong sum", image_name="img:1")


class FakeSandbox:
    """Records commands; `git diff` answers with the files written so far."""

    workdir = "/work/testbed"
    exec_timeout_s = 5.0

    def __init__(self, command_delay: float = 0.0):
        self.commands: list[str] = []
        self.files: dict[str, str] = {}
        self.closed = False
        self.delay = command_delay

    async def exec(self, cmd, timeout=None, workdir=None, env=None):
        self.commands.append(cmd)
        if "git diff" in cmd:
            diff = "".join(f"diff --git a/{p} b/{p}\n+{c}\n" for p, c in self.files.items())
            return ExecResult(0, diff, "")
        if cmd.startswith("test -e"):
            return ExecResult(1, "", "")
        await asyncio.sleep(self.delay)
        return ExecResult(0, f"ran: {cmd}\n", "")

    async def write_file(self, path, content, mode=0o644):
        self.files[path] = content

    async def read_file(self, path):
        return self.files[path].encode()

    def resolve(self, path):
        return path

    async def close(self):
        self.closed = True


class Made(list):
    delay = 0.0


@pytest.fixture
def sandboxes(monkeypatch):
    made = Made()

    async def fake_open(task, config, run_id="swe"):
        assert task.instance_id == TASK.instance_id
        made.append(FakeSandbox(command_delay=made.delay))
        return made[-1], "a" * 40

    monkeypatch.setattr(swe_loop, "open_task_sandbox", fake_open)
    return made


def call(name, **args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def run(tokenizer, replies, n=1, **agent):
    cfg = AgentConfig(**{"name": "swe_agent", "max_turns": 6, "max_total_tokens": 4096, **agent})
    tools = build_tools([{"class": "bash"}, {"class": "editor"}, {"class": "submit"}])
    hooks = ToolHooks(tools, cfg, tokenizer)
    mgr = RolloutManager(
        ScriptedPolicy(tokenizer, replies),
        tokenizer,
        cfg,
        RolloutConfig(n=n, max_model_len=4096, max_tokens=200),
        setup_context=hooks.setup,
        teardown_context=hooks.teardown,
    )
    return asyncio.run(mgr.run([TASK.to_sample()]))


def test_submit_ends_with_the_patch_and_the_container_removed(tokenizer, sandboxes):
    replies = [
        call("bash", command="grep -n def add pkg.py"),
        call("editor", command="create", path="fix.py", file_text="fixed"),
        call("submit", answer="done"),
    ]
    (traj,) = run(tokenizer, replies)
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 3, traj.error
    assert traj.metadata["model_patch"] == "diff --git a/fix.py b/fix.py\n+fixed\n"
    assert traj.metadata["base_commit"] == "a" * 40 and traj.metadata["instance_id"] == "o__r-1"
    assert "add() returns the wrong sum" in traj.messages[1].content  # the issue is in the user turn
    (sandbox,) = sandboxes
    assert sandbox.closed and "grep -n def add pkg.py" in sandbox.commands
    assert {"sandbox_setup_s", "patch_extract_s", "sandbox_close_s"} <= set(traj.timings)
    assert traj.metrics["swe/patch_lines"] == 1.0
    assert traj.metadata["final_tool_calls"] == ["submit"]  # no tool message says so: rewards read it here
    assert check_drift(tokenizer, traj).ok  # token-exact: the tokens re-render as the messages


def test_max_turns_still_extracts_the_patch(tokenizer, sandboxes):
    (traj,) = run(tokenizer, [call("editor", command="create", path="a.py", file_text="x")] * 5, max_turns=2)
    assert traj.stop_reason is StopReason.MAX_TURNS
    assert "a.py" in traj.metadata["model_patch"] and sandboxes[0].closed


def test_replies_without_tool_calls_are_errors_then_stop(tokenizer, sandboxes):
    (traj,) = run(tokenizer, ["I think it is fixed."] * 5, max_consecutive_tool_errors=2)
    assert traj.stop_reason is StopReason.TOOL_ERROR_LIMIT and traj.num_turns == 2
    (traj,) = run(tokenizer, ["I think it is fixed."], kwargs={"on_no_tool_call": "stop"})
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 1 and traj.metadata["model_patch"] == ""


def test_time_budget_ends_with_time_budget(tokenizer, sandboxes):
    sandboxes.delay = 5.0
    (traj,) = run(tokenizer, [call("bash", command="sleep 100")], kwargs={"time_budget_s": 0.3})
    assert traj.stop_reason is StopReason.TIME_BUDGET and "time budget" in traj.error
    assert sandboxes[0].closed and "model_patch" in traj.metadata


def test_sandbox_failure_is_recorded_not_raised(tokenizer, monkeypatch):
    async def broken(task, config, run_id="swe"):
        raise SandboxError("image img:1 of task o__r-1 is missing")

    monkeypatch.setattr(swe_loop, "open_task_sandbox", broken)
    (traj,) = run(tokenizer, [call("submit")])
    assert traj.stop_reason is StopReason.SANDBOX_ERROR and "missing" in traj.error


def test_cancelled_while_starting_still_removes_the_container(tokenizer, monkeypatch):
    started = FakeSandbox()

    async def slow_open(task, config, run_id="swe"):
        await asyncio.sleep(0.2)
        return started, "b" * 40

    monkeypatch.setattr(swe_loop, "open_task_sandbox", slow_open)

    async def main():
        opening = asyncio.ensure_future(swe_loop.open_swe_sandbox(TASK, None, "r"))
        await asyncio.sleep(0.05)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening

    asyncio.run(main())
    assert started.closed


def test_loop_options_are_validated():
    with pytest.raises(UserError, match="agent.kwargs.on_no_tool_call"):
        swe_loop.SWEAgentLoop(AgentConfig(name="swe_agent", kwargs={"on_no_tool_call": "ignore"}))


def test_worked_examples_come_before_the_issue_as_earlier_turns(tokenizer, sandboxes):
    example = {"issue": "sub() raises NameError", "reply": call("submit", answer="fixed sub")}
    (traj,) = run(tokenizer, [call("submit")], kwargs={"examples": [example]})
    roles = [m.role for m in traj.messages]
    assert roles[roles.index("user") :][:4] == ["user", "assistant", "user", "assistant"]
    first, shown, task = [m for m in traj.messages if m.role in ("user", "assistant")][:3]
    assert "sub() raises NameError" in first.content and shown.content == example["reply"]
    assert "add() returns the wrong sum" in task.content and traj.num_turns == 1
    assert check_drift(tokenizer, traj).ok


def test_a_worked_exploration_shows_each_tool_output_and_the_next_reply(tokenizer, sandboxes):
    steps = [{"output": "1 failed: m.py:3 NameError", "reply": call("submit", answer="read")}]
    example = {"issue": "test_sub fails", "reply": call("submit", answer="ran"), "steps": steps}
    (traj,) = run(tokenizer, [call("submit")], kwargs={"examples": [example], "reminder": "Call a tool."})
    start = [m.role for m in traj.messages].index("user")
    shown = traj.messages[start : start + 5]
    assert [m.role for m in shown] == ["user", "assistant", "tool", "assistant", "user"]
    assert shown[2].content == "1 failed: m.py:3 NameError" and shown[3].content == steps[0]["reply"]
    assert not any(s.trainable for s in traj.segments[:1]) and traj.num_turns == 1
    assert check_drift(tokenizer, traj).ok


def test_the_reminder_is_what_a_reply_without_a_tool_call_is_told(tokenizer, sandboxes):
    (traj,) = run(tokenizer, ["no call", call("submit")], kwargs={"reminder": "Error: call run_tests first."})
    assert any("call run_tests first." in str(m.content) for m in traj.messages if m.role == "tool")


def test_a_repeated_call_is_told_so_instead_of_run_again(tokenizer, sandboxes):
    ls = call("bash", command="echo ran")
    replies = [ls, ls, call("bash", command="echo other"), call("submit")]
    (traj,) = run(tokenizer, replies, kwargs={"repeated_call": "Error: you just made this call."})
    answers = [str(m.content) for m in traj.messages if m.role == "tool"]
    assert "ran" in answers[0] and answers[1].endswith("you just made this call.") and "other" in answers[2]
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 4
    (traj,) = run(tokenizer, [ls, ls, call("submit")])  # by default, run again
    assert [m.content for m in traj.messages if m.role == "tool"][1] == answers[0]


def test_the_issue_can_be_only_the_failing_tests_name(tokenizer, sandboxes, monkeypatch):
    monkeypatch.setitem(globals(), "TASK", TASK.model_copy(update={"FAIL_TO_PASS": ["t.py::test_add", "t.py::test_b"]}))
    (traj,) = run(tokenizer, [call("submit")], kwargs={"issue": "failing_test"})
    task = next(m.content for m in traj.messages if m.role == "user")
    assert "The test `t.py::test_add` fails (1 other test of the suite fails too)." in task
    assert "add() returns the wrong sum" not in task
