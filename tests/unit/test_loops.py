import asyncio

import pytest

from agentrl.config import AgentConfig, RolloutConfig
from agentrl.errors import AgentRLError
from agentrl.loops.base import AgentLoopBase, get_loop_class, register_loop
from agentrl.loops.context import StopLoop
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.single_turn import SingleTurnAgentLoop
from agentrl.loops.testing import ScriptedPolicy
from agentrl.types import Message, Sample, StopReason


def sample(text="hi", agent=None):
    return Sample(prompt=[Message(role="user", content=text)], agent_name=agent)


@register_loop("test_echo_twice")
class EchoTwice(AgentLoopBase):
    async def run(self, sample, ctx):
        ctx.start(sample.prompt)
        await ctx.generate()
        ctx.add_messages([Message(role="user", content="again")])
        await ctx.generate()
        return ctx.trajectory


@register_loop("test_crash")
class Crash(AgentLoopBase):
    async def run(self, sample, ctx):
        ctx.start(sample.prompt)
        raise ValueError("boom")


@register_loop("test_slow")
class Slow(AgentLoopBase):
    async def run(self, sample, ctx):
        await asyncio.sleep(10)
        return ctx.trajectory


@register_loop("test_forever")
class Forever(AgentLoopBase):
    async def run(self, sample, ctx):
        ctx.start(sample.prompt)
        while True:
            await ctx.generate()
            ctx.add_messages([Message(role="user", content="more")])


def manager(tokenizer, policy, **rollout):
    return RolloutManager(policy, tokenizer, AgentConfig(), RolloutConfig(**{"n": 1, **rollout}))


def test_registry_known_unknown_and_dotted():
    assert get_loop_class("single_turn") is SingleTurnAgentLoop
    assert get_loop_class("tests.unit.test_loops:EchoTwice") is EchoTwice
    assert get_loop_class("tests.unit.test_loops.EchoTwice") is EchoTwice
    with pytest.raises(AgentRLError, match="Known agent loops: .*single_turn.*tool_agent"):
        get_loop_class("nope")
    with pytest.raises(AgentRLError, match="has no attribute .Missing."):
        get_loop_class("tests.unit.test_loops:Missing")
    with pytest.raises(TypeError):
        register_loop("bad")(object)


async def test_single_turn_trajectory(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["hello"])
    (traj,) = await manager(tokenizer, policy).run([sample()])
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 1
    assert [s.trainable for s in traj.segments] == [False, True]
    assert tokenizer.decode(traj.segments[1].token_ids) == "hello<|im_end|>"
    assert traj.segments[1].logprobs == [-0.5] * len(traj.segments[1].token_ids)
    assert traj.messages[-1].content == "hello"
    assert policy.calls[0] == traj.segments[0].token_ids  # the prompt the server saw is the trajectory's


async def test_groups_and_sample_indices(tokenizer):
    trajs = await manager(tokenizer, ScriptedPolicy(tokenizer, ["x"]), n=3).run([sample("a"), sample("b")])
    assert len(trajs) == 6
    groups = {}
    for t in trajs:
        groups.setdefault(t.group_id, []).append(t.sample_index)
    assert sorted(map(sorted, groups.values())) == [[0, 1, 2], [0, 1, 2]]


async def test_agent_name_of_row_picks_loop(tokenizer):
    trajs = await manager(tokenizer, ScriptedPolicy(tokenizer, ["x"])).run([sample(agent="test_echo_twice"), sample()])
    assert [t.num_turns for t in trajs] == [2, 1]
    assert trajs[0].agent_name == "test_echo_twice"


async def test_failed_loop_is_recorded_and_siblings_finish(tokenizer):
    trajs = await manager(tokenizer, ScriptedPolicy(tokenizer, ["x"])).run(
        [sample(agent="test_crash"), sample(), sample(agent="no_such_loop")]
    )
    assert trajs[0].stop_reason is StopReason.ERROR and "ValueError: boom" in trajs[0].error
    assert trajs[1].stop_reason is StopReason.DONE
    assert trajs[2].stop_reason is StopReason.ERROR and "unknown agent loop" in trajs[2].error


async def test_server_failure_is_recorded(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["x"], fail_with=ConnectionError("server gone"))
    (traj,) = await manager(tokenizer, policy).run([sample()])
    assert traj.stop_reason is StopReason.ERROR and "server gone" in traj.error


async def test_trajectory_timeout(tokenizer):
    (traj,) = await manager(tokenizer, ScriptedPolicy(tokenizer, ["x"]), trajectory_timeout_s=0.05).run(
        [sample(agent="test_slow")]
    )
    assert traj.stop_reason is StopReason.TIMEOUT


async def test_stream_yields_in_completion_order_with_concurrency_cap(tokenizer):
    inflight = peak = 0

    async def slow_reply_policy(prompt_ids, sampling, session_id=None):
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        text = tokenizer.decode(prompt_ids)
        await asyncio.sleep(0.2 if "slow" in text else 0.01)
        inflight -= 1
        return await ScriptedPolicy(tokenizer, ["ok"]).generate(prompt_ids, sampling)

    class Policy:
        generate = staticmethod(slow_reply_policy)

    mgr = manager(tokenizer, Policy(), max_concurrency=3)
    order = [t.messages[0].content async for t in mgr.stream([sample("slow"), *[sample(f"f{i}") for i in range(6)]])]
    assert order[-1] == "slow" and len(order) == 7
    assert peak == 3


async def test_closing_stream_cancels_unfinished(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["x"], delay_s=0.05)
    mgr = manager(tokenizer, policy, max_concurrency=2)
    stream = mgr.stream([sample(str(i)) for i in range(10)])
    first = await stream.__anext__()
    await stream.aclose()
    await asyncio.sleep(0.1)
    assert first.stop_reason is StopReason.DONE
    assert len(policy.calls) < 10


async def test_max_turns_stop_reason(tokenizer):
    mgr = RolloutManager(ScriptedPolicy(tokenizer, ["x"]), tokenizer, AgentConfig(max_turns=3), RolloutConfig(n=1))
    (traj,) = await mgr.run([sample(agent="test_forever")])
    assert traj.stop_reason is StopReason.MAX_TURNS and traj.num_turns == 3


async def test_max_tokens_per_turn_stop_reason(tokenizer):
    mgr = manager(tokenizer, ScriptedPolicy(tokenizer, ["a very long reply indeed"]), max_tokens=5)
    (traj,) = await mgr.run([sample()])
    assert traj.stop_reason is StopReason.MAX_TOKENS
    assert len(traj.segments[-1].token_ids) == 5


async def test_cut_turns_can_continue_and_a_trajectory_ending_on_one_is_max_tokens(tokenizer):
    long, short = "a very long reply indeed", "ok"
    agent = AgentConfig(on_cut_turn="continue")
    policy = ScriptedPolicy(tokenizer, [long, short])
    (traj,) = await RolloutManager(policy, tokenizer, agent, RolloutConfig(n=1, max_tokens=5)).run(
        [sample(agent="test_echo_twice")]
    )
    assert traj.stop_reason is StopReason.DONE and traj.num_turns == 2
    assert traj.metrics["loop/cut_turns"] == 1.0
    cut, last = (s.token_ids for s in traj.segments if s.trainable)
    assert len(cut) == 5 and cut[-1] != tokenizer.eos_token_id and last[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(traj.segments[2].token_ids).startswith("<|im_end|>")  # its end comes from the template
    assert check_drift(tokenizer, traj).ok
    policy = ScriptedPolicy(tokenizer, [long])
    (traj,) = await RolloutManager(policy, tokenizer, agent, RolloutConfig(n=1, max_tokens=5)).run([sample()])
    assert traj.stop_reason is StopReason.MAX_TOKENS and traj.num_turns == 1  # ended on a cut reply: ctx.finish()


async def test_total_token_budget_is_context_overflow(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    prompt_len = len(tokenizer.encode(text, add_special_tokens=False))
    for budget_left in (3, 40):
        mgr = RolloutManager(
            ScriptedPolicy(tokenizer, ["twenty chars of text"]),
            tokenizer,
            AgentConfig(max_total_tokens=prompt_len + budget_left, max_turns=10),
            RolloutConfig(n=1, max_tokens=50),
        )
        (traj,) = await mgr.run([sample(agent="test_forever")])
        assert traj.stop_reason is StopReason.CONTEXT_OVERFLOW
        assert traj.num_tokens <= prompt_len + budget_left


async def test_prompt_too_long_is_context_overflow(tokenizer):
    mgr = RolloutManager(
        ScriptedPolicy(tokenizer, ["x"]), tokenizer, AgentConfig(max_total_tokens=10), RolloutConfig(n=1)
    )
    (traj,) = await mgr.run([sample("a prompt longer than ten tokens")])
    assert traj.stop_reason is StopReason.CONTEXT_OVERFLOW and traj.num_turns == 0


async def test_stop_loop_from_user_code_and_system_prompt(tokenizer):
    @register_loop("test_stopper")
    class Stopper(AgentLoopBase):
        async def run(self, sample, ctx):
            ctx.start(sample.prompt)
            raise StopLoop(StopReason.SANDBOX_ERROR, "sandbox died")

    mgr = RolloutManager(
        ScriptedPolicy(tokenizer, ["x"]), tokenizer, AgentConfig(system_prompt="Be brief."), RolloutConfig(n=1)
    )
    (traj,) = await mgr.run([sample(agent="test_stopper")])
    assert traj.stop_reason is StopReason.SANDBOX_ERROR
    assert traj.messages[0].role == "system" and traj.messages[0].content == "Be brief."


async def test_abort_from_server_is_aborted(tokenizer):
    class Aborting(ScriptedPolicy):
        async def generate(self, prompt_ids, sampling, session_id=None):
            out = await super().generate(prompt_ids, sampling, session_id)
            out.finish_reason = "abort"
            return out

    (traj,) = await manager(tokenizer, Aborting(tokenizer, ["x"])).run([sample()])
    assert traj.stop_reason is StopReason.ABORTED


async def test_teardown_runs_even_on_failure(tokenizer):
    torn = []
    mgr = RolloutManager(
        ScriptedPolicy(tokenizer, ["x"]),
        tokenizer,
        rollout=RolloutConfig(n=1),
        teardown_context=lambda ctx: torn.append(ctx.trajectory.id),
    )
    trajs = await mgr.run([sample(agent="test_crash"), sample()])
    assert sorted(torn) == sorted(t.id for t in trajs)
