"""OpenAI's Responses API at the gateway, through the official `openai` SDK against a scripted policy: function
calls over several turns (the whole input re-sent, or continued by `previous_response_id`) recorded as one
token-exact trajectory, the event stream, and malformed requests answered with a 400 that names the field."""

from __future__ import annotations

import httpx
import openai
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from tests.unit.test_gateway import CALL, client, trainable_ids

ADD = {
    "type": "function",
    "name": "add",
    "description": "Add two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
}


def outputs_of(response) -> list[dict]:
    return [item.model_dump(exclude_none=True) for item in response.output]


async def test_function_calls_with_the_whole_input_resent_are_one_token_exact_trajectory(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        items: list = [{"role": "user", "content": "What is 2 + 3?"}]
        first = await llm.responses.create(model="p", instructions="You add.", input=items, tools=[ADD], store=False)
        (call,) = [item for item in first.output if item.type == "function_call"]
        items += [*outputs_of(first), {"type": "function_call_output", "call_id": call.call_id, "output": "5"}]
        last = await llm.responses.create(model="p", instructions="You add.", input=items, tools=[ADD], store=False)
    assert [item.type for item in first.output] == ["message", "function_call"]
    assert first.output_text == "Let me add." and (call.name, call.arguments) == ("add", '{"a": 2, "b": 3}')
    assert last.output_text == "It is 5." and last.status == "completed"
    assert last.usage.input_tokens == session.recorder.calls[-1].prompt_tokens
    assert last.usage.output_tokens == len(session.recorder.calls[-1].output_ids)
    (trajectory,) = session.recorder.steps
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True]
    for prompt in policy.calls:
        assert trajectory.token_ids[: len(prompt)] == prompt
    assert trainable_ids(trajectory) == [t for c in session.recorder.calls for t in c.output_ids]
    assert check_drift(tokenizer, trajectory).ok


async def test_previous_response_id_continues_the_conversation_without_its_instructions(tokenizer):
    policy = ScriptedPolicy(tokenizer, [CALL, "It is 5.", "Bye."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        first = await llm.responses.create(model="p", instructions="You add.", input="2 + 3?", tools=[ADD])
        (call,) = first.output
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "5"}
        second = await llm.responses.create(
            model="p", instructions="You add.", previous_response_id=first.id, input=[output], tools=[ADD]
        )
        third = await llm.responses.create(
            model="p", instructions="Be short.", previous_response_id=second.id, input="thanks", tools=[ADD]
        )
        with pytest.raises(openai.BadRequestError, match="previous_response_id"):
            await llm.responses.create(model="p", previous_response_id="resp_nope", input="hi")
    assert [r.output_text for r in (second, third)] == ["It is 5.", "Bye."]
    assert [c.prefix_matched for c in session.recorder.calls[:2]] == [False, True]
    assert len(session.recorder.steps) == 2  # new instructions rewrite the history: a new step sample
    third_prompt = tokenizer.decode(policy.calls[2])
    assert "Be short." in third_prompt and "You add." not in third_prompt and "2 + 3?" in third_prompt
    assert all(check_drift(tokenizer, step).ok for step in session.recorder.steps)


async def test_the_event_stream_merges_into_the_response_and_the_next_call_extends_it(tokenizer):
    policy = ScriptedPolicy(tokenizer, [f"Let me add.\n{CALL}", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session("traj")
        llm = client(session)
        items: list = [{"role": "user", "content": "What is 2 + 3?"}]
        async with llm.responses.stream(model="p", input=items, tools=[ADD]) as stream:
            events = [event async for event in stream]
            streamed = await stream.get_final_response()
        (call,) = [item for item in streamed.output if item.type == "function_call"]
        items += [*outputs_of(streamed), {"type": "function_call_output", "call_id": call.call_id, "output": "5"}]
        final = await llm.responses.create(model="p", input=items, tools=[ADD], stream=True)
        final_events = [event async for event in final]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 3 and "".join(deltas) == "Let me add." and not any("<" in d for d in deltas)
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert streamed.output_text == "Let me add." and (call.name, call.arguments) == ("add", '{"a": 2, "b": 3}')
    assert final_events[-1].response.output_text == "It is 5."
    assert [c.prefix_matched for c in session.recorder.calls] == [False, True]
    assert check_drift(tokenizer, session.recorder.steps[0]).ok


async def test_a_reply_cut_at_its_budget_is_incomplete(tokenizer):
    async with Gateway(ScriptedPolicy(tokenizer, ["a long reply that is cut"]), tokenizer) as gateway:
        response = await client(gateway.open_session()).responses.create(model="p", input="hi", max_output_tokens=3)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": []}, "input"),
        ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "add", "arguments": "{"}]}, "input[0].arguments"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "tools": [ADD], "tool_choice": "required"}, "tool_choice"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "hi", "text": {"format": {"type": "json_schema"}}}, "text.format"),
        ({"input": "hi", "background": True}, "background"),
    ],
)
async def test_a_malformed_request_gets_a_400_naming_the_field(tokenizer, body, field):
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        session = gateway.open_session()
        async with httpx.AsyncClient() as http:
            answer = await http.post(f"{session.base_url}/responses", json={"model": "p", **body})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == field and f"`{field}`" in error["message"]
    assert session.recorder.calls == []
