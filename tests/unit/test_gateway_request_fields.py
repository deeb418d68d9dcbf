"""Which request fields the gateway honours, ignores and refuses: a field that would change the reply is applied or
refused with a 400 naming it, never silently dropped."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import openai
import pytest

import agentrl.gateway.session as session_module
from agentrl.config import AgentConfig, RolloutConfig, load_config
from agentrl.gateway import Gateway
from agentrl.gateway.agent_loop import corrects_truncation
from agentrl.gateway.messages_api import MESSAGES_FIELDS
from agentrl.gateway.request_fields import HONOURED, IGNORED, REFUSED, api_fields_table, fields_tables
from agentrl.gateway.responses_api import RESPONSES_FIELDS
from agentrl.loops.manager import RolloutManager
from agentrl.loops.policy_clients import PolicyClients
from agentrl.loops.testing import ScriptedPolicy
from agentrl.types import Message, Sample, StopReason

DOC = Path(__file__).resolve().parents[2] / "docs" / "guides" / "existing-agent.md"
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


class SamplingPolicy(ScriptedPolicy):
    """A scripted policy that keeps the sampling settings of each call."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sampling = []

    async def generate(self, prompt_ids, sampling, session_id=None):
        self.sampling.append(sampling)
        return await super().generate(prompt_ids, sampling, session_id)


async def post(session, body: dict) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{session.base_url}/chat/completions", json=body)


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


async def test_harmless_fields_and_the_defaults_of_refused_ones_are_answered(tokenizer):
    harmless = {"store": True, "user": "u-1", "metadata": {"run": "a"}, "service_tier": "auto", "prediction": None}
    defaults = {"frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}, "logprobs": False}
    defaults |= {"response_format": {"type": "text"}, "parallel_tool_calls": True, "top_k": -1, "modalities": ["text"]}
    policy = ScriptedPolicy(tokenizer, ["fine"])
    async with Gateway(policy, tokenizer) as gateway:
        answer = await post(gateway.open_session(), {"messages": HI, "stream_options": None, **harmless, **defaults})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "fine"


def test_each_field_is_in_one_list_and_the_docs_quote_the_lists():
    assert not (HONOURED.keys() & IGNORED.keys() or HONOURED.keys() & REFUSED.keys() or IGNORED.keys() & REFUSED.keys())
    page = DOC.read_text()
    quoted = page.split("do not edit by hand) -->\n")[1].split("<!-- request-fields:end -->")[0]
    assert quoted == fields_tables(), f"write fields_tables() between the request-fields markers of {DOC}"


TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
FORCED = {"required": "required", "named": {"type": "function", "function": {"name": "add"}}}


@pytest.mark.parametrize("kind", list(FORCED))
async def test_a_tool_choice_the_gateway_cannot_force_gets_a_400_naming_it(tokenizer, kind):
    policy = ScriptedPolicy(tokenizer, ["no call at all"])
    async with Gateway(policy, tokenizer) as gateway:
        body = {"messages": HI, "tools": [TOOL], "tool_choice": FORCED[kind]}
        answer = await post(gateway.open_session(), body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "tool_choice" and '"auto"' in error["message"]  # says what to send instead
    assert policy.calls == []


async def test_a_training_session_refuses_an_agents_greedy_decoding_with_a_400_naming_temperature(tokenizer):
    policy = ScriptedPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        answer = await post(gateway.open_session(honour_request_sampling=True), {"messages": HI, "temperature": 0})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "temperature" and "greedy" in error["message"]
    assert "temperature above 0" in error["message"]  # says what to send instead
    assert policy.calls == []


async def test_an_evaluation_session_and_a_frozen_policy_decode_greedily_when_the_agent_asks(tokenizer):
    evaluated, frozen = SamplingPolicy(tokenizer, ["x"]), SamplingPolicy(tokenizer, ["y"])
    async with Gateway(evaluated, tokenizer) as gateway:
        session = gateway.open_session(honour_request_sampling=True, trains=False)
        answer = await post(session, {"messages": HI, "temperature": 0})
    assert answer.status_code == 200 and evaluated.sampling[0].temperature == 0
    assert session.recorder.steps[0].segments[-1].temperature == 0
    clients = PolicyClients({"learner": SamplingPolicy(tokenizer, ["z"]), "opponent": frozen}, frozen={"opponent"})
    async with Gateway(clients, tokenizer) as gateway:
        answer = await post(
            gateway.open_session(honour_request_sampling=True), {"messages": HI, "temperature": 0, "model": "opponent"}
        )
    assert answer.status_code == 200 and frozen.sampling[0].temperature == 0  # its replies are never trained


async def greedy_agent(base_url: str, model: str, sample: Sample, sandbox) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    reply = await client.chat.completions.create(model=model, messages=HI, temperature=0)
    return reply.choices[0].message.content or ""


@pytest.mark.parametrize("run_temperature", [0.0, 1.0])
def test_the_openai_agent_loop_takes_an_agents_greedy_decoding_in_evaluation_only(tokenizer, run_temperature):
    """Held-out evaluation runs the loop at temperature 0; a training rollout samples (greedy runs are refused)."""
    policy = SamplingPolicy(tokenizer, ["greedy answer"])
    agent = AgentConfig(
        name="openai_agent",
        kwargs={"entry_point": f"{__name__}:greedy_agent", "honour_request_sampling": True},
    )
    manager = RolloutManager(policy, tokenizer, agent, RolloutConfig(n=1, temperature=run_temperature))
    (traj,) = asyncio.run(manager.run([Sample(prompt=[Message(role="user", content="hello")])]))
    if run_temperature == 0.0:
        assert traj.stop_reason == StopReason.DONE and traj.metadata["agent_result"] == "greedy answer"
        assert [s.temperature for s in policy.sampling] == [0.0]
    else:
        assert traj.failed and policy.calls == []  # refused at the gateway, never a trainable trajectory
        assert "`temperature: 0` is greedy decoding" in (traj.error or "")


TRUNCATING = {"top_p": 0.9, "top_k": 5}


@pytest.mark.parametrize("field", list(TRUNCATING))
async def test_a_training_session_refuses_an_agents_truncated_sampling_with_a_400_naming_it(tokenizer, field):
    policy = ScriptedPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(honour_request_sampling=True)
        answer = await post(session, {"messages": HI, field: TRUNCATING[field]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == field and "truncates the sampling distribution" in error["message"]
    assert "leave it out" in error["message"] and "trainer.tis_cap" in error["message"]  # the two ways out
    assert policy.calls == []


async def test_an_evaluation_session_applies_the_agents_top_p_and_top_k(tokenizer):
    policy = SamplingPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(honour_request_sampling=True, trains=False)
        answer = await post(session, {"messages": HI, **TRUNCATING})
        off = await post(session, {"messages": HI, "top_k": 0})  # "off" to OpenAI-style clients
    assert answer.status_code == off.status_code == 200
    assert [(s.top_p, s.top_k) for s in policy.sampling] == [(0.9, 5), (1.0, -1)]


async def test_with_trainer_tis_cap_a_training_session_applies_truncated_sampling_and_warns(tokenizer, caplog):
    session_module._warn_truncated.cache_clear()  # the warning is once per process
    policy = SamplingPolicy(tokenizer, ["x"])
    async with Gateway(policy, tokenizer) as gateway:
        session = gateway.open_session(honour_request_sampling=True, truncation_corrected=True)
        with caplog.at_level(logging.WARNING, logger="agentrl.gateway.session"):
            answer = await post(session, {"messages": HI, "top_p": 0.9})
    assert answer.status_code == 200 and policy.sampling[0].top_p == 0.9
    (warning,) = caplog.messages
    assert "`top_p` truncates the sampling distribution" in warning and "trainer.tis_cap corrects it" in warning


def test_the_openai_agent_loop_lets_truncated_sampling_through_only_when_every_learner_corrects_it():
    assert not corrects_truncation(None)
    assert not corrects_truncation(load_config("quickstart"))
    assert corrects_truncation(load_config("quickstart", ["trainer.tis_cap=2"]))
    two = ["policies={a: {trainer: {tis_cap: 2}}, b: {}}"]
    assert not corrects_truncation(load_config("quickstart", two))
    assert corrects_truncation(load_config("quickstart", [*two, "trainer.tis_cap=3"]))
    frozen = ["policies={a: {trainer: {tis_cap: 2}}, b: {trainable: false}}"]
    assert corrects_truncation(load_config("quickstart", frozen))


@pytest.mark.parametrize(("marker", "fields"), [("messages", MESSAGES_FIELDS), ("responses", RESPONSES_FIELDS)])
def test_the_docs_quote_the_messages_and_responses_fields(marker, fields):
    quoted = DOC.read_text().split(f"<!-- {marker}-fields:start")[1].split("-->\n", 1)[1]
    assert quoted.split(f"<!-- {marker}-fields:end -->")[0] == api_fields_table(fields)
