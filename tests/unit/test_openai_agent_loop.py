"""`agent.name=openai_agent` with a scripted policy: agents written with the `openai` SDK (async, sync, a command)
run per trajectory through their own gateway session; budgets, crashes and rewritten histories."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import openai
import pytest
import torch

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.errors import UserError
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.trainer.advantages import with_step_samples
from agentrl.types import Message, Sample, Segment, StopReason, Trajectory

HERE = "tests.unit.test_openai_agent_loop"


async def chatty_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    """Three turns, re-sending the history as the SDK's users do; returns the last answer."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    messages = [m.to_openai() for m in sample.prompt]
    for turn in range(3):
        reply = await client.chat.completions.create(model=model, messages=messages)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": f"more {turn}"}]
    return reply.choices[0].message.content or ""


def sync_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content or ""


async def crashing_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    raise KeyError("the agent's own bug")


async def endless_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "go"}]
    while True:  # until the gateway refuses
        reply = await client.chat.completions.create(model=model, messages=messages)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "again"}]


async def compacting_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    messages = [{"role": "user", "content": "first"}]
    reply = await client.chat.completions.create(model=model, messages=messages)
    messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "second"}]
    await client.chat.completions.create(model=model, messages=messages[2:])  # dropped the first exchange
    return "done"


async def overflowing_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    """One call over the token budget (the gateway refuses it), then gives up."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x" * 5000}])
    except openai.BadRequestError as exc:
        return str(exc)
    return "answered"


def run_agent(tokenizer, replies, max_turns: int = 8, **kwargs) -> tuple[Trajectory, ScriptedPolicy]:
    policy = ScriptedPolicy(tokenizer, replies)
    agent = AgentConfig(name="openai_agent", max_turns=max_turns, kwargs=kwargs)
    manager = RolloutManager(policy, tokenizer, agent, RolloutConfig(n=1, max_tokens=32))
    sample = Sample(prompt=[Message(role="user", content="hello")])
    (traj,) = asyncio.run(manager.run([sample]))
    return traj, policy


def test_an_sdk_agent_trains_as_one_exact_trajectory(tokenizer):
    traj, policy = run_agent(tokenizer, ["a", "b", "c"], entry_point=f"{HERE}:chatty_agent")
    assert traj.stop_reason == StopReason.DONE and traj.error is None
    assert traj.metadata["agent_result"] == "c"
    assert traj.num_turns == 3 and not traj.earlier_steps
    assert [t for s in traj.segments if s.trainable for t in s.token_ids] == [
        t for text in "abc" for t in [*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id]
    ]
    assert traj.token_ids[: len(policy.calls[-1])] == policy.calls[-1]
    assert check_drift(tokenizer, traj).ok
    assert traj.metrics["gateway/prefix_reuse_rate"] == 1.0 and traj.metrics["gateway/calls"] == 3


def test_a_sync_agent_and_a_command_agent(tokenizer):
    traj, _ = run_agent(tokenizer, ["sync hello"], entry_point=f"{HERE}:sync_agent")
    assert traj.metadata["agent_result"] == "sync hello" and traj.stop_reason == StopReason.DONE
    script = (
        "import os, openai; c = openai.OpenAI(); "
        "r = c.chat.completions.create(model=os.environ['OPENAI_MODEL'], messages=[{'role': 'user', 'content': 'x'}]);"
        " print('answer:', r.choices[0].message.content)"
    )
    traj, _ = run_agent(tokenizer, ["from a command"], command=f'{sys.executable} -c "{script}"')
    assert traj.metadata["agent_result"].strip() == "answer: from a command"
    assert traj.stop_reason == StopReason.DONE and traj.num_turns == 1


def test_an_agent_that_crashes_keeps_what_it_generated(tokenizer):
    traj, _ = run_agent(tokenizer, ["partial work"], entry_point=f"{HERE}:crashing_agent")
    assert traj.stop_reason == StopReason.ERROR and traj.failed
    assert "KeyError" in (traj.error or "") and "the agent's own bug" in (traj.error or "")
    assert traj.num_generated_tokens > 0 and check_drift(tokenizer, traj).ok


def test_the_turn_budget_ends_the_trajectory_with_its_stop_reason(tokenizer):
    traj, policy = run_agent(tokenizer, ["again?"], max_turns=3, entry_point=f"{HERE}:endless_agent")
    assert traj.stop_reason == StopReason.MAX_TURNS and not traj.failed
    assert len(policy.calls) == 3 and traj.num_turns == 3


def test_a_rewritten_history_trains_every_step_sample_with_one_advantage(tokenizer):
    traj, _ = run_agent(tokenizer, ["one", "two"], entry_point=f"{HERE}:compacting_agent")
    assert traj.stop_reason == StopReason.DONE
    (earlier,) = traj.earlier_steps
    assert earlier.num_generated_tokens > 0 and traj.num_generated_tokens > 0
    assert check_drift(tokenizer, earlier).ok and check_drift(tokenizer, traj).ok
    plain = Trajectory(segments=[Segment(token_ids=[1], trainable=True)])
    rows, advantages = with_step_samples([plain, traj], torch.tensor([0.5, -1.0]))
    assert rows == [plain, earlier, traj]
    assert advantages.tolist() == [0.5, -1.0, -1.0]


def test_the_options_say_what_to_set():
    from agentrl.gateway.agent_loop import OpenAIAgentLoop

    for kwargs in ({}, {"entry_point": f"{HERE}:sync_agent", "command": "true"}, {"command": "x", "harness": "codex"}):
        (problem,) = OpenAIAgentLoop.option_problems(kwargs)
        assert "set exactly one of agent.kwargs.entry_point (a callable), agent.kwargs.command or" in problem
    with pytest.raises(UserError, match="exactly one of"):
        OpenAIAgentLoop(AgentConfig(name="openai_agent"))
    (problem,) = OpenAIAgentLoop.option_problems({"harness": "claude_code"})
    assert "runs in the task's own container: set agent.kwargs.task_sandbox=swe_task" in problem
    (problem,) = OpenAIAgentLoop.option_problems({"harness": "aider", "task_sandbox": "swe_task"})
    assert "claude_code" in problem and "codex" in problem


def test_the_documented_example_agent_runs_through_openai_agent(tokenizer, tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "existing-agent.md").read_text()
    code = readme.split("```python\n# my_agent.py")[1].split("```")[0]
    (tmp_path / "my_agent.py").write_text("# my_agent.py" + code)
    traj, _ = run_agent(tokenizer, ["It is a kettle.", "kettle"], entry_point=f"{tmp_path}/my_agent.py:run")
    assert traj.metadata["agent_result"] == "kettle" and traj.stop_reason == StopReason.DONE
    assert traj.num_turns == 2 and check_drift(tokenizer, traj).ok


async def agent_with_its_own_timeout(base_url: str, model: str, sample: Sample, sandbox) -> str:
    raise TimeoutError("the agent's HTTP call timed out")


async def sleeping_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    await asyncio.sleep(60)
    return "never"


def test_an_agents_own_timeout_is_its_error_and_the_budget_is_time_budget(tokenizer, monkeypatch):
    traj, _ = run_agent(tokenizer, ["x"], entry_point=f"{HERE}:agent_with_its_own_timeout")
    assert traj.stop_reason == StopReason.ERROR and "HTTP call timed out" in (traj.error or "")
    monkeypatch.setattr("agentrl.gateway.agent_loop.DEADLINE_GRACE_S", 0.0)
    traj, _ = run_agent(tokenizer, ["x"], timeout_s=0.2, entry_point=f"{HERE}:sleeping_agent")
    assert traj.stop_reason == StopReason.TIME_BUDGET


def test_a_command_agent_past_its_budget_is_killed_with_what_it_started(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr("agentrl.gateway.agent_loop.DEADLINE_GRACE_S", 0.0)
    pid_file = tmp_path / "child.pid"
    command = f"sh -c 'sleep 300 & echo $! > {pid_file}; wait'"
    traj, _ = run_agent(tokenizer, ["x"], timeout_s=0.5, command=command)
    assert traj.stop_reason == StopReason.TIME_BUDGET
    assert dies_within(int(pid_file.read_text()), seconds=10)  # the agent's own child went with it


def test_an_agent_whose_every_call_was_refused_is_a_failure_not_training_data(tokenizer):
    traj, policy = run_agent(tokenizer, ["x"], entry_point=f"{HERE}:overflowing_agent")
    assert "token budget spent" in traj.metadata["agent_result"] and policy.calls == []
    assert traj.failed and traj.stop_reason == StopReason.ERROR and traj.segments == []
    assert "no call was answered (1 refused or failed): token budget spent" in (traj.error or "")


def dies_within(pid: int, seconds: float) -> bool:
    """SIGKILL takes effect when the killed process next runs: on a loaded machine that is not at once."""
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


BARRIER_PARTIES = 12


def waiting_sync_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    """Blocks until every agent of the batch is running: more than a small shared thread pool holds at once."""
    _barrier.wait(timeout=10)
    return "together"


def test_sync_agents_each_get_their_own_thread(tokenizer):
    global _barrier
    import threading

    _barrier = threading.Barrier(BARRIER_PARTIES)
    policy = ScriptedPolicy(tokenizer, ["x"])
    agent = AgentConfig(name="openai_agent", kwargs={"entry_point": f"{HERE}:waiting_sync_agent"})
    manager = RolloutManager(policy, tokenizer, agent, RolloutConfig(n=1, max_tokens=8, max_concurrency=64))
    samples = [Sample(prompt=[Message(role="user", content="hi")]) for _ in range(BARRIER_PARTIES)]
    trajectories = asyncio.run(manager.run(samples))
    assert [t.metadata.get("agent_result") for t in trajectories] == ["together"] * BARRIER_PARTIES


def test_the_blocking_sandbox_refuses_its_own_event_loop_thread():
    from agentrl.sandbox.blocking import BlockingSandbox
    from agentrl.sandbox.local import LocalSandbox

    async def main() -> None:
        blocking = BlockingSandbox(LocalSandbox(), asyncio.get_running_loop())
        with pytest.raises(RuntimeError, match="event loop's own thread"):
            blocking.exec("true")

    asyncio.run(main())
