"""How a harness run (`agent.kwargs.harness`) ends after a reply cut at its token budget: the harness giving up
(an ordinary error exit) is the model's own `max_tokens` ending, trained; the harness stopped from outside (its
exec timed out, killed by a signal: SIGKILL is also what the out-of-memory killer sends) is a failed, untrained
trajectory. Without Docker: a fake container (for unit tests only) plays the harness, one Messages call through
the gateway's unix socket, cut at its budget, then the exit under test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.gateway.agent_loop import OpenAIAgentLoop
from agentrl.harnesses.run import BRIDGE_PORT, SOCKET_NAME
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.sandbox.base import ExecResult
from agentrl.types import Message, Sample, StopReason, Trajectory


class FakeHarnessContainer:
    """A task container stand-in (a fake for unit tests): its one command is the harness, which makes one
    Messages call to its session through the gateway's socket, then ends with `ending`."""

    workdir = "/work"

    def __init__(self, socket: str, ending: ExecResult) -> None:
        self.socket, self.ending = socket, ending

    async def write_file(self, path: str, content: str | bytes, mode: int = 0o644) -> None:
        pass

    async def exec(self, command: str, timeout: float | None = None, workdir=None, env=None) -> ExecResult:
        session_path = env["ANTHROPIC_BASE_URL"].split(f":{BRIDGE_PORT}", 1)[1]  # /s/<id>, as the bridge forwards it
        body = {"model": "policy", "max_tokens": 256, "messages": [{"role": "user", "content": "Fix it."}]}
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=self.socket)) as http,
            http.post(f"http://gateway{session_path}/v1/messages", json=body) as answer,
        ):
            assert (await answer.json())["stop_reason"] == "max_tokens"
        return self.ending

    async def close(self) -> None:
        pass


def run_harness_ending(monkeypatch, tokenizer, ending: ExecResult) -> Trajectory:
    @contextlib.asynccontextmanager
    async def fake_container(loop: OpenAIAgentLoop, sample: Sample, ctx) -> AsyncIterator[None]:
        ctx.sandbox = FakeHarnessContainer(f"{loop._socket_dir}/{SOCKET_NAME}", ending)
        try:
            yield
        finally:
            ctx.sandbox = None

    monkeypatch.setattr(OpenAIAgentLoop, "_sandbox", fake_container)
    policy = ScriptedPolicy(tokenizer, ["a reply far longer than the eight tokens it may have"])
    kwargs = {"harness": "claude_code", "task_sandbox": "swe_task"}
    manager = RolloutManager(
        policy, tokenizer, AgentConfig(name="openai_agent", kwargs=kwargs), RolloutConfig(n=1, max_tokens=8)
    )
    (traj,) = asyncio.run(manager.run([Sample(prompt=[Message(role="user", content="Fix it.")])]))
    assert traj.metadata["gateway_calls"][-1]["finish_reason"] == "length"  # the last reply was cut
    return traj


def test_a_harness_giving_up_on_a_cut_reply_ends_max_tokens_and_trains(monkeypatch, tokenizer):
    gave_up = ExecResult(1, "", "Error: the response exceeded the output token maximum")
    traj = run_harness_ending(monkeypatch, tokenizer, gave_up)
    assert traj.stop_reason == StopReason.MAX_TOKENS and not traj.failed
    assert traj.num_generated_tokens == 8


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        (ExecResult(124, "", "", timed_out=True), "timed out"),
        (ExecResult(137, "", "Killed"), "SIGKILL"),
        (ExecResult(139, "", ""), "SIGSEGV"),
        (ExecResult(-9, "", ""), "SIGKILL"),
    ],
    ids=["exec-timeout", "sigkill-or-oom", "crash-signal", "killed-negative-code"],
)
def test_a_harness_stopped_from_outside_after_a_cut_reply_is_a_failure(monkeypatch, tokenizer, ending, said):
    traj = run_harness_ending(monkeypatch, tokenizer, ending)
    assert traj.stop_reason == StopReason.ERROR and traj.failed
    assert said in (traj.error or "") and "claude_code" in (traj.error or "")
