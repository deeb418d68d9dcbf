"""A reasoning chat template that drops earlier turns' `<think>` blocks (Qwen3 style) rewrites history: each turn's
prompt is what the template really renders, recorded as a new step sample where it rewrote, and every step sample
passes the drift checker — through the tool loop and through the gateway, with a scripted policy (a fake)."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.gateway import Gateway
from agentrl.gateway.serve import session_trajectory
from agentrl.loops.chat_template import encode, render
from agentrl.loops.drift import check_drift
from agentrl.loops.interaction import Interaction
from agentrl.loops.manager import RolloutManager
from agentrl.loops.reasoning_template import with_reasoning_template
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_calling import ToolAgentLoop
from agentrl.loops.tool_setup import ToolHooks
from agentrl.tools.prompt import add_tool_instructions
from agentrl.types import Message, Sample, StopReason, Trajectory
from tests.unit.test_tool_loop import add


def call(a: int, b: int) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'add', 'arguments': {'a': a, 'b': b}})}\n</tool_call>"


REPLIES = [
    f"<think>\nI should add them.\n</think>\n\n{call(2, 3)}",
    "<think>\nThe tool said 5.\n</think>\n\nThe answer is 5.",
    f"<think>\nAdd again.\n</think>\n\n{call(3, 4)}",
    "<think>\nIt is 7.\n</think>\n\n7.",
    "<think>\nBe polite.\n</think>\n\nYou are welcome.",
]
FOLLOW_UPS = ["And 3+4?", "Thanks!"]


@pytest.fixture(scope="module")
def reasoning(tokenizer):
    return with_reasoning_template(tokenizer)


def prompts_of(tokenizer, conversation: list[Message]) -> list[list[int]]:
    """What a server given the messages would see before each assistant turn of `conversation`."""
    return [
        encode(tokenizer, render(tokenizer, conversation[:i], add_generation_prompt=True))
        for i, m in enumerate(conversation)
        if m.role == "assistant"
    ]


def assert_each_step_sample_is_exact(tokenizer, traj: Trajectory, rewrites: int) -> None:
    steps = traj.step_samples()
    assert len(traj.earlier_steps) == rewrites == len(steps) - 1
    assert traj.metrics["loop/template_rewrites"] == rewrites
    for step in steps:
        report = check_drift(tokenizer, step)
        assert report.ok, str(report)


def test_the_template_drops_reasoning_only_before_the_last_user_message(reasoning):
    thought = Message(role="assistant", content="<think>\nhmm\n</think>\n\nA")
    tool_turn = [Message(role="user", content="q"), thought, Message(role="tool", content="r")]
    assert "<think>\nhmm\n</think>\n\nA<|im_end|>" in render(reasoning, tool_turn, add_generation_prompt=True)
    later = render(reasoning, [*tool_turn, Message(role="user", content="q2")], add_generation_prompt=True)
    assert "hmm" not in later and "<|im_start|>assistant\nA<|im_end|>" in later


class FollowUps(Interaction):
    async def respond(self, messages, sample, state):
        state["n"] = state.get("n", 0) + 1
        return FOLLOW_UPS[state["n"] - 1] if state["n"] <= len(FOLLOW_UPS) else None


def run_tool_loop(tokenizer, replies: list[str]) -> tuple[Trajectory, ScriptedPolicy]:
    agent = AgentConfig(name="tool_agent", max_turns=8)
    hooks = ToolHooks([add], agent, tokenizer)
    policy = ScriptedPolicy(tokenizer, replies)
    manager = RolloutManager(
        policy, tokenizer, agent, RolloutConfig(n=1), setup_context=hooks.setup, teardown_context=hooks.teardown
    )
    manager._loops[agent.name] = ToolAgentLoop(agent, FollowUps())
    sample = Sample(prompt=[Message(role="user", content="What is 2+3?")])
    return asyncio.run(manager.run([sample]))[0], policy


def test_the_tool_loop_prompts_and_records_what_the_template_renders(reasoning):
    traj, policy = run_tool_loop(reasoning, REPLIES)
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 5
    conversation = traj.messages  # the last step sample was rendered from the whole conversation
    assert [m.content for m in conversation if m.role == "assistant"] == REPLIES
    assert policy.calls == prompts_of(reasoning, conversation)
    assert "I should add them" not in reasoning.decode(policy.calls[2])  # the rewrite reached the model
    assert_each_step_sample_is_exact(reasoning, traj, rewrites=2)
    turns_per_step = [s.num_generated_turns for s in traj.step_samples()]
    assert turns_per_step == [2, 2, 1] and len(traj.turn_rewards or []) == 5
    first_turn = 0
    for step, turns in zip(traj.step_samples(), turns_per_step, strict=True):
        assert step.messages == conversation[: len(step.messages)]  # the messages it was rendered from
        assert step.segments[0].token_ids == policy.calls[first_turn]  # its prompt: the template's rendering
        first_turn += turns


def test_a_template_that_keeps_history_makes_no_step_samples(tokenizer):
    traj, _ = run_tool_loop(tokenizer, REPLIES)
    assert traj.stop_reason is StopReason.DONE and not traj.earlier_steps
    assert "loop/template_rewrites" not in traj.metrics and check_drift(tokenizer, traj).ok


TOOL = add.schema()


async def test_the_gateway_prompts_and_records_what_the_template_renders(reasoning):
    policy = ScriptedPolicy(reasoning, REPLIES[:4])
    async with Gateway(policy, reasoning) as gateway:
        session = gateway.open_session("think")
        sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
        messages: list[dict] = [{"role": "user", "content": "What is 2+3?"}]
        conversation = [Message(role="user", content="What is 2+3?")]  # as the template renders it
        for raw, then in zip(REPLIES[:4], [("tool", "5"), ("user", FOLLOW_UPS[0]), ("tool", "7"), None], strict=True):
            reply = await sdk.chat.completions.create(model="policy", messages=messages, tools=[TOOL])
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            conversation.append(Message(role="assistant", content=raw))  # rendered from the model's own text
            if then is not None:
                role, content = then
                tool_id = {"tool_call_id": message.tool_calls[0].id} if role == "tool" else {}
                messages.append({"role": role, "content": content, **tool_id})
                conversation.append(Message(role=role, content=content))
        gateway.close_session(session)
    instructions = gateway.parser.format_instructions([TOOL])
    assert policy.calls == prompts_of(reasoning, add_tool_instructions(conversation, instructions))
    recorder = session.recorder
    assert [c.step for c in recorder.calls] == [0, 0, 1, 1] and recorder.template_rewrites == 1
    traj = session_trajectory(session)
    assert traj is not None and traj.stop_reason is StopReason.DONE
    assert_each_step_sample_is_exact(reasoning, traj, rewrites=1)


def test_a_rewritten_prompt_over_the_budget_ends_the_trajectory_and_sets_nothing_aside(reasoning):
    from agentrl.loops.context import AgentContext, Budgets, StopLoop
    from agentrl.rollout.protocol import SamplingParams

    question = [Message(role="user", content="What is 2+3?")]
    long_follow_up = Message(role="user", content="And 3+4? " * 20)  # room for the reply, none for the rewrite
    after = [*question, Message(role="assistant", content=REPLIES[1]), long_follow_up]
    limit = len(encode(reasoning, render(reasoning, after, add_generation_prompt=True)))
    ctx = AgentContext(
        sample=Sample(prompt=question),
        trajectory=Trajectory(),
        llm=ScriptedPolicy(reasoning, [REPLIES[1]]),
        tokenizer=reasoning,
        sampling=SamplingParams(),
        budgets=Budgets(max_total_tokens=limit),
    )
    ctx.start(question)
    asyncio.run(ctx.generate())
    segments = list(ctx.trajectory.segments)
    with pytest.raises(StopLoop) as stopped:
        ctx.add_messages(after[-1:])
    assert stopped.value.reason is StopReason.CONTEXT_OVERFLOW
    assert ctx.trajectory.segments == segments and not ctx.trajectory.earlier_steps
