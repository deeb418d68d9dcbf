"""What the gateway refuses: malformed requests get a 4xx naming the field, a rollout server's 4xx stays a 4xx,
and refused calls never become trainable trajectories."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from agentrl.gateway import Gateway, SessionLimits
from agentrl.gateway.serve import session_trajectory
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.errors import ServerRequestError
from tests.unit.test_gateway import client

HI = [{"role": "user", "content": "hi"}]
MALFORMED = {
    "stop": ({"stop": 5}, "`stop` must be a string or a list of strings"),
    "temperature": ({"temperature": "hot"}, "`temperature` must be a number"),
    "top_p": ({"top_p": 2}, "`top_p` must be a number above 0 up to 1"),
    "top_k": ({"top_k": "many"}, "`top_k` must be an integer"),
    "seed": ({"seed": 1.5}, "`seed` must be an integer"),
    "stream": ({"stream": "yes"}, "`stream` must be true or false"),
    "tools[0]": ({"tools": [{"type": "function"}]}, "`tools[0]` must be"),
    "tool_choice": ({"tool_choice": "sometimes"}, '`tool_choice` must be "none", "auto"'),
    "messages[0].role": ({"messages": [{"role": "robot", "content": "hi"}]}, "`messages[0].role` must be one of"),
    "messages[0].content": ({"messages": [{"role": "user", "content": 5}]}, "must be a string or a list of text"),
    "messages[1].tool_calls[0]": (
        {"messages": [*HI, {"role": "assistant", "content": None, "tool_calls": [{"function": {}}]}]},
        '`messages[1].tool_calls[0]` must be {"type": "function"',
    ),
}


async def post(url: str, content: bytes) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(url, content=content, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("param", list(MALFORMED))
async def test_a_malformed_field_gets_a_400_naming_it(tokenizer, param):
    fields, message = MALFORMED[param]
    policy = ScriptedPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        url = f"{gateway.open_session().base_url}/chat/completions"
        answer = await post(url, json.dumps({"messages": HI, **fields}).encode())
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == param and message in answer.json()["error"]["message"]
    assert policy.calls == []  # refused before anything reached the policy


async def test_a_body_that_is_not_utf8_gets_a_400(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        url = f"{gateway.open_session().base_url}/chat/completions"
        answer = await post(url, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}')
    assert answer.status_code == 400 and "not UTF-8" in answer.json()["error"]["message"]


async def test_sampling_values_out_of_range_get_a_400_the_sdk_raises(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        llm = client(gateway.open_session(honour_request_sampling=True))
        for values in ({"temperature": -1}, {"top_p": 2}, {"top_p": 0}, {"max_tokens": 0}):
            with pytest.raises(openai.BadRequestError, match=f"`{next(iter(values))}` must be"):
                await llm.chat.completions.create(model="p", messages=HI, **values)


async def test_a_rollout_servers_4xx_stays_a_4xx_with_its_message(tokenizer):
    refused = ServerRequestError("http://replica", 400, "This model's maximum context length is 2048 tokens")
    policy = ScriptedPolicy(tokenizer, ["x"], fail_with=refused)
    async with Gateway(policy, tokenizer) as gateway:
        llm = client(gateway.open_session())
        with pytest.raises(openai.BadRequestError, match="maximum context length is 2048"):
            await llm.chat.completions.create(model="p", messages=HI)
        policy.fail_with = ServerRequestError("http://replica", 503, "overloaded (after 5 retries)")
        with pytest.raises(openai.APIStatusError, match="rollout server failed") as failed:
            await llm.chat.completions.create(model="p", messages=HI)
    assert failed.value.status_code == 502


async def test_a_session_whose_calls_were_all_refused_is_no_trainable_trajectory(tokenizer):
    refused = ServerRequestError("http://replica", 400, "bad request")
    policy = ScriptedPolicy(tokenizer, ["x"], fail_with=refused)
    async with Gateway(policy, tokenizer) as gateway:
        failing = gateway.open_session("failing")
        with pytest.raises(openai.BadRequestError):
            await client(failing).chat.completions.create(model="p", messages=HI)
        overflowing = gateway.open_session("overflowing", limits=SessionLimits(max_total_tokens=10))
        with pytest.raises(openai.BadRequestError, match="token budget spent"):
            await client(overflowing).chat.completions.create(model="p", messages=HI)
    for session in (failing, overflowing):
        assert session.recorder.generated_steps == []
        trajectory = session_trajectory(session)
        assert trajectory is not None and trajectory.failed and trajectory.segments == []
        assert trajectory.error and "no call was answered" in trajectory.error


async def test_a_refused_last_call_leaves_the_answered_ones_trainable(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["a fair reply"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj", limits=SessionLimits(max_total_tokens=40))
        first = await client(session).chat.completions.create(model="p", messages=HI)
        rewritten = [{"role": "user", "content": "x" * 60}]  # a new step sample, over the token budget
        with pytest.raises(openai.BadRequestError, match="token budget spent"):
            await client(session).chat.completions.create(model="p", messages=rewritten)
    assert len(session.recorder.steps) == 2 and len(session.recorder.generated_steps) == 1
    trajectory = session_trajectory(session)
    assert trajectory is not None and trajectory.stop_reason == "context_overflow" and not trajectory.failed
    assert trajectory.earlier_steps == []
    assert first.usage.completion_tokens == sum(len(s.token_ids) for s in trajectory.segments if s.trainable)
