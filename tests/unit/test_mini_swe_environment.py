"""`SandboxEnvironment`, mini-swe-agent's environment over an agentrl sandbox: the config's environment variables
and timeout reach each command, a sandbox failure is an observation, the submit marker ends the run."""

from __future__ import annotations

import pytest

from agentrl.sandbox.base import ExecResult, SandboxError
from agentrl.swe.mini_swe_agent import SandboxEnvironment, agent_config


class RecordingSandbox:
    workdir = "/testbed"

    def __init__(self, result: ExecResult | Exception) -> None:
        self.result, self.calls = result, []

    def exec(self, cmd, timeout=None, workdir=None, env=None):
        self.calls.append({"cmd": cmd, "timeout": timeout, "workdir": workdir, "env": env})
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_the_configs_environment_variables_and_timeout_reach_every_command():
    environment = agent_config()["environment"]
    sandbox = RecordingSandbox(ExecResult(exit_code=0, stdout="ok\n", stderr=""))
    env = SandboxEnvironment(sandbox, environment.get("timeout") or 60, environment["env"])
    observation = env.execute({"command": "git log | head"})
    assert observation == {"output": "ok\n", "returncode": 0, "exception_info": ""}
    (call,) = sandbox.calls
    assert call["env"]["PAGER"] == "cat" and call["timeout"] == (environment.get("timeout") or 60)


def test_a_command_the_sandbox_cannot_run_is_an_observation_not_a_crash():
    env = SandboxEnvironment(RecordingSandbox(SandboxError("the container is gone")))
    observation = env.execute({"command": "ls"})
    assert observation["returncode"] == -1 and "the container is gone" in observation["exception_info"]


def test_the_submit_marker_ends_the_run_with_the_submission():
    from minisweagent.exceptions import Submitted

    sandbox = RecordingSandbox(
        ExecResult(exit_code=0, stdout="COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff\n", stderr="")
    )
    with pytest.raises(Submitted) as submitted:
        SandboxEnvironment(sandbox).execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; git diff"})
    assert submitted.value.messages[0]["extra"]["submission"] == "diff\n"
