"""`stream: true` through the gateway, with a scripted policy that streams one token per chunk: content goes out
as the tokens arrive, the chunks merge into the recorded reply, and errors before and after the first token."""

from __future__ import annotations

import openai
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.errors import StreamBrokenError
from tests.unit.test_gateway import CALL, TOOL, client

HI = [{"role": "user", "content": "hi"}]


async def chunks_of(stream) -> list:
    return [chunk async for chunk in stream]


def content_of(chunks) -> list[str]:
    return [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]


async def test_content_is_streamed_token_by_token_and_recorded_exactly(tokenizer):
    text = "A reply of several tokens."
    policy = ScriptedPolicy(tokenizer, [text, "Next."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        chunks = await chunks_of(await llm.chat.completions.create(model="p", messages=HI, stream=True))
        messages = [
            *HI,
            {"role": "assistant", "content": "".join(content_of(chunks))},
            {"role": "user", "content": "more"},
        ]
        await llm.chat.completions.create(model="p", messages=messages)
    pieces = content_of(chunks)
    assert len(pieces) == len(tokenizer.encode(text, add_special_tokens=False))  # one piece per token
    assert "".join(pieces) == text and chunks[-1].choices[0].finish_reason == "stop"
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True]  # the streamed reply is ours
    (trajectory,) = session.recorder.steps
    assert check_drift(tokenizer, trajectory).ok


async def test_with_tools_the_text_before_a_call_streams_and_the_call_follows_parsed(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = client(session)
        stream = await llm.chat.completions.create(model="p", messages=HI, tools=[TOOL], stream=True)
        chunks = await chunks_of(stream)
        calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
        (call,) = calls
        assistant = {"role": "assistant", "content": "".join(content_of(chunks)), "tool_calls": [call.model_dump()]}
        assistant["tool_calls"][0].pop("index")
        messages = [*HI, assistant, {"role": "tool", "tool_call_id": call.id, "content": "5"}]
        await llm.chat.completions.create(model="p", messages=messages, tools=[TOOL])
    assert content_of(chunks)[:3] == ["L", "e", "t"] and "".join(content_of(chunks)) == "Let me add."
    assert not any("<" in piece for piece in content_of(chunks))  # nothing of the call leaked as content
    assert (call.function.name, call.function.arguments) == ("add", '{"a": 2, "b": 3}')
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert session.recorder.calls[1].prefix_matched


async def test_a_refusal_before_the_first_token_is_an_ordinary_error(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        llm = client(gateway.open_session())
        with pytest.raises(openai.BadRequestError, match="`temperature` must be a number"):
            await llm.chat.completions.create(model="p", messages=HI, stream=True, temperature="hot")


async def test_a_failure_after_the_first_token_ends_the_stream_with_an_error_event(tokenizer):
    class BreaksOff(ScriptedPolicy):
        async def generate_stream(self, prompt_ids, sampling, session_id=None, *, on_tokens):
            await on_tokens(tokenizer.encode("Hel", add_special_tokens=False))
            raise StreamBrokenError("http://replica", 3, "connection reset")

    policy = BreaksOff(tokenizer, ["unused"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        stream = await client(session).chat.completions.create(model="p", messages=HI, stream=True)
        with pytest.raises(openai.APIError, match="broke off a streamed generation"):
            await chunks_of(stream)
    assert [c.output_ids for c in session.recorder.calls] == [[]]  # nothing recorded
    assert session.recorder.generated_steps == []
