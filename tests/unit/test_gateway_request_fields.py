"""Which request fields the gateway honours, ignores and refuses: a field that would change the reply is applied or
refused with a 400 naming it, never silently dropped."""

from __future__ import annotations

import httpx
import pytest

from agentrl.gateway import Gateway
from agentrl.loops.testing import ScriptedPolicy

HI = [{"role": "user", "content": "hi"}]
NOT_APPLIED = {
    "frequency_penalty": 0.5,
    "presence_penalty": -1.0,
    "logit_bias": {"42": 100},
    "response_format": {"type": "json_object"},
    "logprobs": True,
    "parallel_tool_calls": False,
    "min_p": 0.1,  # a vLLM extra
    "mirostat_tau": 5.0,  # a field no list names
}


async def post(session, body: dict) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{session.base_url}/chat/completions", json=body)


@pytest.mark.xfail(strict=True, reason="gateway fields: a field that changes generation is silently ignored")
@pytest.mark.parametrize("field", list(NOT_APPLIED))
async def test_a_field_that_would_change_the_reply_and_is_not_applied_gets_a_400_naming_it(tokenizer, field):
    policy = ScriptedPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        answer = await post(gateway.open_session(), {"messages": HI, field: NOT_APPLIED[field]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == field and f"`{field}`" in error["message"]
    assert "remove it" in error["message"] or "omit it" in error["message"]  # says what to do
    assert policy.calls == []
