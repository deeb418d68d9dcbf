"""Context management (`agent.context`): a tool episode whose history outgrows its budget goes on in rewritten
step samples (each token-exact, recorded), ends with its own stop reason when compaction cannot make room, forks
across a compaction, and is refused at start where it cannot work. Against a scripted policy; the real model:
tests/integration/test_context_real.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentrl.config import AgentConfig, RolloutConfig, load_config
from agentrl.config.schema import ContextConfig
from agentrl.loops.compaction import CompactionRequest, ContextManager, register_context_strategy
from agentrl.loops.compaction.checks import context_problems
from agentrl.loops.context import AgentContext
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.loops.tool_calling import record_conversation_turns
from agentrl.loops.tool_setup import ToolHooks
from agentrl.rollout.protocol import SamplingParams
from agentrl.tools import tool
from agentrl.types import Message, Sample, StopReason, Trajectory

LOG = " ".join(f"line{i} ok" for i in range(40))


@tool
def read_log() -> str:
    """Read the build log."""
    return LOG


CALL = f"<tool_call>\n{json.dumps({'name': 'read_log', 'arguments': {}})}\n</tool_call>"


def agent(strategy="drop_tool_outputs", max_tokens=1800, **context) -> AgentConfig:
    return AgentConfig(
        name="tool_agent",
        max_turns=12,
        max_total_tokens=20_000,
        context=ContextConfig(max_tokens=max_tokens, strategy=strategy, **context),
    )


def play(tokenizer, replies, config: AgentConfig, max_model_len=2400, policy=None):
    hooks = ToolHooks([read_log], config, tokenizer)
    policy = policy or ScriptedPolicy(tokenizer, replies)
    rollout = RolloutConfig(n=1, max_tokens=128, max_model_len=max_model_len)
    mgr = RolloutManager(policy, tokenizer, config, rollout, setup_context=hooks.setup, teardown_context=hooks.teardown)
    sample = Sample(prompt=[Message(role="user", content="Why did the build fail? Read the log.")])
    return asyncio.run(mgr.run([sample]))[0]


def five_reads_then_answer(tokenizer, summary="I read the log 2 times; it was fine."):
    state = {"reads": 0}

    def reply(conversation: str) -> str:
        if "Summarize the task" in conversation.rsplit("<|im_start|>", 2)[-2]:
            return summary
        state["reads"] += 1
        return CALL if state["reads"] <= 5 else "The build did not fail."

    return ScriptedPolicy(tokenizer, [reply])


def compactions(traj):
    return traj.metadata.get("context", {}).get("compactions", [])


@pytest.mark.parametrize("strategy", ["drop_tool_outputs", "window", "summarize"])
def test_an_episode_past_its_budget_goes_on_in_exact_step_samples(tokenizer, strategy) -> None:
    traj = play(tokenizer, [], agent(strategy, keep_turns=1), policy=five_reads_then_answer(tokenizer))
    assert traj.stop_reason is StopReason.DONE and traj.messages[-1].content == "The build did not fail."
    steps = [*traj.earlier_steps, traj]
    assert len(steps) >= 2 and len(compactions(traj)) == len(steps) - 1
    assert traj.metrics["loop/compactions"] == len(steps) - 1
    for step in steps:
        # a summary is written past the budget, in the room left below rollout.max_model_len
        assert check_drift(tokenizer, step).ok and step.num_tokens <= (2400 if strategy == "summarize" else 1800)
        assert step.messages[1].content == "Why did the build fail? Read the log."  # the first prompt is kept
    for record in compactions(traj):
        assert record["strategy"] == strategy and record["tokens_after"] < record["tokens_before"]
    dropped = len(compactions(traj)) if strategy == "summarize" else 0  # at most a waiting result each
    assert sum(m.content == LOG for s in steps for m in s.messages if m.role == "tool") >= 5 - dropped


def test_drop_tool_outputs_keeps_the_latest_and_replaces_the_rest(tokenizer) -> None:
    traj = play(tokenizer, [], agent("drop_tool_outputs"), policy=five_reads_then_answer(tokenizer))
    later = traj.earlier_steps[1] if len(traj.earlier_steps) > 1 else traj
    outputs = [m.content for m in later.messages if m.role == "tool"]
    assert outputs[0] == "[output removed to save context]" and LOG in outputs


def test_window_keeps_the_first_prompt_and_the_last_turns(tokenizer) -> None:
    traj = play(tokenizer, [], agent("window", keep_turns=1), policy=five_reads_then_answer(tokenizer))
    after = traj.earlier_steps[1]
    assert [m.role for m in after.messages[:4]] == ["system", "user", "assistant", "tool"]
    assert after.messages[2].content == CALL


def test_summarize_trains_the_summary_and_continues_from_it(tokenizer) -> None:
    traj = play(tokenizer, [], agent("summarize"), policy=five_reads_then_answer(tokenizer, "SUMMARY: read twice."))
    first, second = traj.earlier_steps[0], traj.earlier_steps[1] if len(traj.earlier_steps) > 1 else traj
    assert first.messages[-2].content.startswith("Your context is full.")
    assert first.messages[-1].content == "SUMMARY: read twice." and first.segments[-1].trainable
    assert second.messages[2] == Message(role="user", content="Summary of your work so far:\nSUMMARY: read twice.")


@pytest.mark.parametrize("budget", [1800, 1600])  # the last result waits for the compaction / already joined
def test_summarize_never_keeps_a_tool_result_without_its_call(tokenizer, budget) -> None:
    traj = play(tokenizer, [], agent("summarize", max_tokens=budget), policy=five_reads_then_answer(tokenizer))
    first, after = traj.earlier_steps[0], [*traj.earlier_steps, traj][1]
    assert first.messages[-3].role == ("assistant" if budget == 1800 else "tool")
    assert check_drift(tokenizer, first).ok  # the summary is asked for after the tool result, not after a reply's start
    assert [m.role for m in after.messages[2:4]] == ["user", "assistant"]  # the summary, then the policy goes on
    assert after.messages[3].content == CALL  # and calls again for what it had not read yet


def test_what_compaction_cannot_shorten_ends_the_episode_as_context_exhausted(tokenizer) -> None:
    config = agent("window", keep_turns=3, max_tokens=700)
    traj = play(tokenizer, [CALL], config)
    assert traj.stop_reason is StopReason.CONTEXT_EXHAUSTED and not compactions(traj)
    limited = play(tokenizer, [CALL], agent("drop_tool_outputs", max_compactions=1))
    assert limited.stop_reason is StopReason.CONTEXT_EXHAUSTED and len(compactions(limited)) == 1


def test_the_episode_budget_still_caps_the_whole_episode(tokenizer) -> None:
    config = agent("window", keep_turns=1).model_copy(update={"max_total_tokens": 3000})
    traj = play(tokenizer, [CALL], config)
    assert traj.stop_reason is StopReason.CONTEXT_OVERFLOW and compactions(traj)
    assert sum(s.num_generated_tokens for s in [*traj.earlier_steps, traj]) + 629 + 409 * traj.num_turns > 1400


def test_turn_credit_counts_the_turns_of_every_step_sample(tokenizer) -> None:
    traj = play(tokenizer, [], agent("window", keep_turns=1), policy=five_reads_then_answer(tokenizer))
    record_conversation_turns(traj)
    assert len(traj.turn_rewards) == traj.num_turns_in_all_steps() == traj.num_turns == 6


@register_context_strategy("test_keep_nothing_but_the_task")
def keep_the_task(request: CompactionRequest) -> list[Message]:
    return [*request.conversation[: request.head], Message(role="user", content="Go on.")]


def test_a_registered_strategy_rewrites_the_conversation(tokenizer) -> None:
    traj = play(tokenizer, [], agent("test_keep_nothing_but_the_task"), policy=five_reads_then_answer(tokenizer))
    assert traj.stop_reason is StopReason.DONE
    assert [*traj.earlier_steps, traj][1].messages[2] == Message(role="user", content="Go on.")


def test_forks_after_a_compaction_keep_budgets_of_their_own(tokenizer) -> None:
    ctx = AgentContext(
        sample=Sample(prompt=[Message(role="user", content="hi")]),
        trajectory=Trajectory(),
        llm=ScriptedPolicy(tokenizer, ["x"]),
        tokenizer=tokenizer,
        sampling=SamplingParams(),
        context=ContextManager(ContextConfig(max_tokens=500)),
    )
    ctx.start([Message(role="user", content="hi")])
    ctx.context.hold([Message(role="tool", content="x")], 3)
    one, two = ctx.fork(2)
    one.context.records.append("a compaction")
    one.context.pending.clear()
    assert two.context.pending and not two.context.records and one.context is not two.context
    assert two.context.head == ctx.context.head == 1


def cfg(*overrides: str):
    return load_config(overrides=["agent.name=tool_agent", "tools=[{class: calculator}]", *overrides])


def test_settings_that_cannot_work_are_refused_at_start() -> None:
    assert context_problems(cfg()) == []
    assert context_problems(cfg("agent.context.max_tokens=1024", "rollout.max_model_len=2048")) == []
    (too_long,) = context_problems(cfg("agent.context.max_tokens=2048", "rollout.max_model_len=2048"))
    assert "must be below rollout.max_model_len=2048" in too_long
    (unknown,) = context_problems(cfg("agent.context.max_tokens=1024", "agent.context.strategy=shrink"))
    assert "'shrink' is not known: use one of drop_tool_outputs, summarize" in unknown
    (summary,) = context_problems(
        cfg("agent.context.max_tokens=1900", "agent.context.strategy=summarize", "rollout.max_model_len=2048")
    )
    assert "lower agent.context.max_tokens or summary_max_tokens" in summary
    (loop,) = context_problems(load_config(overrides=["agent.context.max_tokens=1024"]))
    assert "the SingleTurnAgentLoop loop cannot compact" in loop and "remove agent.context.max_tokens" in loop
    gateway = load_config(overrides=["agent.name=openai_agent", "agent.context.max_tokens=1024"])
    assert "a gateway agent compacts its own history" in context_problems(gateway)[0]
