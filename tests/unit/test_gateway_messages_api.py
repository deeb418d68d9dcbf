"""Anthropic's Messages API at the gateway, through the official `anthropic` SDK against a scripted policy:
`messages.create` and `messages.stream` over several tool-use turns recorded as one token-exact trajectory, stop
sequences, token counting, models, and malformed requests answered with a 400 that names the field."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from tests.unit.test_gateway import CALL, trainable_ids

ADD = {
    "name": "add",
    "description": "Add two numbers.",
    "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
}
SYSTEM = [{"type": "text", "text": "You add numbers.", "cache_control": {"type": "ephemeral"}}]


def client(session) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=session.base_url.removesuffix("/v1"), api_key="unused", max_retries=0)


async def test_tool_use_over_several_turns_is_one_token_exact_trajectory(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", CALL, "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        messages: list = [{"role": "user", "content": "What is 2 + 3?"}]
        replies = []
        for _ in range(3):
            reply = await llm.messages.create(
                model="policy", max_tokens=256, system=SYSTEM, tools=[ADD], messages=messages
            )
            replies.append(reply)
            messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
            uses = [b for b in reply.content if b.type == "tool_use"]
            if uses:
                results = [{"type": "tool_result", "tool_use_id": u.id, "content": "5"} for u in uses]
                messages.append({"role": "user", "content": results})
    first, second, last = replies
    assert [b.type for b in first.content] == ["text", "tool_use"] and first.content[0].text == "Let me add."
    assert (first.content[1].name, first.content[1].input) == ("add", {"a": 2, "b": 3})
    assert first.stop_reason == "tool_use" and [b.type for b in second.content] == ["tool_use"]
    assert last.stop_reason == "end_turn" and last.content[0].text == "It is 5."
    assert last.usage.output_tokens == len(session.recorder.calls[-1].output_ids)
    assert last.usage.input_tokens == session.recorder.calls[-1].prompt_tokens
    (trajectory,) = session.recorder.steps  # the history the SDK sent back extended the recording each time
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True, True]
    for call, prompt in zip(session.recorder.calls, policy.calls, strict=True):
        assert trajectory.token_ids[: len(prompt)] == prompt and call.prompt_tokens == len(prompt)
    assert trainable_ids(trajectory) == [t for c in session.recorder.calls for t in c.output_ids]
    assert check_drift(tokenizer, trajectory).ok
    assert "You add numbers." in tokenizer.decode(trajectory.token_ids)


async def test_the_stream_merges_into_the_message_and_the_next_call_extends_it(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        messages: list = [{"role": "user", "content": "What is 2 + 3?"}]
        async with llm.messages.stream(model="p", max_tokens=256, tools=[ADD], messages=messages) as stream:
            texts = [text async for text in stream.text_stream]
            streamed = await stream.get_final_message()
        (use,) = [b for b in streamed.content if b.type == "tool_use"]
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in streamed.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "5"}]},
        ]
        async with llm.messages.stream(model="p", max_tokens=256, tools=[ADD], messages=messages) as stream:
            final = await stream.get_final_message()
    assert len(texts) > 3 and "".join(texts) == "Let me add." and not any("<" in t for t in texts)
    assert (use.name, use.input) == ("add", {"a": 2, "b": 3}) and streamed.stop_reason == "tool_use"
    assert final.content[0].text == "It is 5." and final.stop_reason == "end_turn"
    assert streamed.usage.input_tokens == session.recorder.calls[0].prompt_tokens
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True]
    assert check_drift(tokenizer, session.recorder.steps[0]).ok


async def test_a_stop_sequence_is_reported_and_counting_tokens_records_nothing(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["one two END"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = client(session)
        hi = [{"role": "user", "content": "count"}]
        counted = await llm.messages.count_tokens(model="p", system="Be brief.", messages=hi)
        assert session.recorder.calls == []
        reply = await llm.messages.create(
            model="p", max_tokens=32, system="Be brief.", messages=hi, stop_sequences=["END", "STOP"]
        )
        models = await llm.models.list()
    assert counted.input_tokens == session.recorder.calls[0].prompt_tokens == len(policy.calls[0])
    assert reply.stop_reason == "stop_sequence" and reply.stop_sequence == "END"
    assert [m.id for m in models.data] == ["policy"]


async def test_a_failed_tool_result_reaches_the_policy_as_an_error(tokenizer):
    policy = ScriptedPolicy(tokenizer, [CALL, "It failed."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = client(session)
        messages: list = [{"role": "user", "content": "What is 2 + 3?"}]
        reply = await llm.messages.create(model="p", max_tokens=256, tools=[ADD], messages=messages)
        (use,) = [b for b in reply.content if b.type == "tool_use"]
        failed = {"type": "tool_result", "tool_use_id": use.id, "content": "add: not found", "is_error": True}
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
            {"role": "user", "content": [failed]},
        ]
        await llm.messages.create(model="p", max_tokens=256, tools=[ADD], messages=messages)
    (tool,) = [m for m in session.recorder.steps[0].messages if m.role == "tool"]
    assert tool.content == "Error: add: not found"  # as agentrl's own tools write a failed call
    assert "Error: add: not found" in tokenizer.decode(policy.calls[1])
    assert session.recorder.calls[1].prefix_matched


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
        ({"max_tokens": 8, "messages": []}, "messages"),
        ({"max_tokens": 8, "messages": [{"role": "tool", "content": "hi"}]}, "messages.0.role"),
        ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image"}]}]}, "messages.0.content.0"),
        ({"max_tokens": 8, "messages": [{"role": "user", "content": 3}]}, "messages.0.content"),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "x"}]},
            "tools.0.input_schema",
        ),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "tools": [ADD],
             "tool_choice": {"type": "any"}},
            "tool_choice",
        ),
        ({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "mcp_servers": []}, "mcp_servers"),
        (
            {"max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "no", "is_error": "yes"}]}]},
            "messages.0.content.0.is_error",
        ),
    ],
)  # fmt: skip
async def test_a_malformed_request_gets_a_400_naming_the_field(tokenizer, body, field):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        session = gateway.open_session()
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{session.base_url}/messages", json={"model": "p", **body})
    assert answer.status_code == 400
    error = answer.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert f"`{field}`" in error["error"]["message"]
    assert session.recorder.calls == []


async def test_the_sdk_raises_anthropics_errors_for_a_refusal_and_an_unknown_session(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        session = gateway.open_session()
        with pytest.raises(anthropic.BadRequestError, match="only custom tools"):
            await client(session).messages.create(
                model="p", max_tokens=8, messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "bash_20250124", "name": "bash"}],
            )  # fmt: skip
        gone = anthropic.AsyncAnthropic(base_url=f"{gateway.url}/s/nope", api_key="x", max_retries=0)
        with pytest.raises(anthropic.NotFoundError, match="unknown session"):
            await gone.messages.create(model="p", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
