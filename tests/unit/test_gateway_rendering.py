"""Assistant messages the gateway did not generate (an agent's few-shot example, a resumed session) keep their
tool calls in the prompt: in the chat template's own call format when it has one, else in the parser's."""

from __future__ import annotations

import copy
import json

import openai
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.drift import check_drift
from agentrl.loops.testing import ScriptedPolicy
from tests.unit.test_gateway import CALL, TOOL, client

FOREIGN_CALL = {"id": "call_x", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
HISTORY = [
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": None, "tool_calls": [FOREIGN_CALL]},  # not generated through this gateway
    {"role": "tool", "tool_call_id": "call_x", "content": "5"},
    {"role": "user", "content": "And now?"},
]


def calling_template(tokenizer):
    """The tokenizer with a template that writes tool calls its own way."""
    marked = copy.deepcopy(tokenizer)
    marked.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
        "{% for c in m.get('tool_calls') or [] %}<call>{{ c.function.name }} {{ c.function.arguments | tojson }}"
        "</call>{% endfor %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return marked


async def test_foreign_tool_calls_are_written_as_the_model_emits_them_when_the_template_has_no_format(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        await client(session).chat.completions.create(model="p", messages=HISTORY, tools=[TOOL])
    prompt = tokenizer.decode(policy.calls[0])
    assert f"<|im_start|>assistant\n{CALL}<|im_end|>" in prompt  # the hermes text the parser reads back
    (trajectory,) = session.recorder.steps
    assert check_drift(tokenizer, trajectory).ok


async def test_foreign_tool_calls_go_to_a_template_that_writes_calls(tokenizer):
    marked = calling_template(tokenizer)
    policy = ScriptedPolicy(marked, ["It is 5."])
    async with Gateway(policy, marked) as gateway:
        session = gateway.open_session()
        await client(session).chat.completions.create(model="p", messages=HISTORY)
    prompt = marked.decode(policy.calls[0])
    assert '<|im_start|>assistant\n<call>add {"a": 2, "b": 3}</call><|im_end|>' in prompt
    assert check_drift(marked, session.recorder.steps[0]).ok


async def test_a_foreign_call_appended_to_a_recorded_conversation_extends_it_with_the_call(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["Hello.", "It is 5."])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session()
        llm = client(session)
        messages = [{"role": "user", "content": "hi"}]
        reply = await llm.chat.completions.create(model="p", messages=messages)
        messages += [reply.choices[0].message.model_dump(), *HISTORY]
        await llm.chat.completions.create(model="p", messages=messages)
    assert session.recorder.calls[1].prefix_matched
    assert f"<|im_start|>assistant\n{CALL}<|im_end|>" in tokenizer.decode(policy.calls[1])
    assert check_drift(tokenizer, session.recorder.steps[0]).ok


async def test_foreign_tool_call_arguments_that_are_not_a_json_object_get_a_400(tokenizer):
    broken = copy.deepcopy(HISTORY)
    broken[1]["tool_calls"][0]["function"]["arguments"] = json.dumps([2, 3])
    async with Gateway(ScriptedPolicy(tokenizer, ["x"]), tokenizer) as gateway:
        with pytest.raises(openai.BadRequestError, match="must be a JSON object") as refused:
            await client(gateway.open_session()).chat.completions.create(model="p", messages=broken)
    assert refused.value.body["param"] == "messages[1].tool_calls[0].function.arguments"
