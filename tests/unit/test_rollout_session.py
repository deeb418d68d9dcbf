"""rollout_session: a recipe's `tools:` and `sandbox:` sections become the manager's hooks; loops see the config."""

from __future__ import annotations

import asyncio
import json

from agentrl.config import AgentRLConfig
from agentrl.loops.base import AgentLoopBase, register_loop
from agentrl.loops.session import rollout_session
from agentrl.loops.testing import ScriptedPolicy
from agentrl.types import Message, Sample, StopReason

BASH = (
    "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": "echo hi > f && cat f"}}) + "\n</tool_call>"
)


def config(**sections) -> AgentRLConfig:
    return AgentRLConfig.model_validate({"agent": {"name": "tool_agent", "max_turns": 3}, **sections})


def run(cfg: AgentRLConfig, tokenizer, replies, greedy: bool = False):
    async def go():
        async with rollout_session(cfg, ScriptedPolicy(tokenizer, replies), tokenizer) as manager:
            if greedy:
                manager = manager.with_rollout(cfg.rollout.model_copy(update={"temperature": 0.0}))
            trajs = await manager.run([Sample(prompt=[Message(role="user", content="go")])], n=1)
            return trajs, manager

    return asyncio.run(go())


def test_tools_run_in_a_local_sandbox_from_the_config(tokenizer):
    cfg = config(tools=[{"class": "bash"}], sandbox={"backend": "local"})
    (traj,), _ = run(cfg, tokenizer, [BASH, "done"])
    assert traj.stop_reason is StopReason.DONE, traj.error
    assert [m.content.strip() for m in traj.messages if m.role == "tool"] == ["hi"]


def test_a_greedy_sibling_keeps_the_tools(tokenizer):
    cfg = config(tools=[{"class": "bash"}], sandbox={"backend": "local"})
    (traj,), manager = run(cfg, tokenizer, [BASH, "done"], greedy=True)
    assert manager.rollout.temperature == 0.0
    assert [m.content.strip() for m in traj.messages if m.role == "tool"] == ["hi"]


def test_without_a_sandbox_the_bash_tool_reports_an_error_not_a_crash(tokenizer):
    (traj,), _ = run(config(tools=[{"class": "bash"}]), tokenizer, [BASH, "done"])
    tool_output = [m.content for m in traj.messages if m.role == "tool"]
    assert len(tool_output) == 1 and "sandbox" in tool_output[0].lower()


def test_loops_see_the_whole_run_config(tokenizer):
    seen = {}

    @register_loop("test_reads_run_config")
    class ReadsRunConfig(AgentLoopBase):
        async def run(self, sample, ctx):
            seen["env_id"] = self.run_config.env.id
            return ctx.trajectory

    cfg = AgentRLConfig.model_validate({"agent": {"name": "test_reads_run_config"}, "env": {"id": "Taxi-v3"}})
    run(cfg, tokenizer, ["unused"])
    assert seen == {"env_id": "Taxi-v3"}
