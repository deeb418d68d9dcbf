import asyncio
import json

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.interaction import Interaction
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_calling import ToolAgentLoop
from agentrl.loops.tool_setup import ToolHooks
from agentrl.tools import tool
from agentrl.types import Message, Sample, StopReason


@tool
def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: first number.
        b: second number.
    """
    return str(a + b)


@tool(timeout_s=0.05)
async def slow() -> str:
    """Never answers in time."""
    await asyncio.sleep(5)
    return "late"


def call(name, **args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def run(tokenizer, replies, agent=None, tools=(add, slow), loop=None, **rollout):
    agent = agent or AgentConfig(name="tool_agent", max_turns=6)
    hooks = ToolHooks(list(tools), agent, tokenizer)
    mgr = RolloutManager(
        ScriptedPolicy(tokenizer, replies),
        tokenizer,
        agent,
        RolloutConfig(**{"n": 1, **rollout}),
        setup_context=hooks.setup,
        teardown_context=hooks.teardown,
    )
    if loop is not None:
        mgr._loops[agent.name] = loop
    return asyncio.run(mgr.run([Sample(prompt=[Message(role="user", content="what is 2+3?")])]))[0]


def tool_messages(traj):
    return [m.content for m in traj.messages if m.role == "tool"]


def test_tool_round_trip_is_exact(tokenizer):
    traj = run(tokenizer, [call("add", a=2, b=3), "The answer is 5."])
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 2
    assert tool_messages(traj) == ["5"]
    assert [s.trainable for s in traj.segments] == [False, True, False, True]
    assert traj.segments[2].role == "tool"
    assert "<tools>" in traj.messages[0].content  # SmolLM2-style template: tools described in the system prompt
    assert check_drift(tokenizer, traj).ok
    assert traj.metrics["tool/calls"] == 1


def test_errors_go_back_to_the_model(tokenizer):
    replies = [
        "<tool_call>\n{not json}\n</tool_call>",
        call("nope"),
        call("add", a="x"),
        call("slow"),
        call("add", a=1, b=1),
        "done",
    ]
    traj = run(tokenizer, replies, agent=AgentConfig(name="tool_agent", max_turns=10, max_consecutive_tool_errors=5))
    msgs = tool_messages(traj)
    assert traj.stop_reason is StopReason.DONE
    assert "Error" in msgs[0] and "JSON" in msgs[0]
    assert "unknown tool 'nope'" in msgs[1] and "add" in msgs[1]
    assert "Error" in msgs[2] and "b" in msgs[2]
    assert "timed out" in msgs[3].lower()
    assert msgs[4] == "2"
    assert traj.metrics["tool/errors"] == 4 and traj.metrics["tool/timeouts"] == 1
    assert check_drift(tokenizer, traj).ok


def test_consecutive_error_limit(tokenizer):
    traj = run(tokenizer, [call("nope")] * 5, agent=AgentConfig(name="tool_agent", max_consecutive_tool_errors=2))
    assert traj.stop_reason is StopReason.TOOL_ERROR_LIMIT
    assert len(tool_messages(traj)) == 2


def test_parallel_calls_beyond_limit_are_reported(tokenizer):
    many = "".join(call("add", a=i, b=i) for i in range(4))
    agent = AgentConfig(name="tool_agent", max_parallel_tool_calls=2, max_total_tokens=4096)
    traj = run(tokenizer, [many, "ok"], agent=agent, max_tokens=1024, max_model_len=4096)
    msgs = tool_messages(traj)
    assert msgs[:2] == ["0", "2"]
    assert all("only 2 tool calls are executed per turn" in m for m in msgs[2:]) and len(msgs) == 4


def test_max_turns_with_tools(tokenizer):
    traj = run(tokenizer, [call("add", a=1, b=2)], agent=AgentConfig(name="tool_agent", max_turns=3))
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.num_turns == 3


def test_interaction_produces_user_turns(tokenizer):
    class Counter(Interaction):
        async def respond(self, messages, sample, state):
            state["n"] = state.get("n", 0) + 1
            return None if state["n"] > 2 else f"try again ({state['n']})"

    agent = AgentConfig(name="tool_agent", max_turns=10)
    traj = run(tokenizer, ["guess 1", "guess 2", "guess 3"], agent=agent, loop=ToolAgentLoop(agent, Counter()))
    users = [m.content for m in traj.messages if m.role == "user"]
    assert users == ["what is 2+3?", "try again (1)", "try again (2)"]
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 3
    assert check_drift(tokenizer, traj).ok


def test_tools_released_after_trajectory(tokenizer):
    from agentrl.tools.base import Tool

    events = []

    class Counted(Tool):
        name = "counted"
        description = "counts"
        parameters = {"type": "object", "properties": {}}

        async def create(self, ctx):
            events.append("create")

        async def execute(self, arguments, ctx):
            return "1"

        async def release(self, ctx):
            events.append("release")

    run(tokenizer, [call("counted"), call("counted"), "ok"], tools=[Counted()])
    assert events == ["create", "release"]


def test_turns_are_recorded_for_per_turn_credit_with_the_context_each_starts_from(tokenizer):
    first = run(tokenizer, [call("add", a=2, b=3), "The answer is 5."])
    other = run(tokenizer, [call("add", a=1, b=1), "The answer is 2."])
    assert first.turn_rewards == [0.0, 0.0] == other.turn_rewards
    assert first.turn_states[0] == other.turn_states[0]  # the same prompt: GiGPO anchors the first turns together
    assert first.turn_states[1] != other.turn_states[1]  # different calls and results before the second turns
    assert len(set(first.turn_states)) == 2


def test_turns_are_recorded_when_a_budget_ends_the_conversation(tokenizer):
    traj = run(tokenizer, [call("add", a=1, b=1)] * 3, agent=AgentConfig(name="tool_agent", max_turns=2))
    assert traj.stop_reason is StopReason.MAX_TURNS
    assert len(traj.turn_rewards) == len(traj.turn_states) == traj.num_turns_in_all_steps() == 2
