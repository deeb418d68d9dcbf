"""The gateway in front of the real `hf` server and the default model, driven by the official `openai` SDK
(sync, async, streaming, with tools): every call's tokens are recorded as the server generated them, a 5-turn
conversation re-sent as the SDK does is one token-exact trajectory, and a dropped message makes exact step
samples."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from agentrl.gateway import Gateway, SessionLimits
from agentrl.gateway.serve import session_trajectory
from agentrl.loops.drift import check_drift
from agentrl.rollout import LLMClient
from agentrl.rollout.protocol import SamplingParams

pytestmark = pytest.mark.integration

TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up in the dictionary.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    },
}
SAMPLING = SamplingParams(temperature=1.0, max_tokens=24, seed=7)


class Recording:
    """The rollout client, keeping what the server returned for each call."""

    def __init__(self, llm: LLMClient) -> None:
        self.llm, self.outputs = llm, []

    async def generate(self, prompt_ids, sampling, session_id=None):
        out = await self.llm.generate(prompt_ids, sampling, session_id=session_id)
        self.outputs.append(out)
        return out


def trainable_ids(trajectory) -> list[int]:
    return [t for s in trajectory.segments if s.trainable for t in s.token_ids]


async def test_five_sdk_turns_with_tools_and_streaming_are_one_exact_trajectory(hf_server_url, default_tokenizer):
    async with LLMClient([hf_server_url]) as llm:
        recording = Recording(llm)
        async with Gateway(recording, default_tokenizer) as gateway:
            session = gateway.open_session("five", sampling=SAMPLING)
            sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
            messages = [{"role": "user", "content": "Name an animal."}]
            for turn in range(5):
                if turn % 2:
                    stream = await sdk.chat.completions.create(
                        model="policy", messages=messages, tools=[TOOL], stream=True
                    )
                    content = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
                    reply = {"role": "assistant", "content": content}  # as a streaming client rebuilds it
                else:
                    answer = await sdk.chat.completions.create(model="policy", messages=messages, tools=[TOOL])
                    reply = answer.choices[0].message.model_dump()
                messages += [reply, {"role": "user", "content": f"Another one ({turn + 1})."}]
    (trajectory,) = session.recorder.steps
    calls = session.recorder.calls
    assert [c.prefix_matched for c in calls] == [False, True, True, True, True]
    assert [c.output_ids for c in calls] == [list(out.token_ids) for out in recording.outputs]
    assert [c.logprobs for c in calls] == [out.logprobs for out in recording.outputs]
    assert trainable_ids(trajectory) == [t for out in recording.outputs for t in out.token_ids]
    report = check_drift(default_tokenizer, trajectory)
    assert report.kind != "template", str(report)
    first_prompt = trajectory.token_ids[: calls[0].prompt_tokens]
    assert "lookup" in default_tokenizer.decode(first_prompt)  # the tool reached the prompt


async def test_a_dropped_message_makes_exact_step_samples_and_the_sync_client_works(hf_server_url, default_tokenizer):
    async with LLMClient([hf_server_url]) as llm, Gateway(llm, default_tokenizer) as gateway:
        session = gateway.open_session("dropped", sampling=SAMPLING)
        sdk = openai.OpenAI(base_url=session.base_url, api_key="unused", max_retries=0)

        def chat(messages):
            return sdk.chat.completions.create(model="policy", messages=messages).choices[0].message

        messages = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "A colour?"}]
        for follow_up in ("A fruit?", "A number?"):
            reply = await asyncio.to_thread(chat, messages)
            messages += [reply.model_dump(exclude_none=True), {"role": "user", "content": follow_up}]
        await asyncio.to_thread(chat, [messages[0], *messages[3:]])  # the first exchange dropped
    first, second = session.recorder.steps
    calls = session.recorder.calls
    assert [c.step for c in calls] == [0, 0, 1] and not calls[2].prefix_matched
    assert trainable_ids(first) == calls[0].output_ids + calls[1].output_ids
    assert trainable_ids(second) == calls[2].output_ids
    for step in (first, second):
        report = check_drift(default_tokenizer, step)
        assert report.kind != "template", str(report)


async def test_agentrl_gateway_serves_sessions_and_saves_them_for_the_viewer(hf_server_url, tmp_path):
    from agentrl.config import load_config
    from agentrl.gateway.serve import GatewayOptions, serve_gateway
    from agentrl.types import Trajectory
    from agentrl.viewer import build_viewer

    cfg = load_config(overrides=["recipe=quickstart", f"rollout.urls=[{hf_server_url}]", f"output_dir={tmp_path}"])
    ready, stop = asyncio.get_running_loop().create_future(), asyncio.Event()
    serving = asyncio.ensure_future(serve_gateway(cfg, GatewayOptions(port=0), ready, stop))
    url = await asyncio.wait_for(ready, 120)
    for base in (f"{url}/v1", f"{url}/s/agent-2/v1"):
        sdk = openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0)
        messages = [{"role": "user", "content": "Say only the word kettle."}]
        first = await sdk.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
        messages += [first.choices[0].message.model_dump(), {"role": "user", "content": "Again."}]
        await sdk.chat.completions.create(model="default", messages=messages, max_tokens=8, temperature=0)
    stop.set()
    out = await serving
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    trajectories = sorted((Trajectory.model_validate_json(line) for line in lines), key=lambda t: t.id)
    assert [t.id for t in trajectories] == ["agent-2", "default"]
    assert all(t.num_turns == 2 and t.metrics["gateway/prefix_reuse_rate"] == 1.0 for t in trajectories)
    page = build_viewer(out, tokenizer=None)
    assert "agent-2" in page.read_text()


class StreamRecording(Recording):
    """The rollout client, streaming, keeping what the server returned for each call."""

    async def generate_stream(self, prompt_ids, sampling, session_id=None, *, on_tokens):
        out = await self.llm.generate_stream(prompt_ids, sampling, session_id=session_id, on_tokens=on_tokens)
        self.outputs.append(out)  # the generation is over
        return out


FOREIGN_HISTORY = [
    {"role": "user", "content": "What does 'ephemeral' mean?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "ephemeral"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "lasting for a very short time"},
]


async def test_a_history_with_tool_calls_the_gateway_did_not_generate_keeps_them_in_the_prompt(
    hf_server_url, default_tokenizer
):
    async with LLMClient([hf_server_url]) as llm, Gateway(llm, default_tokenizer) as gateway:
        session = gateway.open_session("foreign", sampling=SAMPLING)
        sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
        await sdk.chat.completions.create(model="policy", messages=FOREIGN_HISTORY, tools=[TOOL])
    (trajectory,) = session.recorder.steps
    prompt = default_tokenizer.decode(trajectory.token_ids[: session.recorder.calls[0].prompt_tokens])
    assistant_turn = prompt.split("<|im_start|>assistant\n")[1]  # the foreign turn, before the tool result
    assert '"name": "lookup"' in assistant_turn and '"arguments": {"word": "ephemeral"}' in assistant_turn
    assert check_drift(default_tokenizer, trajectory).kind != "template"


async def test_malformed_requests_and_bad_sampling_values_get_a_4xx(hf_server_url, default_tokenizer):
    hi = [{"role": "user", "content": "hi"}]
    async with LLMClient([hf_server_url]) as llm, Gateway(llm, default_tokenizer) as gateway:
        session = gateway.open_session("malformed", sampling=SAMPLING, honour_request_sampling=True)
        sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
        wrong = [{"stop": 5}, {"temperature": "hot"}, {"temperature": -1}, {"top_p": 2}, {"seed": "seven"}]
        for fields in wrong:
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.chat.completions.create(model="policy", messages=hi, extra_body=fields)
            assert refused.value.body["param"] == next(iter(fields)), fields
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{session.base_url}/chat/completions",
                content=b'{"messages": [{"role": "user", "content": "caf\xe9"}]}',  # latin-1, not UTF-8
                headers={"Content-Type": "application/json"},
            )
        assert answer.status_code == 400 and "not UTF-8" in answer.json()["error"]["message"]
        roomy = gateway.open_session("too-long", sampling=SAMPLING, limits=SessionLimits(max_total_tokens=10**6))
        sdk = openai.AsyncOpenAI(base_url=roomy.base_url, api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="maximum context length"):  # the server's own 400
            await sdk.chat.completions.create(model="policy", messages=[{"role": "user", "content": "word " * 2100}])
    assert session.recorder.calls == [] and session_trajectory(session) is None
    failed = session_trajectory(roomy)
    assert failed is not None and failed.failed and failed.segments == []  # a refused call is not training data


async def test_a_streamed_reply_arrives_in_chunks_while_it_is_generated_and_is_recorded_exactly(
    hf_server_url, default_tokenizer
):
    async with LLMClient([hf_server_url]) as llm:
        recording = StreamRecording(llm)
        async with Gateway(recording, default_tokenizer) as gateway:
            session = gateway.open_session("streamed", sampling=SamplingParams(temperature=0.0, max_tokens=24))
            sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
            messages = [{"role": "user", "content": "Tell me a short story about a lighthouse."}]
            stream = await sdk.chat.completions.create(model="policy", messages=messages, stream=True)
            pieces, finished, generating = [], [], []
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    assert not finished, "content after the finish reason"
                    pieces.append(chunk.choices[0].delta.content)
                    generating.append(not recording.outputs)
                if chunk.choices and chunk.choices[0].finish_reason:
                    finished.append(chunk.choices[0].finish_reason)
    assert len(pieces) > 1 and finished == ["length"]  # several chunks before the stream completed
    assert generating[0]  # the first piece arrived while the server was still generating
    (out,) = recording.outputs
    call = session.recorder.calls[0]
    assert call.output_ids == list(out.token_ids) and len(out.token_ids) == 24
    assert call.logprobs == out.logprobs and len(call.logprobs) == 24
    assert call.policy_version is not None
    assert "".join(pieces) == default_tokenizer.decode(out.token_ids, skip_special_tokens=False)


async def test_the_anthropic_and_openai_responses_sdks_over_the_real_server_are_exact(hf_server_url, default_tokenizer):
    """Anthropic's Messages API (create, then stream) and OpenAI's Responses API (create, then stream with
    `previous_response_id`) against the real server: each conversation is one trajectory whose trainable tokens are
    exactly what the server generated, and whose tokens render back to what the model saw."""
    import anthropic

    async with LLMClient([hf_server_url]) as llm:
        recording = Recording(llm)
        async with Gateway(recording, default_tokenizer) as gateway:
            claude = gateway.open_session("messages", sampling=SAMPLING)
            sdk = anthropic.AsyncAnthropic(base_url=claude.base_url.removesuffix("/v1"), api_key="x", max_retries=0)
            history: list = [{"role": "user", "content": "Name an animal."}]
            first = await sdk.messages.create(model="policy", max_tokens=24, system="Be brief.", messages=history)
            history += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                        {"role": "user", "content": "Another one."}]  # fmt: skip
            async with sdk.messages.stream(model="policy", max_tokens=24, system="Be brief.", messages=history) as s:
                second = await s.get_final_message()
            codex = gateway.open_session("responses", sampling=SAMPLING)
            client = openai.AsyncOpenAI(base_url=codex.base_url, api_key="x", max_retries=0)
            one = await client.responses.create(model="policy", instructions="Be brief.", input="Name a colour.")
            async with client.responses.stream(
                model="policy", instructions="Be brief.", input="Another one.", previous_response_id=one.id
            ) as s:  # the last event's response: `incomplete` (no `response.completed`) when cut at 24 tokens
                last = [event async for event in s][-1]
            assert last.type in ("response.completed", "response.incomplete")
            two = last.response
    for session, replies in ((claude, [first, second]), (codex, [one, two])):
        (trajectory,) = session.recorder.steps
        assert [c.prefix_matched for c in session.recorder.calls] == [False, True]
        # sampled text may not re-tokenize as generated (kept as generated); the template's render must hold
        assert check_drift(default_tokenizer, trajectory).kind != "template"
        assert [r.usage.output_tokens for r in replies] == [len(c.output_ids) for c in session.recorder.calls]
    generated = [t for out in recording.outputs for t in out.token_ids]
    steps = [claude.recorder.steps[0], codex.recorder.steps[0]]
    assert [t for step in steps for t in trainable_ids(step)] == generated
