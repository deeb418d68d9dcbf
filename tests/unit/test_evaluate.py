"""`agentrl eval` pieces without servers: option parsing, the summary, the chat-API policy."""

import asyncio
from types import SimpleNamespace

import pytest

from agentrl.errors import AgentRLError
from agentrl.evaluate import ChatPolicy, chat_messages, parse_eval_overrides, result_row, summarize_eval
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Message, StopReason, Trajectory


def test_eval_options_are_split_from_the_config_overrides():
    opts, rest = parse_eval_overrides(
        ["recipe=swe_agent", "eval.limit=3", "eval.greedy=false", "rollout.base_url=http://h:1/v1", "rollout.n=2"]
    )
    assert (opts.limit, opts.greedy, opts.base_url, opts.split, opts.n) == (3, False, "http://h:1/v1", "eval", 1)
    assert rest == ["recipe=swe_agent", "rollout.n=2"]
    with pytest.raises(AgentRLError, match="eval.split=eval|train"):
        parse_eval_overrides(["eval.bogus=1"])
    with pytest.raises(AgentRLError, match="bad eval option"):
        parse_eval_overrides(["eval.limit=many"])


def traj(reward, components, resolved=None, stop=StopReason.DONE):
    details = {"resolved": {"resolved": resolved}} if resolved is not None else {}
    return Trajectory(reward=reward, reward_components=components, reward_details=details, stop_reason=stop,
                      metadata={"sample_id": "t"})  # fmt: skip


def test_summary_reports_resolved_rate_and_component_means():
    rows = [
        result_row(traj(1.2, {"resolved": 1.0, "f2p": 1.0}, True)),
        result_row(traj(0.1, {"resolved": 0.0, "f2p": 0.5}, False, StopReason.MAX_TURNS)),
    ]
    summary = summarize_eval(rows, 3.0)
    assert summary["resolved_rate"] == 0.5 and summary["mean_reward"] == pytest.approx(0.65)
    assert summary["components"] == {"f2p": 0.75, "resolved": 0.5}
    assert summary["stop_reasons"] == {"done": 1, "max_turns": 1}
    assert summarize_eval([result_row(traj(1.0, {"exact": 1.0}))], 1.0)["resolved_rate"] is None


def test_summary_breaks_results_down_per_task():
    a, b, c = traj(1.0, {}, True), traj(0.0, {}, False), traj(0.5, {}, None)
    a.metadata["data_source"], b.metadata["data_source"], c.metadata["data_source"] = "click", "click", "type"
    per_task = summarize_eval([result_row(t) for t in (a, b, c)], 1.0)["per_task"]
    assert per_task == {
        "click": {"trajectories": 2, "mean_reward": 0.5, "resolved_rate": 0.5},
        "type": {"trajectories": 1, "mean_reward": 0.5, "resolved_rate": None},
    }


def test_chat_messages_keep_image_parts_of_user_messages():
    parts = [{"type": "text", "text": "click"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]
    out = chat_messages([Message(role="user", content=parts), Message(role="tool", content="ok")])
    assert out[0] == {"role": "user", "content": parts}
    assert out[1]["content"] == "<tool_response>\nok\n</tool_response>"


def test_chat_messages_turn_tool_results_into_user_turns():
    messages = [
        Message(role="system", content="s"),
        Message(role="user", content="u"),
        Message(role="assistant", content='<tool_call>{"name": "bash"}</tool_call>'),
        Message(role="tool", content="out1", name="bash", tool_call_id="call_0"),
        Message(role="tool", content="out2", name="bash", tool_call_id="call_1"),
    ]
    out = chat_messages(messages)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[-1]["content"] == "<tool_response>\nout1\n</tool_response>\n<tool_response>\nout2\n</tool_response>"


def test_chat_policy_calls_the_api_with_the_trajectory_messages(tokenizer, monkeypatch):
    seen = {}

    async def acompletion(**kwargs):
        seen.update(kwargs)
        choice = SimpleNamespace(message=SimpleNamespace(content="hello"), finish_reason="stop")
        return SimpleNamespace(choices=[choice])

    import agentrl.rewards.judge as judge

    monkeypatch.setattr(judge, "_litellm", lambda: SimpleNamespace(acompletion=acompletion))
    policy = ChatPolicy("my-model", tokenizer, "http://h:1/v1", None, 30.0)
    manager = SimpleNamespace(setup_context=None, teardown_context=None)
    policy.attach(manager)
    ctx = SimpleNamespace(trajectory=Trajectory(id="t1", messages=[Message(role="user", content="hi")]))
    asyncio.run(manager.setup_context(ctx))
    out = asyncio.run(policy.generate([1, 2], SamplingParams(max_tokens=7, temperature=0.0), session_id="t1"))
    assert seen["model"] == "openai/my-model" and seen["api_base"] == "http://h:1/v1" and seen["api_key"] == "EMPTY"
    assert seen["messages"] == [{"role": "user", "content": "hi"}] and seen["max_tokens"] == 7
    assert tokenizer.decode(out.token_ids[:-1]) == "hello" and out.token_ids[-1] == tokenizer.eos_token_id
    asyncio.run(manager.teardown_context(ctx))
    with pytest.raises(AgentRLError, match="unknown trajectory"):
        asyncio.run(policy.generate([1], SamplingParams(), session_id="t1"))
