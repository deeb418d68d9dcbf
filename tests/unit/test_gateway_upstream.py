"""The gateway's upstream mode (`gateway.upstream`): another model's chat completions endpoint answers each call of
an agent (through chat completions and the Messages API), the agent gets the teacher's tool calls back, and the
session is recorded as the policy would have written the replies: the same tokens as the conversation rendered as a
chat row for supervised fine-tuning, no logprobs, the policy never asked. An upstream that does not answer is
refused, named. (A fake upstream: the real one is tests/integration/test_sft_real.py's.)"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from agentrl.config.schema import DataConfig
from agentrl.errors import UserError
from agentrl.gateway import Gateway
from agentrl.gateway.serve import parse_gateway_overrides, session_trajectory
from agentrl.gateway.upstream import Upstream
from agentrl.loops.testing import ScriptedPolicy
from agentrl.tools.parsers import get_parser
from agentrl.trainer.demonstrations import load_demonstrations, render_chat
from tests.unit.test_gateway import client
from tests.unit.test_gateway_messages_api import client as anthropic_client

LOOKUP = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
CALL = {"id": "up_1", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "alpha"}'}}
REPLIES = [
    ({"role": "assistant", "content": None, "tool_calls": [CALL]}, "tool_calls"),
    ({"role": "assistant", "content": "alpha is 42"}, "stop"),
]


class FakeUpstream:
    """An OpenAI-compatible endpoint answering with `REPLIES` in turn; it keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict] = []
        app = web.Application()
        app.router.add_get("/v1/models", lambda _: web.json_response({"data": [{"id": "teacher"}]}))
        app.router.add_post("/v1/chat/completions", self.complete)
        self.runner = web.AppRunner(app)

    async def complete(self, request: web.Request) -> web.Response:
        self.asked.append(await request.json())
        message, finish = REPLIES[(len(self.asked) - 1) % len(REPLIES)]
        return web.json_response({"choices": [{"index": 0, "message": message, "finish_reason": finish}]})

    async def __aenter__(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


async def test_a_teacher_upstream_answers_the_agent_and_its_replies_are_recorded_as_demonstrations(tokenizer):
    policy = ScriptedPolicy(tokenizer, [])
    teacher = FakeUpstream()
    async with teacher as url, Gateway(policy, tokenizer) as gateway:
        await asyncio.to_thread(Upstream(url).check)  # answers (the fake serves on this loop)
        session = gateway.open_session("taught", upstream=Upstream(url, model="teacher"))
        llm = client(session)
        messages: list = [{"role": "user", "content": "Look alpha up."}]
        first = await llm.chat.completions.create(model="student", messages=messages, tools=[LOOKUP])
        (call,) = first.choices[0].message.tool_calls
        assert (call.function.name, json.loads(call.function.arguments)) == ("lookup", {"key": "alpha"})
        assert first.choices[0].finish_reason == "tool_calls"
        messages += [first.choices[0].message.model_dump(exclude_none=True)]
        messages += [{"role": "tool", "tool_call_id": call.id, "content": "42"}]
        second = await llm.chat.completions.create(model="student", messages=messages, tools=[LOOKUP])
        assert second.choices[0].message.content == "alpha is 42"
    assert policy.calls == []  # the policy was never asked
    assert [a["model"] for a in teacher.asked] == ["teacher", "teacher"] and teacher.asked[0]["tools"] == [LOOKUP]
    assert teacher.asked[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "42"}
    trajectory = session_trajectory(gateway.close_session(session))
    replies = [s for s in trajectory.segments if s.trainable]
    assert [tokenizer.decode(s.token_ids) for s in replies][1] == "alpha is 42<|im_end|>"
    assert all(s.logprobs is None for s in replies)
    taught = [{"role": "user", "content": "Look alpha up."}, REPLIES[0][0]]
    taught += [{"role": "tool", "tool_call_id": "up_1", "content": "42"}, REPLIES[1][0]]
    row = render_chat(taught, tokenizer, get_parser("hermes"), tools=[LOOKUP])
    assert trajectory.token_ids == row.token_ids  # the recording is the chat row SFT would render


async def test_the_messages_api_goes_upstream_and_the_saved_session_is_an_sft_file(tokenizer, tmp_path):
    teacher = FakeUpstream()
    async with teacher as url, Gateway(ScriptedPolicy(tokenizer, []), tokenizer) as gateway:
        session = gateway.open_session("claude", upstream=Upstream(url))
        tool = {"name": "lookup", "input_schema": {"type": "object"}}
        asked = [{"role": "user", "content": "Look alpha up."}]
        reply = await anthropic_client(session).messages.create(
            model="claude-like", max_tokens=64, tools=[tool], messages=asked
        )
    (use,) = [b for b in reply.content if b.type == "tool_use"]
    assert (use.name, use.input, reply.stop_reason) == ("lookup", {"key": "alpha"}, "tool_use")
    assert teacher.asked[0]["model"] == "claude-like" and teacher.asked[0]["max_tokens"] <= 64
    saved = tmp_path / "sessions.jsonl"
    saved.write_text(session_trajectory(gateway.close_session(session)).to_json() + "\n")
    (row,) = load_demonstrations(DataConfig(demonstrations=[str(saved)]), tokenizer, get_parser("hermes"))
    assert get_parser("hermes").parse(tokenizer.decode(row.segments[-1].token_ids).removesuffix("<|im_end|>")).calls


def test_an_upstream_that_does_not_answer_is_refused_naming_it():
    with pytest.raises(UserError, match=r"gateway.upstream=http://127.0.0.1:9/v1 cannot be reached"):
        Upstream("http://127.0.0.1:9/v1").check()
    opts, rest = parse_gateway_overrides(["gateway.upstream=http://x/v1", "gateway.upstream_model=t", "model=m"])
    assert (opts.upstream, opts.upstream_model, rest) == ("http://x/v1", "t", ["model=m"])
    with pytest.raises(UserError, match="gateway.upstream and gateway.upstream_model"):
        parse_gateway_overrides(["gateway.teacher=x"])
