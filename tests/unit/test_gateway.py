"""The gateway against a scripted policy, through the official `openai` SDK: exact tokens, step samples, tool
calls, streaming, budgets and session isolation."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from agentrl.gateway import Gateway, SessionLimits
from agentrl.loops.chat_template import encode, render
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.protocol import SamplingParams
from agentrl.types import Message

TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
    },
}
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


def client(session) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)


def trainable_ids(trajectory) -> list[int]:
    return [t for s in trajectory.segments if s.trainable for t in s.token_ids]


async def test_a_conversation_resent_by_the_sdk_is_one_token_exact_trajectory(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"reply {i}" for i in range(5)])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        messages = [{"role": "system", "content": "Be brief."}]
        for turn in range(5):
            messages.append({"role": "user", "content": f"question {turn}"})
            reply = await llm.chat.completions.create(model="policy", messages=messages)
            messages.append(reply.choices[0].message.model_dump())  # the SDK's own serialization
            assert reply.choices[0].message.content == f"reply {turn}"
            assert reply.usage.completion_tokens == len(session.recorder.calls[-1].output_ids)
    (trajectory,) = session.recorder.steps
    assert trajectory.id == "traj"
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True, True, True, True]
    assert session.recorder.prefix_reuse_rate == 1.0
    for call, prompt in zip(session.recorder.calls, policy.calls, strict=True):
        assert call.prompt_tokens == len(prompt)
        assert trajectory.token_ids[: len(prompt)] == prompt  # what the policy saw is what was recorded
    generated = [t for c in session.recorder.calls for t in c.output_ids]
    assert trainable_ids(trajectory) == generated
    assert trajectory.token_ids[: len(policy.calls[-1])] == policy.calls[-1]
    assert check_drift(tokenizer, trajectory).ok


async def test_a_dropped_message_starts_a_new_step_sample_each_exact(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["one", "two", "three"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        messages = [{"role": "user", "content": "first"}]
        for text in ("second", "third"):
            reply = await llm.chat.completions.create(model="policy", messages=messages)
            messages += [reply.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": text}]
        compacted = messages[2:]  # the client drops the first exchange
        await llm.chat.completions.create(model="policy", messages=compacted)
    first, second = session.recorder.steps
    assert [c.step for c in session.recorder.calls] == [0, 0, 1]
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True, False]
    assert second.id == "traj-step1"
    rendered = [Message(role=m["role"], content=m["content"]) for m in compacted]
    expected_prompt = encode(tokenizer, render(tokenizer, rendered, add_generation_prompt=True))
    assert policy.calls[2] == expected_prompt == second.token_ids[: len(expected_prompt)]
    assert trainable_ids(second) == session.recorder.calls[2].output_ids
    assert trainable_ids(first) == session.recorder.calls[0].output_ids + session.recorder.calls[1].output_ids
    assert check_drift(tokenizer, first).ok and check_drift(tokenizer, second).ok
    assert session.recorder.prefix_reuse_rate == 0.5


async def test_tool_calls_are_parsed_and_the_tool_result_extends_the_trajectory(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        messages = [{"role": "user", "content": "What is 2 + 3?"}]
        first = await llm.chat.completions.create(model="policy", messages=messages, tools=[TOOL], tool_choice="auto")
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert (call.function.name, call.function.arguments, choice.message.content) == (
            "add",
            '{"a": 2, "b": 3}',
            "Let me add.",
        )
        messages += [choice.message.model_dump(), {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        second = await llm.chat.completions.create(model="policy", messages=messages, tools=[TOOL])
    assert second.choices[0].message.content == "It is 5." and second.choices[0].finish_reason == "stop"
    (trajectory,) = session.recorder.steps
    assert session.recorder.calls[1].prefix_matched
    assert "add" in tokenizer.decode(policy.calls[0])  # the tools reached the prompt (system-prompt fallback)
    assert CALL in tokenizer.decode(trajectory.token_ids)  # the model's own text, not a re-serialization


async def test_streamed_chunks_merge_into_the_non_streamed_reply(tokenizer):
    script = [f"A somewhat longer answer that spans several stream pieces.\n{CALL}"]
    async with Gateway(ScriptedPolicy(tokenizer, script), tokenizer) as gateway:
        plain = await client(gateway.open_session()).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], tools=[TOOL]
        )
        stream = await client(gateway.open_session()).chat.completions.create(
            model="policy",
            messages=[{"role": "user", "content": "hi"}],
            tools=[TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    message = plain.choices[0].message
    assert len(chunks) > 4
    assert content == message.content
    assert [(tc.id, tc.function.name, tc.function.arguments) for tc in calls] == [
        (tc.id, tc.function.name, tc.function.arguments) for tc in message.tool_calls
    ]
    assert finish == [plain.choices[0].finish_reason]
    assert chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_the_sync_sdk_client_works_against_the_gateway(tokenizer):
    async def main() -> str:
        async with Gateway(ScriptedPolicy(tokenizer, ["hello"]), tokenizer) as gateway:
            session = gateway.open_session()
            sync = openai.OpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
            call = lambda: sync.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])  # noqa: E731
            reply = await asyncio.to_thread(call)
            assert [m.id for m in (await asyncio.to_thread(sync.models.list)).data] == ["policy"]
            return reply.choices[0].message.content

    assert asyncio.run(main()) == "hello"


async def test_the_turn_budget_answers_an_error_the_agent_sees_and_ends_the_session(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["ok"]), tokenizer) as gateway:
        session = gateway.open_session(limits=SessionLimits(max_turns=2))
        llm = client(session)
        messages = [{"role": "user", "content": "hi"}]
        for _ in range(2):
            reply = await llm.chat.completions.create(model="policy", messages=messages)
            messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "again"}]
        with pytest.raises(openai.BadRequestError, match="turn budget spent") as refused:
            await llm.chat.completions.create(model="policy", messages=messages)
    assert refused.value.code == "max_turns"
    assert session.stop_reason == "max_turns"


async def test_token_and_time_budgets(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["a reply of a fair number of characters"])
    async with Gateway(policy, tokenizer) as gateway:
        short = gateway.open_session(limits=SessionLimits(max_total_tokens=60, max_tokens_per_turn=8))
        reply = await client(short).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=100
        )
        assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 8  # capped
        with pytest.raises(openai.BadRequestError, match="token budget spent") as overflow:
            long_prompt = [{"role": "user", "content": "x" * 80}]
            await client(short).chat.completions.create(model="policy", messages=long_prompt)
        assert overflow.value.code == "context_overflow"
        late = gateway.open_session(limits=SessionLimits(max_wall_s=0.0))
        await asyncio.sleep(0.01)
        with pytest.raises(openai.BadRequestError, match="time budget spent"):
            await client(late).chat.completions.create(model="policy", messages=[{"role": "user", "content": "hi"}])
        assert late.stop_reason == "time_budget"


async def test_a_reply_cut_by_the_trajectory_token_budget_ends_the_session_as_context_overflow(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["a reply of a fair number of characters"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(limits=SessionLimits(max_total_tokens=30))
        hi = [{"role": "user", "content": "hi"}]
        reply = await client(session).chat.completions.create(model="policy", messages=hi)
        assert reply.choices[0].finish_reason == "length"  # answered, cut where the budget ends
        assert reply.usage.prompt_tokens + reply.usage.completion_tokens == 30
        assert session.stop_reason == "context_overflow"  # no later call could have room
        with pytest.raises(openai.BadRequestError, match="token budget spent") as refused:
            await client(session).chat.completions.create(model="policy", messages=hi)
    assert refused.value.code == "context_overflow"


async def test_the_sessions_sampling_max_tokens_caps_a_reply_the_agent_leaves_open(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["a reply of a fair number of characters"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(sampling=SamplingParams(max_tokens=5))
        hi = [{"role": "user", "content": "hi"}]
        open_ended = await client(session).chat.completions.create(model="policy", messages=hi)
        asked_more = await client(session).chat.completions.create(model="policy", messages=hi, max_tokens=50)
    assert open_ended.usage.completion_tokens == asked_more.usage.completion_tokens == 5


async def test_sessions_are_isolated_and_closed_sessions_refuse(tokenizer):
    policy = ScriptedPolicy(tokenizer, [lambda conversation: f"seen {conversation.count('secret')}"])
    async with Gateway(policy, tokenizer) as gateway:
        a, b = gateway.open_session("a"), gateway.open_session("b")
        assert a.base_url != b.base_url and a.id not in b.base_url
        await client(a).chat.completions.create(model="p", messages=[{"role": "user", "content": "secret"}])
        reply = await client(b).chat.completions.create(model="p", messages=[{"role": "user", "content": "hello"}])
        assert reply.choices[0].message.content == "seen 0"  # b's prompt holds nothing of a's
        assert len(a.recorder.calls) == len(b.recorder.calls) == 1
        gateway.close_session(a)
        with pytest.raises(openai.NotFoundError):
            await client(a).chat.completions.create(model="p", messages=[{"role": "user", "content": "again"}])
        guessed = openai.AsyncOpenAI(base_url=f"{gateway.url}/s/not-a-session/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="unknown session"):
            await guessed.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])


async def test_a_failed_generation_is_retried_on_the_same_prompt(tokenizer):
    from agentrl.rollout.errors import ServerUnavailableError

    policy = ScriptedPolicy(tokenizer, ["fine"], fail_with=ServerUnavailableError(["http://replica"]))
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        messages = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.APIStatusError, match="rollout server failed") as failed:
            await client(session).chat.completions.create(model="p", messages=messages)
        assert failed.value.status_code == 502
        policy.fail_with = None
        reply = await client(session).chat.completions.create(model="p", messages=messages)
    assert reply.choices[0].message.content == "fine"
    (trajectory,) = session.recorder.steps  # the retry did not start a second step
    assert policy.calls[0] == policy.calls[1] and check_drift(tokenizer, trajectory).ok


async def test_requests_the_gateway_cannot_serve_get_a_clear_400(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        llm = client(gateway.open_session())
        with pytest.raises(openai.BadRequestError, match="n must be 1"):
            await llm.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}], n=2)
        image = [{"type": "image_url", "image_url": {"url": "data:,"}}]
        with pytest.raises(openai.BadRequestError, match="image inputs are not supported"):
            await llm.chat.completions.create(model="p", messages=[{"role": "user", "content": image}])


def test_gateway_command_options_are_split_from_the_config_overrides(monkeypatch):
    from agentrl.errors import UserError
    from agentrl.gateway.serve import parse_gateway_overrides

    monkeypatch.setenv("AGENTRL_GATEWAY_TOKEN", "s3cret")  # a host other machines reach needs one
    opts, rest = parse_gateway_overrides(["recipe=quickstart", "gateway.port=9001", "gateway.host=0.0.0.0"])
    assert (opts.host, opts.port, opts.token, rest) == ("0.0.0.0", 9001, "s3cret", ["recipe=quickstart"])
    with pytest.raises(UserError, match="gateway.host, gateway.port, gateway.upstream"):
        parse_gateway_overrides(["gateway.prot=1"])
    with pytest.raises(UserError, match="port number"):
        parse_gateway_overrides(["gateway.port=http"])


async def test_on_demand_sessions_are_saved_when_closed_or_at_shutdown(tokenizer):
    from agentrl.gateway.serve import session_trajectory

    saved = []
    policy = ScriptedPolicy(tokenizer, ["one", "two"])
    async with Gateway(policy, tokenizer, on_demand=True, on_close=saved.append) as gateway:
        named = openai.AsyncOpenAI(base_url=f"{gateway.url}/s/mine/v1", api_key="x", max_retries=0)
        bare = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
        await named.chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
        await bare.chat.completions.create(model="p", messages=[{"role": "user", "content": "hello"}])
        async with httpx.AsyncClient() as http:
            closed = await http.post(f"{gateway.url}/s/mine/close")
        assert closed.json() == {"id": "mine", "calls": 1} and [s.id for s in saved] == ["mine"]
    assert [s.id for s in saved] == ["mine", "default"]
    traj = session_trajectory(saved[1])
    assert traj is not None and traj.id == "default" and traj.stop_reason == "done" and traj.num_turns == 1
    assert check_drift(tokenizer, traj).ok


async def test_a_template_that_rewrites_earlier_turns_gets_a_new_step_not_an_error(tokenizer):
    import copy

    marking = copy.deepcopy(tokenizer)  # a template that marks the last message: earlier renderings change
    marking.chat_template = tokenizer.chat_template.replace(
        "message['content'] + '<|im_end|>'", "message['content'] + ('!' if loop.last else '') + '<|im_end|>'"
    )
    policy = ScriptedPolicy(marking, ["one", "two"])
    async with Gateway(policy, marking) as gateway:
        session = gateway.open_session()
        messages = [{"role": "user", "content": "hi"}]
        reply = await client(session).chat.completions.create(model="p", messages=messages)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "more"}]
        second = await client(session).chat.completions.create(model="p", messages=messages)
    assert second.choices[0].message.content == "two"
    assert [c.step for c in session.recorder.calls] == [0, 1]
    rendered = [Message(role=m["role"], content=m["content"]) for m in messages]
    assert policy.calls[1] == encode(marking, render(marking, rendered, add_generation_prompt=True))


async def test_a_generation_a_weight_push_aborts_resumes_from_its_prefix(tokenizer):
    from agentrl.loops.testing import ScriptedOutput

    class PushedMidTurn:
        """Aborts the first generation after 'Hello' (a weight push), then finishes it on version 1."""

        def __init__(self) -> None:
            self.prompts: list[list[int]] = []

        async def generate(self, prompt_ids, sampling, session_id=None):
            self.prompts.append(list(prompt_ids))
            if len(self.prompts) == 1:
                ids = tokenizer.encode("Hello", add_special_tokens=False)
                return ScriptedOutput(ids, [-0.1] * len(ids), "abort", policy_version=0)
            ids = [*tokenizer.encode(" world", add_special_tokens=False), tokenizer.eos_token_id]
            return ScriptedOutput(ids, [-0.2] * len(ids), "stop", policy_version=1)

    policy = PushedMidTurn()
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(resume_aborted=True)
        reply = await client(session).chat.completions.create(model="p", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "Hello world"
    first, second = policy.prompts
    assert second == first + tokenizer.encode("Hello", add_special_tokens=False)  # the exact prefix
    (trajectory,) = session.recorder.steps
    assert [s.policy_version for s in trajectory.segments if s.trainable] == [0, 1]
    assert session.metrics["rollout/resumed_generations"] == 1.0 and check_drift(tokenizer, trajectory).ok


async def test_a_call_still_generating_when_its_session_closes_is_refused_not_recorded(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["first", "late"], delay_s=0.3)
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        messages = [{"role": "user", "content": "hi"}]
        reply = await client(session).chat.completions.create(model="p", messages=messages)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "more"}]
        late = asyncio.create_task(client(session).chat.completions.create(model="p", messages=messages))
        await asyncio.sleep(0.1)  # generating now
        gateway.close_session(session)
        saved = list(session.recorder.steps[0].token_ids)
        with pytest.raises(openai.NotFoundError, match="ended while the call was generating"):
            await late
    assert session.recorder.steps[0].token_ids == saved  # the handed-over trajectory did not change
    assert [c.output_ids != [] for c in session.recorder.calls] == [True, False]


async def test_tool_calls_are_parsed_only_when_the_request_offered_tools(tokenizer):
    policy = ScriptedPolicy(tokenizer, [CALL, CALL, CALL])
    async with Gateway(policy, tokenizer) as gateway:
        llm = client(gateway.open_session())
        ask = [{"role": "user", "content": "add"}]
        plain = await llm.chat.completions.create(model="p", messages=ask)
        refused = await client(gateway.open_session()).chat.completions.create(
            model="p", messages=ask, tools=[TOOL], tool_choice="none"
        )
        offered = await client(gateway.open_session()).chat.completions.create(model="p", messages=ask, tools=[TOOL])
    for reply in (plain, refused):
        assert reply.choices[0].message.tool_calls is None and reply.choices[0].message.content == CALL
        assert reply.choices[0].finish_reason == "stop"
    assert offered.choices[0].finish_reason == "tool_calls" and len(offered.choices[0].message.tool_calls) == 1


async def test_a_generation_cut_by_a_weight_push_answers_length_without_resume(tokenizer):
    from agentrl.loops.testing import ScriptedOutput

    class Aborting:
        async def generate(self, prompt_ids, sampling, session_id=None):
            ids = tokenizer.encode("Hel", add_special_tokens=False)
            return ScriptedOutput(ids, [-0.1] * len(ids), "abort", policy_version=0)

    async with Gateway(Aborting(), tokenizer) as gateway:
        reply = await client(gateway.open_session()).chat.completions.create(
            model="p", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].finish_reason == "length"  # an OpenAI finish reason agents know


async def test_after_a_failed_call_a_different_request_starts_a_clean_step_sample(tokenizer):
    from agentrl.rollout.errors import ServerUnavailableError

    policy = ScriptedPolicy(tokenizer, ["one", "two"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        messages = [{"role": "user", "content": "hi"}]
        reply = await client(session).chat.completions.create(model="p", messages=messages)
        messages += [reply.choices[0].message.model_dump(), {"role": "user", "content": "more"}]
        policy.fail_with = ServerUnavailableError(["http://replica"])
        with pytest.raises(openai.APIStatusError):
            await client(session).chat.completions.create(model="p", messages=messages)
        policy.fail_with = None
        changed = [*messages[:-1], {"role": "user", "content": "something else"}]  # not a retry of the same call
        await client(session).chat.completions.create(model="p", messages=changed)
    first, second = session.recorder.steps
    rendered = [Message(role=m["role"], content=m["content"]) for m in changed]
    assert policy.calls[-1] == encode(tokenizer, render(tokenizer, rendered, add_generation_prompt=True))
    assert second.token_ids[: len(policy.calls[-1])] == policy.calls[-1]
    assert "more" not in tokenizer.decode(second.token_ids)  # nothing of the failed call's prompt
    assert check_drift(tokenizer, first).ok and check_drift(tokenizer, second).ok


async def test_malformed_request_bodies_get_a_400_that_says_what_is_wrong(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        url = f"{gateway.open_session().base_url}/chat/completions"
        async with httpx.AsyncClient() as http:
            cases = {
                "[1, 2]": "JSON object",
                '{"messages": "hi"}': "non-empty list of message objects",
                '{"messages": []}': "non-empty list",
                '{"messages": [{"role": "user", "content": "hi"}], "tools": {"a": 1}}': "`tools` must be a list",
                '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}': "positive integer",
            }
            for body, expected in cases.items():
                answer = await http.post(url, content=body, headers={"Content-Type": "application/json"})
                assert answer.status_code == 400, body
                assert expected in answer.json()["error"]["message"], body
